# SPDX-License-Identifier: Apache-2.0
"""RTL twin of the LSTM engine: a compiled plan and sequences through the generated Verilog."""

import numpy as np

from gen.core.fixed import Requant, requant_sums, to_signed, to_unsigned
from gen.core.regmap import requant_regs
from gen.core.sim import axi_ports as sim_axi_ports, run_axi_jobs, run_job
from gen.core.stimulus import make_job, rate_of
from hdl.lstm import GATEWARE, SHELL
from hdl.lstm.shell import REGMAP, regmap_for, shell_ports

from gen.lstm import LstmPlan, seq_words, weight_beats, weight_words

__all__ = ["rtl_lstm", "axi_jobs", "rtl_lstm_axi", "requant_job", "requant_h"]

JOB_INPUTS, H_WORDS = REGMAP.offset("JOB_INPUTS"), REGMAP.offset("H_WORDS")
IRQ_ENABLE = REGMAP.offset("IRQ_ENABLE")


def rtl_lstm(plan: LstmPlan, seqs, sim="verilator", *, w_valid_prob=1.0, x_valid_prob=1.0,
             o_ready_prob=1.0, seed=0, reset_at=None, name="run", waves=False,
             max_cycles=None):
    """RTL twin of :func:`ref_lstm` for sequences ``[(xs, h0, c0), ...]`` (codes; h0/c0 may
    be None): load the plan once, run every sequence; returns ``(h_seqs, result)``."""
    cfg = plan.cfg
    words = weight_beats(plan)
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
    result = run_job(GATEWARE, cfg, job, sim=sim, name=name, waves=waves)
    if result.get("error"):
        raise RuntimeError(f"lstm RTL run failed: {result['error']}")
    h = to_signed(result["sinks"]["o"]["data"], cfg.x_fmt.width)
    out, pos = [], 0
    for n in lens:
        out.append(h[pos:pos + n * plan.hidden].reshape(n, plan.hidden))
        pos += n * plan.hidden
    return out, result


def axi_jobs(plan: LstmPlan, seqs, *, with_weights=True, rq=None) -> list:
    """The AXI bench jobs (:mod:`gen.core.cocotb_axi`) for sequences ``[(xs, h0, c0), ...]``:
    the weight stream in a job of its own (``with_weights``), then one job per sequence
    (``JOB_INPUTS`` = x, ``H_WORDS`` = steps x H).  ``rq`` (a
    :class:`gen.core.fixed.Requant`, shells with ``rq_width`` > 0): its registers on every
    sequence job, its biases loaded with the first (:func:`requant_job`)."""
    jobs = []
    if with_weights:
        jobs.append({"regs": [[JOB_INPUTS, 1], [H_WORDS, 0], [IRQ_ENABLE, 1]],
                     "packets": {"s_axis_w": weight_words(plan)}, "receive": []})
    for k, (xs, h0, c0) in enumerate(seqs):
        steps = len(np.asarray(xs).reshape(-1, plan.inputs))
        job = {"regs": [[JOB_INPUTS, 2], [H_WORDS, steps * plan.hidden], [IRQ_ENABLE, 1]],
               "packets": {"s_axis_x": seq_words(plan, xs, h0, c0)}}
        if plan.cfg.rq_width:
            requant_job(job, plan, rq if k == 0 or rq is None else
                        Requant(rq.mult, rq.shift, rq.relu))
        jobs.append(job)
    return jobs


def requant_job(job: dict, plan: LstmPlan, rq=None) -> dict:
    """Add to a shell ``job`` the ``RQ_*`` registers of ``rq`` (one channel per hidden unit)
    and, when it loads biases, their packet on ``s_axis_b`` (``JOB_INPUTS.b_en`` set with
    the job's other inputs)."""
    cfg = plan.cfg
    if not cfg.rq_width:
        raise ValueError("a Requant job needs a shell with rq_width > 0")
    rq = rq if rq is not None else Requant()
    regmap = regmap_for(cfg)
    job["regs"] += requant_regs(regmap, rq, 1, plan.hidden, cfg.rq_depth)
    if rq.bias is not None:
        job["regs"] = [[a, v | 4] if a == JOB_INPUTS else [a, v] for a, v in job["regs"]]
        job["packets"]["s_axis_b"] = to_unsigned(rq.bias, cfg.x_fmt.width)
    return job


def requant_h(h, rq, bias, width: int):
    """Golden model of the shell's output stage on ``h`` codes ``(steps, H)``: ``bias`` the
    hidden units' biases in effect."""
    return requant_sums(h, np.asarray(bias, dtype=np.int64)[None, :], mult=rq.mult,
                        shift=rq.shift, width=width, relu=rq.relu)


def axi_ports(cfg, w_valid_prob=1.0, x_valid_prob=1.0, o_ready_prob=1.0, seed=0):
    """The bench's ``(sources, sinks)`` for the shell with these per-port patterns."""
    return sim_axi_ports(*shell_ports(cfg), seed=seed,
                         patterns={"w": w_valid_prob, "x": x_valid_prob, "h": o_ready_prob})


def rtl_lstm_axi(plan: LstmPlan, seqs, sim="verilator", *, w_valid_prob=1.0, x_valid_prob=1.0,
                 o_ready_prob=1.0, seed=0, name="run-axi", jobs=None, rq=None):
    """:func:`rtl_lstm` through the accelerator shell: the weights in one job, then one
    job per sequence (or the given ``jobs``, :func:`axi_jobs` style).  Returns
    ``(h_seqs, records)``: per sequence job the ``(steps, H)`` codes, and the bench's
    per-job records (:mod:`gen.core.cocotb_axi`)."""
    cfg = plan.cfg
    jobs = axi_jobs(plan, seqs, rq=rq) if jobs is None else jobs
    words = sum(len(v) for j in jobs for v in j["packets"].values())
    steps = sum(len(np.asarray(xs).reshape(-1, plan.inputs)) for xs, _, _ in seqs)
    slow = max(min(rate_of(w_valid_prob), rate_of(x_valid_prob), rate_of(o_ready_prob)), 0.05)
    per_step = plan.loads.max(initial=0) + plan.cols + 3 * plan.hidden + 4 * cfg.fifo_depth \
        + cfg.ew_latency + plan.r_run + 50
    sources, sinks = axi_ports(cfg, w_valid_prob, x_valid_prob, o_ready_prob, seed)
    records = run_axi_jobs(SHELL, cfg, jobs, sources, sinks, sim=sim, name=name,
                           max_cycles=int(2000 * len(jobs) + cfg.rows_per_pe
                                          + 2 * (words + steps * per_step) / slow))
    hs = [to_signed(r["packets"]["m_axis_h"], cfg.rq_width or cfg.x_fmt.width).reshape(
        -1, plan.hidden) for r in records if "m_axis_h" in r["packets"]]
    return hs, records
