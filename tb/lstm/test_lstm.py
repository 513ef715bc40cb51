# SPDX-License-Identifier: Apache-2.0
"""LSTM engine: config, import, compiler, golden model vs PyTorch, RTL under both simulators."""

import numpy as np
from numpy.testing import assert_array_equal
import pytest

from gen.core.config import SpnnError
from gen.core.fixed import QFormat, decode, quantise
from gen.lstm import (LstmConfig, LstmFloat, compile_lstm, cycle_model, float_lstm, load_model,
                      model_from_dict, plan_quant, prune_lstm, quantise_lstm, ref_lstm, step_cycles)
from gen.lstm.twin import rtl_lstm

# Stated bound: |h_golden - h_float| with the float model on the *same* (dequantised)
# weights, inputs and initial state, default formats, |w| <= 1, T <= 12.  Measured
# worst case over the random cases below: ~6e-4 (PWL error ~2e-4 + rounding).
BOUND = 2e-3

# One small RTL build serves every RTL test (runtime sizes H <= 16, X <= 8; 8 PWL segments
# keep the Verilator build short).
RTL_CFG = LstmConfig(pes=3, max_inputs=8, max_hidden=16, fifo_depth=4, mem_depth=256,
                     segments=8)
# two weight words per clock (lane 1 feeds PE 1 alone, lane 0 PEs 0 and 2)
RTL_CFG_L = LstmConfig(pes=3, max_inputs=8, max_hidden=16, fifo_depth=4, mem_depth=256,
                       segments=8, w_lanes=2)


def random_layer(rng, H, X, density=0.5, scale=1.0):
    m = LstmFloat(rng.uniform(-scale, scale, (4 * H, X)), rng.uniform(-scale, scale, (4 * H, H)),
                  rng.uniform(-scale, scale, 4 * H))
    return prune_lstm(m, density)


def dequant(q, cfg):
    return LstmFloat(decode(q.w_ih, cfg.w_fmt), decode(q.w_hh, cfg.w_fmt), decode(q.b, cfg.b_fmt))


# ----------------------------------------------------------------------- config

@pytest.mark.parametrize("kwargs, message", [
    (dict(pes=0), "pes must be between 1 and 256, not 0"),
    (dict(fifo_depth=1), "fifo_depth must be between 2 and 256, not 1"),
    (dict(segments=12), "segments must be a power of two between 2 and 256, not 12"),
    (dict(w_fmt=QFormat(20, 12)), "w_fmt must be 2 to 24 bits wide, not 32 (Q20.12)"),
    (dict(act_fmt=QFormat(4, 1)), "act_fmt must have at least 2 fraction bits, not Q4.1"),
    (dict(b_fmt=QFormat(2, 30)), "b_fmt must have at most w_fmt + x_fmt fraction bits = 21, "
                                 "not 30"),
])
def test_config_rejects(kwargs, message):
    with pytest.raises(ValueError) as info:
        LstmConfig(**kwargs)
    assert str(info.value) == message


def test_config_type_error():
    with pytest.raises(TypeError, match="c_fmt must be a QFormat"):
        LstmConfig(c_fmt="Q5.11")
    with pytest.raises(TypeError, match="pes must be an integer"):
        LstmConfig(pes=4.0)


# ----------------------------------------------------------------------- golden model

def test_golden_vs_float_bound():
    rng = np.random.default_rng(1)
    cfg = LstmConfig()
    worst = 0.0
    for _ in range(12):
        H, X, T = int(rng.integers(1, 20)), int(rng.integers(1, 9)), int(rng.integers(1, 13))
        q = quantise_lstm(random_layer(rng, H, X), cfg)
        xq = quantise(rng.uniform(-2, 2, (T, X)), cfg.x_fmt)
        h0 = quantise(rng.uniform(-1, 1, H), cfg.x_fmt)
        c0 = quantise(rng.uniform(-2, 2, H), cfg.c_fmt)
        hq, cq = ref_lstm(q, xq, cfg, h0, c0)
        hf, cf = float_lstm(dequant(q, cfg), decode(xq, cfg.x_fmt), decode(h0, cfg.x_fmt),
                            decode(c0, cfg.c_fmt))
        worst = max(worst, np.abs(decode(hq, cfg.x_fmt) - hf).max(),
                    np.abs(decode(cq, cfg.c_fmt) - cf).max())
    assert worst <= BOUND


def test_golden_vs_torch():
    """The float reference is torch.nn.LSTM (CPU) with the same weights."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    cfg = LstmConfig()
    for H, X, T in ((5, 3, 6), (13, 1, 10), (16, 8, 1)):
        lstm = torch.nn.LSTM(X, H, dtype=torch.float64)
        layer = model_from_dict(lstm.state_dict())
        q = quantise_lstm(prune_lstm(layer, 0.4), cfg)
        deq = dequant(q, cfg)
        with torch.no_grad():
            lstm.weight_ih_l0.copy_(torch.tensor(deq.w_ih))
            lstm.weight_hh_l0.copy_(torch.tensor(deq.w_hh))
            lstm.bias_ih_l0.copy_(torch.tensor(deq.b))
            lstm.bias_hh_l0.zero_()
        xq = quantise(rng.uniform(-1, 1, (T, X)), cfg.x_fmt)
        h0 = quantise(rng.uniform(-0.5, 0.5, H), cfg.x_fmt)
        c0 = quantise(rng.uniform(-1, 1, H), cfg.c_fmt)
        hq, _ = ref_lstm(q, xq, cfg, h0, c0)
        with torch.no_grad():
            ht, _ = lstm(torch.tensor(decode(xq, cfg.x_fmt)),
                         (torch.tensor(decode(h0, cfg.x_fmt))[None],
                          torch.tensor(decode(c0, cfg.c_fmt))[None]))
        assert np.abs(decode(hq, cfg.x_fmt) - ht.numpy()).max() <= BOUND
        # the numpy float model is the same function as torch
        hf, _ = float_lstm(deq, decode(xq, cfg.x_fmt), decode(h0, cfg.x_fmt),
                           decode(c0, cfg.c_fmt))
        assert np.abs(hf - ht.numpy()).max() < 1e-9


def test_golden_saturates():
    cfg = LstmConfig()
    H, X = 3, 2
    big = LstmFloat(np.full((4 * H, X), 100.0), np.full((4 * H, H), 100.0), np.full(4 * H, 100.0))
    q = quantise_lstm(big, cfg)
    assert q.w_ih.max() == cfg.w_fmt.max_code and q.b.max() == cfg.b_fmt.max_code
    xq = np.full((20, X), cfg.x_fmt.max_code)
    h, c = ref_lstm(q, xq, cfg)
    assert c.max() == cfg.c_fmt.max_code          # c grows by ~1 per step and saturates
    assert np.all(h <= cfg.x_fmt.max_code)


# ----------------------------------------------------------------------- compiler

@pytest.mark.parametrize("alloc", ["interleave", "zigzag", "lpt", "balanced"])
def test_compile_one_permutation(alloc):
    rng = np.random.default_rng(3)
    cfg = LstmConfig(pes=4, max_hidden=32)
    layer = random_layer(rng, 11, 5, density=0.3)
    q = quantise_lstm(layer, cfg)
    plan = compile_lstm(q, cfg, alloc)
    assert plan.r_run == 3 and plan.slots == 12
    # every unit's four gate rows share one PE; units per PE <= ceil(H / P)
    assert np.bincount(plan.unit_pe, minlength=4).max() <= 3
    assert sorted(plan.slot_unit[plan.slot_unit >= 0]) == list(range(11))
    back = plan_quant(plan)
    assert_array_equal(back.w_ih, q.w_ih)
    assert_array_equal(back.w_hh, q.w_hh)
    assert_array_equal(back.b, q.b)
    assert plan.nnz == q.nnz == plan.loads.sum()


def test_compile_balances_combined_rows():
    rng = np.random.default_rng(4)
    cfg = LstmConfig(pes=8, max_inputs=64, max_hidden=128, mem_depth=4096)
    q = quantise_lstm(random_layer(rng, 128, 64, density=0.12), cfg)
    bal = compile_lstm(q, cfg, "balanced").load_report()
    inter = compile_lstm(q, cfg, "interleave").load_report()
    assert bal["max_over_mean"] <= inter["max_over_mean"]
    assert bal["max_over_mean"] < 1.02


def test_compile_rejects_too_big():
    cfg = LstmConfig(pes=2, max_inputs=4, max_hidden=4, mem_depth=8)
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="hidden size must be at most max_hidden = 4, not 5"):
        compile_lstm(quantise_lstm(random_layer(rng, 5, 2), cfg), cfg)
    with pytest.raises(ValueError, match="input size must be at most max_inputs = 4, not 6"):
        compile_lstm(quantise_lstm(random_layer(rng, 2, 6), cfg), cfg)
    with pytest.raises(ValueError, match="a PE needs .* weight entries; mem_depth is 8"):
        compile_lstm(quantise_lstm(random_layer(rng, 4, 4, density=1.0), cfg), cfg)


def test_cycle_model_efficiency_ese_shape_small():
    """Step period close to ceil(nnz / P) on a mid-sized layer (the bench runs ESE size)."""
    rng = np.random.default_rng(5)
    cfg = LstmConfig(pes=8, max_inputs=40, max_hidden=128, fifo_depth=32, mem_depth=8192)
    q = quantise_lstm(random_layer(rng, 128, 40, density=0.117), cfg)
    plan = compile_lstm(q, cfg)
    xs = quantise(rng.uniform(-1, 1, (2, 40)), cfg.x_fmt)
    cm = cycle_model(plan, [(xs, None, None)])
    period = step_cycles(cm)[-1]
    assert period <= 1.11 * plan.ideal_cycles


# ----------------------------------------------------------------------- model import

def _state(rng, H=4, X=3):
    return {"weight_ih_l0": rng.normal(size=(4 * H, X)), "weight_hh_l0": rng.normal(size=(4 * H, H)),
            "bias_ih_l0": rng.normal(size=4 * H), "bias_hh_l0": rng.normal(size=4 * H)}


def test_import_npz(tmp_path):
    rng = np.random.default_rng(0)
    st = _state(rng)
    np.savez(tmp_path / "m.npz", **st)
    m = load_model(tmp_path / "m.npz")
    assert_array_equal(m.w_hh, st["weight_hh_l0"])
    assert_array_equal(m.b, st["bias_ih_l0"] + st["bias_hh_l0"])


@pytest.mark.parametrize("change, message", [
    (lambda s: s.pop("weight_hh_l0"), "--model: missing key weight_hh_l0"),
    (lambda s: s.pop("weight_ih_l0"), "--model: no LSTM weights found"),
    (lambda s: s.update(weight_hh_l0=np.zeros((16, 3))),
     "--model: weight_hh_l0 must have shape (4H, H), not (16, 3)"),
    (lambda s: s.update(weight_ih_l0=np.zeros((12, 3))),
     "--model: weight_ih_l0 must have shape (4H, X) = (16, X), not (12, 3)"),
    (lambda s: s.update(bias_ih_l0=np.zeros(5)), "--model: bias_ih_l0 must have shape (16,), not (5,)"),
    (lambda s: s["weight_hh_l0"].__setitem__((0, 0), np.nan),
     "--model: weight_hh_l0 holds NaN or infinite values"),
])
def test_import_errors(tmp_path, change, message):
    st = _state(np.random.default_rng(0))
    change(st)
    np.savez(tmp_path / "m.npz", **st)
    with pytest.raises(SpnnError) as info:
        load_model(tmp_path / "m.npz")
    assert str(info.value).startswith(message)
    assert "\n" not in str(info.value)


def test_import_pickled_npz(tmp_path):
    np.savez(tmp_path / "m.npz", weight_ih_l0=np.array([{"a": 1}], dtype=object))
    with pytest.raises(SpnnError, match="holds pickled objects"):
        load_model(tmp_path / "m.npz")


def test_import_pt(tmp_path):
    torch = pytest.importorskip("torch")
    lstm = torch.nn.LSTM(3, 5)
    torch.save(lstm.state_dict(), tmp_path / "m.pt")
    m = load_model(tmp_path / "m.pt")
    assert m.hidden == 5 and m.inputs == 3
    # a classifier's state dict with the LSTM under a prefix
    net = torch.nn.Module()
    net.lstm, net.fc = lstm, torch.nn.Linear(5, 2)
    torch.save(net.state_dict(), tmp_path / "net.pt")
    assert load_model(tmp_path / "net.pt").hidden == 5
    torch.save({"model": lstm}, tmp_path / "pickled.pt")
    with pytest.raises(SpnnError, match="holds pickled Python objects"):
        load_model(tmp_path / "pickled.pt")
    torch.save(torch.nn.LSTM(3, 5, num_layers=2).state_dict(), tmp_path / "two.pt")
    with pytest.raises(SpnnError, match="only one-layer LSTMs"):
        load_model(tmp_path / "two.pt")


def test_prune_density():
    rng = np.random.default_rng(0)
    layer = random_layer(rng, 10, 6, density=0.25)
    assert layer.density == pytest.approx(0.25, abs=0.002)


# ----------------------------------------------------------------------- RTL

@pytest.mark.parametrize("segments", [8, 32])
def test_lstm_pwl_unit_matches_ref_pwl(segments):
    """The LSTM's deeper-pipelined PWL unit (Amaranth simulator): ref_pwl exactly, on
    every 29th code plus both ends and the region around 0, result valid exactly
    ``latency`` clocks after its input."""
    from amaranth.sim import Simulator
    from gen.pwl import ref_pwl
    from hdl.lstm.pwl import LstmPwlUnit
    cfg = LstmConfig(segments=segments)
    for name, table in cfg.tables().items():
        fmt = table.config.in_fmt
        xs = np.unique(np.concatenate([np.arange(fmt.min_code, fmt.max_code + 1, 29),
                                       np.arange(-200, 200), [fmt.min_code, fmt.max_code,
                                                              fmt.max_code - 1]]))
        dut = LstmPwlUnit(table)
        assert dut.latency == cfg.pwl_latency
        got = []

        async def bench(ctx):
            for t in range(len(xs) + dut.latency):
                ctx.set(dut.i.valid, t < len(xs))
                ctx.set(dut.i.payload, int(xs[t]) if t < len(xs) else 0)
                await ctx.tick()
                if ctx.get(dut.o.valid):
                    got.append((t + 1, ctx.get(dut.o.payload)))

        sim = Simulator(dut)
        sim.add_clock(1e-6)
        sim.add_testbench(bench)
        sim.run()
        assert [c for c, _ in got] == list(range(dut.latency, dut.latency + len(xs))), name
        assert_array_equal(np.array([v for _, v in got]), ref_pwl(xs, table), err_msg=name)


def _case(rng, H, X, T, density=0.5, scale=1.0, state=True, zero_x=False):
    cfg = RTL_CFG
    q = quantise_lstm(random_layer(rng, H, X, density, scale), cfg)
    xs = np.zeros((T, X), np.int64) if zero_x else quantise(rng.uniform(-2, 2, (T, X)),
                                                            cfg.x_fmt)
    h0 = quantise(rng.uniform(-1, 1, H), cfg.x_fmt) if state else None
    c0 = quantise(rng.uniform(-3, 3, H), cfg.c_fmt) if state else None
    return q, (xs, h0, c0)


def _check(plan, q, seqs, outs):
    for (xs, h0, c0), out in zip(seqs, outs):
        assert_array_equal(out, ref_lstm(q, xs, plan.cfg, h0, c0)[0])


def test_rtl_random_sequences(sim, cycle_log):
    """H = 10 on 3 PEs (not divisible), T > 1 with non-zero h0/c0, then T = 1, then an
    all-zero input sequence with zero state, back to back on one weight load."""
    rng = np.random.default_rng(11)
    q, s1 = _case(rng, 10, 3, 4)
    _, s2 = _case(rng, 10, 3, 1)
    s3 = (np.zeros((3, 3), np.int64), None, None)
    plan = compile_lstm(q, RTL_CFG)
    seqs = [s1, s2, s3]
    outs, res = rtl_lstm(plan, seqs, sim, name="random")
    _check(plan, q, seqs, outs)
    cm = cycle_model(plan, seqs)
    assert res["sinks"]["o"]["cycles"] == cm["o"]
    assert res["sources"]["x"]["cycles"] == cm["x"]
    cycle_log(res["sinks"]["o"]["cycles"][-1], cm["o"][-1])


@pytest.mark.native_agree
def test_rtl_x1_saturation_backpressure(sim, cycle_log):
    """X = 1, H = 7, saturation-provoking weights/inputs, random idle cycles on w and x
    and back-pressure on o; cycles still match the model draw for draw."""
    rng = np.random.default_rng(12)
    q, s1 = _case(rng, 7, 1, 6, density=0.8, scale=20.0)
    xs = np.where(rng.random((6, 1)) < 0.5, RTL_CFG.x_fmt.max_code, RTL_CFG.x_fmt.min_code)
    fmt = RTL_CFG.c_fmt
    c0 = np.where(np.arange(7) % 2 == 0, fmt.max_code, fmt.min_code)   # c saturates
    seqs = [(xs, s1[1], c0), s1]
    plan = compile_lstm(q, RTL_CFG)
    probs = dict(w_valid_prob=0.7, x_valid_prob=0.6, o_ready_prob=0.5, seed=3)
    outs, res = rtl_lstm(plan, seqs, sim, name="sat_bp", **probs)
    _check(plan, q, seqs, outs)
    assert np.any(np.abs(outs[0]) > 0)
    cm = cycle_model(plan, seqs, **probs)
    assert res["sinks"]["o"]["cycles"] == cm["o"]
    cycle_log(res["sinks"]["o"]["cycles"][-1], cm["o"][-1])


@pytest.mark.native_agree
def test_rtl_reset_between_sequences(sim, cycle_log):
    """A reset in the middle of the second sequence: after it the job restarts from the
    weight load and every result (and cycle, shifted by the reset cycle) is right."""
    rng = np.random.default_rng(13)
    q, s1 = _case(rng, 16, 8, 2, density=0.3)
    _, s2 = _case(rng, 16, 8, 2, density=0.3)
    plan = compile_lstm(q, RTL_CFG)
    seqs = [s1, s2]
    cm = cycle_model(plan, seqs)
    reset_at = cm["o"][len(cm["o"]) * 3 // 4]
    outs, res = rtl_lstm(plan, seqs, sim, name="reset", reset_at=reset_at)
    _check(plan, q, seqs, outs)
    assert len(res["before_reset"]["o"]["data"]) > 0
    shifted = [c + reset_at for c in cm["o"]]
    assert res["sinks"]["o"]["cycles"] == shifted
    cycle_log(res["sinks"]["o"]["cycles"][-1], shifted[-1])


# ----------------------------------------------------------------------- CLI

def run_cli(args, cwd=None):
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, "-m", "gen.cli", *args], capture_output=True,
                          text=True, cwd=cwd)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture
def cli_files(tmp_path):
    rng = np.random.default_rng(21)
    st = _state(rng, H=16, X=8)
    files = {"model": tmp_path / "m.npz", "seq": tmp_path / "seq.npy"}
    np.savez(files["model"], **{k: v * 0.5 for k, v in st.items()})
    np.save(files["seq"], rng.uniform(-1, 1, (3, 8)))
    bad = dict(st)
    bad["weight_hh_l0"] = np.zeros((64, 5))
    np.savez(tmp_path / "shape.npz", **bad)
    files["shape"] = tmp_path / "shape.npz"
    np.savez(tmp_path / "keys.npz", foo=np.zeros(3))
    files["keys"] = tmp_path / "keys.npz"
    nan = {k: v.copy() for k, v in st.items()}
    nan["bias_hh_l0"][2] = np.nan
    np.savez(tmp_path / "nan.npz", **nan)
    files["nan"] = tmp_path / "nan.npz"
    np.savez(tmp_path / "pickle.npz", weight_ih_l0=np.array([None], dtype=object))
    files["pickle"] = tmp_path / "pickle.npz"
    (tmp_path / "junk.pt").write_bytes(b"not a zip file at all")
    files["junk"] = tmp_path / "junk.pt"
    np.save(tmp_path / "seq_bad.npy", np.zeros((3, 5)))
    files["seq_bad"] = tmp_path / "seq_bad.npy"
    np.save(tmp_path / "seq_nan.npy", np.full((3, 8), np.nan))
    files["seq_nan"] = tmp_path / "seq_nan.npy"
    return files


@pytest.mark.parametrize("model, seq, extra, message", [
    ("keys", "seq", [], "--model: no LSTM weights found"),
    ("shape", "seq", [], "--model: weight_hh_l0 must have shape (4H, H), not (64, 5)"),
    ("nan", "seq", [], "--model: bias_hh_l0 holds NaN or infinite values"),
    ("pickle", "seq", [], "holds pickled objects"),
    ("junk", "seq", [], "--model: "),
    ("model", "seq_bad", [], "--input must have shape (T, X) = (T, 8) with T >= 1, not (3, 5)"),
    ("model", "seq_nan", [], "--input: values must be finite, found NaN"),
    ("model", "seq", ["--density", "1.5"], "--density must be between 0 and 1, excluding 0, not 1.5"),
    ("model", "seq", ["--pes", "0"], "--pes must be between 1 and 256, not 0"),
    ("model", "seq", ["--w-fmt", "Q3"], "--w-fmt must be a fixed-point format"),
    ("model", "seq", ["--mem-depth", "4"], "a PE needs"),
])
def test_cli_errors(tmp_path, cli_files, model, seq, extra, message):
    out = tmp_path / "h.npy"
    code, _, stderr = run_cli(["run", "lstm", "--model", str(cli_files[model]), "--input",
                               str(cli_files[seq]), "--out", str(out), *extra])
    assert code == 2, stderr
    assert message in stderr and stderr.count("\n") == 1
    assert not out.exists()


def test_cli_end_to_end(sim, tmp_path, cli_files):
    """Same hardware config as the RTL tests (no extra build): h out, report fields."""
    out, report = tmp_path / "h.npy", tmp_path / "r.json"
    code, stdout, stderr = run_cli(
        ["run", "lstm", "--model", str(cli_files["model"]), "--input", str(cli_files["seq"]),
         "--density", "0.3", "--pes", "3", "--fifo-depth", "4", "--mem-depth", "256",
         "--segments", "8", "--out", str(out), "--report", str(report), "--sim", sim])
    assert code == 0, stderr
    h = np.load(out)
    assert h.shape == (3, 16) and h.dtype == np.float64
    import json
    rep = json.loads(report.read_text())
    for field in ("block", "config", "formats", "sim", "cycles", "ideal_cycles", "efficiency",
                  "utilisation", "samples", "max_abs_error", "cycles_per_step"):
        assert field in rep
    assert rep["config"] == {**rep["config"], "pes": 3, "max_hidden": 16, "max_inputs": 8,
                             "segments": 8, "mem_depth": 256}
    assert rep["rtl_matches_golden"] and len(rep["cycles_per_step"]) == 3
    assert rep["max_abs_error"] < 0.05


# ---------------------------------------------------------------- weight lanes

def test_weight_beats_lanes():
    """Lane l holds the words of PEs p = l mod L (lane 0 also every ROW word, first), each
    lane one COL per column, NOP padding, one END beat; the one-lane stream is the words."""
    from gen.lstm import KIND_COL, KIND_END, KIND_NOP, KIND_ROW, weight_beats, weight_words
    rng = np.random.default_rng(41)
    q = quantise_lstm(random_layer(rng, 10, 3), RTL_CFG_L)
    plan = compile_lstm(q, RTL_CFG_L)
    cfg = plan.cfg
    ww, L = cfg.word_width, cfg.w_lanes
    beats = weight_beats(plan)
    words = weight_words(plan)
    assert len(words) == L * len(beats)
    kind = lambda w: w >> (ww - 3)                                          # noqa: E731
    pe = lambda w: (w >> (cfg.wv_width + cfg.idx_bits)) & ((1 << cfg.pe_bits) - 1)  # noqa: E731
    lanes = [[(b >> (k * ww)) & ((1 << ww) - 1) for b in beats] for k in range(L)]
    for k, lane in enumerate(lanes):
        assert kind(lane[-1]) == KIND_END
        body = [w for w in lane[:-1] if kind(w) != KIND_NOP]
        assert sum(kind(w) == KIND_COL for w in body) == plan.cols
        assert all(pe(w) % L == k for w in body if kind(w) not in (KIND_COL, KIND_ROW))
        assert sum(kind(w) == KIND_ROW for w in body) == (plan.hidden if k == 0 else 0)
    one = compile_lstm(q, RTL_CFG)
    from gen.lstm import weight_beats as beats1
    assert beats1(one) == weight_words(one)
    # two lanes: about half the clocks of one (lane 0 also carries the ROW words)
    assert len(beats) < 0.75 * len(weight_words(one))


def test_rtl_weight_lanes(sim, cycle_log):
    """Two weight words per clock: sequences after the load, idle inputs and back-pressure,
    every h_t exact and every transfer on the model's cycle."""
    rng = np.random.default_rng(42)
    q = quantise_lstm(random_layer(rng, 10, 3, 0.5), RTL_CFG_L)
    xs = quantise(rng.uniform(-2, 2, (3, 3)), RTL_CFG_L.x_fmt)
    h0 = quantise(rng.uniform(-1, 1, 10), RTL_CFG_L.x_fmt)
    seqs = [(xs, h0, None), (xs[:1], None, None)]
    plan = compile_lstm(q, RTL_CFG_L)
    probs = dict(w_valid_prob=0.6, x_valid_prob=0.7, o_ready_prob=0.5, seed=5)
    outs, res = rtl_lstm(plan, seqs, sim, name="lanes", **probs)
    _check(plan, q, seqs, outs)
    cm = cycle_model(plan, seqs, **probs)
    assert res["sources"]["w"]["cycles"] == cm["w"]
    assert res["sinks"]["o"]["cycles"] == cm["o"]
    cycle_log(res["sinks"]["o"]["cycles"][-1], cm["o"][-1])
