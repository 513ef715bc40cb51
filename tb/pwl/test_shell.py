# SPDX-License-Identifier: Apache-2.0
"""The PWL accelerator shell (hdl/pwl/shell.py) under both simulators: AXI4-Stream at bus
width (partial last beats, idle input, back-pressure), AXI4-Lite start/done/interrupt and
the performance counters against what the bench sees on the ports."""

import json
import re

import numpy as np
import pytest

from gen.core.emit import to_verilog
from gen.core.fixed import to_signed
from gen.core.sim import run_axi_jobs
from gen.core.stimulus import Pattern
from gen.pwl import PwlConfig, fit_table, ref_pwl, shell_cycle_model
from gen.pwl.twin import axi_job, axi_ports, rtl_pwl_axi
from hdl.pwl import SHELL, PwlShell
from tb.shell_checks import assert_cleared_by_reset, assert_record_is_model, run_native_beats


@pytest.mark.parametrize("func, bus_words, pause_in, pause_out",
                         [("tanh", 4, 0.3, 0.4), ("sigmoid", 3, 0.5, 0.2)])
@pytest.mark.native_agree
def test_shell_jobs(sim, func, bus_words, pause_in, pause_out):
    """Four jobs back to back (1 word, one beat, a partial last beat, 37 words; extreme
    codes), idle input and back-pressure: every result equals the golden model's, every
    counter what the bench saw on the ports, the interrupt rises and is acknowledged."""
    cfg = PwlConfig(func=func, bus_words=bus_words)
    table = fit_table(cfg)
    rng = np.random.default_rng(bus_words)
    packets = []
    for n in (1, bus_words, 4 * bus_words + 1, 37):
        x = rng.integers(-32768, 32768, n)
        x[:2] = [-32768, 32767][:min(2, n)]
        packets.append(x)
    ys, jobs = rtl_pwl_axi(packets, cfg, sim, valid_prob=1 - pause_in,
                           ready_prob=1 - pause_out, seed=5,
                           name=f"shell-{int(pause_in * 10)}{int(pause_out * 10)}")
    (_, _, valid), = axi_ports(cfg, 1 - pause_in, 1 - pause_out, 5)[0]
    (_, _, ready), = axi_ports(cfg, 1 - pause_in, 1 - pause_out, 5)[1]
    # the exact back-pressure model (gen.pwl.shell_cycle_model) on the bench's patterns,
    # the start responses' clocks predicted too
    models = shell_cycle_model([len(x) for x in packets], cfg, valid, ready)
    for x, y, job, model in zip(packets, ys, jobs, models):
        np.testing.assert_array_equal(y, ref_pwl(x, table))
        assert job["status"] == 0b10                             # done, not busy
        assert (job["irq"], job["irq_after_ack"], job["irq_status_after_ack"]) == (1, 0, 0)
        beats = -(-len(x) // bus_words)
        assert job["beats_in"] == job["beats_out"] == job["counters"]["busy"] == beats
        assert job["counters"]["cycles"] == job["end"] - job["start_ack"]
        assert job["counters"]["stall_in"] == job["stall_in"]
        assert job["counters"]["stall_out"] == job["stall_out"]
        assert_record_is_model(job, model)
    assert sum(j["stall_out"] for j in jobs) > 0 and sum(j["stall_in"] for j in jobs) > 0


# (valid, ready) of s_axis_x and m_axis_y: probabilities (seeded per port) or patterns
MODEL_PATTERNS = [(1.0, 1.0), (0.7, 0.5), (0.3, 0.9), (0.9, 0.2), (0.5, 0.5),
                  (Pattern.bits((1, 1, 0)), Pattern.bits((0, 1, 1, 0, 0)))]


@pytest.mark.parametrize("func, bus_words", [("tanh", 1), ("sigmoid", 3), ("tanh", 8)])
def test_shell_backpressure_model(sim, func, bus_words):
    """Exact back-pressure model: five jobs back to back (1 word, one beat, partial last
    beats, 29 and 2 words) under six pattern pairs (full rate, idle input and
    back-pressure at several probabilities and seeds, periodic patterns): every job's
    record (first input beat, last output beat, beats and stall clocks, the four counters)
    and the clock of every output beat equal :func:`gen.pwl.shell_cycle_model`'s, which
    reads only the words per job, ``bus_words``, the patterns and the bench's register
    writes per job (the start responses' clocks are predicted and checked too).  The same
    model with the patterns of another seed must differ somewhere (the check can fail)."""
    cfg = PwlConfig(func=func, bus_words=bus_words)
    table = fit_table(cfg)
    rng = np.random.default_rng(40 + bus_words)
    packets = [rng.integers(-32768, 32768, n)
               for n in (1, bus_words, 3 * bus_words + 1, 29, 2)]
    for i, (valid_prob, ready_prob) in enumerate(MODEL_PATTERNS):
        sources, sinks = axi_ports(cfg, valid_prob, ready_prob, seed=i)
        valid, ready = sources[0][2], sinks[0][2]
        records, beats = run_native_beats(
            SHELL, cfg, [axi_job(x, cfg) for x in packets], sources, sinks, sim,
            f"model-{bus_words}-{i}", max_cycles=20_000)
        differ = 0
        words = [len(x) for x in packets]
        models = shell_cycle_model(words, cfg, valid, ready)
        others = shell_cycle_model(words, cfg, _other(valid), _other(ready))
        for k, (x, record, got, model, other) in enumerate(zip(packets, records, beats,
                                                                models, others)):
            np.testing.assert_array_equal(to_signed(record["packets"]["m_axis_y"], 16),
                                          ref_pwl(x, table))
            assert_record_is_model(record, model, f"(patterns {i}, job {k})")
            assert got["m_axis_y"] == model["out_cycles"]["m_axis_y"]
            differ += other["out_cycles"] != model["out_cycles"]
        assert differ >= 2 or (valid, ready) == (Pattern.always(), Pattern.always())


def _other(pattern):
    """A deliberately different pattern of the same rate (another seed, a rotated
    sequence)."""
    if pattern.kind == "bits":
        return Pattern.bits(pattern.seq[1:] + pattern.seq[:1])
    return pattern if pattern.kind == "always" else Pattern.bernoulli(pattern.prob,
                                                                      pattern.seed + 1)


@pytest.mark.native_agree
def test_shell_reset_mid_job(sim):
    """``aresetn`` low in the middle of a job (inputs in flight, results pending, output
    back-pressured): the registers read their reset values and the next job is exact."""
    cfg = PwlConfig(func="tanh", bus_words=4)
    rng = np.random.default_rng(9)
    xs = [rng.integers(-32768, 32768, n) for n in (200, 23)]
    jobs = [dict(axi_job(xs[0], cfg), reset_after=30), axi_job(xs[1], cfg)]
    sources, sinks = axi_ports(cfg, 0.8, 0.6, seed=3)
    cut, after = run_axi_jobs(SHELL, cfg, jobs, sources, sinks, sim=sim,
                              name="shell-reset", max_cycles=5000)
    assert_cleared_by_reset(cut)
    assert cut["beats_out_before_reset"] < -(-200 // 4)
    np.testing.assert_array_equal(to_signed(after["packets"]["m_axis_y"], 16),
                                  ref_pwl(xs[1], fit_table(cfg)))
    assert after["counters"]["cycles"] == after["end"] - after["start_ack"]
    # the exact model: the cut job up to the reset, the next job from the bench's reset
    # sequence on
    models = shell_cycle_model([200, 23], cfg, sources[0][2], sinks[0][2], resets=[30, None])
    for k, (job, model) in enumerate(zip((cut, after), models)):
        assert_record_is_model(job, model, f"(job {k})")


def test_shell_ports_are_vivado_names():
    text = to_verilog(PwlShell(PwlConfig(bus_words=4)), "pwl_shell")
    text = text[text.index("module pwl_shell("):]
    text = text[:text.index("endmodule")]
    ports = set(re.findall(r"^\s*(?:input|output)\s+(?:\[\d+:0\]\s+)?(\w+);", text, re.M))
    axis = {f"{d}_axis_{n}_t{s}" for d, n in (("s", "x"), ("m", "y"))
            for s in ("data", "keep", "last", "valid", "ready")}
    axil = {f"s_axi_{s}" for s in ("awaddr", "awprot", "awvalid", "awready", "wdata", "wstrb",
                                   "wvalid", "wready", "bresp", "bvalid", "bready", "araddr",
                                   "arprot", "arvalid", "arready", "rdata", "rresp", "rvalid",
                                   "rready")}
    assert ports == axis | axil | {"aclk", "aresetn", "irq"}
    assert re.search(r"input \[63:0\] s_axis_x_tdata;", text)
    assert re.search(r"output \[7:0\] m_axis_y_tkeep;", text)


@pytest.mark.parametrize("bus_words", [0, 33, 1.5, True])
def test_bus_words_range(bus_words):
    with pytest.raises(ValueError, match="bus_words must be an integer between 1 and 32"):
        PwlConfig(bus_words=bus_words)


def test_bus_words_leaves_the_unit_alone():
    assert fit_table(PwlConfig(bus_words=8)).slopes == fit_table(PwlConfig()).slopes
    assert PwlConfig(bus_words=8).module_name == "pwl_sigmoid"
    assert PwlConfig(bus_words=8).shell_name == "pwl_sigmoid_axi_w8"


@pytest.mark.rtl
def test_cli_run_through_the_shell(tmp_path, capsys):
    """``spnn run pwl --bus-words 4``: results equal the golden model's, the report gives
    end-to-end cycles, the shell's counters and the roofline bound."""
    from gen.cli import main
    from gen.core.sim import sim_available
    if not sim_available("verilator"):
        pytest.skip("needs Verilator")
    x = np.random.default_rng(3).integers(-32768, 32768, 103).astype(np.int16)
    np.save(tmp_path / "x.npy", x)
    argv = ["run", "pwl", "--func", "tanh", "--bus-words", "4", "--input",
            str(tmp_path / "x.npy"), "--out", str(tmp_path / "y.npy"), "--report",
            str(tmp_path / "r.json")]
    assert main(argv) == 0
    cfg = PwlConfig(func="tanh", bus_words=4)
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), ref_pwl(x, fit_table(cfg)))
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["interface"] == "axi" and report["bus_words"] == 4
    assert report["roofline_cycles"] == 26 + cfg.latency
    assert report["cycles"] >= report["roofline_cycles"]
    assert report["counters"]["busy"] == 26 and report["counters"]["stall_out"] == 0
    assert report["roofline_efficiency"] == report["roofline_cycles"] / report["cycles"]
    assert "max |error|" in capsys.readouterr().out
