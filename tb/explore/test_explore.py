# SPDX-License-Identifier: Apache-2.0
"""Sparse dataflow explorer (seed 003): hand-computed cases, invariants, degree of freedom,
the cross-check against the remainder-aware MAC array's cycle model (gen/conv.py), CLI."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gen.cli import main
from gen.explore import (SKIPS, UNROLLS, ExploreConfig, dense_cycles_formula, explore,
                         explore_modes, measured_dof, prepare, queue_lengths, seed_dof)

ROOT = Path(__file__).resolve().parents[2]


def _sparse(rng, shape, density, lo=1, hi=5):
    return rng.integers(lo, hi, shape) * (rng.random(shape) < density)


def _check(rep, cycles, performed, useful, imbalance_idle, mapping_idle=0):
    assert rep["cycles"] == cycles
    assert rep["performed_macs"] == performed
    assert rep["useful_macs"] == useful
    assert rep["imbalance_idle_pe_cycles"] == imbalance_idle
    assert rep["mapping_idle_pe_cycles"] == mapping_idle


# ------------------------------------------------------------------ hand-computed cases

def test_neuron_hand():
    # one map, 2x2 kernel, input 2x3 -> output 1x2 on Tr x Tc = 1 x 2: one step, 4 slots
    w = np.array([[[[1, 0], [1, 1]]]])
    x = np.array([[[1, 0, 2], [0, 3, 4]]])
    r = explore_modes(w, x, ExploreConfig("neuron", 1, 2))
    _check(r["none"], 4, 8, 4, 0)
    _check(r["weights"], 3, 6, 4, 0)          # broadcast weight: both PEs skip (0, 1)
    _check(r["acts"], 3, 5, 4, 1)             # windows hold 2 and 3 non-zeros: 1 idle
    _check(r["both"], 2, 4, 4, 0)
    assert r["both"]["ideal_cycles"] == 2 and r["none"]["dense_cycles"] == 4
    assert r["acts"]["imbalance_loss"] == pytest.approx(1 / 6)
    # lockstep acts: a kernel position is skipped only if both windows are zero there
    lock = explore(w, x, ExploreConfig("neuron", 1, 2), "acts", lockstep=True)
    _check(lock, 4, 8, 4, 0)
    lock = explore(w, x, ExploreConfig("neuron", 1, 2), "both", lockstep=True)
    _check(lock, 3, 6, 4, 0)                  # (0,1): w zero; (0,0),(1,0),(1,1) needed


def test_fmap_hand_tree_word():
    # Tn x Tm = 2 x 1: one tree, two lanes (input maps); kernel 1x2, output 1x1
    w = np.zeros((1, 2, 1, 2), dtype=int)
    w[0, 0, 0, 0] = 7                          # tree word j=0: (7, 0); j=1: (0, 0)
    x = np.array([[[5, 0]], [[1, 1]]])
    r = explore_modes(w, x, ExploreConfig("fmap", 2, 1))
    _check(r["none"], 2, 4, 1, 0)
    _check(r["weights"], 1, 2, 1, 0)           # the all-zero word j=1 is skipped by the tree
    _check(r["acts"], 2, 3, 1, 1)              # lane 0 has 1 non-zero activation, lane 1 two
    _check(r["both"], 1, 1, 1, 1)              # lane 1 has no non-zero weight
    assert r["both"]["wasted_macs"] == 0 and r["weights"]["wasted_macs"] == 1


def test_synapse_hand():
    # Kx x Ky = 2 x 1, kernel 1x2, input 1x3 -> output 1x2; steps = streamed activations
    w = np.array([[[[0, 3]]]])
    x = np.array([[[0, 2, 4]]])
    r = explore_modes(w, x, ExploreConfig("synapse", 2, 1))
    # x0 feeds only PE j=0 (output 0), x1 both, x2 only PE j=1 (output 1)
    _check(r["none"], 3, 4, 2, 0, mapping_idle=2)
    _check(r["weights"], 2, 2, 2, 1, mapping_idle=1)    # PE j=0 holds a zero: idles in x1
    _check(r["acts"], 2, 3, 2, 0, mapping_idle=1)       # x0 = 0 is skipped by every PE
    _check(r["both"], 2, 2, 2, 1, mapping_idle=1)
    assert r["none"]["mapping_loss"] == pytest.approx(2 / 6)


def test_array_hand():
    # rows x cols = 2 x 2 (naive), channels 2, kernel 1x2, input 1x3 -> 2 positions, K = 2
    w = np.array([[[[1, 0]]], [[[1, 1]]]])
    x = np.array([[[1, 0, 2]]])
    cfg = ExploreConfig("array", 2, 2)
    r = explore_modes(w, x, cfg)
    _check(r["none"], 2, 8, 3, 0)
    _check(r["weights"], 2, 6, 3, 2)           # rows hold 1 and 2 non-zero weights
    _check(r["acts"], 1, 4, 3, 0)              # each column's window has one non-zero
    _check(r["both"], 1, 3, 3, 1)
    lock = explore(w, x, cfg, "acts", lockstep=True)
    _check(lock, 2, 8, 3, 0)                   # no beat has all-zero features
    assert r["none"]["array_schedule"]["passes"] == [[2, 1, 1, 1]]


def test_array_drain_floor():
    # 4 rows drained 1 per clock: a tile lasts max(K beats, 4) cycles
    w = np.ones((4, 1, 1, 2), dtype=int)
    x = np.ones((1, 1, 3))
    r = explore(w, x, ExploreConfig("array", 4, 2, drain_rows=1), "none")
    assert r["cycles"] == 4 and r["performed_macs"] == 16
    assert r["drain_idle_pe_cycles"] == 16 and r["drain_loss"] == pytest.approx(0.5)


# ------------------------------------------------------------------ invariants

CASES = [  # (unroll, a, b, M, N, K, H, W, stride, pad)
    ("synapse", 3, 3, 4, 3, 3, 7, 6, 1, 1),
    ("synapse", 2, 2, 3, 2, 3, 8, 7, 2, 0),      # kernel larger than the array: tiles
    ("synapse", 4, 4, 2, 2, 3, 6, 6, 1, 0),      # smaller than the array
    ("neuron", 3, 2, 5, 3, 3, 7, 8, 1, 1),
    ("neuron", 4, 4, 3, 2, 2, 9, 9, 2, 0),
    ("fmap", 2, 3, 7, 5, 3, 6, 6, 1, 0),
    ("fmap", 4, 2, 4, 3, 1, 5, 5, 1, 0),
    ("array", 4, 2, 9, 3, 3, 6, 7, 1, 1),
    ("array", 8, 4, 20, 2, 3, 7, 7, 2, 1),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}{c[1]}x{c[2]}")
def test_invariants(case):
    unroll, a, b, m, n, k, h, wd, s, p = case
    rng = np.random.default_rng(a * 100 + b)
    w = _sparse(rng, (m, n, k, k), 0.4, -3, 4)
    x = _sparse(rng, (2, n, h, wd), 0.6)
    cfg = ExploreConfig(unroll, a, b, stride=s, pad=p)
    r = explore_modes(w, x, cfg)
    L = prepare(w, x, s, p)
    # every MAC exactly once when nothing is skipped; closed-form dense cycles
    assert r["none"]["performed_macs"] == L.dense_macs
    assert r["none"]["cycles"] == dense_cycles_formula(L, cfg)
    assert r["none"]["imbalance_idle_pe_cycles"] == 0
    # useful MACs against an independent convolution of the zero patterns
    from gen.conv import ref_conv
    useful = sum(int(ref_conv((xi != 0).astype(int), (w != 0).astype(int), s, p).sum())
                 for xi in x)
    for skip, rep in r.items():
        assert rep["useful_macs"] == useful
        # the PE-cycle budget splits exactly
        budget = rep["pes"] * rep["cycles"]
        assert (rep["performed_macs"] + rep["imbalance_idle_pe_cycles"]
                + rep["mapping_idle_pe_cycles"] + rep["drain_idle_pe_cycles"]) == budget
        assert rep["ideal_cycles"] <= rep["cycles"] <= rep["dense_cycles"]
        assert useful <= rep["performed_macs"] <= L.dense_macs
    assert r["both"]["performed_macs"] == useful
    assert r["both"]["cycles"] <= min(r["weights"]["cycles"], r["acts"]["cycles"])
    # lockstep: never imbalance, never faster than independent queues
    lock = explore_modes(w, x, cfg, lockstep=True)
    for skip in SKIPS:
        assert lock[skip]["imbalance_idle_pe_cycles"] == 0
        assert r[skip]["cycles"] <= lock[skip]["cycles"] <= r["none"]["cycles"]


@pytest.mark.parametrize("unroll, a, b", [("synapse", 3, 3), ("neuron", 4, 4),
                                          ("fmap", 4, 4), ("array", 4, 4)])
def test_dense_is_ideal(unroll, a, b):
    """No zeros, sizes that fill every tile: dense = ideal = MACs / P.

    The synapse array streams every activation, so windows at the map edges leave PEs idle
    (mapping loss) unless the kernel is 1x1; the other unrollings only lose partial tiles.
    """
    if unroll == "synapse":
        w, x = np.ones((2, 3, 1, 1)), np.ones((3, 4, 5))   # 1x1 kernel, 1x1 array
        a = b = 1
    elif unroll == "neuron":
        w, x = np.ones((2, 3, 3, 3)), np.ones((3, 10, 6))   # output 8x4 on 4x4 tiles
    elif unroll == "fmap":
        w, x = np.ones((8, 4, 3, 3)), np.ones((4, 5, 5))
    else:
        w, x = np.ones((8, 2, 3, 3)), np.ones((2, 6, 6))    # 8 channels, 16 positions
    r = explore_modes(w, x, ExploreConfig(unroll, a, b))
    for skip in SKIPS:
        rep = r[skip]
        assert rep["cycles"] == rep["dense_cycles"] == rep["ideal_cycles"]
        assert rep["dense_macs"] == rep["useful_macs"] == rep["pes"] * rep["cycles"]
        assert rep["parallel_efficiency"] == 1.0 and rep["imbalance_loss"] == 0.0
        assert rep["efficiency"] == 1.0 and rep["speedup_vs_dense"] == 1.0


def test_imbalance_as_defined():
    """imbalance idle = sum over steps of (active PEs x longest queue - queued MACs)."""
    rng = np.random.default_rng(7)
    w = _sparse(rng, (5, 3, 3, 3), 0.5)
    x = _sparse(rng, (3, 7, 7), 0.5)
    for unroll, a, b in [("neuron", 3, 3), ("fmap", 2, 4), ("synapse", 3, 3),
                         ("array", 4, 4)]:
        cfg = ExploreConfig(unroll, a, b, pad=1)
        for skip in SKIPS:
            q, _ = queue_lengths(w, x, cfg, skip)
            qv, _ = queue_lengths(w, x, cfg, "none")      # active = has a valid MAC
            active = (qv > 0).sum(axis=1)
            expect = int((active * q.max(axis=1) - q.sum(axis=1)).sum())
            rep = explore(w, x, cfg, skip)
            assert rep["imbalance_idle_pe_cycles"] == expect
            assert rep["imbalance_loss"] == pytest.approx(expect / (a * b * rep["cycles"]))
            assert rep["performed_macs"] == int(q.sum())


@pytest.mark.parametrize("unroll", UNROLLS)
@pytest.mark.parametrize("skip", SKIPS)
def test_degree_of_freedom(unroll, skip):
    """The seed's parallel degree of freedom = the model's independent queue lengths."""
    sizes = [(2, 2), (4, 2), (2, 4)] + ([(3, 3)] if unroll != "array" else [(8, 2)])
    for a, b in sizes:
        assert measured_dof(unroll, a, b, skip) == seed_dof(unroll, a, b, skip), (a, b)


def test_seed_dof_table():
    assert [seed_dof("synapse", 3, 3, s) for s in ("acts", "weights", "both")] == [1, 9, 9]
    assert [seed_dof("neuron", 3, 3, s) for s in ("acts", "weights", "both")] == [9, 1, 9]
    assert [seed_dof("fmap", 2, 3, s) for s in ("acts", "weights", "both")] == [2, 3, 6]


def test_weight_skip_in_neuron_and_act_skip_in_synapse_never_imbalance():
    rng = np.random.default_rng(3)
    w = _sparse(rng, (4, 3, 3, 3), 0.3)
    x = _sparse(rng, (2, 3, 8, 8), 0.3)
    assert explore(w, x, ExploreConfig("neuron", 4, 4), "weights")["imbalance_loss"] == 0
    rep = explore(w, x, ExploreConfig("synapse", 3, 3), "acts")
    assert rep["imbalance_loss"] == 0
    # more PEs sharing nothing -> more imbalance (fmap both: Tn*Tm queues)
    small = explore(w, x, ExploreConfig("fmap", 1, 2), "both")["imbalance_loss"]
    large = explore(w, x, ExploreConfig("fmap", 3, 4), "both")["imbalance_loss"]
    assert large > small


# ------------------------------------------------------------------ cross-check with gen/conv

CONV_CASES = [  # (oc, ic, h, w, k, stride, pad, rows, cols, mapping, icq, drain_rows)
    (96, 3, 8, 8, 3, 1, 1, 64, 4, "remainder", None, 1),     # drain-bound tiles
    (10, 4, 9, 7, 3, 2, 0, 4, 2, "naive", None, 1),
    (10, 4, 9, 7, 3, 1, 0, 4, 2, "seed", None, 1),
    (10, 5, 9, 7, 3, 1, 1, 4, 4, "remainder", 2, 2),          # input-channel chunks
    (20, 3, 6, 6, 5, 1, 2, 16, 4, "remainder", None, 4),
    (16, 8, 8, 8, 3, 1, 1, 16, 4, "remainder", None, 1),      # digits conv2
]


@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: f"{c[0]}ch-{c[7]}x{c[8]}-{c[9]}")
def test_array_matches_conv_cycle_model(case):
    conv = pytest.importorskip("gen.conv")
    oc, ic, h, wd, k, s, p, rows, cols, mapping, icq, drain = case
    ccfg = conv.ConvConfig(rows=rows, cols=cols, max_groups=min(4, rows), drain_rows=drain)
    layer = conv.ConvLayer(oc, ic, h, wd, k, k, s, p)
    sched = conv.plan(layer, ccfg, mapping, limit_buffers=False, icq=icq)
    rng = np.random.default_rng(oc)
    w, x = rng.integers(-3, 4, (oc, ic, k, k)), rng.integers(-3, 4, (ic, h, wd))
    rep = explore(w, x, ExploreConfig("array", rows, cols, s, p, mapping), "none",
                  sched=sched)
    # this model: tiles x max(kq, drain).  The RTL's cycle model adds, per pass and chunk,
    # the set-up, the stagger start-up and the pipeline (stall_free_cycles minus the beats);
    # when a tile is shorter than its copies' drain both models are drain-bound (the RTL
    # hides its set-up and stagger behind the drain), so only a lower bound holds there.
    beats = sum(p.count * p.tiles * q * k * k for p in sched.passes for q in sched.chunk_sizes)
    overhead = conv.stall_free_cycles(sched) - beats
    if rep["drain_idle_pe_cycles"] == 0:
        assert rep["cycles"] == beats
        assert conv.compute_cycles(sched) == rep["cycles"] + overhead
    else:
        assert conv.compute_cycles(sched) >= rep["cycles"] > beats
    assert rep["performed_macs"] == layer.macs == sched.busy_mac_cycles
    if rep["drain_idle_pe_cycles"] == 0:
        # and the busy fraction is the array's own utilisation over the beats
        assert rep["parallel_efficiency"] == pytest.approx(
            layer.macs / (rows * cols * sched.tiles * layer.k))


@pytest.mark.parametrize("rows, cols", [(8, 1), (1, 4), (5, 1), (1, 2)])
def test_fmap_and_neuron_are_the_array_edges(rows, cols):
    """Dense: a ``rows x 1`` array = fmap Tn=1, Tm=rows; a ``1 x cols`` array (row strips)
    = neuron Tr=1, Tc=cols.  The array is their product."""
    conv = pytest.importorskip("gen.conv")
    rng = np.random.default_rng(rows + cols)
    w, x = rng.integers(1, 3, (11, 3, 3, 3)), rng.integers(1, 3, (3, 7, 9))
    ccfg = conv.ConvConfig(rows=rows, cols=cols, max_groups=1, drain_rows=1)
    sched = conv.plan(conv.ConvLayer(11, 3, 7, 9, 3, 3), ccfg, "naive", limit_buffers=False)
    beats = sched.tiles * sched.layer.k
    other = ExploreConfig("fmap", 1, rows) if cols == 1 else ExploreConfig("neuron", 1, cols)
    assert explore(w, x, other, "none")["cycles"] == beats
    assert explore(w, x, ExploreConfig("array", rows, cols), "none", sched=sched)["cycles"] \
        == beats


# ------------------------------------------------------------------ validation and CLI

@pytest.mark.parametrize("kwargs, exc, message", [
    (dict(unroll="tree", a=1, b=1), ValueError,
     "unroll must be one of synapse, neuron, fmap, array, not 'tree'"),
    (dict(unroll="fmap", a=0, b=1), ValueError, "a must be between 1 and 1024, not 0"),
    (dict(unroll="fmap", a=2, b=2.5), TypeError, "b must be an integer, not 2.5"),
    (dict(unroll="fmap", a=2, b=2, stride=0), ValueError,
     "stride must be between 1 and 64, not 0"),
    (dict(unroll="array", a=2, b=2, mapping="best"), ValueError,
     "mapping must be one of naive, seed, remainder, not 'best'"),
])
def test_config_errors(kwargs, exc, message):
    with pytest.raises(exc, match="^" + message.replace("(", r"\(").replace(")", r"\)")
                       .replace(".", r"\.") + "$"):
        ExploreConfig(**kwargs)


def _files(tmp_path, w=None, x=None):
    rng = np.random.default_rng(0)
    w = _sparse(rng, (4, 2, 3, 3), 0.5) if w is None else w
    x = _sparse(rng, (2, 6, 6), 0.5) if x is None else x
    np.save(tmp_path / "w.npy", w)
    np.save(tmp_path / "x.npy", x)
    return str(tmp_path / "w.npy"), str(tmp_path / "x.npy")


def test_cli_report(tmp_path, capsys):
    wf, xf = _files(tmp_path)
    out = tmp_path / "r.json"
    assert main(["explore", "conv", "--weights", wf, "--input", xf, "--unroll", "neuron",
                 "--pe", "2x2", "--skip", "acts", "--pad", "1", "--report", str(out)]) == 0
    text = capsys.readouterr().out
    assert "imbalance loss" in text and "degree of freedom 4" in text
    rep = json.loads(out.read_text())
    expect = explore(np.load(wf), np.load(xf), ExploreConfig("neuron", 2, 2, pad=1), "acts")
    for key in ("cycles", "dense_cycles", "ideal_cycles", "useful_macs", "imbalance_loss"):
        assert rep[key] == expect[key]
    assert main(["explore", "conv", "--weights", wf, "--input", xf, "--unroll", "array",
                 "--pe", "4x2", "--lockstep", "--skip", "acts"]) == 0
    assert "lockstep" in capsys.readouterr().out


@pytest.mark.parametrize("shape_w, shape_x, extra, message", [
    ((4, 2, 3), (2, 6, 6), [], "--weights must be a 4-D array (M, N, Kh, Kw), not 3-D"),
    ((4, 2, 3, 3), (6, 6), [], "--input must be a 3-D (N, H, W) or 4-D (B, N, H, W) array"),
    ((4, 3, 3, 3), (2, 6, 6), [], "--weights have 3 input channels but --input has 2"),
    ((4, 2, 9, 9), (2, 6, 6), [], "kernel 9x9 is larger than the padded input 6x6"),
    ((4, 2, 3, 3), (2, 6, 6), ["--pe", "3by3"], "--pe must be AxB with positive integers"),
    ((4, 2, 3, 3), (2, 6, 6), ["--pe", "0x3"], "--pe sizes must be between 1 and 1024"),
    ((4, 2, 3, 3), (2, 6, 6), ["--stride", "x"], "--stride must be an integer, not 'x'"),
    ((4, 2, 3, 3), (2, 6, 6), ["--stride", "0"], "--stride must be between 1 and 64, not 0"),
    ((4, 2, 3, 3), (2, 6, 6), ["--pad", "-1"], "--pad must be between 0 and 64, not -1"),
    ((4, 2, 3, 3), (2, 6, 6), ["--unroll", "array", "--pe", "4x3"],
     "--pe for --unroll array: cols must be a power of two between 1 and 64, not 3"),
])
def test_cli_errors(tmp_path, capsys, shape_w, shape_x, extra, message):
    wf, xf = _files(tmp_path, np.ones(shape_w), np.ones(shape_x))
    args = ["explore", "conv", "--weights", wf, "--input", xf, "--unroll", "fmap",
            "--pe", "2x2"]
    # later options override earlier ones
    assert main(args + extra) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("spnn: error: " + message), err


def test_cli_file_errors(tmp_path, capsys):
    wf, xf = _files(tmp_path)
    assert main(["explore", "conv", "--weights", str(tmp_path / "no.npy"), "--input", xf,
                 "--unroll", "fmap", "--pe", "2x2"]) == 2
    assert "--weights: no such file" in capsys.readouterr().err
    np.save(tmp_path / "nan.npy", np.full((2, 6, 6), np.nan))
    assert main(["explore", "conv", "--weights", wf, "--input", str(tmp_path / "nan.npy"),
                 "--unroll", "fmap", "--pe", "2x2"]) == 2
    assert "--input: values must be finite" in capsys.readouterr().err
    proc = subprocess.run([sys.executable, "-m", "gen.cli", "explore", "conv", "--weights",
                           wf, "--input", xf, "--unroll", "systolic", "--pe", "2x2"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    with pytest.raises(SystemExit) as info:
        main(["explore", "conv", "--help"])
    assert info.value.code == 0 and "Examples" in capsys.readouterr().out


# ------------------------------------------------------------------ real data (torch)

@pytest.mark.slow
def test_train_cnn_digits(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("sklearn")
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "train_cnn_digits.py"),
                           "--out", str(tmp_path), "--images", "8"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    man = json.loads((tmp_path / "manifest.json").read_text())
    assert [lv["sparsity"] for lv in man["levels"]] == [0.0, 0.5, 0.7, 0.8, 0.9]
    # the FC layer is pruned too, to the level's sparsity capped at fc_max_sparsity
    assert [lv["fc_sparsity"] for lv in man["levels"]] == [0.0, 0.5, 0.7, 0.8, 0.8]
    assert list(man["layers"]) == ["conv1", "conv2", "conv3", "fc"]
    for level in man["levels"]:
        assert level["accuracy"] > 0.9
        assert list(level["layers"]) == list(man["layers"])
        for name, info in level["layers"].items():
            w = np.load(tmp_path / level["folder"] / f"{name}_w.npy")
            x = np.load(tmp_path / level["folder"] / f"{name}_x.npy")
            assert x.shape[0] == 8 and (x >= 0).all()
            assert info["weight_density"] == np.mean(w != 0)
            if name == "fc":
                assert w.shape == (10, 512) and x.shape == (8, 512)
                assert abs(np.mean(w == 0) - level["fc_sparsity"]) < 0.01
                continue
            assert abs(np.mean(w == 0) - level["sparsity"]) < 0.01
            rep = explore(w, x, ExploreConfig("fmap", 2, 4, pad=1), "both")
            assert rep["useful_macs"] <= rep["dense_macs"]
