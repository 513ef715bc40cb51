# SPDX-License-Identifier: Apache-2.0
"""The LSTM accelerator shell (hdl/lstm/shell.py on hdl/lib/axi_shell.py) under both
simulators: the weight load as a job of its own, sequences as jobs, AXI4-Stream at a bus
width that divides none of the packets, idle inputs and back-pressure on every stream, the
counters against what the bench saw on the ports."""

import dataclasses

import numpy as np
import pytest
from numpy.testing import assert_array_equal

from gen.core.fixed import quantise
from gen.core.sim import run_axi_jobs
from gen.core.stimulus import Pattern
from gen.lstm import (LstmConfig, compile_lstm, lstm_shell_cycle_model, quantise_lstm, ref_lstm,
                      weight_beats, weight_words)
from gen.lstm.twin import H_WORDS, JOB_INPUTS, axi_jobs, axi_ports, rtl_lstm_axi
from hdl.lstm import SHELL
from hdl.lstm.shell import REGMAP
from tb.shell_checks import assert_cleared_by_reset, assert_record_is_model, run_native_beats
from tb.lstm.test_lstm import cli_files, random_layer, run_cli  # noqa: F401 (fixture)

CFG = LstmConfig(pes=3, max_inputs=8, max_hidden=16, fifo_depth=4, mem_depth=256, segments=8,
                 bus_words=3)
# two weight words per beat and clock (a direct weight port)
CFG_L = dataclasses.replace(CFG, w_lanes=2)


def _seqs(rng, H, X, steps):
    return [(quantise(rng.uniform(-2, 2, (T, X)), CFG.x_fmt),
             quantise(rng.uniform(-1, 1, H), CFG.x_fmt) if k else None,
             quantise(rng.uniform(-3, 3, H), CFG.c_fmt) if k else None)
            for k, T in enumerate(steps)]


def _check_counters(job):
    c = job["counters"]
    assert job["status"] == 0b10
    assert (job["irq"], job["irq_after_ack"], job["irq_status_after_ack"]) == (1, 0, 0)
    assert c["stall_in"] == job["stall_in_any"] and c["stall_out"] == job["stall_out_any"]
    assert c["busy"] <= c["cycles"]


@pytest.mark.native_agree
@pytest.mark.parametrize("cfg", [CFG, CFG_L], ids=["l1", "l2"])
def test_shell_weights_then_sequences(sim, cfg):
    """H = 10 on 3 PEs, X = 3: the weights in a job of their own (it ends when the END word
    has entered the engine, no results), then three sequences (T = 4 with zero state, T = 1
    and T = 2 with h0/c0), idle inputs and back-pressure: every h_t bit-exact."""
    CFG = cfg
    rng = np.random.default_rng(21)
    q = quantise_lstm(random_layer(rng, 10, 3), CFG)
    plan = compile_lstm(q, CFG)
    seqs = _seqs(rng, 10, 3, [4, 1, 2])
    hs, records = rtl_lstm_axi(plan, seqs, sim, w_valid_prob=0.7, x_valid_prob=0.6,
                               o_ready_prob=0.5, seed=4, name=f"shell-seqs-l{CFG.w_lanes}")
    assert len(hs) == 3 and len(records) == 4
    for (xs, h0, c0), h in zip(seqs, hs):
        assert_array_equal(h, ref_lstm(q, xs, CFG, h0, c0)[0])
    load = records[0]
    _check_counters(load)
    assert load["beats_out"] == 0 and load["end"] is None
    if CFG.w_lanes == 1:
        assert load["beats_in"] == -(-len(weight_words(plan)) // CFG.bus_words)
        assert load["counters"]["busy"] == len(weight_words(plan))
    else:
        assert load["beats_in"] == load["counters"]["busy"] == len(weight_beats(plan))
    for (xs, _, _), job in zip(seqs, records[1:]):
        _check_counters(job)
        assert job["counters"]["cycles"] == job["end"] - job["start_ack"]
        assert job["beats_out"] == -(-len(xs) * 10 // CFG.bus_words)
    assert sum(j["stall_out_any"] for j in records) > 0
    assert sum(j["stall_in_any"] for j in records) > 0
    sources, sinks = axi_ports(CFG, 0.7, 0.6, 0.5, 4)
    models = lstm_shell_cycle_model(plan, [(True, [])] + [(False, [s]) for s in seqs],
                                    {p: pat for p, _, pat in sources + sinks})
    for k, (job, model) in enumerate(zip(records, models)):
        assert_record_is_model(job, model, f"(job {k})")


def test_shell_weights_with_the_first_sequence(sim):
    """JOB_INPUTS = w and x: the weights and the first sequence in one job at full rate,
    then a second sequence on the same weights."""
    rng = np.random.default_rng(22)
    q = quantise_lstm(random_layer(rng, 5, 8, density=0.3), CFG)
    plan = compile_lstm(q, CFG)
    seqs = _seqs(rng, 5, 8, [2, 3])
    jobs = axi_jobs(plan, seqs, with_weights=False)
    jobs[0]["regs"][0] = [JOB_INPUTS, 3]
    jobs[0]["packets"]["s_axis_w"] = weight_words(plan)
    sources, sinks = axi_ports(CFG)
    records = run_axi_jobs(SHELL, CFG, jobs, sources, sinks, sim=sim, name="shell-together",
                           max_cycles=20_000)
    for (xs, h0, c0), job in zip(seqs, records):
        h = np.asarray(job["packets"]["m_axis_h"], dtype=np.int64)
        h = np.where(h >= 1 << 15, h - (1 << 16), h).reshape(-1, 5)
        assert_array_equal(h, ref_lstm(q, xs, CFG, h0, c0)[0])
        _check_counters(job)
        assert job["counters"]["stall_out"] == 0
    models = lstm_shell_cycle_model(plan, [(True, seqs[:1]), (False, seqs[1:])],
                                    {p: pat for p, _, pat in sources + sinks})
    for k, (job, model) in enumerate(zip(records, models)):
        assert_record_is_model(job, model, f"(job {k})")


# (w valid, x valid, h ready): probabilities (seeded per port) or patterns
LSTM_PATTERNS = [(1.0, 1.0, 1.0), (0.7, 0.6, 0.5), (0.3, 0.9, 0.8), (0.9, 0.8, 0.2),
                 (1.0, 0.3, 1.0),
                 (Pattern.bits((1, 1, 0)), Pattern.bits((0, 1)), Pattern.bits((1, 0, 0, 1)))]


def _other(pattern):
    if pattern.kind == "bits":
        return Pattern.bits(pattern.seq[1:] + pattern.seq[:1])
    return pattern if pattern.kind == "always" else Pattern.bernoulli(pattern.prob,
                                                                      pattern.seed + 1)


@pytest.mark.parametrize("cfg", [CFG, CFG_L, dataclasses.replace(CFG, bus_words=1)],
                         ids=["l1", "l2", "w1"])
@pytest.mark.parametrize("together", [False, True], ids=["load", "with-seq"])
def test_shell_backpressure_model(sim, cfg, together):
    """Exact back-pressure model: H = 10 on 3 PEs, X = 3; the weights in a job of their own
    (no results: the bench polls STATUS after it) or with the first sequence, then
    sequences of 4, 1 and 2 steps (packets that do not divide into beats: partial last
    beats), under six sets of per-port patterns (full rate; idle weights and sequence
    words, back-pressured h at probabilities 0.2..0.9; periodic): every job's record (first
    input beat, last h beat, beats and stall clocks, the four counters) and the clock of
    every h beat equal :func:`gen.lstm.lstm_shell_cycle_model`'s, which reads only the
    plan, the sequences (their zero h values decide the broadcasts), the config, the
    patterns and the bench's register writes per job (the start responses' clocks are
    predicted and checked too).  The model with reseeded or rotated patterns
    must differ (the check can fail)."""
    rng = np.random.default_rng(21)
    q = quantise_lstm(random_layer(rng, 10, 3), cfg)
    plan = compile_lstm(q, cfg)
    seqs = _seqs(rng, 10, 3, [4, 1, 2])
    jobs = axi_jobs(plan, seqs, with_weights=not together)
    if together:
        jobs[0]["regs"][0] = [JOB_INPUTS, 3]
        jobs[0]["packets"]["s_axis_w"] = weight_words(plan)
        model_jobs = [(True, seqs[:1])] + [(False, [s]) for s in seqs[1:]]
    else:
        model_jobs = [(True, [])] + [(False, [s]) for s in seqs]
    for i, probs in enumerate(LSTM_PATTERNS):
        sources, sinks = axi_ports(cfg, *probs, 40 + i)
        patterns = {p: pat for p, _, pat in sources + sinks}
        records, beats = run_native_beats(
            SHELL, cfg, jobs, sources, sinks, sim,
            f"model-{cfg.w_lanes}-{cfg.bus_words}-{int(together)}-{i}", max_cycles=50_000)
        models = lstm_shell_cycle_model(plan, model_jobs, patterns)
        others = lstm_shell_cycle_model(plan, model_jobs,
                                        {p: _other(v) for p, v in patterns.items()}) \
            if i else models
        for k, (job, got, model) in enumerate(zip(records, beats, models)):
            assert_record_is_model(job, model, f"(patterns {i}, job {k})")
            assert got["m_axis_h"] == model["out_cycles"].get("m_axis_h", [])
        for (xs, h0, c0), job in zip(seqs[1:] if together else seqs, records[1:]):
            h = np.asarray(job["packets"]["m_axis_h"], dtype=np.int64)
            h = np.where(h >= 1 << 15, h - (1 << 16), h).reshape(-1, 10)
            assert_array_equal(h, ref_lstm(q, xs, cfg, h0, c0)[0])
        assert any(o["out_cycles"] != m["out_cycles"] or o["counters"] != m["counters"]
                   for o, m in zip(others, models)) or i == 0


@pytest.mark.parametrize("cfg", [CFG, CFG_L], ids=["l1", "l2"])
def test_shell_full_rate_model(sim, cfg):
    """The weights and a sequence in one job at full rate: the end-to-end cycles equal
    gen.lstm.shell_cycles exactly."""
    from gen.lstm import shell_cycles
    rng = np.random.default_rng(24)
    q = quantise_lstm(random_layer(rng, 10, 3), cfg)
    plan = compile_lstm(q, cfg)
    seqs = _seqs(rng, 10, 3, [4])
    jobs = axi_jobs(plan, seqs, with_weights=False)
    jobs[0]["regs"][0] = [JOB_INPUTS, 3]
    jobs[0]["packets"]["s_axis_w"] = weight_words(plan)
    hs, records = rtl_lstm_axi(plan, seqs, sim, jobs=jobs, name=f"shell-model-l{cfg.w_lanes}")
    assert_array_equal(hs[0], ref_lstm(q, seqs[0][0], cfg)[0])
    job = records[0]
    assert job["end"] - job["first_in"] + 1 == shell_cycles(plan, seqs)


@pytest.mark.native_agree
def test_shell_reset_mid_job(sim):
    """``aresetn`` low while the weights load, and again in the middle of a sequence
    (results pending, output back-pressured): each time the registers read their reset
    values; the weights loaded again and the next sequence are exact."""
    rng = np.random.default_rng(23)
    q = quantise_lstm(random_layer(rng, 7, 4), CFG)
    plan = compile_lstm(q, CFG)
    seqs = _seqs(rng, 7, 4, [6, 2])
    load, seq0, seq1 = axi_jobs(plan, seqs[:1]) + axi_jobs(plan, seqs[1:], with_weights=False)
    jobs = [dict(load, reset_after=20), load, dict(seq0, reset_after=80), load, seq1]
    sources, sinks = axi_ports(CFG, 0.8, 0.7, 0.5, seed=6)
    records = run_axi_jobs(SHELL, CFG, jobs, sources, sinks, sim=sim, name="shell-reset",
                           max_cycles=40_000)
    assert_cleared_by_reset(records[0])
    assert_cleared_by_reset(records[2])
    assert records[2]["beats_out_before_reset"] < 6 * 7
    xs, h0, c0 = seqs[1]
    h = np.asarray(records[4]["packets"]["m_axis_h"], dtype=np.int64)
    h = np.where(h >= 1 << 15, h - (1 << 16), h).reshape(-1, 7)
    assert_array_equal(h, ref_lstm(q, xs, CFG, h0, c0)[0])
    _check_counters(records[4])
    models = lstm_shell_cycle_model(
        plan, [(True, []), (True, []), (False, seqs[:1]), (True, []), (False, seqs[1:])],
        {p: pat for p, _, pat in sources + sinks}, resets=[20, None, 80, None, None])
    for k, (job, model) in enumerate(zip(records, models)):
        assert_record_is_model(job, model, f"(job {k})")


def test_regmap_and_ports():
    from gen.core.emit import to_verilog, verilog_ports
    assert REGMAP.register("ID").fields[0].reset == 0x53500003
    assert (JOB_INPUTS, H_WORDS) == (0x40, 0x44)
    module = SHELL.module_name(CFG)
    assert module == "lstm_axi_w3"
    ports = {n: (d, w) for n, d, w in verilog_ports(to_verilog(SHELL.build(CFG), module), module)}
    assert ports["m_axis_h_tdata"] == ("output", 48)
    assert ports["s_axis_x_tkeep"] == ("input", 9)
    assert not [p for p in ports if "__" in p]


def test_cli_run_through_the_shell(sim, tmp_path, cli_files):
    """``spnn run lstm --bus-words 3`` (the hardware config above: no extra build): h equals
    the bare engine's golden model; the report gives end-to-end cycles including the weight
    load beside the roofline bound."""
    import json
    out, report = tmp_path / "h.npy", tmp_path / "r.json"
    code, stdout, stderr = run_cli(
        ["run", "lstm", "--model", str(cli_files["model"]), "--input", str(cli_files["seq"]),
         "--density", "0.3", "--pes", "3", "--fifo-depth", "4", "--mem-depth", "256",
         "--segments", "8", "--bus-words", "3", "--out", str(out), "--report", str(report),
         "--sim", sim])
    assert code == 0, stderr
    assert np.load(out).shape == (3, 16)
    r = json.loads(report.read_text())
    assert r["config"] == {**r["config"], "bus_words": 3, "pes": 3, "max_hidden": 16}
    assert r["interface"] == "axi" and r["bus_beats"]["m_axis_h"] == 16
    assert r["end_to_end_cycles"] == r["cycles"] >= r["roofline_cycles"] > 0
    assert r["roofline_cycles"] == max(r["compute_bound_cycles"], r["bandwidth_bound_cycles"])
    assert r["counters"]["cycles"] >= r["cycles"] and "end to end" in stdout


# the requantisation stage on h: a bias per hidden unit, 6-bit results
CFG_RQ = dataclasses.replace(CFG, rq_width=6, rq_depth=16)


@pytest.mark.native_agree
@pytest.mark.parametrize("full", [True, False], ids=["full", "bp"])
def test_shell_requant(sim, full):
    """The weights and two sequences through the shell's output stage (biases, shift,
    saturation to 6 bits, ReLU; loaded with the first sequence, kept for the second): the
    h codes == the golden stage on ref_lstm's; at full rate, weights and sequence in one
    job, gen.lstm.shell_cycles (+ the stage's latency) exactly."""
    from gen.core.fixed import Requant
    from gen.lstm import shell_cycles
    from gen.lstm.twin import requant_h, requant_job
    rng = np.random.default_rng(31)
    q = quantise_lstm(random_layer(rng, 10, 3), CFG_RQ)
    plan = compile_lstm(q, CFG_RQ)
    seqs = _seqs(rng, 10, 3, [4, 3])
    bias = tuple(int(v) for v in rng.integers(-600, 600, 10))
    rq = Requant(mult=3, shift=7, relu=True, bias=bias)
    p = 1.0 if full else 0.6
    if full:                       # the weights with the first sequence: one job
        jobs = axi_jobs(plan, seqs[:1], with_weights=False)
        jobs[0]["regs"] = [[JOB_INPUTS, 3], jobs[0]["regs"][1], jobs[0]["regs"][2]]
        jobs[0]["packets"]["s_axis_w"] = weight_words(plan)
        requant_job(jobs[0], plan, rq)
        seqs = seqs[:1]
    else:
        jobs = None
    hs, records = rtl_lstm_axi(plan, seqs, sim, w_valid_prob=p, x_valid_prob=p,
                               o_ready_prob=p, seed=4, jobs=jobs, rq=rq,
                               name=f"shell-requant-{int(full)}")
    for (xs, h0, c0), h in zip(seqs, hs):
        want = requant_h(ref_lstm(q, xs, CFG_RQ, h0, c0)[0], rq, bias, 6)
        assert_array_equal(h, want)
    assert (hs[0] == 0).any() and (hs[0] >= 0).all() and (hs[0] == 31).any()
    if full:
        job = records[0]
        assert job["end"] - job["first_in"] + 1 == shell_cycles(plan, seqs)
    sources, sinks = axi_ports(CFG_RQ, p, p, p, 4)
    jobs = jobs or axi_jobs(plan, seqs, rq=rq)
    model_jobs = ([(True, seqs)] if full else
                  [(True, [])] + [(False, [s]) for s in seqs])
    models = lstm_shell_cycle_model(plan, model_jobs, {q: pat for q, _, pat in sources + sinks},
                                    writes=[len(j["regs"]) for j in jobs],
                                    bias_loads=["s_axis_b" in j["packets"] for j in jobs])
    for k, (job, model) in enumerate(zip(records, models)):
        assert_record_is_model(job, model, f"(job {k})")


def test_shell_requant_backpressure_model(sim):
    """Exact back-pressure model with the requantisation stage: the weights alone, then two
    sequences (the first loading the biases), under five sets of per-port patterns (full
    rate; idle weights, sequence words and biases, back-pressured h; a bias beat once in
    301 clocks): every record and every h beat's clock equal
    :func:`gen.lstm.lstm_shell_cycle_model`'s (:class:`gen.core.flow.RequantTwin`)."""
    from gen.core.fixed import Requant
    from gen.core.sim import axi_ports as sim_axi_ports
    from hdl.lstm.shell import shell_ports
    rng = np.random.default_rng(32)
    q = quantise_lstm(random_layer(rng, 10, 3), CFG_RQ)
    plan = compile_lstm(q, CFG_RQ)
    seqs = _seqs(rng, 10, 3, [4, 3])
    rq = Requant(mult=3, shift=7, relu=True,
                 bias=tuple(int(v) for v in rng.integers(-600, 600, 10)))
    jobs = axi_jobs(plan, seqs, rq=rq)
    model_jobs = [(True, [])] + [(False, [s]) for s in seqs]
    late = Pattern.bits((0,) * 300 + (1,))
    sets = [{}, {"w": 0.7, "x": 0.6, "h": 0.5, "b": 0.4}, {"w": 0.9, "b": 0.3, "h": 0.2},
            {"b": late}, {"x": 0.5, "b": late, "h": Pattern.bits((1, 0, 0))}]
    for i, probs in enumerate(sets):
        sources, sinks = sim_axi_ports(*shell_ports(CFG_RQ), seed=70 + i, patterns=probs)
        records, beats = run_native_beats(SHELL, CFG_RQ, jobs, sources, sinks, sim,
                                          f"rq-model-{i}", max_cycles=50_000)
        models = lstm_shell_cycle_model(plan, model_jobs,
                                        {p: pat for p, _, pat in sources + sinks},
                                        writes=[len(j["regs"]) for j in jobs],
                                        bias_loads=["s_axis_b" in j["packets"] for j in jobs])
        for k, (job, got, model) in enumerate(zip(records, beats, models)):
            assert_record_is_model(job, model, f"(patterns {i}, job {k})")
            assert got["m_axis_h"] == model["out_cycles"].get("m_axis_h", [])
        if i == 3:                 # the late biases hold the first results back
            assert records[1]["end"] - records[1]["start_ack"] > 300 * -(-10 // CFG.bus_words)
            unaware = lstm_shell_cycle_model(plan, model_jobs,
                                             {p: pat for p, _, pat in sources + sinks},
                                             writes=[len(j["regs"]) for j in jobs])
            assert unaware[1]["end"] < records[1]["end"]
