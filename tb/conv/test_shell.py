# SPDX-License-Identifier: Apache-2.0
"""The MAC array's accelerator shell (hdl/conv/shell.py on hdl/lib/axi_shell.py) under both
simulators: layers back to back, each described in the AXI4-Lite descriptor registers, its
weights, features and sums over AXI4-Stream with idle inputs and back-pressure, its
statistics read back from registers, the counters against what the bench saw."""

import dataclasses

import numpy as np
import pytest

from gen.conv import ConvConfig, ConvLayer, plan, ref_conv, shell_cycles
from gen.conv.twin import axi_job, rtl_conv_axi
from gen.core.fixed import Requant, to_signed
from gen.core.sim import axi_ports, run_axi_jobs
from hdl.conv import IM2COL_SHELL as SHELL
from hdl.conv.shell import desc_layout, desc_words, regmap_for, shell_ports
from tb.shell_checks import assert_cleared_by_reset

# a small array (short Verilator build): 4 rows x 2 columns, 3 words per beat (divides none
# of the packets)
CFG = ConvConfig(rows=4, cols=2, max_groups=2, feat_depth=256, weight_depth=128,
                 out_depth=128, max_slots=64, max_dim=16, bus_words=3)
LAYERS = [
    # oc, ic, h, w, k, stride, pad, batch, icq
    (5, 2, 5, 5, 3, 1, 1, 1, None),      # Oc > rows: a full block and a remainder
    (3, 3, 6, 5, 1, 1, 0, 2, 2),         # 1x1, batch 2, Ic split 2+1
    (2, 2, 6, 6, 3, 2, 0, 1, None),      # stride 2, Oc < rows
]


# two weights per beat and clock (a direct weight port)
CFG_L = dataclasses.replace(CFG, w_lanes=2)


def _jobs(seed, extreme=False, cfg=CFG):
    rng = np.random.default_rng(seed)
    jobs = []
    for oc, ic, h, w, k, s, p, b, icq in LAYERS:
        layer = ConvLayer(oc, ic, h, w, k, k, s, p, batch=b)
        x = rng.integers(-128, 128, (b, ic, h, w))
        wt = rng.integers(-128, 128, (oc, ic, k, k))
        if extreme:
            x = np.where(rng.integers(0, 2, x.shape) == 1, -128, 127)
            wt = np.full_like(wt, -128)
        jobs.append((x, wt, plan(layer, cfg, "remainder", icq=icq)))
    return jobs


@pytest.mark.parametrize("valid_prob, ready_prob, extreme, cfg", [
    (0.6, 0.5, False, CFG), (1.0, 1.0, True, CFG), (0.6, 0.5, False, CFG_L),
    (1.0, 1.0, False, CFG_L)], ids=["bp", "full", "lanes-bp", "lanes-full"])
@pytest.mark.native_agree
def test_shell_layers(sim, valid_prob, ready_prob, extreme, cfg):
    CFG = cfg
    jobs = _jobs(3, extreme, cfg)
    outs, stats, records = rtl_conv_axi(jobs, CFG, sim, valid_prob=valid_prob,
                                        ready_prob=ready_prob, seed=7,
                                        name=f"layers-{int(valid_prob * 10)}-l{CFG.w_lanes}")
    for (x, w, sched), y, st, job in zip(jobs, outs, stats, records):
        layer = sched.layer
        want = np.stack([ref_conv(xb, w, layer.stride, layer.pad) for xb in x])
        np.testing.assert_array_equal(y, want)
        assert st == {"busy": sched.busy_mac_cycles, "cycles": sched.compute_cycles}
        c = job["counters"]
        assert job["status"] == 0b10
        assert (job["irq"], job["irq_after_ack"], job["irq_status_after_ack"]) == (1, 0, 0)
        assert c["cycles"] == job["end"] - job["start_ack"]
        assert c["stall_in"] == job["stall_in_any"] and c["stall_out"] == job["stall_out_any"]
        words = layer.batch * layer.oc * layer.ho * layer.wo
        assert job["beats_out"] == -(-words // CFG.bus_words)
        assert c["busy"] <= c["cycles"]
        if valid_prob == ready_prob == 1.0:        # the full-rate end-to-end model, exact
            assert job["end"] - job["first_in"] + 1 == shell_cycles(sched)
            assert c["cycles"] == shell_cycles(sched) + 1
    if valid_prob < 1:
        assert sum(j["stall_out_any"] for j in records) > 0
        assert sum(j["stall_in_any"] for j in records) > 0


@pytest.mark.parametrize("valid_prob, ready_prob, layers, cfg", [
    (1.0, 1.0, 3, CFG), (0.6, 0.5, 3, CFG), (1.0, 1.0, 4, CFG_L)],
    ids=["full", "bp", "lanes-full"])
@pytest.mark.native_agree
def test_shell_runs(sim, valid_prob, ready_prob, layers, cfg):
    """``LAYERS`` = n: one descriptor, n layers of data in one job (each its own inputs and
    outputs, back to back in the packets), then a plain job: every layer exact, the
    statistics summed over the run, and at full rate the run's end to end on the clock of
    ``shell_cycles(sched, n)`` (each layer's loads and compute overlapping the previous
    layer's output stream: fewer clocks than n jobs)."""
    rng = np.random.default_rng(layers)
    layer = ConvLayer(5, 2, 5, 5, 3, 3, 1, 1)          # long output stream: 125 sums
    sched = plan(layer, cfg, "remainder")
    xs = [rng.integers(-128, 128, (1, 2, 5, 5)) for _ in range(layers)]
    ws = [rng.integers(-128, 128, (5, 2, 3, 3)) for _ in range(layers)]
    tail = _jobs(4, cfg=cfg)[1]
    outs, stats, records = rtl_conv_axi([(xs, ws, sched), tail], cfg, sim,
                                        valid_prob=valid_prob, ready_prob=ready_prob, seed=3,
                                        name=f"runs-{layers}-{int(valid_prob * 10)}")
    for x, w, y in zip(xs, ws, outs[0]):
        np.testing.assert_array_equal(y, np.stack([ref_conv(xb, w, 1, 1) for xb in x]))
    assert stats[0] == {"busy": layers * sched.busy_mac_cycles,
                        "cycles": layers * sched.compute_cycles}
    x, w, s = tail
    np.testing.assert_array_equal(
        outs[1], np.stack([ref_conv(xb, w, s.layer.stride, s.layer.pad) for xb in x]))
    assert stats[1] == {"busy": s.busy_mac_cycles, "cycles": s.compute_cycles}
    run = records[0]
    assert run["status"] == 0b10 and run["counters"]["cycles"] == run["end"] - run["start_ack"]
    assert run["beats_out"] == -(-layers * 125 // cfg.bus_words)
    if valid_prob == 1.0:
        assert run["end"] - run["first_in"] + 1 == shell_cycles(sched, layers)
        assert shell_cycles(sched, layers) < layers * shell_cycles(sched)
        assert records[1]["end"] - records[1]["first_in"] + 1 == shell_cycles(s)


@pytest.mark.native_agree
@pytest.mark.parametrize("reset_after, out_beats", [(40, 0), (400, 0), (700, 29)])
def test_shell_reset_mid_job(sim, reset_after, out_beats):
    """``aresetn`` low while a layer's weights load (40 clocks in), while it computes (400)
    or while its results stream out (700; 29 of 42 beats out): the registers read their
    reset values and the next layer is exact."""
    jobs = _jobs(5)
    axi = [dict(axi_job(*jobs[0]), reset_after=reset_after), axi_job(*jobs[1])]
    sources, sinks = axi_ports(*shell_ports(CFG), valid=0.8, ready=0.6, seed=2)
    cut, after = run_axi_jobs(SHELL, CFG, axi, sources, sinks, sim=sim,
                              name=f"shell-reset-{reset_after}", max_cycles=20_000)
    assert_cleared_by_reset(cut)
    assert cut["beats_out_before_reset"] == out_beats
    x, w, sched = jobs[1]
    layer = sched.layer
    y = to_signed(after["packets"]["m_axis_o"], CFG.acc_width)
    want = np.stack([ref_conv(xb, w, layer.stride, layer.pad) for xb in x])
    np.testing.assert_array_equal(y.reshape(want.shape), want)
    assert after["counters"]["cycles"] == after["end"] - after["start_ack"]


def test_regmap_and_ports():
    from gen.core.emit import to_verilog, verilog_ports
    regmap = regmap_for(CFG)
    assert regmap.register("ID").fields[0].reset == 0x53500004
    assert [f.reset for f in regmap.register("VERSION").fields] == [0, 3, 0]
    assert regmap.offset("LAYERS") == 0x54
    n = desc_words(CFG)
    assert regmap.offset("DESC_0") == 0x100 and regmap.offset(f"DESC_{n - 1}") == 0x100 + 4 * (n - 1)
    # the descriptor's fields by name, in its order, none across a register boundary
    from gen.conv import descriptor_fields
    named = [(r.name, f.name, f.lsb, f.width) for r in regmap.registers
             if r.name.startswith("DESC_") for f in r.fields]
    assert [(name, width) for _, name, _, width in named] == descriptor_fields(CFG)
    assert all(lsb + width <= 32 for _, _, lsb, width in named)
    assert named == [(f"DESC_{k}", name, lsb, width) for k, name, lsb, width in desc_layout(CFG)]
    module = SHELL.module_name(CFG)
    assert module == "conv_4x2_axi_w3"
    ports = {p: (d, w) for p, d, w in verilog_ports(to_verilog(SHELL.build(CFG), module), module)}
    assert ports["s_axis_w_tdata"] == ("input", 24) and ports["m_axis_o_tdata"] == ("output", 96)
    assert ports["s_axi_awaddr"][1] == regmap.addr_width
    assert not [p for p in ports if "__" in p]
    module = SHELL.module_name(CFG_L)
    assert module == "conv_4x2_axi_l2_w3"
    ports = {p: (d, w) for p, d, w in verilog_ports(to_verilog(SHELL.build(CFG_L), module),
                                                    module)}
    assert ports["s_axis_w_tdata"] == ("input", 16) and ports["s_axis_w_tkeep"] == ("input", 2)


# the requantisation stage in the output path: 8-bit results, biases for up to 8 channels
CFG_RQ = dataclasses.replace(CFG, rq_width=8, rq_depth=8)
RQS = [Requant(mult=3, shift=9, relu=True, bias=(-70000, 50000, 0, 123456, -1, 7, 8, 9)[:5]),
       Requant(mult=1, shift=7, bias=(1000, -2000, 3000)),
       Requant(mult=65535, shift=23)]          # keeps the biases of the job before


def _rq_want(jobs, rqs):
    from gen.conv.twin import requant_conv
    wants, bias = [], (0,) * 8
    for (x, w, sched), rq in zip(jobs, rqs):
        layer = sched.layer
        bias = rq.bias if rq.bias is not None else bias
        y = np.stack([ref_conv(xb, w, layer.stride, layer.pad) for xb in x])
        wants.append(requant_conv(y, rq, bias[:layer.oc], CFG_RQ.rq_width))
    return wants


@pytest.mark.parametrize("valid_prob, ready_prob", [(1.0, 1.0), (0.6, 0.5)],
                         ids=["full", "bp"])
@pytest.mark.native_agree
def test_shell_requant(sim, valid_prob, ready_prob):
    """Bias, multiply-shift (round half up), saturation to 8 bits and ReLU in the shell's
    output path, three layers back to back (the third reusing the loaded biases): results ==
    the golden stage on the exact sums; at full rate the end-to-end model + the stage's
    latency, exactly."""
    jobs = _jobs(4, cfg=CFG_RQ)
    wants = _rq_want(jobs, RQS)
    assert all((v == 127).any() for v in wants) and (wants[1] == -128).any()
    assert (wants[0] == 0).any() and (wants[0] >= 0).all()          # the ReLU
    outs, stats, records = rtl_conv_axi([j + (rq,) for j, rq in zip(jobs, RQS)], CFG_RQ, sim,
                                        valid_prob=valid_prob, ready_prob=ready_prob, seed=5,
                                        name=f"requant-{int(valid_prob * 10)}")
    for (x, w, sched), y, want, st, job in zip(jobs, outs, wants, stats, records):
        np.testing.assert_array_equal(y, want.reshape(y.shape))
        assert st == {"busy": sched.busy_mac_cycles, "cycles": sched.compute_cycles}
        assert job["counters"]["cycles"] == job["end"] - job["start_ack"]
        if valid_prob == 1.0:
            assert job["end"] - job["first_in"] + 1 == shell_cycles(sched)


@pytest.mark.native_agree
def test_shell_requant_reset_and_late_bias(sim):
    """``aresetn`` low while the first layer computes, then a layer whose bias packet
    arrives late (its port idles for a long stretch): no result leaves before the last
    bias, and every result is exact."""
    from gen.core.stimulus import Pattern
    jobs = _jobs(6, cfg=CFG_RQ)
    rq = Requant(mult=5, shift=11, bias=(-3000, 2000, 100, 0, 40000))
    axi = [dict(axi_job(*jobs[0], rq), reset_after=300), axi_job(*jobs[0], rq)]
    late = Pattern.bits([0] * 1500 + [1])
    sources, sinks = axi_ports(*shell_ports(CFG_RQ), valid=1.0, ready=0.7, seed=3,
                               patterns={"b": late})
    cut, after = run_axi_jobs(SHELL, CFG_RQ, axi, sources, sinks, sim=sim,
                              name="requant-reset", max_cycles=40_000)
    assert_cleared_by_reset(cut)
    want, = _rq_want(jobs[:1], [rq])
    y = to_signed(after["packets"]["m_axis_o"], CFG_RQ.rq_width)
    np.testing.assert_array_equal(y, want.ravel())
    # the first result waited for the bias packet
    assert after["end"] - after["start_ack"] > 1500


def test_requant_regmap_and_ports():
    from gen.core.emit import to_verilog, verilog_ports
    regmap = regmap_for(CFG_RQ)
    assert [regmap.offset(n) for n in ("RQ_SCALE", "RQ_POSITIONS", "RQ_CHANNELS")] == \
        [0x60, 0x64, 0x68]
    assert [f.name for f in regmap.register("JOB_INPUTS").fields] == ["w_en", "x_en", "b_en"]
    assert [f.reset for f in regmap.register("JOB_INPUTS").fields] == [1, 1, 0]
    assert "RQ_SCALE" not in [r.name for r in regmap_for(CFG).registers]
    module = SHELL.module_name(CFG_RQ)
    assert module == "conv_4x2_axi_w3_rq8"
    ports = {p: (d, w) for p, d, w in verilog_ports(to_verilog(SHELL.build(CFG_RQ), module),
                                                    module)}
    assert ports["m_axis_o_tdata"] == ("output", 24) and ports["s_axis_b_tdata"] == ("input", 96)
