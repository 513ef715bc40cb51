# SPDX-License-Identifier: Apache-2.0
"""RTL twin of the FC engine: ``W @ X`` through the generated Verilog (:func:`rtl_fc`)."""

import numpy as np

from gen.core.fixed import Requant, requant_sums, to_signed, to_unsigned
from gen.core.regmap import requant_regs
from gen.core.sim import axi_ports, run_axi_jobs, run_job
from gen.core.stimulus import rate_of
from hdl.fc import GATEWARE, SHELL
from hdl.fc.shell import regmap_for, shell_ports

from gen.fc import FcConfig, fc_cycle_model, fc_job, unpack_requests, unpack_y

__all__ = ["rtl_fc", "axi_job", "rtl_fc_axi", "requant_fc"]


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


def axi_job(w, x, cfg: FcConfig, rq=None) -> dict:
    """The AXI bench job (:mod:`gen.core.cocotb_axi`) computing ``W @ X``: ``ROWS``, ``COLS``,
    ``Y_BEATS``; the rows of ``X`` and the FD-CSR metadata as packets, the weight memory's
    responses (the values the engine's requests will read, in order) on ``s_axis_vdata``.
    ``rq`` (a :class:`gen.core.fixed.Requant`, shells with ``rq_width`` > 0): its ``RQ_*``
    registers (one channel per row) and, when it loads biases, their packet on
    ``s_axis_b``."""
    job, sched, _ = fc_job(w, np.asarray(x), cfg)
    data = {s["port"]: s["data"] for s in job["sources"]}
    rows, cols = np.asarray(w).shape
    regmap = regmap_for(cfg)
    regs = [[regmap.offset("ROWS"), rows], [regmap.offset("COLS"), cols],
            [regmap.offset("Y_BEATS"), rows], [regmap.offset("IRQ_ENABLE"), 1]]
    packets = {"s_axis_x": _lanes(data["x"], cfg.x_fmt.width, cfg.batch),
               "s_axis_meta": [int(v) for v in data["meta"]],
               "s_axis_vdata": _lanes(data["vdata"], cfg.w_fmt.width, cfg.nz_per_clock)}
    if cfg.rq_width:
        rq = rq if rq is not None else Requant()
        regs += requant_regs(regmap, rq, 1, rows, cfg.rq_depth)
        regs += [[regmap.offset("JOB_INPUTS"), 0b11 | int(rq.bias is not None) << 2]]
        if rq.bias is not None:
            packets["s_axis_b"] = to_unsigned(rq.bias, cfg.acc_width)
    return {"regs": regs, "packets": packets, "receive": ["m_axis_y"],
            "cycles": sched["cycles"]}


def requant_fc(y, rq, bias, width: int):
    """Golden model of the shell's output stage on ``W @ X`` ``(rows, batch)``: ``bias``
    the row biases in effect (``rq.bias`` or the last loaded)."""
    b = np.asarray(bias, dtype=np.int64)[:, None]
    return requant_sums(y, b, mult=rq.mult, shift=rq.shift, width=width, relu=rq.relu)


def rtl_fc_axi(w, x, cfg: FcConfig, sim="verilator", *, valid_prob=1.0, ready_prob=1.0,
               seed=0, name="run-axi", rq=None):
    """``W @ X`` through the accelerator shell, one job per ``(w, x)`` of a list (or one
    job for a single pair).  Returns ``(y, records)``: :func:`ref_fc`-shaped results (a
    list for a list) and the bench's per-job records.  ``rq``: a
    :class:`gen.core.fixed.Requant` per job (a list for a list; ``rq_width`` > 0), the
    results then ``rq_width``-bit codes."""
    many = isinstance(w, (list, tuple))
    pairs = list(zip(w, x)) if many else [(w, x)]
    rqs = (list(rq) if many else [rq]) if rq is not None else [None] * len(pairs)
    jobs = [axi_job(wi, xi, cfg, r) for (wi, xi), r in zip(pairs, rqs)]
    sources, sinks = axi_ports(*shell_ports(cfg), valid=valid_prob, ready=ready_prob, seed=seed)
    slow = max(min(rate_of(valid_prob), rate_of(ready_prob)), 0.05)
    total = sum(j.pop("cycles") + len(j["packets"]["s_axis_vdata"]) for j in jobs)
    records = run_axi_jobs(SHELL, cfg, jobs, sources, sinks, sim=sim, name=name,
                           max_cycles=int(2000 * len(jobs) + 3 * total / slow))
    ys = []
    for (wi, xi), record in zip(pairs, records):
        y = to_signed(record["packets"]["m_axis_y"], cfg.rq_width or cfg.acc_width)
        y = y.reshape(-1, cfg.batch)
        ys.append(y[:, :np.asarray(xi).shape[1]])
    return (ys if many else ys[0]), records
