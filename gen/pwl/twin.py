# SPDX-License-Identifier: Apache-2.0
"""RTL twin of the PWL unit: input codes through the generated Verilog (:func:`rtl_pwl`)."""

import numpy as np

import json

from gen.core.fixed import to_signed, to_unsigned
from gen.core.sim import SimError, run_cocotb, run_job
from gen.core.stimulus import make_job, pattern_for, rate_of
from hdl.pwl import GATEWARE, SHELL

from gen.pwl.config import PwlConfig

__all__ = ["rtl_pwl", "rtl_pwl_axi"]


def rtl_pwl(x, cfg: PwlConfig, sim="verilator", *, valid_prob=1.0, ready_prob=1.0, seed=0,
            reset_at=None, name="run", waves=False):
    """Run input codes ``x`` through the generated RTL; return ``(y_codes, result)``.

    Same contract as :func:`ref_pwl` (codes in, codes out).  ``valid_prob`` /
    ``ready_prob`` are the patterns of ``i`` / ``o``: a probability (the port's own seeded
    pattern) or a :class:`gen.core.stimulus.Pattern`.  ``result`` is the raw
    :func:`gen.core.sim.run_job` result (cycle numbers of every transfer, ...).
    """
    x = np.asarray(x, dtype=np.int64).ravel()
    slow = max(min(rate_of(valid_prob), rate_of(ready_prob)), 0.05)
    job = make_job([("i", to_unsigned(x, cfg.in_fmt.width), valid_prob)],
                   [("o", len(x), ready_prob)], seed=seed, reset_at=reset_at,
                   max_cycles=int(50 + 20 * len(x) / slow))
    result = run_job(GATEWARE, cfg, job, sim=sim, name=name, waves=waves)
    return to_signed(result["sinks"]["o"]["data"], cfg.out_fmt.width), result


def rtl_pwl_axi(x, cfg: PwlConfig, sim="verilator", *, valid_prob=1.0, ready_prob=1.0,
                seed=0, name="run-axi"):
    """Run input codes ``x`` through the accelerator shell (``cfg.bus_words`` words per
    AXI4-Stream beat, started over AXI4-Lite) as one packet; return ``(y_codes, job)``,
    ``job`` being the bench's record (:mod:`gen.core.cocotb_axi`: counters read back, clocks
    of the start, first input beat and last output beat)."""
    x = np.asarray(x, dtype=np.int64).ravel()
    wb = (cfg.in_fmt.width + 7) // 8
    beats = -(-len(x) // cfg.bus_words)
    slow = max(min(rate_of(valid_prob), rate_of(ready_prob)), 0.05)
    spec = {
        "jobs": [{"packets": {"s_axis_x": [int(v) for v in to_unsigned(x, cfg.in_fmt.width)]}}],
        "sources": [{"port": "s_axis_x", "word_bytes": wb,
                     "pattern": pattern_for(valid_prob, seed, "s_axis_x").to_json()}],
        "sinks": [{"port": "m_axis_y", "word_bytes": (cfg.out_fmt.width + 7) // 8,
                   "pattern": pattern_for(ready_prob, seed, "m_axis_y").to_json()}],
        "max_cycles": int(2000 + 20 * beats / slow),
    }
    from gen.core.sim import build_root
    folder = build_root().resolve() / "sim" / "axi-jobs" / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "job.json").write_text(json.dumps(spec))
    result = folder / "result.json"
    result.unlink(missing_ok=True)
    run_cocotb(SHELL, cfg, "gen.core.cocotb_axi", sim=sim, name=name,
               env={"SPNN_JOB": folder / "job.json", "SPNN_RESULT": result})
    if not result.exists():
        raise SimError(f"the {cfg.shell_name} run wrote no result")
    job = json.loads(result.read_text())["jobs"][0]
    return to_signed(job["packets"]["m_axis_y"], cfg.out_fmt.width), job
