# SPDX-License-Identifier: Apache-2.0
"""RTL twin of the SpMV engine: compiled blocks through the generated Verilog."""

import numpy as np

from gen.core.fixed import to_signed
from gen.core.sim import run_job
from gen.core.stimulus import make_job
from hdl.spmv import GATEWARE

from gen.spmv import SpmvConfig, compile_tiled, gather_tiled, tile_jobs, weight_beats

__all__ = ["run_jobs", "rtl_spmv"]


def run_jobs(jobs, cfg: SpmvConfig, sim="verilator", *, w_valid_prob=1.0, x_valid_prob=1.0,
             o_ready_prob=1.0, seed=0, reset_at=None, name="run", waves=False,
             max_cycles=None):
    """Run blocks ``[(plan, x_codes), ...]`` back to back on the RTL.

    Returns ``(ys, result)``: ``ys`` has one entry per block (the block row's results
    for a last block, an empty array otherwise); ``result`` is :func:`gen.core.sim.run_job`'s.
    """
    words, xdata, n_out = [], [], 0
    xmask = (1 << cfg.x_fmt.width) - 1
    for plan, x in jobs:
        words += weight_beats(plan)
        xdata += [int(v) & xmask for v in np.asarray(x, dtype=np.int64).ravel()]
        n_out += plan.rows if plan.last else 0
    if max_cycles is None:
        slow = max(min(w_valid_prob, x_valid_prob, o_ready_prob), 0.05)
        max_cycles = int(200 + 4 * (len(words) + len(xdata) + n_out
                                    + sum(p.nnz for p, _ in jobs)) / slow)
    job = make_job([("w", words, w_valid_prob), ("x", xdata, x_valid_prob)],
                   [("o", n_out, o_ready_prob)], seed=seed, reset_at=reset_at,
                   max_cycles=max_cycles)
    result = run_job(GATEWARE, cfg, job, sim=sim, name=name, waves=waves)
    y = to_signed(result["sinks"]["o"]["data"], cfg.out_fmt.width)
    ys, pos = [], 0
    for plan, _ in jobs:
        n = plan.rows if plan.last else 0
        ys.append(y[pos:pos + n])
        pos += n
    return ys, result


def rtl_spmv(w_codes, x_codes, cfg: SpmvConfig, sim="verilator", *, alloc="balanced",
             **kwargs):
    """RTL twin of :func:`ref_spmv`: compile (tiled when larger than the memories),
    load, run; return ``(y_codes, result)``."""
    blocks = compile_tiled(w_codes, cfg, alloc)
    ys, result = run_jobs(tile_jobs(blocks, x_codes), cfg, sim, **kwargs)
    return gather_tiled(blocks, ys), result
