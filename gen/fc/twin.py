# SPDX-License-Identifier: Apache-2.0
"""RTL twin of the FC engine: ``W @ X`` through the generated Verilog (:func:`rtl_fc`)."""

import numpy as np

from gen.core.fixed import to_signed
from gen.core.sim import axi_ports, run_axi_jobs, run_job
from gen.core.stimulus import rate_of
from hdl.fc import GATEWARE, SHELL
from hdl.fc.shell import REGMAP, shell_ports

from gen.fc import FcConfig, fc_cycle_model, fc_job, unpack_requests, unpack_y

__all__ = ["rtl_fc", "axi_job", "rtl_fc_axi"]


def rtl_fc(w, x, cfg: FcConfig, sim="verilator", *, valid_prob=1.0, ready_prob=1.0, seed=0,
           reset_at=None, patterns=None, name="run", waves=False):
    """Run ``W @ X`` (integer codes; ``x`` at most ``batch`` columns) on the RTL; return
    ``(y, result)`` with ``y`` shaped like :func:`ref_fc`'s output.  The stimulus
    arguments are :func:`fc_job`'s.  ``result`` is the raw :func:`gen.core.sim.run_job` result
    plus ``schedule`` (:func:`fc_schedule`, the unstalled timing), ``model``
    (:func:`fc_cycle_model` with the job's own patterns: every port's transfer cycles) and
    ``requests`` (the memory requests the RTL issued)."""
    x = np.asarray(x)
    job, sched, fd = fc_job(w, x, cfg, valid_prob=valid_prob, ready_prob=ready_prob,
                            seed=seed, reset_at=reset_at, patterns=patterns)
    result = run_job(GATEWARE, cfg, job, sim=sim, name=name, waves=waves)
    y = unpack_y(result["sinks"]["y"]["data"], cfg)[:, :x.shape[1]]
    result["schedule"] = sched
    result["model"] = fc_cycle_model(fd, cfg, job, reset_at=reset_at)
    result["requests"] = unpack_requests(result["sinks"]["vaddr"]["data"], cfg)
    return y, result


def _lanes(words, width, n):
    mask = (1 << width) - 1
    return [(int(w) >> (k * width)) & mask for w in words for k in range(n)]


def axi_job(w, x, cfg: FcConfig) -> dict:
    """The AXI bench job (:mod:`gen.core.cocotb_axi`) computing ``W @ X``: ``ROWS``, ``COLS``,
    ``Y_BEATS``; the rows of ``X`` and the FD-CSR metadata as packets, the weight memory's
    responses (the values the engine's requests will read, in order) on ``s_axis_vdata``."""
    job, sched, _ = fc_job(w, np.asarray(x), cfg)
    data = {s["port"]: s["data"] for s in job["sources"]}
    rows, cols = np.asarray(w).shape
    return {"regs": [[REGMAP.offset("ROWS"), rows], [REGMAP.offset("COLS"), cols],
                     [REGMAP.offset("Y_BEATS"), rows], [REGMAP.offset("IRQ_ENABLE"), 1]],
            "packets": {"s_axis_x": _lanes(data["x"], cfg.x_fmt.width, cfg.batch),
                        "s_axis_meta": [int(v) for v in data["meta"]],
                        "s_axis_vdata": _lanes(data["vdata"], cfg.w_fmt.width,
                                               cfg.nz_per_clock)},
            "receive": ["m_axis_y"], "cycles": sched["cycles"]}


def rtl_fc_axi(w, x, cfg: FcConfig, sim="verilator", *, valid_prob=1.0, ready_prob=1.0,
               seed=0, name="run-axi"):
    """``W @ X`` through the accelerator shell, one job per ``(w, x)`` of a list (or one
    job for a single pair).  Returns ``(y, records)``: :func:`ref_fc`-shaped results (a
    list for a list) and the bench's per-job records."""
    many = isinstance(w, (list, tuple))
    pairs = list(zip(w, x)) if many else [(w, x)]
    jobs = [axi_job(wi, xi, cfg) for wi, xi in pairs]
    sources, sinks = axi_ports(*shell_ports(cfg), valid=valid_prob, ready=ready_prob, seed=seed)
    slow = max(min(rate_of(valid_prob), rate_of(ready_prob)), 0.05)
    total = sum(j.pop("cycles") + len(j["packets"]["s_axis_vdata"]) for j in jobs)
    records = run_axi_jobs(SHELL, cfg, jobs, sources, sinks, sim=sim, name=name,
                           max_cycles=int(2000 * len(jobs) + 3 * total / slow))
    ys = []
    for (wi, xi), record in zip(pairs, records):
        y = to_signed(record["packets"]["m_axis_y"], cfg.acc_width).reshape(-1, cfg.batch)
        ys.append(y[:, :np.asarray(xi).shape[1]])
    return (ys if many else ys[0]), records
