# SPDX-License-Identifier: Apache-2.0
"""The banked array's accelerator shell (hdl/conv/banked/shell.py) under both simulators,
driven by cocotbext-axi: jobs back to back with idle inputs and back-pressure (strips whose
last beat is partial), the statistics against the cycle model, the counters against what
the bench saw, the interrupt, Vivado port names, ``aresetn`` in the middle of a job; the
exact shell cycle model (gen.conv.banked.shell_cycles): its clock-stepped array model ==
the event model run_cycles transfer for transfer (pure Python, random jobs and patterns),
and every bench record and every m_axis_o beat's clock == the shell model under random idle
inputs and back-pressure (partial last beats with bus_words 3).  The requantising shell
(rq_width > 0, channel-aligned jobs, RQ_STRIPS): results == gen.conv.banked.requant_job,
records and m_axis_o beats == the shell model with the stage's twin, a reset mid-job, the
register map; the stage's strips option alone in Amaranth's simulator."""

import numpy as np
import pytest

from gen.conv import ConvLayer, ref_conv
from gen.conv.banked import BankedConfig, assemble, make_job, run_cycles
from gen.conv.banked.shell_cycles import (array_cycle_model, banked_shell_cycle_model,
                                          banked_shell_writes)
from gen.conv.twin import banked_axi_job, rtl_banked_axi
from gen.core.emit import to_verilog
from gen.core.fixed import to_signed
from gen.core.sim import axi_ports
from gen.core.stimulus import Pattern
from hdl.conv import BANKED_SHELL, BankedShell
from hdl.conv.banked.shell import banked_shell_ports
from tb.shell_checks import assert_cleared_by_reset, assert_record_is_model, run_native_beats

CFG = BankedConfig(rows=8, cols=4, bus_words=4, feat_depth=64, weight_depth=64, out_depth=64)
CFG3 = BankedConfig(rows=8, cols=4, bus_words=3, copies=4, feat_depth=64, weight_depth=64,
                    out_depth=64)


def golden(x, w, layer):
    return np.stack([ref_conv(x[b], w, layer.stride, layer.pad) for b in range(layer.batch)])


def _items(rng, cfg):
    shapes = [(ConvLayer(5, 3, 6, 7, 3, 3, 1, 1), dict(rs=3, segw=7, icq=2, R=5, n=1)),
              (ConvLayer(2, 2, 7, 5, 2, 2, 2, 0, 2), dict(rs=1, segw=2, icq=1)),
              (ConvLayer(4, 3, 5, 5, 1, 1, 1, 0), dict(rs=5, segw=5, resident=False))]
    # a strip whose sums fill both output sets (span), after a job of one-set strips
    wide = cfg.nb * cfg.out_depth // 64 + 2
    shapes.append((ConvLayer(8, 2, 8, wide, 3, 3, 1, 1), dict(rs=8, segw=wide, n=1, icq=1,
                                                             span=True)))
    items = []
    for layer, kw in shapes:
        x = rng.integers(-128, 128, (layer.batch, layer.ic, layer.h, layer.w))
        w = rng.integers(-128, 128, (layer.oc, layer.ic, layer.kh, layer.kw))
        items.append((x, w, make_job(layer, cfg, **kw)))
    return items


@pytest.mark.parametrize("cfg, valid, ready", [(CFG, 1.0, 1.0), (CFG, 0.7, 0.6),
                                               (CFG3, 0.5, 0.8)])
@pytest.mark.native_agree
def test_shell_jobs(sim, cfg, valid, ready):
    """Four jobs back to back (the last one's strips fill both output sets): sums ==
    golden, statistics == the cycle model's, counters == what the bench saw on the ports,
    the interrupt raised and acknowledged."""
    rng = np.random.default_rng(int(valid * 10 + ready))
    items = _items(rng, cfg)
    outs, stats, records = rtl_banked_axi(items, cfg, sim, valid=valid, ready=ready, seed=3,
                                          name=f"shell-{cfg.bus_words}-{int(10 * valid)}")
    model = run_cycles([job for _x, _w, job in items], cfg)
    for (x, w, job), y, st, job_model, rec in zip(items, outs, stats, model["stats"], records):
        np.testing.assert_array_equal(y, golden(x, w, job.layer))
        assert st == job_model
        assert rec["status"] == 0b10
        assert (rec["irq"], rec["irq_after_ack"], rec["irq_status_after_ack"]) == (1, 0, 0)
        assert rec["beats_out"] == job.G * job.S * job.obeats
        assert rec["counters"]["cycles"] == rec["end"] - rec["start_ack"]
        assert rec["counters"]["stall_in"] == rec["stall_in_any"]
        assert rec["counters"]["stall_out"] == rec["stall_out_any"]
    if valid < 1 and ready < 1:
        assert sum(r["stall_in_any"] for r in records) and sum(r["stall_out_any"] for r in records)
    # the cocotb bench's records == the exact shell model (the start responses predicted too)
    sources, sinks = axi_ports(*banked_shell_ports(cfg), valid=valid, ready=ready, seed=3)
    shell = banked_shell_cycle_model([job for _x, _w, job in items], cfg,
                                     {p: pat for p, _, pat in sources + sinks})
    for k, (rec, pred) in enumerate(zip(records, shell)):
        assert_record_is_model(rec, pred, f"(job {k})")


# ------------------------------------------------------------------ the shell cycle model

def _other(pattern):
    """The same kind of pattern, reseeded (Bernoulli) or rotated (bits)."""
    if pattern.kind == "bits":
        return Pattern.bits(pattern.seq[1:] + pattern.seq[:1])
    return pattern if pattern.kind == "always" else Pattern.bernoulli(pattern.prob,
                                                                      pattern.seed + 1)


def _random_pattern(rng, seed):
    kind = int(rng.integers(0, 4))
    if kind == 0:
        return Pattern.always()
    if kind == 1:
        bits = [int(v) for v in rng.integers(0, 2, int(rng.integers(2, 7)))]
        return Pattern.bits(bits if any(bits) else [1] + bits)
    return Pattern.bernoulli(float(rng.uniform(0.15, 1.0)), seed)


@pytest.mark.parametrize("cfg", [CFG, CFG3, BankedConfig(rows=8, cols=4, bus_words=16,
                                                          copies=4, feat_depth=32,
                                                          weight_depth=64, out_depth=32)],
                         ids=["b4", "b3", "b16"])
def test_array_model_is_event_model(cfg):
    """The clock-stepped array model of the shell's model (:class:`gen.conv.banked.
    shell_cycles.ArrayModel`) against the stream bench equals the event model
    :func:`gen.conv.banked.run_cycles` (checked against the RTL in tb/conv/test_banked.py)
    in every transfer's clock on c, w, x, o and s: random layers and jobs (resident and
    per-step weights, chunks, strides, batches, copies), one to three back to back, under
    random per-port patterns (full rate, periodic bits, Bernoulli down to 0.15)."""
    from tb.conv.test_banked import random_item
    rng = np.random.default_rng(cfg.bus_words)
    for trial in range(25):
        jobs = [random_item(rng, cfg)[2] for _ in range(int(rng.integers(1, 4)))]
        pats = {p: _random_pattern(rng, 100 * trial + k) for k, p in enumerate("cwxos")}
        if trial == 0:
            pats = {}
        want = run_cycles(jobs, cfg, pats)
        got = array_cycle_model(jobs, cfg, pats)
        for p in "cwxos":
            assert got[p] == want[p], f"trial {trial}: port {p} differs"
        assert [r["T0"] for r in got["jobs"]] == [r["T0"] for r in want["jobs"]]
        assert [r["stat"] for r in got["jobs"]] == want["s"]


def test_array_model_aligned():
    """:class:`gen.conv.banked.shell_cycles.ArrayModel` == :func:`run_cycles` on
    channel-aligned jobs (the requantising shell's) too, under random patterns."""
    from tb.conv.test_banked import random_item
    for cfg in (CFG, CFG3):
        rng = np.random.default_rng(70 + cfg.bus_words)
        for trial in range(10):
            jobs = [random_item(rng, cfg, align=True)[2]
                    for _ in range(int(rng.integers(1, 4)))]
            pats = {p: _random_pattern(rng, 100 * trial + k) for k, p in enumerate("cwxos")}
            want, got = run_cycles(jobs, cfg, pats), array_cycle_model(jobs, cfg, pats)
            for p in "cwxos":
                assert got[p] == want[p], f"trial {trial}: port {p} differs"


# (w valid, x valid, o ready): probabilities (seeded per port) or patterns
SHELL_PATTERNS = [(1.0, 1.0, 1.0), (0.7, 0.6, 0.5), (0.3, 0.9, 0.8), (0.9, 0.8, 0.2),
                  (Pattern.bits((1, 1, 0)), 0.5, Pattern.bits((0, 1, 1, 0, 1)))]


@pytest.mark.parametrize("cfg", [CFG, CFG3], ids=["b4", "b3"])
def test_shell_backpressure_model(sim, cfg):
    """Exact end-to-end cycle model of the shell: five jobs back to back (resident
    weights with two chunks, a strided batch of two, per-step weights, strips that fill
    both output sets, one bound by its sums' streaming; the strips' last sum beats
    partial) under five sets of per-port
    patterns (full rate; idle weights and features, back-pressured sums at 0.2..0.9;
    periodic): every job's record (start response, first input beat, last output beat,
    beats and stall clocks, the four counters) and every m_axis_o beat's clock equal
    :func:`gen.conv.banked.shell_cycles.banked_shell_cycle_model`'s, which reads only the
    jobs, the config, the patterns and the bench's register writes.  The model with
    reseeded or rotated patterns must differ (the check can fail)."""
    rng = np.random.default_rng(17)
    # the shell tests' four jobs and one bound by its sums (three strips of 32+ beats,
    # one-beat rounds): the streamer, held back by the output FIFO, decides when a strip's
    # output set is free
    out_bound = ConvLayer(8, 2, 6, 8, 1, 1, 1, 0)
    items = _items(rng, cfg) + [(rng.integers(-128, 128, (1, 2, 6, 8)),
                                 rng.integers(-128, 128, (8, 2, 1, 1)),
                                 make_job(out_bound, cfg, rs=2, segw=8))]
    jobs = [job for _x, _w, job in items]
    assert any(job.E % cfg.bus_words for job in jobs)           # partial last beats
    axi = [banked_axi_job(x, w, job, cfg) for x, w, job in items]
    assert all(len(a["regs"]) == banked_shell_writes(cfg) for a in axi)
    for i, (wv, xv, orr) in enumerate(SHELL_PATTERNS):
        sources, sinks = axi_ports(*banked_shell_ports(cfg), seed=40 + i,
                                   patterns={"w": wv, "x": xv, "o": orr})
        patterns = {p: pat for p, _, pat in sources + sinks}
        records, beats = run_native_beats(BANKED_SHELL, cfg, axi, sources, sinks, sim,
                                          f"shell-model-{cfg.bus_words}-{i}",
                                          max_cycles=100_000)
        models = banked_shell_cycle_model(jobs, cfg, patterns)
        for k, ((x, w, job), rec, got, model) in enumerate(zip(items, records, beats,
                                                                models)):
            words = to_signed(np.array(rec["packets"]["m_axis_o"], dtype=np.int64),
                              cfg.acc_width)
            np.testing.assert_array_equal(assemble(words, job, padded=False),
                                          golden(x, w, job.layer))
            assert_record_is_model(rec, model, f"(patterns {i}, job {k})")
            assert got["m_axis_o"] == model["out_cycles"]["m_axis_o"], (i, k)
            assert len(got["m_axis_o"]) == job.G * job.S * job.obeats
        if i:
            other = banked_shell_cycle_model(jobs, cfg, {p: _other(v)
                                                         for p, v in patterns.items()})
            assert any(o["out_cycles"] != m["out_cycles"] for o, m in zip(other, models))
        if i == 3:                  # the sums back-pressured: the stall counters count
            assert all(r["counters"]["stall_out"] > 0 for r in records)


def test_shell_reset_mid_job(sim):
    """``aresetn`` low in the middle of the first job: the registers read their reset values
    and the next jobs are exact."""
    rng = np.random.default_rng(5)
    items = _items(rng, CFG)
    outs, stats, records = rtl_banked_axi(items, CFG, sim, ready=0.7, reset_after=40,
                                          name="shell-reset")
    assert_cleared_by_reset(records[0])
    model = run_cycles([job for _x, _w, job in items], CFG)
    for (x, w, job), y, st, job_model in list(zip(items, outs, stats, model["stats"]))[1:]:
        np.testing.assert_array_equal(y, golden(x, w, job.layer))
        assert st == job_model
    # the shell model with the bench's reset: the cut job's record and the next jobs' (the
    # shell and the array from their reset state), start responses predicted
    sources, sinks = axi_ports(*banked_shell_ports(CFG), ready=0.7, seed=0)
    patterns = {p: pat for p, _, pat in sources + sinks}
    jobs = [job for _x, _w, job in items]
    models = banked_shell_cycle_model(jobs, CFG, patterns,
                                      resets=[40] + [None] * (len(jobs) - 1))
    for k, (rec, pred) in enumerate(zip(records, models)):
        assert_record_is_model(rec, pred, f"(job {k})")
    # likewise the jobs after the reset alone, from their start responses
    after = banked_shell_cycle_model(jobs[1:], CFG, patterns,
                                     starts=[r["start_ack"] for r in records[1:]])
    for k, (rec, pred) in enumerate(zip(records[1:], after)):
        assert_record_is_model(rec, pred, f"(job {k + 1}, after the reset)")


def test_shell_ports_are_vivado_names():
    text = to_verilog(BankedShell(CFG), CFG.shell_name)
    head = text[text.index(f"module {CFG.shell_name}("):].split(");", 1)[0]
    for port in ("aclk", "aresetn", "s_axis_w_tdata", "s_axis_x_tkeep", "m_axis_o_tlast",
                 "m_axis_o_tkeep", "s_axi_awaddr", "irq"):
        assert port in head, port


# ------------------------------------------------------------------ requantisation

CFG_RQ = BankedConfig(rows=8, cols=4, bus_words=4, feat_depth=64, weight_depth=64,
                      out_depth=64, rq_width=8, rq_depth=32)
CFG3_RQ = BankedConfig(rows=8, cols=4, bus_words=3, copies=4, feat_depth=64, weight_depth=64,
                       out_depth=64, rq_width=6, acc_width=24, rq_depth=16)


def _rq_items(rng, cfg):
    """Jobs covering the stage: ``(x, w, job, Requant, biases in effect)``.  G > 1 over
    several strips, P not a multiple of bus_words, P < bus_words, bias loads and a job
    reusing the last load (fewer channels), ReLU, shift 0 and large, saturation at both
    ends (a large multiplier), a job of a layer's channel part (``oc0`` > 0)."""
    from gen.core.fixed import Requant
    shapes = [  # layer, job, (mult, shift, relu), bias load
        (ConvLayer(8, 3, 6, 7, 3, 3, 1, 1), dict(rs=3, segw=7, icq=2, R=4, n=1),
         (3, 9, False), True),                                     # G 2, S 2, P 21
        (ConvLayer(6, 2, 7, 5, 2, 2, 2, 0, 2), dict(rs=1, segw=2, icq=1, R=2),
         (1, 0, True), False),                                     # G 3, S 12, P 2 < bw
        (ConvLayer(4, 3, 5, 5, 1, 1, 1, 0), dict(rs=5, segw=5, resident=False),
         (65535, 40, False), True),                                # shift 40: ~0 and -1
        (ConvLayer(8, 2, 4, 6, 3, 3, 1, 1), dict(rs=2, segw=6, R=2, n=2, oc0=2, oc=6),
         (40000, 4, False), True),                                 # saturation, oc0 = 2
        (ConvLayer(3, 2, 4, 4, 3, 3, 1, 1), dict(rs=4, segw=4, R=3),
         (5, 3, True), True),                                      # P 16, ReLU
    ]
    items, last = [], None
    for layer, kw, (mult, shift, relu), load in shapes:
        x = rng.integers(-128, 128, (layer.batch, layer.ic, layer.h, layer.w))
        w = rng.integers(-128, 128, (layer.oc, layer.ic, layer.kh, layer.kw))
        job = make_job(layer, cfg, **kw)
        n = job.G * job.R
        if load:
            bias = rng.integers(-40000, 40000, n)
            bias[0] = 1 << (cfg.acc_width - 3)                     # saturates high ...
            bias[-1] = -(1 << (cfg.acc_width - 3))                 # ... and low
            last = bias
        else:
            bias = last[:n]                                         # the last load's
        rq = Requant(mult, shift, relu, tuple(bias) if load else None)
        items.append((x, w, job, rq, bias))
    return items


def _rq_check(items, outs, cfg):
    """Each job's results == the golden requantisation of its exact sums; the codes reach
    both saturation ends over the jobs."""
    from gen.conv.banked import requant_job
    hit = set()
    for (x, w, job, rq, bias), y in zip(items, outs):
        want = requant_job(golden(x, w, job.layer), job, rq, cfg.rq_width, bias)
        np.testing.assert_array_equal(y, want)
        c0, c1 = job.oc0, job.oc0 + job.G * job.R
        vals = want[:, c0:c1]
        hit |= {int(vals.min()), int(vals.max())}
    top = (1 << (cfg.rq_width - 1)) - 1
    assert top in hit and -(top + 1) in hit


@pytest.mark.parametrize("cfg, valid, ready", [(CFG_RQ, 1.0, 1.0), (CFG3_RQ, 0.6, 0.5)],
                         ids=["b4-full", "b3-stalls"])
@pytest.mark.native_agree
def test_requant_shell_jobs(sim, cfg, valid, ready):
    """Requantising jobs back to back (:func:`_rq_items`) through the shell: results ==
    :func:`gen.conv.banked.requant_job` exactly, statistics == the cycle model's, beats
    out == the channel-aligned count, and the bench records == the exact shell model."""
    rng = np.random.default_rng(21 + cfg.bus_words)
    items = _rq_items(rng, cfg)
    outs, stats, records = rtl_banked_axi([it[:4] for it in items], cfg, sim, valid=valid,
                                          ready=ready, seed=4,
                                          name=f"shell-rq-{cfg.bus_words}-{int(10 * valid)}")
    _rq_check(items, outs, cfg)
    model = run_cycles([it[2] for it in items], cfg)
    for (x, w, job, rq, _b), st, job_model, rec in zip(items, stats, model["stats"], records):
        assert st == job_model
        assert rec["status"] == 0b10
        assert rec["beats_out"] == job.G * job.S * job.R * job.cb
        assert rec["counters"]["cycles"] == rec["end"] - rec["start_ack"]
    sources, sinks = axi_ports(*banked_shell_ports(cfg), valid=valid, ready=ready, seed=4)
    shell = banked_shell_cycle_model([it[2] for it in items], cfg,
                                     {p: pat for p, _, pat in sources + sinks},
                                     bias_loads=[it[3].bias is not None for it in items])
    for k, (rec, pred) in enumerate(zip(records, shell)):
        assert_record_is_model(rec, pred, f"(job {k})")


# (w valid, x valid, b valid, o ready)
RQ_PATTERNS = [(1.0, 1.0, 1.0, 1.0), (0.7, 0.6, 0.4, 0.5), (0.9, 0.8, 1.0, 0.2),
               (Pattern.bits((1, 1, 0)), 0.5, Pattern.bits((1, 0)),
                Pattern.bits((0, 1, 1, 0, 1)))]


@pytest.mark.parametrize("cfg", [CFG_RQ, CFG3_RQ], ids=["b4", "b3"])
def test_requant_backpressure_model(sim, cfg):
    """The requantising shell under four sets of per-port patterns (back-pressure on
    ``m_axis_o`` down to 0.2, idle weights, features and biases, periodic): every record
    and every ``m_axis_o`` beat's clock == :func:`gen.conv.banked.shell_cycles.
    banked_shell_cycle_model` (the stage's twin between the array and the port), results ==
    golden; reseeded patterns must change the model (the check can fail)."""
    rng = np.random.default_rng(30 + cfg.bus_words)
    items = _rq_items(rng, cfg)
    jobs = [it[2] for it in items]
    loads = [it[3].bias is not None for it in items]
    axi = [banked_axi_job(x, w, job, cfg, rq) for x, w, job, rq, _b in items]
    assert all(len(a["regs"]) == banked_shell_writes(cfg) for a in axi)
    for i, (wv, xv, bv, orr) in enumerate(RQ_PATTERNS):
        sources, sinks = axi_ports(*banked_shell_ports(cfg), seed=50 + i,
                                   patterns={"w": wv, "x": xv, "b": bv, "o": orr})
        patterns = {p: pat for p, _, pat in sources + sinks}
        records, beats = run_native_beats(BANKED_SHELL, cfg, axi, sources, sinks, sim,
                                          f"shell-rq-model-{cfg.bus_words}-{i}",
                                          max_cycles=100_000)
        models = banked_shell_cycle_model(jobs, cfg, patterns, bias_loads=loads)
        outs = []
        for k, (job, rec, got, model) in enumerate(zip(jobs, records, beats, models)):
            words = to_signed(np.array(rec["packets"]["m_axis_o"], dtype=np.int64),
                              cfg.rq_width)
            outs.append(assemble(words, job, padded=False))
            assert_record_is_model(rec, model, f"(patterns {i}, job {k})")
            assert got["m_axis_o"] == model["out_cycles"]["m_axis_o"], (i, k)
            assert len(got["m_axis_o"]) == job.G * job.S * job.obeats
        _rq_check(items, outs, cfg)
        if i:
            other = banked_shell_cycle_model(jobs, cfg, {p: _other(v)
                                                         for p, v in patterns.items()},
                                             bias_loads=loads)
            assert any(o["out_cycles"] != m["out_cycles"] for o, m in zip(other, models))
        if i == 2:
            assert all(r["counters"]["stall_out"] > 0 for r in records)


def test_requant_register_map_and_ports():
    """``RQ_SCALE``, ``RQ_POSITIONS``, ``RQ_CHANNELS``, ``RQ_STRIPS`` and ``JOB_INPUTS.b_en``
    only with ``rq_width`` > 0 (the other registers where they were), ``s_axis_b`` only
    then, ``m_axis_o`` words of ``rq_width`` bits; a job's register values."""
    from gen.conv.banked import requant_fields
    from hdl.conv.banked.shell import banked_regmap
    plain, rq = banked_regmap(CFG), banked_regmap(CFG_RQ)
    names = {r.name for r in plain.registers}
    assert not {n for n in names if n.startswith("RQ_")}
    assert {r.name: r.offset for r in rq.registers if r.name.startswith("RQ_")} == {
        "RQ_SCALE": 0x60, "RQ_POSITIONS": 0x64, "RQ_CHANNELS": 0x68, "RQ_STRIPS": 0x6C}
    for r in plain.registers:
        assert rq.offset(r.name) == r.offset
    assert [f.name for f in rq.register("JOB_INPUTS").fields] == ["w_en", "x_en", "b_en"]
    assert [f.name for f in plain.register("JOB_INPUTS").fields] == ["w_en", "x_en"]
    assert [(f.name, f.lsb, f.width, f.reset) for f in rq.register("RQ_STRIPS").fields] == [
        ("value", 0, 16, 1), ("group", 16, 16, 1)]
    ins, outs = banked_shell_ports(CFG_RQ)
    assert [p.name for p in ins] == ["w", "x", "b"] and outs[0].word_width == 8
    assert [p.name for p in banked_shell_ports(CFG)[0]] == ["w", "x"]
    text = to_verilog(BankedShell(CFG_RQ), CFG_RQ.shell_name)
    head = text[text.index(f"module {CFG_RQ.shell_name}("):].split(");", 1)[0]
    assert "s_axis_b_tdata" in head and "m_axis_o_tkeep" in head
    job = make_job(ConvLayer(8, 3, 6, 7, 3, 3, 1, 1), CFG_RQ, rs=3, segw=7, R=4, n=1)
    assert requant_fields(job) == {"positions": 6, "channels": 8, "strips": 2, "group": 4}
    regs = dict(map(tuple, banked_axi_job(np.zeros((1, 3, 6, 7), int),
                                          np.zeros((8, 3, 3, 3), int), job, CFG_RQ)["regs"]))
    assert regs[0x6C] == 2 | 4 << 16 and regs[0x64] == 6 and regs[0x68] == 8
    assert regs[rq.offset("JOB_INPUTS")] == 0b011
    with pytest.raises(ValueError, match="rq_width > 0"):
        from gen.core.fixed import Requant
        banked_axi_job(np.zeros((1, 3, 6, 7), int), np.zeros((8, 3, 3, 3), int),
                       make_job(job.layer, CFG, rs=3, segw=7), CFG, Requant())


@pytest.mark.parametrize("positions, channels, strips, group", [
    (2, 6, 3, 2), (1, 4, 2, 4), (3, 5, 1, 1), (1, 6, 4, 1), (2, 3, 2, 3)])
def test_requant_stage_strips(monkeypatch, positions, channels, strips, group):
    """:class:`hdl.lib.requant.RequantStage` with ``strips`` alone (Amaranth simulator): run
    ``j = k // positions`` belongs to channel ``(j // (strips group)) group + j % group``
    (modulo ``channels x strips`` runs), the job running more than one period; at ``strips``
    1 the order without (``j % channels``); a second job with other parameters restarts
    the order."""
    import tb.lib.test_requant as trq
    from gen.core.fixed import requant_sums
    from hdl.lib.requant import RequantStage

    def params(mult, shift, relu, bias, positions, channels, strips, group):
        return (mult | shift << 16 | int(relu) << 22 | int(bias) << 23 | positions << 24
                | channels << 56 | strips << 72 | group << 88)
    monkeypatch.setattr(trq, "_params", params)
    dut = RequantStage(20, 8, lanes=2, depth=8, array=True, strips=True)
    rng = np.random.default_rng(positions * 10 + strips)
    jobs, wants = [], []
    for p in (dict(positions=positions, channels=channels, strips=strips, group=group),
              dict(positions=1, channels=2, strips=2, group=1)):
        runs = p["channels"] * p["strips"] * 2 + 1
        sums = rng.integers(-1000, 1000, (runs * p["positions"], 2))
        biases = rng.integers(-1000, 1000, p["channels"])     # results within 8 bits
        j = (np.arange(len(sums)) // p["positions"]) % (p["channels"] * p["strips"])
        ch = j // (p["strips"] * p["group"]) * p["group"] + j % p["group"]
        if p["strips"] == 1:
            assert (ch == j % p["channels"]).all()
        q = dict(mult=1, shift=4, relu=False, bias=True, **p)
        jobs.append((q, biases, sums))
        wants.append(requant_sums(sums, biases[ch][:, None], mult=1, shift=4, width=8))
    for (got, *_), want in zip(trq._run(dut, jobs, 0.7, seed=1), wants):
        np.testing.assert_array_equal(got, want)


def test_requant_reset_mid_job(sim):
    """``aresetn`` low in the middle of the first requantising job: the registers read their
    reset values, the next jobs (loading their biases) are exact, and the shell model with
    the stage's twin predicts the cut job's record and the next ones'."""
    rng = np.random.default_rng(9)
    items = _rq_items(rng, CFG_RQ)[2:]
    outs, stats, records = rtl_banked_axi([it[:4] for it in items], CFG_RQ, sim, ready=0.7,
                                          reset_after=60, name="shell-rq-reset")
    assert_cleared_by_reset(records[0])
    assert all(it[3].bias is not None for it in items)
    from gen.conv.banked import requant_job
    for (x, w, job, rq, bias), y in list(zip(items, outs))[1:]:
        np.testing.assert_array_equal(
            y, requant_job(golden(x, w, job.layer), job, rq, CFG_RQ.rq_width, bias))
    sources, sinks = axi_ports(*banked_shell_ports(CFG_RQ), ready=0.7, seed=0)
    models = banked_shell_cycle_model([it[2] for it in items], CFG_RQ,
                                      {p: pat for p, _, pat in sources + sinks},
                                      bias_loads=[True] * len(items), resets=[60, None, None])
    for k, (rec, pred) in enumerate(zip(records, models)):
        assert_record_is_model(rec, pred, f"(job {k})")
