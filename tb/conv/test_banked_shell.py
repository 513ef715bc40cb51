# SPDX-License-Identifier: Apache-2.0
"""The banked array's accelerator shell (hdl/conv/banked/shell.py) under both simulators,
driven by cocotbext-axi: jobs back to back with idle inputs and back-pressure (strips whose
last beat is partial), the statistics against the cycle model, the counters against what
the bench saw, the interrupt, Vivado port names, ``aresetn`` in the middle of a job; the
exact shell cycle model (gen.conv.banked.shell_cycles): its clock-stepped array model ==
the event model run_cycles transfer for transfer (pure Python, random jobs and patterns),
and every bench record and every m_axis_o beat's clock == the shell model under random idle
inputs and back-pressure (partial last beats with bus_words 3)."""

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
    """Three jobs back to back: sums == golden, statistics == the cycle model's, counters ==
    what the bench saw on the ports, the interrupt raised and acknowledged."""
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


# (w valid, x valid, o ready): probabilities (seeded per port) or patterns
SHELL_PATTERNS = [(1.0, 1.0, 1.0), (0.7, 0.6, 0.5), (0.3, 0.9, 0.8), (0.9, 0.8, 0.2),
                  (Pattern.bits((1, 1, 0)), 0.5, Pattern.bits((0, 1, 1, 0, 1)))]


@pytest.mark.parametrize("cfg", [CFG, CFG3], ids=["b4", "b3"])
def test_shell_backpressure_model(sim, cfg):
    """Exact end-to-end cycle model of the shell: four jobs back to back (resident
    weights with two chunks, a strided batch of two, per-step weights, one bound by its
    sums' streaming; the strips' last sum beats partial) under five sets of per-port
    patterns (full rate; idle weights and features, back-pressured sums at 0.2..0.9;
    periodic): every job's record (start response, first input beat, last output beat,
    beats and stall clocks, the four counters) and every m_axis_o beat's clock equal
    :func:`gen.conv.banked.shell_cycles.banked_shell_cycle_model`'s, which reads only the
    jobs, the config, the patterns and the bench's register writes.  The model with
    reseeded or rotated patterns must differ (the check can fail)."""
    rng = np.random.default_rng(17)
    # the shell tests' three jobs and one bound by its sums (three strips of 32+ beats,
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
    models = banked_shell_cycle_model(jobs, CFG, patterns, resets=[40, None, None])
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
