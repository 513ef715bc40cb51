# SPDX-License-Identifier: Apache-2.0
"""RTL twin of the LSTM engine: a compiled plan and sequences through the generated Verilog."""

import numpy as np

from gen.core.fixed import to_signed
from gen.core.sim import run_job
from gen.core.stimulus import make_job
from hdl.lstm import GATEWARE

from gen.lstm import LstmPlan, seq_words, weight_words

__all__ = ["rtl_lstm"]


def rtl_lstm(plan: LstmPlan, seqs, sim="verilator", *, w_valid_prob=1.0, x_valid_prob=1.0,
             o_ready_prob=1.0, seed=0, reset_at=None, name="run", waves=False,
             max_cycles=None):
    """RTL twin of :func:`ref_lstm` for sequences ``[(xs, h0, c0), ...]`` (codes; h0/c0 may
    be None): load the plan once, run every sequence; returns ``(h_seqs, result)``."""
    import os
    cfg = plan.cfg
    words = weight_words(plan)
    xdata, lens = [], []
    for xs, h0, c0 in seqs:
        xdata += seq_words(plan, xs, h0, c0)
        lens.append(len(np.asarray(xs).reshape(-1, plan.inputs)))
    n_out = sum(lens) * plan.hidden
    if max_cycles is None:
        slow = max(min(w_valid_prob, x_valid_prob, o_ready_prob), 0.05)
        per_step = plan.loads.max(initial=0) + plan.cols + 3 * plan.hidden + 4 * cfg.fifo_depth \
            + cfg.ew_latency + plan.r_run + 50
        max_cycles = int(500 + cfg.rows_per_pe + (len(words) + len(xdata) + n_out
                                                  + sum(lens) * per_step) * 2 / slow)
    job = make_job([("w", words, w_valid_prob), ("x", xdata, x_valid_prob)],
                   [("o", n_out, o_ready_prob)], seed=seed, reset_at=reset_at,
                   max_cycles=max_cycles)
    old_flags = os.environ.get("MAKEFLAGS")
    if sim == "verilator" and "CFG_CXXFLAGS_PCH_I" not in (old_flags or ""):
        os.environ["MAKEFLAGS"] = ((old_flags or "") + " CFG_CXXFLAGS_PCH_I=-include").strip()
    try:
        result = run_job(GATEWARE, cfg, job, sim=sim, name=name, waves=waves)
    finally:
        if old_flags is None:
            os.environ.pop("MAKEFLAGS", None)
        else:
            os.environ["MAKEFLAGS"] = old_flags
    if result.get("error"):
        raise RuntimeError(f"lstm RTL run failed: {result['error']}")
    h = to_signed(result["sinks"]["o"]["data"], cfg.x_fmt.width)
    out, pos = [], 0
    for n in lens:
        out.append(h[pos:pos + n * plan.hidden].reshape(n, plan.hidden))
        pos += n * plan.hidden
    return out, result
