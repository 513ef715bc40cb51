# SPDX-License-Identifier: Apache-2.0
"""The SpMV accelerator shell (hdl/spmv/shell.py on hdl/lib/axi_shell.py) under both
simulators: weights, activations and results over AXI4-Stream with idle inputs and
back-pressure on every stream, jobs started over AXI4-Lite, the counters against what the
bench saw on the ports, an empty job, the job-input mask, a gen.spmv.plan_blocks plan
(reordered column blocks, ROW words spread into later blocks)."""

import dataclasses
import json

import numpy as np
import pytest

from gen.core.fixed import QFormat
from gen.core.sim import run_axi_jobs
from gen.core.stimulus import Pattern
from gen.spmv import (SpmvConfig, beat_count, compile_tiled, ref_spmv, spmv_shell_cycle_model,
                      tile_jobs)
from gen.spmv.twin import IRQ_ENABLE, Y_WORDS, axi_job, axi_ports
from hdl.spmv import SHELL
from hdl.spmv.shell import REGMAP
from tb.shell_checks import assert_cleared_by_reset, assert_record_is_model, run_native_beats

JOB_INPUTS = REGMAP.offset("JOB_INPUTS")

# 3 block rows x 2 block columns on 4 PEs: rows and columns that do not divide the array,
# activation/result beats (3 words) that do not divide the packets
CFG = SpmvConfig(pes=4, fifo_depth=2, rows_per_pe=4, max_cols=8, mem_depth=32, w_lanes=2,
                 bus_words=3, acc_width=24, out_fmt=QFormat(12, 12))
# the same with two results per clock: one drain transfer per beat, a block row of odd rows
# ends with a half beat (tkeep)
CFG_D = dataclasses.replace(CFG, drain_lanes=2)


def _y_beats(cfg, blocks):
    if cfg.drain_lanes == 1:
        return -(-sum(b.rows for b in blocks if b.last) // cfg.bus_words)
    return sum(cfg.out_transfers(b.rows) for b in blocks if b.last)


def _matrix(seed, rows=37, cols=13, density=0.4):
    rng = np.random.default_rng(seed)
    w = rng.integers(-128, 128, (rows, cols)) * (rng.random((rows, cols)) < density)
    w[5] = 0                                                     # an empty row
    w[:, 3] = 0                                                  # an empty column
    w[0, 0], w[1, 1] = -128, 127
    return w


def _ports(cfg, w_prob, x_prob, y_prob, seed):
    return axi_ports(cfg, w_prob, x_prob, y_prob, seed)


@pytest.mark.native_agree
@pytest.mark.parametrize("cfg", [CFG, CFG_D], ids=["d1", "d2"])
def test_shell_jobs(sim, cfg):
    """Two tiled products back to back, an empty job (no inputs, no results: done in its
    first clock), then a product again, with idle inputs and back-pressure on every stream:
    results bit-exact, counters equal to what the bench saw on the ports."""
    CFG = cfg
    w = _matrix(1)
    rng = np.random.default_rng(2)
    xs = [rng.integers(-2048, 2048, w.shape[1]) for _ in range(3)]
    xs[1][[0, 2]] = [-32768, 32767]                               # x_fmt extremes
    blocks = compile_tiled(w, CFG, "balanced")
    assert len(blocks) == 6
    full = [axi_job(blocks, x, CFG) for x in xs]
    empty = {"regs": [[JOB_INPUTS, 0], [Y_WORDS, 0]], "packets": {}, "receive": []}
    again = dict(full[2], regs=[[JOB_INPUTS, 3]] + full[2]["regs"])
    jobs = [full[0], full[1], empty, again]
    sources, sinks = _ports(CFG, 0.7, 0.6, 0.5, 9)
    records = run_axi_jobs(SHELL, CFG, jobs, sources, sinks, sim=sim,
                           name=f"shell-jobs-d{CFG.drain_lanes}", max_cycles=20_000)
    for x, job in zip([xs[0], xs[1], None, xs[2]], records):
        assert job["status"] == 0b10                             # done, not busy
        assert (job["irq"], job["irq_after_ack"], job["irq_status_after_ack"]) == (1, 0, 0)
        c = job["counters"]
        if x is None:
            assert c == {"cycles": 1, "busy": 0, "stall_in": 0, "stall_out": 0}
            assert job["beats_in"] == job["beats_out"] == 0
            continue
        y = np.asarray(job["packets"]["m_axis_y"], dtype=np.int64)
        y = np.where(y >= 1 << 23, y - (1 << 24), y)
        np.testing.assert_array_equal(y, ref_spmv(w, x, CFG))
        assert c["cycles"] == job["end"] - job["start_ack"]
        assert c["stall_in"] == job["stall_in_any"]
        assert c["stall_out"] == job["stall_out_any"]
        w_beats = len(jobs[0]["packets"]["s_axis_w"]) // CFG.w_lanes
        x_beats = -(-sum(b.cols for b in blocks) // CFG.bus_words)
        assert job["beats_in"] == w_beats + x_beats
        assert job["beats_out"] == _y_beats(CFG, blocks)
        assert max(w_beats, w.shape[0]) <= c["busy"] <= c["cycles"]
    assert sum(j["stall_out_any"] for j in records) > 0
    assert sum(j["stall_in_any"] for j in records) > 0
    # the exact model of the four jobs (the empty one ends in its first clock, the bench
    # polls STATUS after it)
    patterns = {p: pat for p, _, pat in sources + sinks}
    models = spmv_shell_cycle_model([tile_jobs(blocks, x) for x in xs[:2]] + [[]]
                                    + [tile_jobs(blocks, xs[2])], CFG, patterns,
                                    writes=[len(job["regs"]) for job in jobs])
    for k, (job, model) in enumerate(zip(records, models)):
        assert_record_is_model(job, model, f"(job {k})")


def test_shell_full_rate_and_disabled_port(sim):
    """At full rate: the activations are taken only while the engine computes (weights
    first); with JOB_INPUTS.x_en clear the x port stays not ready and the job waits for
    nothing but the weights (no results expected)."""
    w = _matrix(3, rows=9, cols=6)
    x = np.arange(6) * 100 - 250
    blocks = compile_tiled(w, CFG, "balanced")
    assert len(blocks) == 1
    job = axi_job(blocks, x, CFG)
    weights_only = {"regs": [[JOB_INPUTS, 1], [Y_WORDS, 0]],
                    "packets": {"s_axis_w": job["packets"]["s_axis_w"]}, "receive": []}
    # the weights loaded by weights_only wait in the engine's bank: the activations and the
    # results of the next job complete the product
    rest = {"regs": [[JOB_INPUTS, 2]] + job["regs"],
            "packets": {"s_axis_x": job["packets"]["s_axis_x"]}}
    sources, sinks = _ports(CFG, 1.0, 1.0, 1.0, 0)
    first, second, third = run_axi_jobs(SHELL, CFG, [job, weights_only, rest], sources, sinks,
                                        sim=sim, name="shell-mask", max_cycles=5_000)
    for record in (first, third):
        y = np.asarray(record["packets"]["m_axis_y"], dtype=np.int64)
        np.testing.assert_array_equal(np.where(y >= 1 << 23, y - (1 << 24), y),
                                      ref_spmv(w, x, CFG))
    assert first["counters"]["stall_in"] == first["stall_in_any"]
    assert second["beats_in"] == len(job["packets"]["s_axis_w"]) // CFG.w_lanes
    assert second["beats_out"] == 0 and second["end"] is None
    assert third["beats_in"] == -(-len(x) // CFG.bus_words)
    # the exact model: the weights' job ends the clock after its last word, the bench polls
    # STATUS; the loaded bank waits for the next job's activations
    pair = tile_jobs(blocks, x)
    models = spmv_shell_cycle_model([pair, {"w": pair}, {"x": pair}], CFG,
                                    {p: pat for p, _, pat in sources + sinks},
                                    writes=[len(j["regs"]) for j in (job, weights_only, rest)])
    for k, (record, model) in enumerate(zip((first, second, third), models)):
        assert_record_is_model(record, model, f"(job {k})")


@pytest.mark.parametrize("cfg", [CFG, CFG_D], ids=["d1", "d2"])
def test_shell_full_rate_model(sim, cfg):
    """At full rate the end-to-end cycles (first input beat to last result beat) equal
    gen.spmv.shell_cycles exactly: a tiled product and a one-block one."""
    rng = np.random.default_rng(8)
    for n, (rows, cols) in enumerate(((37, 13), (9, 6))):
        w = _matrix(10 + n, rows, cols)
        x = rng.integers(-2048, 2048, cols)
        _full_rate_exact(sim, cfg, w, x, compile_tiled(w, cfg, "balanced"),
                         f"shell-model-d{cfg.drain_lanes}-{n}")


def _full_rate_exact(sim, cfg, w, x, blocks, name):
    """One product of ``blocks`` at full rate: results == golden and end-to-end cycles ==
    gen.spmv.shell_cycles exactly; returns the bench's record."""
    from gen.spmv import shell_cycles, tile_jobs
    sources, sinks = _ports(cfg, 1.0, 1.0, 1.0, 0)
    job, = run_axi_jobs(SHELL, cfg, [axi_job(blocks, x, cfg)], sources, sinks, sim=sim,
                        name=name, max_cycles=20_000)
    y = np.asarray(job["packets"]["m_axis_y"], dtype=np.int64)
    np.testing.assert_array_equal(np.where(y >= 1 << 23, y - (1 << 24), y),
                                  ref_spmv(w, x, cfg))
    assert job["end"] - job["first_in"] + 1 == shell_cycles(tile_jobs(blocks, x), cfg)
    return job


def _planned(cfg):
    """A 16 x 8 matrix (a whole block row on the 4 PEs, 0.7 dense, |w| < 24 so no partial
    sum can saturate for any activations), its activations and ``plan_blocks``'s plan for
    them, asserted to be one of the non-trivial plans: columns reordered across several
    blocks and ROW words carried by blocks after the first.  At 8 columns the planner's
    default annealed block counts (4..7) lose to column-order cuts, so 3 and 4 are
    annealed (2000 steps: deterministic, ~0.2 s)."""
    from gen.spmv import order_free, plan_blocks
    rng = np.random.default_rng(111)
    w = rng.integers(-24, 24, (16, 8)) * (rng.random((16, 8)) < 0.7)
    x = rng.integers(-2048, 2048, 8)
    assert order_free(w, cfg)                                    # reorder="auto" allows it
    blocks = plan_blocks(w, x, cfg, block_counts=(3, 4), iters=2000)
    assert len(blocks) >= 2 and blocks[0].first and blocks[-1].last
    assert not any(b.last for b in blocks[:-1]) and not any(b.first for b in blocks[1:])
    # reordered columns: every block names its columns, together a permutation that is
    # not the column order
    assert all(b.col_ids is not None for b in blocks)
    order = np.concatenate([b.columns for b in blocks])
    np.testing.assert_array_equal(np.sort(order), np.arange(8))
    assert not np.array_equal(order, np.arange(8))
    # spread ROW words: later blocks carry some (every row's once, over the block row)
    words = np.array([b.row_words for b in blocks])
    assert words[1:].sum() > 0
    np.testing.assert_array_equal(words.sum(axis=0), [8] * cfg.w_lanes)
    return w, x, blocks


@pytest.mark.parametrize("cfg", [CFG, CFG_D], ids=["d1", "d2"])
def test_shell_planned_blocks_full_rate(sim, cfg):
    """A ``plan_blocks`` plan (reordered column blocks, ROW words spread into later
    blocks: the activations go in the blocks' column order) at full rate: results ==
    golden, end-to-end cycles == gen.spmv.shell_cycles exactly."""
    w, x, blocks = _planned(cfg)
    job = _full_rate_exact(sim, cfg, w, x, blocks, f"shell-planned-d{cfg.drain_lanes}")
    c = job["counters"]
    assert c["cycles"] == job["end"] - job["start_ack"]
    assert job["beats_in"] == (sum(beat_count(b) for b in blocks)
                               + -(-sum(b.cols for b in blocks) // cfg.bus_words))
    assert job["beats_out"] == _y_beats(cfg, blocks)


@pytest.mark.native_agree
@pytest.mark.parametrize("cfg", [CFG, CFG_D], ids=["d1", "d2"])
def test_shell_planned_blocks_backpressure(sim, cfg):
    """The same ``plan_blocks`` plan, two products back to back (the planned activations,
    then others with the x_fmt extremes and zeros: the plan holds for any since no partial
    sum can saturate), with idle inputs and back-pressure on every stream: results ==
    golden, counters equal to what the bench saw on the ports."""
    w, x, blocks = _planned(cfg)
    x2 = np.random.default_rng(112).integers(-32768, 32768, 8)
    x2[[1, 4, 6]] = [-32768, 32767, 0]
    xs = [x, x2]
    sources, sinks = _ports(cfg, 0.7, 0.6, 0.5, 13)
    records = run_axi_jobs(SHELL, cfg, [axi_job(blocks, v, cfg) for v in xs], sources, sinks,
                           sim=sim, name=f"shell-planned-bp-d{cfg.drain_lanes}",
                           max_cycles=10_000)
    for v, job in zip(xs, records):
        assert job["status"] == 0b10
        y = np.asarray(job["packets"]["m_axis_y"], dtype=np.int64)
        np.testing.assert_array_equal(np.where(y >= 1 << 23, y - (1 << 24), y),
                                      ref_spmv(w, v, cfg))
        c = job["counters"]
        assert c["cycles"] == job["end"] - job["start_ack"]
        assert c["stall_in"] == job["stall_in_any"]
        assert c["stall_out"] == job["stall_out_any"]
    assert sum(j["stall_out_any"] for j in records) > 0
    assert sum(j["stall_in_any"] for j in records) > 0
    patterns = {p: pat for p, _, pat in sources + sinks}
    models = spmv_shell_cycle_model([tile_jobs(blocks, v) for v in xs], cfg, patterns)
    for k, (job, model) in enumerate(zip(records, models)):
        assert_record_is_model(job, model, f"(job {k})")


# (w valid, x valid, y ready): probabilities (seeded per port) or patterns
SPMV_PATTERNS = [(1.0, 1.0, 1.0), (0.7, 0.6, 0.5), (0.3, 0.9, 0.8), (0.9, 0.8, 0.2),
                 (1.0, 0.4, 1.0),
                 (Pattern.bits((1, 1, 0)), Pattern.bits((0, 1)), Pattern.bits((1, 0, 0, 1)))]


def _other(pattern):
    if pattern.kind == "bits":
        return Pattern.bits(pattern.seq[1:] + pattern.seq[:1])
    return pattern if pattern.kind == "always" else Pattern.bernoulli(pattern.prob,
                                                                      pattern.seed + 1)


@pytest.mark.parametrize("cfg", [CFG, CFG_D, dataclasses.replace(CFG, bus_words=1)],
                         ids=["d1", "d2", "w1"])
def test_shell_backpressure_model(sim, cfg):
    """Exact back-pressure model: three products back to back (a 37 x 13 matrix tiled into
    six blocks on 4 PEs, activation and result packets that do not divide into beats:
    partial last beats; with ``drain_lanes`` 2 a block row's half last beat) under six sets
    of per-port patterns (full rate; idle weights and activations and back-pressured
    results at probabilities 0.2..0.9; periodic): every job's record (first input beat,
    last output beat, beats and stall clocks, the four counters) and the clock of every
    result beat equal :func:`gen.spmv.spmv_shell_cycle_model`'s, which reads only the
    blocks, ``bus_words``, the config, the patterns and the bench's register writes per
    job (the start responses' clocks are predicted and checked too).  The
    model with reseeded or rotated patterns must differ (the check can fail)."""
    w = _matrix(21)
    rng = np.random.default_rng(22)
    xs = [rng.integers(-2048, 2048, w.shape[1]) for _ in range(3)]
    blocks = compile_tiled(w, cfg, "balanced")
    jobs = [tile_jobs(blocks, x) for x in xs]
    for i, probs in enumerate(SPMV_PATTERNS):
        sources, sinks = _ports(cfg, *probs, 30 + i)
        patterns = {p: pat for p, _, pat in sources + sinks}
        records, beats = run_native_beats(
            SHELL, cfg, [axi_job(blocks, x, cfg) for x in xs], sources, sinks, sim,
            f"model-{cfg.drain_lanes}-{cfg.bus_words}-{i}", max_cycles=20_000)
        models = spmv_shell_cycle_model(jobs, cfg, patterns)
        other = {p: _other(v) for p, v in patterns.items()}
        others = spmv_shell_cycle_model(jobs, cfg, other) if i else models
        for k, (x, job, got, model) in enumerate(zip(xs, records, beats, models)):
            y = np.asarray(job["packets"]["m_axis_y"], dtype=np.int64)
            np.testing.assert_array_equal(np.where(y >= 1 << 23, y - (1 << 24), y),
                                          ref_spmv(w, x, cfg))
            assert_record_is_model(job, model, f"(patterns {i}, job {k})")
            assert got["m_axis_y"] == model["out_cycles"]["m_axis_y"]
        assert any(o["out_cycles"] != m["out_cycles"] for o, m in zip(others, models)) \
            or i == 0


def test_shell_ports_are_vivado_names():
    from gen.core.emit import to_verilog, verilog_ports
    text = to_verilog(SHELL.build(CFG), SHELL.module_name(CFG))
    ports = {name: (d, width) for name, d, width in verilog_ports(text, SHELL.module_name(CFG))}
    assert SHELL.module_name(CFG) == "spmv_axi_l2_w3"
    assert ports["s_axis_w_tdata"] == ("input", 2 * 8 * ((CFG.word_width + 7) // 8))
    assert ports["s_axis_x_tdata"] == ("input", 48)
    assert ports["m_axis_y_tdata"] == ("output", 72)
    assert ports["m_axis_y_tkeep"] == ("output", 9)
    assert {"aclk", "aresetn", "irq", "s_axi_awaddr", "s_axi_rdata"} <= set(ports)
    assert not [p for p in ports if "__" in p]


def test_regmap():
    assert REGMAP.register("ID").fields[0].reset == 0x53500002
    assert [f.name for f in REGMAP.register("JOB_INPUTS").fields] == ["w_en", "x_en"]
    assert (JOB_INPUTS, Y_WORDS, IRQ_ENABLE) == (0x40, 0x44, 0x10)


@pytest.mark.rtl
def test_cli_run_through_the_shell(tmp_path):
    """``spnn run spmv --bus-words 4``: results equal the golden model's; the report gives
    end-to-end cycles beside the roofline bound and the shell's counters."""
    from gen.cli import main
    from gen.core.sim import sim_available
    if not sim_available("verilator"):
        pytest.skip("needs Verilator")
    w = _matrix(4, rows=21, cols=10).astype(np.int8)
    x = np.random.default_rng(5).integers(-1000, 1000, 10).astype(np.int16)
    np.save(tmp_path / "w.npy", w)
    np.save(tmp_path / "x.npy", x)
    argv = ["run", "spmv", "--weights", str(tmp_path / "w.npy"), "--x", str(tmp_path / "x.npy"),
            "--pes", "4", "--bus-words", "4", "--out", str(tmp_path / "y.npy"),
            "--report", str(tmp_path / "r.json")]
    assert main(argv) == 0
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"),
                                  w.astype(np.int64) @ x.astype(np.int64))
    r = json.loads((tmp_path / "r.json").read_text())
    assert r["interface"] == "axi" and r["bus_words"] == 4 and r["w_lanes"] == 4
    assert r["bus_beats"]["m_axis_y"] == 6 and r["bus_beats"]["s_axis_x"] == 3
    assert r["roofline_cycles"] == max(r["compute_bound_cycles"], r["bandwidth_bound_cycles"])
    assert r["end_to_end_cycles"] == r["cycles"] >= r["roofline_cycles"]
    assert r["efficiency_vs_roofline"] == r["roofline_cycles"] / r["cycles"]
    assert r["counters"]["cycles"] >= r["cycles"]


@pytest.mark.native_agree
@pytest.mark.parametrize("cfg", [CFG, CFG_D], ids=["d1", "d2"])
def test_shell_reset_mid_job(sim, cfg):
    """``aresetn`` low in the middle of a product (weights loading, results pending): the
    registers read their reset values, and the next product, on the same weights streamed
    again, is exact."""
    CFG = cfg
    w = _matrix(6)
    rng = np.random.default_rng(7)
    xs = [rng.integers(-2048, 2048, w.shape[1]) for _ in range(2)]
    blocks = compile_tiled(w, CFG, "balanced")
    jobs = [dict(axi_job(blocks, xs[0], CFG), reset_after=60), axi_job(blocks, xs[1], CFG)]
    sources, sinks = _ports(CFG, 0.8, 0.8, 0.7, 4)
    cut, after = run_axi_jobs(SHELL, CFG, jobs, sources, sinks, sim=sim,
                              name=f"shell-reset-d{CFG.drain_lanes}", max_cycles=20_000)
    assert_cleared_by_reset(cut)
    y = np.asarray(after["packets"]["m_axis_y"], dtype=np.int64)
    np.testing.assert_array_equal(np.where(y >= 1 << 23, y - (1 << 24), y),
                                  ref_spmv(w, xs[1], CFG))
    assert after["counters"]["cycles"] == after["end"] - after["start_ack"]
    models = spmv_shell_cycle_model([tile_jobs(blocks, x) for x in xs], CFG,
                                    {p: pat for p, _, pat in sources + sinks},
                                    resets=[60, None])
    for k, (job, model) in enumerate(zip((cut, after), models)):
        assert_record_is_model(job, model, f"(job {k})")


# the requantisation stage on the results: one bias per row, 8-bit results
CFG_RQ = dataclasses.replace(CFG, rq_width=8, rq_depth=64)


@pytest.mark.native_agree
@pytest.mark.parametrize("full", [True, False], ids=["full", "bp"])
def test_shell_requant(sim, full):
    """A tiled product (3 block rows, 37 rows) with the rows' biases, a shift, saturation
    and ReLU in the shell's output stage, then one reusing those biases with a multiplier:
    results == the golden stage on ref_spmv; at full rate gen.spmv.shell_cycles exactly."""
    from gen.core.fixed import Requant
    from gen.spmv import shell_cycles, tile_jobs
    from gen.spmv.twin import requant_spmv, rtl_spmv_axi
    w = _matrix(21)
    rng = np.random.default_rng(22)
    xs = [rng.integers(-2048, 2048, w.shape[1]) for _ in range(2)]
    bias = tuple(int(v) for v in rng.integers(-20000, 20000, w.shape[0]))
    rqs = [Requant(shift=9, relu=True, bias=bias), Requant(mult=40, shift=12)]
    blocks = compile_tiled(w, CFG_RQ, "balanced")
    p = 1.0 if full else 0.6
    ys, records = rtl_spmv_axi(w, xs, CFG_RQ, sim, w_valid_prob=p, x_valid_prob=p,
                               o_ready_prob=p, seed=3, name=f"shell-requant-{int(full)}",
                               blocks=blocks, rq=rqs)
    for x, y, rq, job in zip(xs, ys, rqs, records):
        want = requant_spmv(ref_spmv(w, x, CFG_RQ), rq, bias, 8)
        np.testing.assert_array_equal(y, want)
        assert job["counters"]["cycles"] == job["end"] - job["start_ack"]
        if full:
            assert job["end"] - job["first_in"] + 1 == shell_cycles(tile_jobs(blocks, x),
                                                                    CFG_RQ)
    assert (ys[0] == 0).any() and (ys[0] >= 0).all() and (np.abs(ys[1]) >= 127).any()
    sources, sinks = axi_ports(CFG_RQ, p, p, p, 3)
    models = spmv_shell_cycle_model(
        [tile_jobs(blocks, x) for x in xs], CFG_RQ, {q: pat for q, _, pat in sources + sinks},
        writes=[len(axi_job(blocks, x, CFG_RQ, rq)["regs"]) for x, rq in zip(xs, rqs)],
        bias_loads=[rq.bias is not None for rq in rqs])
    for k, (job, model) in enumerate(zip(records, models)):
        assert_record_is_model(job, model, f"(job {k})")


def test_shell_requant_backpressure_model(sim):
    """Exact back-pressure model with the requantisation stage: a tiled product loading the
    rows' biases, then one reusing them, under five sets of per-port patterns (full rate;
    idle weights, activations and biases, back-pressured results; a bias beat once in 61
    clocks): every record and every result beat's clock equal
    :func:`gen.spmv.spmv_shell_cycle_model`'s (:class:`gen.core.flow.RequantTwin`)."""
    from gen.core.fixed import Requant
    from gen.core.sim import axi_ports as sim_axi_ports
    from hdl.spmv.shell import shell_ports
    w = _matrix(23)
    rng = np.random.default_rng(24)
    xs = [rng.integers(-2048, 2048, w.shape[1]) for _ in range(2)]
    bias = tuple(int(v) for v in rng.integers(-20000, 20000, w.shape[0]))
    rqs = [Requant(shift=9, relu=True, bias=bias), Requant(mult=40, shift=12)]
    blocks = compile_tiled(w, CFG_RQ, "balanced")
    jobs = [axi_job(blocks, x, CFG_RQ, rq) for x, rq in zip(xs, rqs)]
    late = Pattern.bits((0,) * 60 + (1,))
    sets = [{}, {"w": 0.7, "x": 0.6, "y": 0.5, "b": 0.4}, {"w": 0.9, "b": 0.3, "y": 0.2},
            {"b": late}, {"x": 0.5, "b": late, "y": Pattern.bits((1, 0, 0))}]
    for i, probs in enumerate(sets):
        sources, sinks = sim_axi_ports(*shell_ports(CFG_RQ), seed=60 + i, patterns=probs)
        records, beats = run_native_beats(SHELL, CFG_RQ, jobs, sources, sinks, sim,
                                          f"rq-model-{i}", max_cycles=20_000)
        models = spmv_shell_cycle_model(
            [tile_jobs(blocks, x) for x in xs], CFG_RQ,
            {q: pat for q, _, pat in sources + sinks}, writes=[len(j["regs"]) for j in jobs],
            bias_loads=[rq.bias is not None for rq in rqs])
        for k, (job, got, model) in enumerate(zip(records, beats, models)):
            assert_record_is_model(job, model, f"(patterns {i}, job {k})")
            assert got["m_axis_y"] == model["out_cycles"]["m_axis_y"]
        if i == 3:                 # the late biases hold the first results back
            assert records[0]["end"] > 60 * -(-w.shape[0] // CFG_RQ.bus_words)
            unaware = spmv_shell_cycle_model(
                [tile_jobs(blocks, x) for x in xs], CFG_RQ,
                {q: pat for q, _, pat in sources + sinks}, writes=[len(j["regs"]) for j in jobs])
            assert unaware[0]["end"] < records[0]["end"]
