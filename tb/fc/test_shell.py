# SPDX-License-Identifier: Apache-2.0
"""The FC engine's accelerator shell (hdl/fc/shell.py on hdl/lib/axi_shell.py) under both
simulators: job sizes in registers, rows of X, FD-CSR metadata and results over AXI4-Stream,
the weight memory's requests and responses as unframed side channels; jobs back to back with
idle inputs and back-pressure, the counters against what the bench saw."""

import dataclasses

import numpy as np
import pytest

from gen.core.fixed import to_signed
from gen.core.flow import BENCH_BEFORE
from gen.core.sim import axi_ports, run_axi_jobs
from gen.core.stimulus import Pattern
from gen.fc import FcConfig, fc_job, fc_shell_cycle_model, prune_random, ref_fc
from gen.fc.twin import axi_job, rtl_fc_axi
from hdl.fc import SHELL
from hdl.fc.shell import REGMAP, shell_ports
from tb.shell_checks import assert_cleared_by_reset, assert_record_is_model, run_native_beats

CFG = FcConfig(batch=2, nz_per_clock=2, row_width=8, segs_per_beat=2, max_cols=64,
               max_rows=32, addr_width=10)


def _case(rng, rows, cols, n, density):
    w = prune_random((rows, cols), density, rng, CFG.w_fmt.width)
    fmt = CFG.x_fmt
    return w, rng.integers(fmt.min_code, fmt.max_code + 1, size=(cols, n))


@pytest.mark.parametrize("valid_prob, ready_prob, bus_words", [(0.6, 0.5, 1), (1.0, 1.0, 1),
                                                               (0.6, 0.5, 6)])
@pytest.mark.native_agree
def test_shell_jobs(sim, valid_prob, ready_prob, bus_words):
    """Three layers back to back: 9 x 37 at 30 % with a full batch, 1 x 5 (one row, one
    activation column), 20 x 17 with an empty row and an empty column; with ``bus_words``
    6, three rows of X and of Y per beat (partial last beats: 37, 5, 17 rows in; 9, 1, 20
    out)."""
    cfg = dataclasses.replace(CFG, bus_words=bus_words)
    rng = np.random.default_rng(31)
    cases = [_case(rng, 9, 37, 2, 0.3), _case(rng, 1, 5, 1, 0.6), _case(rng, 20, 17, 2, 0.4)]
    cases[2][0][4] = 0
    cases[2][0][:, 6] = 0
    ws, xs = [c[0] for c in cases], [c[1] for c in cases]
    ys, records = rtl_fc_axi(ws, xs, cfg, sim, valid_prob=valid_prob, ready_prob=ready_prob,
                             seed=2, name=f"jobs-{int(valid_prob * 10)}-{bus_words}")
    for w, x, y, job in zip(ws, xs, ys, records):
        np.testing.assert_array_equal(y, ref_fc(w, x, cfg))
        c = job["counters"]
        assert job["status"] == 0b10
        assert (job["irq"], job["irq_after_ack"], job["irq_status_after_ack"]) == (1, 0, 0)
        assert c["cycles"] == job["end"] - job["start_ack"]
        assert c["busy"] <= c["cycles"]
        assert len(job["packets"]["m_axis_y"]) == w.shape[0] * cfg.batch
    if valid_prob < 1:
        assert sum(j["stall_in"] for j in records) > 0
    sources, sinks = axi_ports(*shell_ports(cfg), valid=valid_prob, ready=ready_prob, seed=2)
    patterns = {p: pat for p, _, pat in sources + sinks}
    models = fc_shell_cycle_model([fc_job(w, x, cfg)[2] for w, x in zip(ws, xs)], cfg,
                                  patterns, writes=4)
    for k, (job, model) in enumerate(zip(records, models)):
        assert_record_is_model(job, model, f"(job {k})")

# per-port patterns: (x, meta, vdata valid; vaddr, y ready), probabilities or patterns
FC_PATTERNS = [(1.0, 1.0, 1.0, 1.0, 1.0), (0.6, 0.5, 0.7, 0.6, 0.5),
               (0.3, 0.9, 0.4, 0.9, 0.8), (0.9, 0.8, 0.9, 0.3, 0.2),
               (1.0, 1.0, 0.5, 1.0, 0.4),
               (Pattern.bits((1, 0)), 0.7, Pattern.bits((1, 1, 0)), 0.8,
                Pattern.bits((0, 1, 1)))]


def _other(pattern):
    if pattern.kind == "bits":
        return Pattern.bits(pattern.seq[1:] + pattern.seq[:1])
    return pattern if pattern.kind == "always" else Pattern.bernoulli(pattern.prob,
                                                                      pattern.seed + 1)


@pytest.mark.parametrize("bus_words", [1, 4, 6])
def test_shell_backpressure_model(sim, bus_words):
    """Exact back-pressure model: three layers back to back (9 x 37 at 30 %, 1 x 5, 20 x 17
    with an empty row and column; with ``bus_words`` 4 and 6 two and three rows a beat,
    partial last beats) under six sets of per-port patterns (full rate; idle inputs and
    back-pressure on every stream, the weight memory's side channels included, at
    probabilities 0.2..0.9 and periodic): every job's record (first input beat, last output
    beat, beats, output stall clocks, the four counters) and the clock of every
    ``m_axis_y`` and ``m_axis_vaddr`` beat equal :func:`gen.fc.fc_shell_cycle_model`'s,
    which reads only the weights' sparsity, ``cols``, the config, the patterns and the
    bench's register writes per job (the start responses' clocks are predicted and checked
    too; requests left in the ``vaddr`` skid buffer at a job's end leave between or during
    the next jobs: the model runs the jobs as one sequence).  The model with reseeded or
    rotated patterns must differ (the check can fail)."""
    cfg = dataclasses.replace(CFG, bus_words=bus_words)
    rng = np.random.default_rng(31)
    cases = [_case(rng, 9, 37, 2, 0.3), _case(rng, 1, 5, 1, 0.6), _case(rng, 20, 17, 2, 0.4)]
    cases[2][0][4] = 0
    cases[2][0][:, 6] = 0
    for i, probs in enumerate(FC_PATTERNS):
        sources, sinks = axi_ports(*shell_ports(cfg), seed=i, patterns=dict(
            zip(("x", "meta", "vdata", "vaddr", "y"), probs)))
        patterns = {p: pat for p, _, pat in sources + sinks}
        jobs = [axi_job(w, x, cfg) for w, x in cases]
        for job in jobs:
            job.pop("cycles")
        records, beats = run_native_beats(SHELL, cfg, jobs, sources, sinks, sim,
                                          f"model-{bus_words}-{i}", max_cycles=20_000)
        fds = [fc_job(w, x, cfg)[2] for w, x in cases]
        writes = [len(job["regs"]) for job in jobs]
        models = fc_shell_cycle_model(fds, cfg, patterns, writes=writes)
        others = fc_shell_cycle_model(fds, cfg, {p: _other(v) for p, v in patterns.items()},
                                      writes=writes)
        for k, ((w, x), record, got, model) in enumerate(zip(cases, records, beats, models)):
            y = to_signed(record["packets"]["m_axis_y"], CFG.acc_width).reshape(-1, 2)
            np.testing.assert_array_equal(y[:, :x.shape[1]], ref_fc(w, x, cfg))
            assert_record_is_model(record, model, f"(patterns {i}, job {k})")
            assert got["m_axis_y"] == model["out_cycles"]["m_axis_y"]
            # vaddr beats in the bench's window of this job (a request left over from the job
            # before may leave before the start; the event file's job begins earlier)
            window = record["start_ack"] - BENCH_BEFORE
            assert [c for c in got["m_axis_vaddr"] if c >= window] == \
                model["out_cycles"].get("m_axis_vaddr", [])
        assert sum(o["out_cycles"] != m["out_cycles"] for o, m in zip(others, models)) >= 2 \
            or i == 0


def test_shell_reset_mid_job(sim):
    """``aresetn`` low in the middle of a layer (metadata and weight values in flight,
    results pending): the registers read their reset values and the next layer, on the
    side channels' fresh streams, is exact."""
    rng = np.random.default_rng(33)
    cases = [_case(rng, 24, 40, 2, 0.4), _case(rng, 7, 19, 2, 0.5)]
    jobs = [dict(axi_job(*cases[0], CFG), reset_after=40), axi_job(*cases[1], CFG)]
    for job in jobs:
        job.pop("cycles")
    sources, sinks = axi_ports(*shell_ports(CFG), valid=0.8, ready=0.6, seed=4)
    cut, after = run_axi_jobs(SHELL, CFG, jobs, sources, sinks, sim=sim, name="shell-reset",
                              max_cycles=5000)
    assert_cleared_by_reset(cut)
    assert cut["beats_out_before_reset"] < 24                   # the layer was cut short
    y = to_signed(after["packets"]["m_axis_y"], CFG.acc_width).reshape(-1, CFG.batch)
    np.testing.assert_array_equal(y, ref_fc(*cases[1], CFG))
    assert after["counters"]["cycles"] == after["end"] - after["start_ack"]
    models = fc_shell_cycle_model([fc_job(w, x, CFG)[2] for w, x in cases], CFG,
                                  {p: pat for p, _, pat in sources + sinks}, writes=4,
                                  resets=[40, None])
    for k, (job, model) in enumerate(zip((cut, after), models)):
        assert_record_is_model(job, model, f"(job {k})")


def test_regmap_and_ports():
    from gen.core.emit import to_verilog, verilog_ports
    assert REGMAP.register("ID").fields[0].reset == 0x53500005
    assert [r.name for r in REGMAP.registers][-4:] == ["JOB_INPUTS", "Y_BEATS", "ROWS", "COLS"]
    module = SHELL.module_name(CFG)
    ports = {p: (d, w) for p, d, w in verilog_ports(to_verilog(SHELL.build(CFG), module), module)}
    assert ports["s_axis_x_tdata"] == ("input", 32)          # one row of X: 2 x 16 bits
    assert ports["s_axis_vdata_tdata"] == ("input", 32)      # 2 values per response
    assert ports["m_axis_y_tdata"][0] == "output"
    assert not [p for p in ports if "__" in p]


def test_bus_words_is_whole_rows():
    """``bus_words`` 1 (a row per beat) or a multiple of ``batch``; the shell's module name
    carries it."""
    assert FcConfig(batch=2, bus_words=6).rows_per_beat == 3
    assert FcConfig(batch=4, bus_words=1).rows_per_beat == 1
    assert FcConfig(batch=2, bus_words=6).shell_name.endswith("_axi_w6")
    for bad in (0, 3, 33):
        with pytest.raises(ValueError, match="bus_words must be"):
            FcConfig(batch=2, bus_words=bad)


@pytest.mark.parametrize("valid_prob, ready_prob, bus_words", [(1.0, 1.0, 1), (0.6, 0.5, 6)])
@pytest.mark.native_agree
def test_shell_requant(sim, valid_prob, ready_prob, bus_words):
    """The requantisation stage on each row of ``batch`` sums (one bias per row; 8-bit
    results with saturation, ReLU on the first layer; the third layer reuses the second's
    biases); with ``bus_words`` 6 three rows per beat, biases 6 per beat."""
    from gen.core.fixed import Requant
    from gen.fc.twin import requant_fc
    cfg = dataclasses.replace(CFG, bus_words=bus_words, rq_width=8, rq_depth=32)
    rng = np.random.default_rng(35)
    cases = [_case(rng, 9, 37, 2, 0.3), _case(rng, 20, 17, 2, 0.4), _case(rng, 5, 8, 1, 0.5)]
    ws, xs = [c[0] for c in cases], [c[1] for c in cases]
    b1 = tuple(int(v) for v in rng.integers(-1 << 20, 1 << 20, 20))
    rqs = [Requant(mult=3, shift=20, relu=True, bias=tuple(range(-4 << 18, 5 << 18, 1 << 18))),
           Requant(mult=1, shift=18, bias=b1), Requant(mult=200, shift=25)]
    ys, records = rtl_fc_axi(ws, xs, cfg, sim, valid_prob=valid_prob, ready_prob=ready_prob,
                             seed=2, name=f"requant-{int(valid_prob * 10)}-{bus_words}", rq=rqs)
    bias, sat = (), 0
    for w, x, y, rq in zip(ws, xs, ys, rqs):
        bias = rq.bias if rq.bias is not None else bias
        want = requant_fc(ref_fc(w, x, cfg), rq, bias[:w.shape[0]], 8)
        np.testing.assert_array_equal(y, want)
        sat += int((np.abs(want) >= 127).sum())
    assert sat > 0 and (ys[0] >= 0).all() and (ys[0] == 0).any()
    sources, sinks = axi_ports(*shell_ports(cfg), valid=valid_prob, ready=ready_prob, seed=2)
    models = fc_shell_cycle_model([fc_job(w, x, cfg)[2] for w, x in zip(ws, xs)], cfg,
                                  {p: pat for p, _, pat in sources + sinks},
                                  writes=[len(axi_job(w, x, cfg, rq)["regs"])
                                          for w, x, rq in zip(ws, xs, rqs)],
                                  bias_loads=[rq.bias is not None for rq in rqs])
    for k, (job, model) in enumerate(zip(records, models)):
        assert_record_is_model(job, model, f"(job {k})")


# a bias port idle for 60 clocks out of 61: the biases arrive late and hold the results back
LATE = Pattern.bits((0,) * 60 + (1,))


@pytest.mark.parametrize("bus_words", [1, 6])
def test_shell_requant_backpressure_model(sim, bus_words):
    """Exact back-pressure model with the requantisation stage (8-bit results): three
    layers, the first two loading their rows' biases, under five sets of per-port patterns
    (full rate; idle inputs, side channels and biases, back-pressured results; a bias
    beat once in 61 clocks): every record and every ``m_axis_y`` beat's clock equal
    :func:`gen.fc.fc_shell_cycle_model`'s (the stage's credit counter, pipeline and output
    FIFO, the wait for the biases, :class:`gen.core.flow.RequantTwin`)."""
    from gen.core.fixed import Requant
    cfg = dataclasses.replace(CFG, bus_words=bus_words, rq_width=8, rq_depth=32)
    rng = np.random.default_rng(36)
    cases = [_case(rng, 9, 37, 2, 0.3), _case(rng, 20, 17, 2, 0.4), _case(rng, 5, 8, 1, 0.5)]
    rqs = [Requant(mult=3, shift=20, relu=True, bias=tuple(range(-4 << 18, 5 << 18, 1 << 18))),
           Requant(mult=1, shift=18, bias=tuple(range(20))), Requant(mult=200, shift=25)]
    jobs = [axi_job(w, x, cfg, rq) for (w, x), rq in zip(cases, rqs)]
    for job in jobs:
        job.pop("cycles")
    fds = [fc_job(w, x, cfg)[2] for w, x in cases]
    sets = [{}, {"x": 0.6, "meta": 0.5, "vdata": 0.7, "vaddr": 0.6, "y": 0.5, "b": 0.4},
            {"x": 0.9, "meta": 0.9, "b": 0.3, "y": 0.2}, {"b": LATE},
            {"x": 0.5, "b": LATE, "y": Pattern.bits((1, 0, 0))}]
    for i, probs in enumerate(sets):
        sources, sinks = axi_ports(*shell_ports(cfg), seed=50 + i, patterns=probs)
        patterns = {p: pat for p, _, pat in sources + sinks}
        records, beats = run_native_beats(SHELL, cfg, jobs, sources, sinks, sim,
                                          f"rq-model-{bus_words}-{i}", max_cycles=20_000)
        models = fc_shell_cycle_model(fds, cfg, patterns, writes=[len(j["regs"]) for j in jobs],
                                      bias_loads=[rq.bias is not None for rq in rqs])
        for k, (job, got, model) in enumerate(zip(records, beats, models)):
            assert_record_is_model(job, model, f"(patterns {i}, job {k})")
            assert got["m_axis_y"] == model["out_cycles"]["m_axis_y"]
        if i == 3:                 # the late biases hold the first results back
            assert records[0]["end"] > 60 * -(-fds[0].rows // max(1, bus_words))
            unaware = fc_shell_cycle_model(fds, cfg, patterns,
                                           writes=[len(j["regs"]) for j in jobs])
            assert unaware[0]["end"] < records[0]["end"]
