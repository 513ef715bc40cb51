# SPDX-License-Identifier: Apache-2.0
"""RTL twin of the MAC array: layers through the generated Verilog (:func:`rtl_conv`)."""

import numpy as np

from gen.core.fixed import to_signed, to_unsigned
from gen.core.sim import run_job
from gen.core.stimulus import make_job
from hdl.conv import GATEWARE

from gen.conv import ConvConfig, check_fits, layer_cycles, pack_descriptor

__all__ = ["rtl_conv"]


def rtl_conv(jobs, cfg: ConvConfig, sim="verilator", *, ready_prob=1.0, valid_prob=1.0,
             seed=0, reset_at=None, name="run", waves=False):
    """Run layers through the RTL; same contract as :func:`ref_conv` per layer.

    ``jobs`` is a list of ``(x, w, sched)`` run back to back (ping-pong output buffers);
    ``x`` is ``(Ic, H, W)`` or ``(B, Ic, H, W)`` with ``B = sched.layer.batch``.
    Returns ``(outputs, stats, result)``: the ``(Oc, Ho, Wo)`` (or ``(B, Oc, Ho, Wo)``)
    arrays, per layer
    ``{"busy": busy MAC-cycles, "cycles": compute cycles}`` counted by the RTL, and the raw
    :func:`gen.core.sim.run_job` result.
    """
    cdata, wdata, xdata, counts = [], [], [], []
    for x, w, sched in jobs:
        check_fits(sched)
        layer = sched.layer
        x = np.asarray(x, dtype=np.int64)
        w = np.asarray(w, dtype=np.int64)
        if x.ndim == 3:
            x = x[None]
        if x.shape != (layer.batch, layer.ic, layer.h, layer.w):
            raise ValueError(f"x has shape {x.shape}, the layer needs "
                             f"{(layer.batch, layer.ic, layer.h, layer.w)}")
        cdata.append(pack_descriptor(sched))
        start = 0
        for q in sched.chunk_sizes:
            wdata += to_unsigned(w[:, start:start + q], cfg.weight_width)
            xdata += to_unsigned(x[:, start:start + q], cfg.data_width)
            start += q
        counts.append(layer.oc * layer.positions)
    total_cycles = sum(2 * (layer_cycles(s)["last_out"] + 64) for _, _, s in jobs)
    job = make_job([("c", cdata, valid_prob), ("w", wdata, valid_prob),
                    ("x", xdata, valid_prob)],
                   [("o", sum(counts), ready_prob), ("s", len(jobs), None)],
                   seed=seed, reset_at=reset_at,
                   max_cycles=int(200 + total_cycles / max(min(ready_prob, valid_prob), 0.05)))
    result = run_job(GATEWARE, cfg, job, sim=sim, name=name, waves=waves)
    data = to_signed(result["sinks"]["o"]["data"], cfg.acc_width)
    outputs, at = [], 0
    for (x, w, sched), n in zip(jobs, counts):
        layer = sched.layer
        y = data[at:at + n].reshape(layer.batch, layer.oc, layer.ho, layer.wo)
        outputs.append(y if np.ndim(x) == 4 else y[0])
        at += n
    stats = []
    for word in result["sinks"]["s"]["data"]:
        stats.append({"busy": word & ((1 << 48) - 1), "cycles": word >> 48})
    return outputs, stats, result
