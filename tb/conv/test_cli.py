# SPDX-License-Identifier: Apache-2.0
"""``spnn run conv``: layers of any size planned into jobs and run through the MAC array's
accelerator shell; the result == the golden model, the cycles == the exact shell model, the
report's figures; every bad input refused with one line naming the flag, nothing written."""

import json

import numpy as np
import pytest

from gen.conv import ref_conv


def _save(tmp_path, name, arr):
    path = tmp_path / name
    np.save(path, arr)
    return str(path)


def _sim():
    from gen.core.sim import sim_available
    return "icarus" if sim_available("icarus") else "verilator"


@pytest.mark.rtl
def test_cli_run(tmp_path, capsys):
    """A layer the planner cuts into jobs (a part of 8 channels and a remainder part, two
    strips), stride 2, remainder and naive mappings: exact sums, the report's end-to-end
    cycles (== the exact shell model, checked by the command) beside the roofline."""
    from gen.cli import main
    rng = np.random.default_rng(21)
    w = rng.integers(-128, 128, (10, 3, 3, 3))
    x = rng.integers(-128, 128, (3, 13, 11))
    reports = {}
    for mapping in ("remainder", "naive"):
        out, rep = tmp_path / f"y_{mapping}.npy", tmp_path / f"r_{mapping}.json"
        assert main(["run", "conv", "--weights", _save(tmp_path, "w.npy", w), "--input",
                     _save(tmp_path, "x.npy", x), "--stride", "2", "--array", "8x4",
                     "--mapping", mapping, "--out", str(out), "--report", str(rep),
                     "--sim", _sim()]) == 0
        np.testing.assert_array_equal(np.load(out), ref_conv(x, w, 2, 1))
        reports[mapping] = r = json.loads(rep.read_text())
        assert r["block"] == "conv" and r["array"] == "8x4" and r["interface"] == "axi"
        assert r["rtl_matches_golden"] is True and r["rtl_matches_model"] is True
        assert r["end_to_end_cycles"] == r["cycles"] == sum(r["job_cycles"])
        assert r["end_to_end_model_cycles"] == r["cycles"]        # the shell model's own sum
        assert r["cycles"] >= r["roofline_cycles"] >= r["compute_bound_cycles"]
        macs = 10 * 27 * 7 * 6
        assert r["macs"] == macs and r["compute_bound_cycles"] == -(-macs // 32)
        assert r["utilisation"] == macs / (32 * r["cycles"]) < r["compute_utilisation"] <= 1
        assert r["jobs"] == len(r["plan"]) == len(r["n_per_pass"]) >= 2
        assert all({"fold", "icq", "resident", "span", "pack"} <= set(j) for j in r["plan"])
        assert r["bus_words"] == 4 and r["w_lanes"] == 4
    assert set(reports["naive"]["n_per_pass"]) == {1}
    assert max(reports["remainder"]["n_per_pass"]) == 2
    assert "cycles end to end" in capsys.readouterr().out


@pytest.mark.rtl
def test_cli_batch_and_bus(tmp_path):
    """A batch of images ``(B, Ic, H, W)`` -> ``(B, Oc, Ho, Wo)``, 8 words per beat, one
    copy at most; a 1 x 1 kernel at stride 2 (the host subsamples)."""
    from gen.cli import main
    rng = np.random.default_rng(41)
    w = rng.integers(-128, 128, (5, 2, 3, 3))
    x = rng.integers(-128, 128, (3, 2, 5, 6))
    out, rep = tmp_path / "y.npy", tmp_path / "r.json"
    assert main(["run", "conv", "--weights", _save(tmp_path, "w.npy", w), "--input",
                 _save(tmp_path, "x.npy", x), "--array", "8x4", "--bus-words", "8",
                 "--copies", "1", "--out", str(out), "--report", str(rep), "--sim",
                 _sim()]) == 0
    y = np.load(out)
    assert y.shape == (3, 5, 5, 6)
    np.testing.assert_array_equal(y, np.stack([ref_conv(xi, w, 1, 1) for xi in x]))
    r = json.loads(rep.read_text())
    assert r["batch"] == 3 and r["bus_words"] == 8 and set(r["n_per_pass"]) == {1}
    w1 = rng.integers(-128, 128, (4, 3, 1, 1))
    x1 = rng.integers(-128, 128, (3, 7, 8))
    assert main(["run", "conv", "--weights", _save(tmp_path, "w1.npy", w1), "--input",
                 _save(tmp_path, "x1.npy", x1), "--stride", "2", "--pad", "0", "--array",
                 "8x4", "--out", str(out), "--sim", _sim()]) == 0
    np.testing.assert_array_equal(np.load(out), ref_conv(x1, w1, 2, 0))


@pytest.mark.rtl
def test_cli_requant(tmp_path):
    """``--requant 8 --bias --mult --shift --relu``: the shell's stage on every job (two
    channel parts, each loading its channels' biases) == the golden stage on the exact
    sums; the report names the stage and the 8-bit output."""
    from gen.cli import main
    from gen.core.fixed import requant_sums
    rng = np.random.default_rng(9)
    w, x = rng.integers(-128, 128, (10, 3, 3, 3)), rng.integers(-128, 128, (3, 9, 7))
    b = rng.integers(-5000, 5000, 10)
    out, rep = tmp_path / "y.npy", tmp_path / "r.json"
    assert main(["run", "conv", "--weights", _save(tmp_path, "w.npy", w), "--input",
                 _save(tmp_path, "x.npy", x), "--array", "8x4", "--requant", "8", "--bias",
                 _save(tmp_path, "b.npy", b), "--mult", "3", "--shift", "10", "--relu",
                 "--out", str(out), "--report", str(rep), "--sim", _sim()]) == 0
    want = requant_sums(ref_conv(x, w, 1, 1), b[:, None, None], mult=3, shift=10, width=8,
                        relu=True)
    got = np.load(out)
    np.testing.assert_array_equal(got, want)
    assert got.min() == 0 and got.max() == 127           # the ReLU and saturation acted
    r = json.loads(rep.read_text())
    assert r["requant"] == {"bits": 8, "mult": 3, "shift": 10, "relu": True, "bias": True}
    assert r["formats"]["output"] == "int8" and r["rtl_matches_model"] is True
    assert r["jobs"] >= 2


@pytest.mark.parametrize("case, extra, message", [
    ("w2d", [], "--weights must have shape (Oc, Ic, kh, kw), not (3, 3)"),
    ("x2d", [], "--input must have shape (Ic, H, W) or (B, Ic, H, W), not (3, 3)"),
    ("x5d", [], "--input must have shape (Ic, H, W) or (B, Ic, H, W), not (1, 2, 3, 5, 5)"),
    ("ic", [], "--weights has 2 input channels but --input has 3"),
    ("empty", [], "--input must not be empty, not shape (0, 3, 5, 5)"),
    ("float", [], "--input must hold integers, not float64"),
    ("range", [], "--weights: value 300 lies outside [-128, 127] (8-bit signed codes of "
     "--weight-width 8)"),
    ("ok", ["--array", "16by4"], "--array must be ROWSxCOLS, e.g. 16x4, not '16by4'"),
    ("ok", ["--array", "8x3"], "--array must be ROWSxCOLS with ROWS 1..512 and COLS a power "
     "of two 1..64, not '8x3'"),
    ("ok", ["--mapping", "seed"], "--mapping must be one of naive, remainder, not 'seed'"),
    ("ok", ["--stride", "0"], "--stride must be between 1 and 7, not 0"),
    ("ok", ["--stride", "8"], "--stride must be between 1 and 7, not 8"),
    ("ok", ["--copies", "3"], "--copies must be 1, 2, 4 or 8, not 3"),
    ("ok", ["--array", "2x4", "--copies", "4"], "copies must be at most rows (2), not 4"),
    ("ok", ["--bus-words", "33"], "--bus-words must be between 1 and 32, not 33"),
    ("ok", ["--bus-words", "8", "--w-lanes", "4"], "--w-lanes must equal --bus-words (8)"),
    ("ok", ["--skip-pad"], "--skip-pad does not apply"),
    ("ok", ["--relu"], "--relu needs --requant BITS"),
    ("ok", ["--requant", "1"], "--requant must be between 2 and 32, not 1"),
    ("bias5", ["--requant", "8"], "--bias must have shape (4,), one per channel, not (5,)"),
    ("ok", ["--data-width", "19"], "--data-width must be between 2 and 18, not 19"),
    ("kernel", ["--pad", "0"], "kernel 5x5 is larger than the padded input 3x3"),
    ("k16", [], "--weights kernel must be at most 15x15, not 16x16"),
    ("wide", ["--data-width", "18", "--weight-width", "18"], "--weights: a sum of 8192 "
     "products of --data-width 18 and --weight-width 18 codes can reach 140737488355328, "
     "beyond the 48-bit sums"),
    ("missing", [], "--weights: no such file"),
])
def test_cli_errors(tmp_path, capsys, case, extra, message):
    from gen.cli import main
    w = np.ones((4, 3, 3, 3), dtype=np.int64)
    x = np.ones((3, 5, 5), dtype=np.int64)
    if case == "w2d":
        w = np.ones((3, 3), dtype=np.int64)
    elif case == "x2d":
        x = np.ones((3, 3), dtype=np.int64)
    elif case == "x5d":
        x = np.ones((1, 2, 3, 5, 5), dtype=np.int64)
    elif case == "ic":
        w = np.ones((4, 2, 3, 3), dtype=np.int64)
    elif case == "empty":
        x = np.ones((0, 3, 5, 5), dtype=np.int64)
    elif case == "float":
        x = np.ones((3, 5, 5)) * 0.5
    elif case == "range":
        w = np.arange(4 * 3 * 9).reshape(4, 3, 3, 3) * 3 % 301
        w.flat[0], w.flat[1] = 0, 300
    elif case == "kernel":
        w, x = np.ones((4, 3, 5, 5), dtype=np.int64), np.ones((3, 3, 3), dtype=np.int64)
    elif case == "wide":
        w, x = np.ones((2, 512, 4, 4), dtype=np.int64), np.ones((512, 5, 5), dtype=np.int64)
    elif case == "k16":
        w, x = np.ones((4, 3, 16, 16), dtype=np.int64), np.ones((3, 20, 20), dtype=np.int64)
    if case == "bias5":
        extra = extra + ["--bias", _save(tmp_path, "b.npy", np.zeros(5, dtype=np.int64))]
    out, rep = tmp_path / "y.npy", tmp_path / "r.json"
    wpath = _save(tmp_path, "w.npy", w) if case != "missing" else str(tmp_path / "none.npy")
    assert main(["run", "conv", "--weights", wpath, "--input", _save(tmp_path, "x.npy", x),
                 "--array", "8x4", "--out", str(out), "--report", str(rep)] + extra) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not out.exists() and not rep.exists()
