# SPDX-License-Identifier: Apache-2.0
"""The native simulation engine (gen/core/native.py) against the cocotb bench.

Every block's reset and back-pressure tests (marker ``native_agree``) rerun their jobs
natively; here the engine's own contract: the pattern files, the bench's corner cases
(a timeout, surplus outputs, a reset mid-job, a job naming an unknown port, payload-less
ports), the Verilog cache and the cost accounting."""

import numpy as np
import pytest

from gen.core.block import Gateware
from gen.core.config import SpnnError
from gen.core import native
from gen.core.native import _pattern_lines, stream_ports
from gen.core.sim import SimError, measuring, run_job, verilog_for
from gen.core.stimulus import Pattern, make_job
from hdl.lib.skid import SkidBuffer

WIDTH = 12
SKID = Gateware("skid", SkidBuffer, lambda width: f"skid_{width}")
KEYS = ("error", "cycles_run", "sources", "sinks", "before_reset", "resets", "log")


def _both(job, sim, name):
    a = run_job(SKID, WIDTH, job, sim, name=f"{name}-c", engine="cocotb")
    b = run_job(SKID, WIDTH, job, sim, name=f"{name}-n", engine="native")
    for key in KEYS:
        assert a[key] == b[key], key
    return a, b


@pytest.mark.parametrize("pattern", [Pattern.always(), Pattern.bits([1, 0, 0, 1, 1]),
                                     Pattern.bernoulli(0.3, 99)], ids=["always", "bits", "bern"])
def test_pattern_expand_is_at(pattern):
    bits = pattern.expand(9000)
    assert list(bits) == [pattern.at(c) for c in range(9000)]
    # the pattern file: 32 clocks a line, clock 32 i + b in bit b of line i
    lines = _pattern_lines(pattern, 70).split()
    assert len(lines) == 3
    assert all(((int(lines[c // 32], 16) >> (c % 32)) & 1) == bits[c] for c in range(70))


def test_testbench_names_every_stream_port():
    module, text = verilog_for(SKID, WIDTH)
    sources, sinks, others = stream_ports(text, module)
    assert sources == [("i", WIDTH)] and sinks == [("o", WIDTH)] and others == []
    tb = native.testbench(module, sources, sinks)
    for port in ("i__valid", "i__ready", "i__payload", "o__valid", "o__ready", "o__payload"):
        assert f".{port}(" in tb
    # the same text for the same module: builds are cached by it
    assert tb == native.testbench(module, sources, sinks)


def test_payloadless_stream_ports():
    text = ("module m(clk, rst, a__valid, a__ready, b__valid, b__ready, en);\n"
            "  input clk;\n  input rst;\n  input a__valid;\n  output a__ready;\n"
            "  output b__valid;\n  input b__ready;\n  input [3:0] en;\nendmodule\n")
    sources, sinks, others = stream_ports(text, "m")
    assert sources == [("a", 0)] and sinks == [("b", 0)] and others == [("en", 4)]
    tb = native.testbench("m", sources, sinks, others)
    assert ".en(4'd0)" in tb and "payload" not in tb


@pytest.mark.native_agree
def test_random_patterns_and_reset_agree(sim):
    rng = np.random.default_rng(3)
    data = [int(v) for v in rng.integers(0, 1 << WIDTH, 300)]
    for i, (valid, ready, reset_at) in enumerate([(0.6, 0.5, None), (0.8, 0.3, 41),
                                                  (Pattern.bits([0, 1, 1]), 0.7, 0)]):
        job = make_job([("i", data, valid)], [("o", len(data), ready)], seed=i,
                       reset_at=reset_at, max_cycles=5000)
        a, b = _both(job, sim, f"native-agree-{i}")
        assert b["sinks"]["o"]["data"] == data and b["engine"] == "native"
        if reset_at:
            assert b["resets"] == [reset_at] and b["before_reset"]["o"]["data"]


def test_timeout_and_surplus_outputs_are_the_same_errors(sim):
    data = list(range(50))
    job = make_job([("i", data, None)], [("o", 50, 0.05)], seed=1, max_cycles=100)
    for engine in ("cocotb", "native"):
        with pytest.raises(SimError, match="timeout after 100 cycles"):
            run_job(SKID, WIDTH, job, sim, name=f"native-timeout-{engine}", engine=engine)
    job = make_job([("i", data, None)], [("o", 40, None)], seed=1, max_cycles=1000)
    for engine in ("cocotb", "native"):
        with pytest.raises(SimError, match=r"unexpected extra output transfers: \{'o': 10\}"):
            run_job(SKID, WIDTH, job, sim, name=f"native-extra-{engine}", engine=engine)


def test_a_port_the_module_lacks_is_an_error(sim):
    job = make_job([("i", [1, 2], None), ("q", [3], None)], [("o", 2, None)])
    with pytest.raises(SpnnError, match=r"ports the module does not have: \['q'\]"):
        run_job(SKID, WIDTH, job, sim, name="native-unknown", engine="native")


def test_unnamed_sink_stays_not_ready(sim):
    """A job that names no sink: the output is never ready, so the buffer fills (two
    words) and the source stalls, under both engines alike."""
    job = make_job([("i", list(range(5)), None)], [], max_cycles=30)
    with pytest.raises(SimError, match="timeout"):
        run_job(SKID, WIDTH, job, sim, name="native-nosink", engine="native")


def test_measuring_counts_clocks_and_seconds(sim):
    job = make_job([("i", list(range(100)), None)], [("o", 100, None)], max_cycles=1000)
    with measuring() as stats:
        r1 = run_job(SKID, WIDTH, job, sim, name="native-m1", engine="native")
        r2 = run_job(SKID, WIDTH, job, sim, name="native-m2", engine="native")
    assert stats["runs"] == 2 and stats["engine"] == "native"
    assert stats["clocks"] == r1["cycles_run"] + r2["cycles_run"] > 200
    assert stats["sim_seconds"] > 0 and stats["clocks_per_second"] > 0


def test_watch_and_unknown_engine():
    job = make_job([("i", [1], None)], [("o", 1, None)])
    with pytest.raises(SpnnError, match="engine must be one of cocotb, native, not 'fast'"):
        run_job(SKID, WIDTH, job, "icarus", engine="fast")
