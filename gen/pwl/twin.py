# SPDX-License-Identifier: Apache-2.0
"""RTL twin of the PWL unit: input codes through the generated Verilog (:func:`rtl_pwl`)."""

import numpy as np

from gen.core.fixed import to_signed, to_unsigned
from gen.core.sim import run_axi_jobs, run_job
from gen.core.stimulus import make_job, pattern_for, rate_of
from hdl.lib.shell import CONTROL_MAP
from hdl.pwl import GATEWARE, SHELL

from gen.pwl.config import PwlConfig

__all__ = ["rtl_pwl", "rtl_pwl_axi", "axi_job", "axi_ports"]

IRQ_ENABLE = CONTROL_MAP.offset("IRQ_ENABLE")


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


def axi_job(x, cfg: PwlConfig) -> dict:
    """The AXI bench job (:mod:`gen.core.cocotb_axi`) of one packet of input codes."""
    x = np.asarray(x, dtype=np.int64).ravel()
    return {"regs": [[IRQ_ENABLE, 1]],
            "packets": {"s_axis_x": [int(v) for v in to_unsigned(x, cfg.in_fmt.width)]}}


def axi_ports(cfg: PwlConfig, valid_prob=1.0, ready_prob=1.0, seed=0):
    """The bench's ``(sources, sinks)`` for the shell with these per-port patterns."""
    return ([("s_axis_x", (cfg.in_fmt.width + 7) // 8,
              pattern_for(valid_prob, seed, "s_axis_x"))],
            [("m_axis_y", (cfg.out_fmt.width + 7) // 8,
              pattern_for(ready_prob, seed, "m_axis_y"))])


def rtl_pwl_axi(x, cfg: PwlConfig, sim="verilator", *, valid_prob=1.0, ready_prob=1.0,
                seed=0, name="run-axi"):
    """Run input codes through the accelerator shell (``cfg.bus_words`` words per
    AXI4-Stream beat, each job started over AXI4-Lite): ``x`` is one packet (an array) or a
    list of packets, one job each.  Returns ``(y, jobs)``: the result codes (an array, or a
    list for a list) and the bench's per-job records (:mod:`gen.core.cocotb_axi`: counters
    read back, interrupt, clocks of the start, first input beat and last output beat)."""
    many = isinstance(x, (list, tuple))
    packets = [np.asarray(p, dtype=np.int64).ravel() for p in (x if many else [x])]
    beats = sum(-(-len(p) // cfg.bus_words) for p in packets)
    slow = max(min(rate_of(valid_prob), rate_of(ready_prob)), 0.05)
    records = run_axi_jobs(SHELL, cfg, [axi_job(p, cfg) for p in packets],
                           *axi_ports(cfg, valid_prob, ready_prob, seed),
                           sim=sim, name=name, max_cycles=2000 * len(packets) + 20 * beats / slow)
    ys = [to_signed(r["packets"]["m_axis_y"], cfg.out_fmt.width) for r in records]
    return (ys if many else ys[0]), (records if many else records[0])
