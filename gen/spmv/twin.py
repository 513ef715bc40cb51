# SPDX-License-Identifier: Apache-2.0
"""RTL twin of the SpMV engine: compiled blocks through the generated Verilog."""

import numpy as np

from gen.core.fixed import Requant, requant_sums, to_signed, to_unsigned
from gen.core.regmap import requant_regs
from gen.core.lanes import beat_words
from gen.core.sim import axi_ports as sim_axi_ports, run_axi_jobs, run_job
from gen.core.stimulus import make_job, rate_of
from hdl.spmv import GATEWARE, SHELL
from hdl.spmv.shell import REGMAP, regmap_for, shell_ports

from gen.spmv import SpmvConfig, compile_tiled, gather_tiled, tile_jobs, weight_beats

Y_WORDS, IRQ_ENABLE = REGMAP.offset("Y_WORDS"), REGMAP.offset("IRQ_ENABLE")

__all__ = ["run_jobs", "result_words", "rtl_spmv", "axi_job", "axi_ports", "rtl_spmv_axi",
           "requant_spmv"]


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
        n_out += cfg.out_transfers(plan.rows) if plan.last else 0
    if max_cycles is None:
        slow = max(min(w_valid_prob, x_valid_prob, o_ready_prob), 0.05)
        max_cycles = int(200 + 4 * (len(words) + len(xdata) + n_out
                                    + sum(p.nnz for p, _ in jobs)) / slow)
    job = make_job([("w", words, w_valid_prob), ("x", xdata, x_valid_prob)],
                   [("o", n_out, o_ready_prob)], seed=seed, reset_at=reset_at,
                   max_cycles=max_cycles)
    result = run_job(GATEWARE, cfg, job, sim=sim, name=name, waves=waves)
    y = result_words(result["sinks"]["o"]["data"], cfg)
    ys, pos = [], 0
    for plan, _ in jobs:
        n = plan.rows if plan.last else 0
        ys.append(y[pos:pos + n])
        pos += n
    return ys, result


def result_words(payloads, cfg: SpmvConfig) -> np.ndarray:
    """The result codes of ``o`` transfers (:func:`hdl.spmv.engine.out_layout`): one word
    each, or the first ``n`` of ``drain_lanes`` words."""
    W, D = cfg.out_fmt.width, cfg.drain_lanes
    if D == 1:
        return to_signed(payloads, W)
    mask = (1 << W) - 1
    words = [(int(v) >> (k * W)) & mask for v in payloads for k in range(int(v) >> (D * W))]
    return to_signed(words, W)


def rtl_spmv(w_codes, x_codes, cfg: SpmvConfig, sim="verilator", *, alloc="balanced",
             **kwargs):
    """RTL twin of :func:`ref_spmv`: compile (tiled when larger than the memories),
    load, run; return ``(y_codes, result)``."""
    blocks = compile_tiled(w_codes, cfg, alloc)
    ys, result = run_jobs(tile_jobs(blocks, x_codes), cfg, sim, **kwargs)
    return gather_tiled(blocks, ys), result


def axi_job(blocks, x_codes, cfg: SpmvConfig, rq=None) -> dict:
    """The AXI bench job (:mod:`gen.core.cocotb_axi`) that computes ``W @ x`` for the
    compiled ``blocks``: its weight beats as lane words on ``s_axis_w``, its activations on
    ``s_axis_x``, ``Y_WORDS`` = the rows of its last blocks.  ``rq`` (a
    :class:`gen.core.fixed.Requant`, shells with ``rq_width`` > 0): its ``RQ_*`` registers
    (one channel per row) and, when it loads biases, their packet on ``s_axis_b``."""
    xmask = (1 << cfg.x_fmt.width) - 1
    words, xdata = [], []
    for plan, x in tile_jobs(blocks, x_codes):
        words += beat_words(weight_beats(plan), cfg.w_lanes, cfg.word_width)
        xdata += [int(v) & xmask for v in np.asarray(x, dtype=np.int64).ravel()]
    rows = sum(b.rows for b in blocks if b.last)
    regs = [[Y_WORDS, rows], [IRQ_ENABLE, 1]]
    packets = {"s_axis_w": words, "s_axis_x": xdata}
    if cfg.rq_width:
        regmap = regmap_for(cfg)
        rq = rq if rq is not None else Requant()
        regs += requant_regs(regmap, rq, 1, rows, cfg.rq_depth)
        regs += [[regmap.offset("JOB_INPUTS"), 0b11 | int(rq.bias is not None) << 2]]
        if rq.bias is not None:
            packets["s_axis_b"] = to_unsigned(rq.bias, cfg.out_fmt.width)
    elif rq is not None:
        raise ValueError("a Requant job needs a shell with rq_width > 0")
    return {"regs": regs, "packets": packets}


def requant_spmv(y, rq, bias, width: int):
    """Golden model of the shell's output stage on the results ``y`` (one per row, the
    engine's ``out_fmt`` codes): ``bias`` the row biases in effect."""
    return requant_sums(y, np.asarray(bias, dtype=np.int64), mult=rq.mult, shift=rq.shift,
                        width=width, relu=rq.relu)


def axi_ports(cfg, w_valid_prob=1.0, x_valid_prob=1.0, o_ready_prob=1.0, seed=0):
    """The bench's ``(sources, sinks)`` for the shell with these per-port patterns."""
    return sim_axi_ports(*shell_ports(cfg), seed=seed,
                         patterns={"w": w_valid_prob, "x": x_valid_prob, "y": o_ready_prob})


def rtl_spmv_axi(w_codes, x_codes, cfg: SpmvConfig, sim="verilator", *, alloc="balanced",
                 w_valid_prob=1.0, x_valid_prob=1.0, o_ready_prob=1.0, seed=0,
                 name="run-axi", blocks=None, rq=None):
    """``W @ x`` through the accelerator shell: ``x_codes`` one vector (one job) or a list
    of vectors (one job each, the weights streamed again for each); ``blocks`` the compiled
    blocks (default :func:`gen.spmv.compile_tiled` of ``w_codes``).  Returns ``(y, jobs)``:
    the result codes (an array, or a list for a list) and the bench's per-job records
    (:mod:`gen.core.cocotb_axi`).  ``rq``: a :class:`gen.core.fixed.Requant` per job (a
    list for a list; ``rq_width`` > 0), the results then ``rq_width``-bit codes."""
    many = isinstance(x_codes, (list, tuple))
    vectors = list(x_codes) if many else [x_codes]
    if blocks is None:
        blocks = compile_tiled(w_codes, cfg, alloc)
    rqs = (list(rq) if many else [rq]) if rq is not None else [None] * len(vectors)
    jobs = [axi_job(blocks, x, cfg, r) for x, r in zip(vectors, rqs)]
    words = sum(len(j["packets"]["s_axis_w"]) // cfg.w_lanes + len(j["packets"]["s_axis_x"])
                for j in jobs)
    slow = max(min(rate_of(w_valid_prob), rate_of(x_valid_prob), rate_of(o_ready_prob)), 0.05)
    nnz = sum(b.nnz for b in blocks) * len(jobs)
    records = run_axi_jobs(
        SHELL, cfg, jobs, *axi_ports(cfg, w_valid_prob, x_valid_prob, o_ready_prob, seed),
        sim=sim, name=name, max_cycles=int(2000 * len(jobs) + 8 * (words + nnz) / slow))
    ys = [to_signed(r["packets"]["m_axis_y"], cfg.rq_width or cfg.out_fmt.width)
          for r in records]
    return (ys if many else ys[0]), (records if many else records[0])
