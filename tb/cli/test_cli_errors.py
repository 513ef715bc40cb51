# SPDX-License-Identifier: Apache-2.0
"""Every bad input to every ``spnn`` subcommand is refused before any work.

The contract (docs/cli.md): exit code 2, exactly one line on stderr (``... error: ...``), no
traceback, nothing on stdout, and the output folder unchanged (no new, changed or removed
file).  The cases are generated from tables: per subcommand a valid command line, its input
files, numeric flags, format flags and outputs; every bad-input class is then applied to
each of them.  ``test_every_flag_is_covered`` fails when a subcommand gains a flag that the
tables do not cover.  Every case runs in-process (no simulation is ever reached: a case that
wrongly passed the checks would start one and fail on its exit code); a few go through a
real subprocess to pin the exit code and the one-line stderr of the installed entry point.
"""

import argparse
import contextlib
import io
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gen.cli import build_parser, main

EVIDENCE = "pickle-code-ran"   # a file that a pickled payload would create if it were run


class _Payload:
    """Unpickling this runs ``open(EVIDENCE, 'w')``: proof that a loader ran pickled code."""

    def __init__(self, folder):
        self.path = str(Path(folder) / EVIDENCE)

    def __reduce__(self):
        return (open, (self.path, "w"))


def _files(root: Path) -> dict:
    """The good inputs every case starts from and one file per bad-input class."""
    rng = np.random.default_rng(7)
    arrays = {
        # good inputs
        "x1": np.linspace(-1, 1, 8), "W2": rng.normal(0, 0.2, (6, 8)),
        "X2": rng.normal(0, 0.5, (8, 3)), "Wc": rng.integers(-3, 4, (2, 3, 3, 3)),
        "Xc": rng.integers(-3, 4, (3, 6, 6)), "seq": rng.normal(0, 0.5, (3, 4)),
        "Xs": rng.integers(-3, 4, (3, 2, 2)),
        # bad arrays
        "nan": np.array([0.0, np.nan] * 4), "inf": np.array([0.0, np.inf] * 4),
        "ninf": np.full((6, 8), -np.inf), "complex": np.ones(8, dtype=complex),
        "text": np.array(["a"] * 8), "struct": np.zeros(8, dtype=[("a", "i4")]),
        "empty1": np.zeros(0), "empty2": np.zeros((0, 8)), "empty4": np.zeros((0, 3, 3, 3)),
        "scalar": np.float64(1.0), "nd5": np.zeros((1, 1, 1, 1, 1)),
        "u64": np.full(8, 2 ** 64 - 1, dtype=np.uint64),
        "u64m": np.full((6, 8), 2 ** 63, dtype=np.uint64),
        "i64big": np.full((6, 8), 2 ** 62, dtype=np.int64),
        "big": np.full((6, 8), 1e6), "x7": np.zeros(7),
    }
    paths = {}
    for name, arr in arrays.items():
        paths[name] = root / f"{name}.npy"
        np.save(paths[name], arr)
    paths["pickled"] = root / "pickled.npy"
    np.save(paths["pickled"], np.array([_Payload(root)] * 8, dtype=object), allow_pickle=True)
    paths["npz"] = root / "arrays.npz"
    np.savez(paths["npz"], x=np.ones(8))
    good = paths["x1"].read_bytes()
    for name, data in (("truncated", good[:len(good) - 9]), ("headonly", good[:80]),
                       ("zerobytes", b""), ("garbage", b"\x93NUMPY\x01\x00garbage" * 8)):
        paths[name] = root / f"{name}.npy"
        paths[name].write_bytes(data)
    paths["folder"] = root / "folder.npy"
    paths["folder"].mkdir()
    paths["missing"] = root / "missing.npy"
    # LSTM models: a good .npz state dict, a .pt whose pickle would run code
    h, x = 4, 4
    paths["model"] = root / "model.npz"
    np.savez(paths["model"], weight_ih_l0=rng.normal(0, 0.3, (4 * h, x)),
             weight_hh_l0=rng.normal(0, 0.3, (4 * h, h)), bias_ih_l0=np.zeros(4 * h),
             bias_hh_l0=np.zeros(4 * h))
    paths["model_nan"] = root / "model_nan.npz"
    np.savez(paths["model_nan"], weight_ih_l0=np.full((4 * h, x), np.nan),
             weight_hh_l0=np.zeros((4 * h, h)))
    paths["model_big"] = root / "model_big.npz"
    np.savez(paths["model_big"], weight_ih_l0=np.full((4 * h, x), 100.0),
             weight_hh_l0=np.zeros((4 * h, h)))
    paths["evil_pt"] = root / "evil.pt"
    with open(paths["evil_pt"], "wb") as handle:
        pickle.dump({"weight_ih_l0": _Payload(root)}, handle)
    _fdcsr_files(root, paths)
    paths["a_file"] = root / "a_file"
    paths["a_file"].write_text("not a folder\n")
    return paths


def _fdcsr_files(root: Path, paths: dict):
    """A good FD-CSR file and one per broken field."""
    from gen.fc import encode, save
    good = encode(np.array([[0.0, 1.5, 0.0, 2.0] * 4, [0.0] * 16]), 16)
    fields = {"format": np.array("fdcsr"), "version": np.array(1),
              "shape": np.array(good.shape), "row_width": np.array(16),
              "values": good.values, "masks": good.masks, "offsets": good.offsets}
    paths["fdcsr"] = root / "good.fdcsr.npz"
    save(paths["fdcsr"], good)
    broken = {
        "fd_nan": {"values": np.array([1.5, np.nan, 1.5, 2.0, 1.5, 2.0, 1.5, 2.0])},
        "fd_inf": {"values": np.full(8, np.inf)},
        "fd_zero": {"values": np.zeros(8)},
        "fd_shape0d": {"shape": np.array(3)},
        "fd_shape3d": {"shape": np.array([2, 2, 4])},
        "fd_width": {"row_width": np.array(12)},
        "fd_width_text": {"row_width": np.array("16")},
        "fd_masks": {"masks": good.masks.astype(np.int64) - 1},
        "fd_offsets": {"offsets": good.offsets + 1},
        "fd_count": {"values": good.values[:-1]},
        "fd_version": {"version": np.array(7)},
        "fd_values_text": {"values": np.array(["a"] * 8)},
        "fd_masks_2d": {"masks": good.masks.reshape(1, -1)},
    }
    for name, change in broken.items():
        paths[name] = root / f"{name}.npz"
        np.savez(paths[name], **{**fields, **change})
    paths["fd_missing"] = root / "fd_missing.npz"
    np.savez(paths["fd_missing"], **{k: v for k, v in fields.items() if k != "masks"})


# ----------------------------------------------------------------------------- the tables

# Bad-input classes applied to every .npy input flag: file key -> what it is.
BAD_ARRAYS = ["nan", "inf", "complex", "text", "struct", "pickled", "npz", "truncated",
              "headonly", "zerobytes", "garbage", "folder", "missing", "empty1", "empty2",
              "empty4", "scalar", "nd5", "u64"]
BAD_INTS = ["abc", "1.5", "nan", "inf", "-1", "99999999999999999999", "", "0x"]
BAD_FLOATS = ["abc", "nan", "inf", "-inf", "-1", "1e400", ""]
BAD_FORMATS = ["Q4", "Q0.0", "Q40.40", "int0", "abc", "Q2.-1", "Q.5", ""]

# Per subcommand: a valid command line (with {name} standing for a file path), the .npy
# input flags, integer flags, float flags, format flags, file outputs (flag, suffix) and
# folder outputs.  Flags not listed must be named in OTHER (choices, switches) or the
# coverage test fails.
COMMANDS = {
    "run pwl": dict(
        argv=["run", "pwl", "--func", "tanh", "--input", "{x1}"],
        arrays=["--input"], ints=["--segments", "--seed", "--bus-words",
              "--w-lanes"], floats=[],
        formats=["--in-fmt", "--out-fmt"], files=["--out", "--report"], folders=[],
        other={"--func", "--raw", "--sim", "--engine", "--waves"},
        valid={"scalar", "nd5"}),   # any shape, a 0-d one included
    "run spmv": dict(
        argv=["run", "spmv", "--weights", "{W2}", "--x", "{x1}"],
        arrays=["--weights", "--x"],
        ints=["--pes", "--fifo-depth", "--acc-width", "--rows-per-pe", "--max-cols",
              "--mem-depth", "--w-lanes", "--drain-lanes", "--seed", "--bus-words"],
        floats=["--density", "--w-valid-prob"], formats=["--w-fmt", "--x-fmt", "--out-fmt"],
        files=["--out", "--report"], folders=[], other={"--alloc", "--sim", "--engine", "--waves"}),
    "run fc": dict(
        argv=["run", "fc", "--weights", "{W2}", "--x", "{X2}"],
        arrays=["--weights", "--x"], ints=["--lanes", "--segs-per-beat", "--seed",
                                           "--bus-words"],
        floats=[], formats=["--w-fmt", "--x-fmt"], files=["--out", "--report"], folders=[],
        other={"--raw", "--sim", "--engine", "--waves"}),
    "run conv": dict(
        argv=["run", "conv", "--weights", "{Wc}", "--input", "{Xc}"],
        arrays=["--weights", "--input"],
        ints=["--stride", "--pad", "--data-width", "--weight-width", "--seed", "--bus-words",
              "--w-lanes"],
        floats=[],
        formats=[], files=["--out", "--report"], folders=[],
        other={"--array", "--mapping", "--skip-pad", "--sim", "--engine", "--waves",
               # the requantisation flags: "run conv --requant" below
               "--requant", "--bias", "--mult", "--shift", "--relu",
               # the banked array's: "run conv --banked" below
               "--banked", "--copies"}),
    # the banked array's shell: its flags' bad values with --banked given
    "run conv --banked": dict(
        argv=["run", "conv", "--weights", "{Wc}", "--input", "{Xc}", "--banked"],
        arrays=["--weights", "--input"],
        ints=["--stride", "--pad", "--data-width", "--weight-width", "--seed", "--bus-words",
              "--copies"],
        floats=[], formats=[], files=["--out", "--report"], folders=[], other=set()),
    # the shell's requantisation stage: its flags' bad values with the flags they need given
    "run conv --requant": dict(
        argv=["run", "conv", "--weights", "{Wc}", "--input", "{Xc}", "--bus-words", "4",
              "--requant", "8"],
        arrays=["--bias"], ints=["--requant", "--mult", "--shift"], floats=[], formats=[],
        files=[], folders=[], other=set()),
    "run lstm": dict(
        argv=["run", "lstm", "--model", "{model}", "--input", "{seq}"],
        arrays=["--input", "--h0", "--c0"],
        ints=["--pes", "--fifo-depth", "--mem-depth", "--segments", "--seed", "--bus-words",
              "--w-lanes"],
        floats=["--density"],
        formats=["--w-fmt", "--x-fmt", "--c-fmt", "--b-fmt", "--pre-fmt", "--act-fmt"],
        files=["--out", "--report"], folders=[],
        other={"--model", "--alloc", "--sim", "--engine", "--waves"}),
    "explore conv": dict(
        argv=["explore", "conv", "--weights", "{Wc}", "--input", "{Xc}", "--unroll", "fmap",
              "--pe", "2x2"],
        arrays=["--weights", "--input"],
        ints=["--stride", "--pad", "--groups", "--drain-rows"], floats=[], formats=[],
        files=["--report"], folders=[],
        other={"--unroll", "--pe", "--skip", "--lockstep", "--mapping"}),
    "encode": dict(
        argv=["encode", "fdcsr", "{W2}", "-o", "{out}/w.npz"], arrays=["WEIGHTS"],
        ints=["--row-width"], floats=[], formats=[], files=["-o"], folders=[], other=set(),
        valid={"u64"}),   # FD-CSR keeps the dtype: uint64 values are stored exactly
    "decode": dict(
        argv=["decode", "{fdcsr}", "-o", "{out}/w.npy"], arrays=[], ints=[], floats=[],
        formats=[], files=["-o"], folders=[], other=set()),
    "verilog": dict(
        argv=["verilog", "pwl", "-o", "{out}/v"], arrays=[], ints=[], floats=[], formats=[],
        files=[], folders=["-o"], other={"--all", "--set"}),
    "info": dict(argv=["info", "pwl"], arrays=[], ints=[], floats=[], formats=[], files=[],
                 folders=[], other={"--set", "--json"}),
    "synth": dict(
        argv=["synth", "pwl", "--target", "xc7", "-o", "{out}/s"], arrays=[],
        ints=["--seed", "--timing-weight", "--crit-exp"], floats=["--freq"], formats=[],
        files=[], folders=["-o"],
        other={"--all", "--set", "--target", "--router", "--placer", "--shell"}),
    "vivado": dict(
        argv=["vivado", "pwl", "-o", "{out}/v"], arrays=[], ints=[], floats=["--freq"],
        formats=[], files=[], folders=["-o"], other={"--all", "--set", "--part"}),
}

# Where a flag takes a file path of the command's own kind, positional or not.
POSITIONAL_ARRAY = {"WEIGHTS"}


def _replace(argv, flag, value):
    """``argv`` with ``flag``'s value set to ``value`` (appended if absent)."""
    argv = list(argv)
    if flag in POSITIONAL_ARRAY:
        return [value if a == "{W2}" else a for a in argv]
    if flag in argv:
        argv[argv.index(flag) + 1] = value
        return argv
    return argv + [flag, value]


def _cases():
    """(id, argv) of every bad command line the tables describe."""
    cases = []
    for name, spec in COMMANDS.items():
        base = spec["argv"]
        for flag in spec["arrays"]:
            for bad in [b for b in BAD_ARRAYS if b not in spec.get("valid", ())]:
                cases.append((f"{name} {flag} {bad}", _replace(base, flag, f"{{{bad}}}")))
        for flag in spec["ints"]:
            for bad in BAD_INTS:
                cases.append((f"{name} {flag}={bad!r}", _replace(base, flag, bad)))
        for flag in spec["floats"]:
            for bad in BAD_FLOATS:
                cases.append((f"{name} {flag}={bad!r}", _replace(base, flag, bad)))
        for flag in spec["formats"]:
            for bad in BAD_FORMATS:
                cases.append((f"{name} {flag}={bad!r}", _replace(base, flag, bad)))
        for flag in spec["files"]:
            for bad, where in (("folder", "{out}/existing_folder"),
                               ("under a file", "{a_file}/y.npy"), ("empty", "")):
                cases.append((f"{name} {flag} {bad}", _replace(base, flag, where)))
        for flag in spec["folders"]:
            for bad, where in (("file", "{a_file}"), ("under a file", "{a_file}/sub")):
                cases.append((f"{name} {flag} {bad}", _replace(base, flag, where)))
    return cases


# Command-specific classes: shape mismatch, wrong dimensionality, out-of-range values,
# unknown --set keys, bad --set values, corrupt FD-CSR files, models that must not load.
SPECIFIC = [
    ("pwl good --out, bad --report", ["run", "pwl", "--func", "tanh", "--input", "{x1}",
                                       "--out", "{out}/new.npy", "--report",
                                       "{out}/existing_folder"]),
    ("spmv good --out, report under a file",
     ["run", "spmv", "--weights", "{W2}", "--x", "{x1}", "--out", "{out}/new.npy",
      "--report", "{a_file}/r.json"]),
    ("pwl --out without .npy", ["run", "pwl", "--func", "tanh", "--input", "{x1}",
                                "--out", "{out}/y"]),
    ("pwl --out = --report", ["run", "pwl", "--func", "tanh", "--input", "{x1}",
                              "--out", "{out}/same.npy", "--report", "{out}/same.npy"]),
    ("spmv shape mismatch", ["run", "spmv", "--weights", "{W2}", "--x", "{x7}"]),
    ("spmv 1-D weights", ["run", "spmv", "--weights", "{x1}", "--x", "{x1}"]),
    ("spmv x 2-D", ["run", "spmv", "--weights", "{W2}", "--x", "{W2}"]),
    ("spmv uint64 weights", ["run", "spmv", "--weights", "{u64m}", "--x", "{x1}"]),
    ("spmv uint64 weights, given format",
     ["run", "spmv", "--weights", "{u64m}", "--x", "{x1}", "--w-fmt", "int32"]),
    ("spmv integer too wide", ["run", "spmv", "--weights", "{i64big}", "--x", "{x1}"]),
    ("spmv float clipped", ["run", "spmv", "--weights", "{big}", "--x", "{x1}"]),
    ("spmv -inf", ["run", "spmv", "--weights", "{ninf}", "--x", "{x1}"]),
    ("spmv density on ints", ["run", "spmv", "--weights", "{u64m}", "--x", "{x1}",
                              "--density", "0.5"]),
    ("spmv lanes above pes", ["run", "spmv", "--weights", "{W2}", "--x", "{x1}", "--pes", "2",
                              "--w-lanes", "4"]),
    ("spmv pes 0", ["run", "spmv", "--weights", "{W2}", "--x", "{x1}", "--pes", "0"]),
    ("spmv pes 257", ["run", "spmv", "--weights", "{W2}", "--x", "{x1}", "--pes", "257"]),
    ("spmv density 1.5", ["run", "spmv", "--weights", "{W2}", "--x", "{x1}",
                          "--density", "1.5"]),
    ("fc shape mismatch", ["run", "fc", "--weights", "{W2}", "--x", "{W2}"]),
    ("fc 3-D x", ["run", "fc", "--weights", "{W2}", "--x", "{Xc}"]),
    ("fc uint64 --raw", ["run", "fc", "--weights", "{u64m}", "--x", "{X2}", "--raw"]),
    ("fc uint64", ["run", "fc", "--weights", "{u64m}", "--x", "{X2}"]),
    ("fc float --raw", ["run", "fc", "--weights", "{W2}", "--x", "{X2}", "--raw"]),
    ("fc float clipped", ["run", "fc", "--weights", "{big}", "--x", "{X2}"]),
    ("fc lanes 5", ["run", "fc", "--weights", "{W2}", "--x", "{X2}", "--lanes", "5"]),
    ("fc segs 3", ["run", "fc", "--weights", "{W2}", "--x", "{X2}", "--segs-per-beat", "3"]),
    ("fc wide format", ["run", "fc", "--weights", "{W2}", "--x", "{X2}", "--w-fmt", "Q20.20"]),
    ("pwl float --raw", ["run", "pwl", "--func", "tanh", "--input", "{x1}", "--raw"]),
    ("pwl uint64 --raw", ["run", "pwl", "--func", "tanh", "--input", "{u64}", "--raw"]),
    ("pwl clipped", ["run", "pwl", "--func", "tanh", "--input", "{big}"]),
    ("pwl bad func", ["run", "pwl", "--func", "relu", "--input", "{x1}"]),
    ("pwl segments 12", ["run", "pwl", "--func", "tanh", "--input", "{x1}",
                         "--segments", "12"]),
    ("pwl out-fmt narrow", ["run", "pwl", "--func", "tanh", "--input", "{x1}",
                            "--out-fmt", "Q2.1"]),
    ("conv channels mismatch", ["run", "conv", "--weights", "{Wc}", "--input", "{seq}"]),
    ("conv float weights", ["run", "conv", "--weights", "{W2}", "--input", "{Xc}"]),
    ("conv uint64 input", ["run", "conv", "--weights", "{Wc}", "--input", "{u64m}"]),
    ("conv array 8x3", ["run", "conv", "--weights", "{Wc}", "--input", "{Xc}",
                        "--array", "8x3"]),
    ("conv array text", ["run", "conv", "--weights", "{Wc}", "--input", "{Xc}",
                         "--array", "big"]),
    ("conv array 0x4", ["run", "conv", "--weights", "{Wc}", "--input", "{Xc}",
                        "--array", "0x4"]),
    ("conv mapping", ["run", "conv", "--weights", "{Wc}", "--input", "{Xc}",
                      "--mapping", "best"]),
    ("conv width 19", ["run", "conv", "--weights", "{Wc}", "--input", "{Xc}",
                       "--data-width", "19"]),
    ("conv kernel > input", ["run", "conv", "--weights", "{Wc}", "--input", "{Xs}",
                             "--pad", "0"]),
    ("lstm evil .pt", ["run", "lstm", "--model", "{evil_pt}", "--input", "{seq}"]),
    ("lstm .npy as model", ["run", "lstm", "--model", "{x1}", "--input", "{seq}"]),
    ("lstm model folder", ["run", "lstm", "--model", "{folder}", "--input", "{seq}"]),
    ("lstm model missing", ["run", "lstm", "--model", "{missing}", "--input", "{seq}"]),
    ("lstm model npz without keys", ["run", "lstm", "--model", "{npz}", "--input", "{seq}"]),
    ("lstm model NaN", ["run", "lstm", "--model", "{model_nan}", "--input", "{seq}"]),
    ("lstm weights clipped", ["run", "lstm", "--model", "{model_big}", "--input", "{seq}"]),
    ("lstm input shape", ["run", "lstm", "--model", "{model}", "--input", "{W2}"]),
    ("lstm input clipped", ["run", "lstm", "--model", "{model}", "--input", "{big}"]),
    ("lstm h0 shape", ["run", "lstm", "--model", "{model}", "--input", "{seq}",
                       "--h0", "{x1}"]),
    ("lstm density 0", ["run", "lstm", "--model", "{model}", "--input", "{seq}",
                        "--density", "0"]),
    ("lstm pes 0", ["run", "lstm", "--model", "{model}", "--input", "{seq}", "--pes", "0"]),
    ("explore pe 0x2", ["explore", "conv", "--weights", "{Wc}", "--input", "{Xc}",
                        "--unroll", "fmap", "--pe", "0x2"]),
    ("explore pe text", ["explore", "conv", "--weights", "{Wc}", "--input", "{Xc}",
                         "--unroll", "fmap", "--pe", "axb"]),
    ("explore channels", ["explore", "conv", "--weights", "{Wc}", "--input", "{seq}",
                          "--unroll", "fmap", "--pe", "2x2"]),
    ("explore unroll", ["explore", "conv", "--weights", "{Wc}", "--input", "{Xc}",
                        "--unroll", "tile", "--pe", "2x2"]),
    ("encode 3-D", ["encode", "fdcsr", "{Wc}", "-o", "{out}/w.npz"]),
    ("encode -o .npy", ["encode", "fdcsr", "{W2}", "-o", "{out}/w.npy"]),
    ("encode row width 12", ["encode", "fdcsr", "{W2}", "-o", "{out}/w.npz",
                             "--row-width", "12"]),
    ("decode -o .npz", ["decode", "{fdcsr}", "-o", "{out}/w.npz"]),
    ("verilog unknown block", ["verilog", "nosuch", "-o", "{out}/v"]),
    ("verilog no block", ["verilog", "-o", "{out}/v"]),
    ("verilog --all with block", ["verilog", "--all", "pwl", "-o", "{out}/v"]),
    ("verilog --set no =", ["verilog", "pwl", "--set", "segments", "-o", "{out}/v"]),
    ("info unknown block", ["info", "nosuch"]),
    ("synth freq 0", ["synth", "pwl", "--target", "xc7", "--freq", "0"]),
    ("synth freq 1001", ["synth", "pwl", "--target", "xc7", "--freq", "1001"]),
    ("synth target", ["synth", "pwl", "--target", "ice41"]),
    ("synth heap setting, static placer",
     ["synth", "pwl", "--target", "ecp5", "--placer", "static", "--crit-exp", "3"]),
    ("vivado part", ["vivado", "pwl", "--part", "xc7 bad", "-o", "{out}/v"]),
]
for key in ("fd_nan", "fd_inf", "fd_zero", "fd_shape0d", "fd_shape3d", "fd_width",
            "fd_width_text", "fd_masks", "fd_offsets", "fd_count", "fd_version",
            "fd_values_text", "fd_masks_2d", "fd_missing", "x1", "npz", "folder", "missing",
            "zerobytes", "truncated", "pickled"):
    SPECIFIC.append((f"decode {key}", ["decode", f"{{{key}}}", "-o", "{out}/w.npy"]))


def _set_cases():
    """Unknown keys and a bad value of every field of every block's config via --set."""
    from gen.registry import BLOCKS
    from tb.cli.values import bad_values
    cases = []
    for name, block in BLOCKS.items():
        cases.append((f"info {name} --set unknown", ["info", name, "--set", "colour=red"]))
        for field, values in bad_values(block.config_cls).items():
            for value in values:
                cases.append((f"info {name} --set {field}={value!r}",
                              ["info", name, "--set", f"{field}={value}"]))
    return cases


ALL_CASES = _cases() + SPECIFIC + _set_cases()


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return _files(tmp_path_factory.mktemp("inputs"))


# Where each command's work starts: a refused command must never get there.
WORK = (("gen.pwl.cli", "rtl_pwl"), ("gen.pwl.cli", "rtl_pwl_axi"), ("gen.spmv.cli", "run_jobs"), ("gen.fc.cli", "rtl_fc"),
        ("gen.conv.cli", "rtl_banked_axi"),
        ("gen.lstm.cli", "rtl_lstm"), ("gen.synth", "synth"),
        ("gen.synth", "vivado_files"), ("gen.core.emit", "emit_files"))


def _stub_work(monkeypatch, stub, skip=()):
    import importlib
    for module, name in WORK:
        if (module, name) not in skip:
            monkeypatch.setattr(importlib.import_module(module), name, stub)


@pytest.fixture
def no_work(monkeypatch):
    """Any RTL run, synthesis or Verilog emission fails the test at once: a refused
    command must not reach them (and a wrongly accepted one must not cost a simulation)."""
    def reached(*args, **kwargs):
        raise AssertionError("the command reached its work instead of refusing the input")

    _stub_work(monkeypatch, reached)


def _snapshot(folder: Path) -> dict:
    return {str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else None)
            for p in sorted(folder.rglob("*"))}


def _refused(argv):
    """Run ``argv`` in-process: (exit code, stdout, stderr); a traceback fails the test."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:     # argparse's usage errors
            code = exc.code
    return code, out.getvalue(), err.getvalue()


def check_contract(argv, out: Path):
    """exit 2, one line on stderr, no traceback, nothing on stdout, ``out`` unchanged."""
    (out / "existing_folder").mkdir(exist_ok=True)
    (out / "y.npy").write_bytes(b"a good file from an earlier run")
    before = _snapshot(out)
    code, stdout, stderr = _refused(argv)
    assert code == 2, f"exit {code}; stderr: {stderr!r}"
    assert stderr.count("\n") == 1 and stderr.endswith("\n"), stderr
    assert " error: " in stderr and "Traceback" not in stderr, stderr
    assert stdout == "", stdout
    assert _snapshot(out) == before


def _fill(argv, files, out):
    names = {**{k: str(v) for k, v in files.items()}, "out": str(out)}
    return [a.format(**names) for a in argv]


@pytest.mark.parametrize("argv", [c[1] for c in ALL_CASES], ids=[c[0] for c in ALL_CASES])
def test_bad_input_is_refused(argv, files, tmp_path, no_work):
    check_contract(_fill(argv, files, tmp_path), tmp_path)
    assert not (files["x1"].parent / EVIDENCE).exists(), "a loader ran pickled code"


def test_good_command_lines_pass_the_checks(files, tmp_path, monkeypatch):
    """The base command lines are valid: each reaches the work (stubbed out here), so every
    refusal above is caused by the one bad value it changes."""
    class Reached(Exception):
        pass

    def stop(*args, **kwargs):
        raise Reached

    _stub_work(monkeypatch, stop, skip={("gen.core.emit", "emit_files")})
    for name, spec in COMMANDS.items():
        argv = _fill(spec["argv"], files, tmp_path)
        try:
            code, stdout, stderr = _refused(argv)
        except Reached:
            continue
        assert code == 0, f"{name}: {stderr}"


def test_every_flag_is_covered():
    """Every option of every subcommand is in the tables above (numeric, format, input,
    output or a named 'other'), so a new flag cannot escape the bad-input tests."""
    parser = build_parser()
    seen = {}

    def walk(p, path):
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub, child in action.choices.items():
                    walk(child, path + [sub])
            elif not isinstance(action, argparse._HelpAction):
                seen.setdefault(" ".join(path), set()).update(
                    action.option_strings or [action.metavar or action.dest])

    walk(parser, [])
    for name, flags in seen.items():
        key = name if name in COMMANDS else None
        if key is None:
            continue
        spec = COMMANDS[key]
        covered = set(spec["arrays"] + spec["ints"] + spec["floats"] + spec["formats"]
                      + spec["files"] + spec["folders"]) | spec["other"]
        covered |= {"--output"} if "-o" in covered else set()
        flags = {f for f in flags if f not in ("block", "format", "input", "BLOCK", "what")}
        missing = flags - covered - {"INPUT", "WEIGHTS", "command"}
        assert not missing, f"{name}: flags {sorted(missing)} are not in the tables"
    assert set(COMMANDS) <= set(seen) | {"encode", "decode", "run conv --requant",
                                         "run conv --banked"}


@pytest.mark.parametrize("argv", [
    ["run", "spmv", "--weights", "{u64m}", "--x", "{x1}"],
    ["run", "lstm", "--model", "{evil_pt}", "--input", "{seq}"],
    ["synth", "pwl", "--target", "xc7", "--freq", "nan"],
    ["decode", "{fd_nan}", "-o", "{out}/w.npy"],
])
def test_entry_point_exit_code(argv, files, tmp_path):
    """Through a real process: exit code 2, exactly one line, no traceback."""
    proc = subprocess.run([sys.executable, "-m", "gen.cli", *_fill(argv, files, tmp_path)],
                          capture_output=True, text=True)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("spnn: error: ")
    assert proc.stdout == "" and list(tmp_path.iterdir()) == []
    assert not (files["x1"].parent / EVIDENCE).exists()


def test_messages_name_flag_value_and_range(files, tmp_path):
    """A few messages in full: the flag as typed, the value, what is allowed."""
    expect = {
        ("run", "spmv", "--weights", "{u64m}", "--x", "{x1}"):
            "spnn: error: --weights: integer values need 65 bits; at most 32 are supported\n",
        ("run", "fc", "--weights", "{u64m}", "--x", "{X2}", "--raw", "--w-fmt", "Q2.14"):
            "spnn: error: --weights: value 9223372036854775808 lies outside [-32768, 32767] "
            "(codes of --w-fmt Q2.14)\n",
        ("run", "pwl", "--func", "tanh", "--input", "{big}"):
            "spnn: error: --input: value 1000000 lies outside the range of --in-fmt Q4.12, "
            "[-8, 7.99976]; scale the data or give a wider --in-fmt\n",
        ("run", "fc", "--weights", "{W2}", "--x", "{X2}", "--w-fmt", "Q0.0"):
            "spnn: error: --w-fmt must be a fixed-point format like Q4.12 or int16 (Qm.n: "
            "m >= 1 integer bits including the sign, n >= 0 fraction bits, m + n <= 64), "
            "not 'Q0.0'\n",
        ("run", "pwl", "--func", "tanh", "--input", "{x1}", "--out-fmt", "Q40.40"):
            "spnn: error: --out-fmt must be a fixed-point format like Q4.12 or int16 (Qm.n: "
            "m >= 1 integer bits including the sign, n >= 0 fraction bits, m + n <= 64), "
            "not 'Q40.40'\n",
        ("run", "spmv", "--weights", "{W2}", "--x", "{x1}", "--empty-out"): None,
        ("decode", "{fd_nan}", "-o", "{out}/w.npy"): None,
        ("run", "pwl", "--func", "tanh", "--input", "{npz}"):
            "spnn: error: --input: '{npz}' is an .npz archive; give one array as .npy\n",
        ("run", "spmv", "--weights", "{empty2}", "--x", "{x1}"):
            "spnn: error: --weights must not be empty, not shape (0, 8)\n",
        ("info", "pwl", "--set", "x_max=99"):
            "spnn: error: --set x_max must be between 0.0078125 and 8 for Q4.12 with 32 "
            "segments, not 99.0\n",
        ("run", "pwl", "--func", "tanh", "--input", "{x1}", "--out", "{out}"):
            "spnn: error: --out must name a .npy file, not '{out}'\n",
        ("run", "pwl", "--func", "tanh", "--input", "{x1}", "--report", "{out}"):
            "spnn: error: --report: '{out}' is a folder; give a file name\n",
        ("run", "pwl", "--func", "tanh", "--input", "{x1}", "--out", "{a_file}/y.npy"):
            "spnn: error: --out: cannot write '{a_file}/y.npy': '{a_file}' is a file, "
            "not a folder\n",
        ("run", "pwl", "--func", "tanh", "--input", "{x1}", "--out", "{out}/r.npy",
         "--report", "{out}/r.npy"):
            "spnn: error: --report names the same file as --out: '{out}/r.npy'\n",
        ("verilog", "pwl", "--output", "{a_file}"):
            "spnn: error: --output: '{a_file}' is a file, not a folder\n",
    }
    for argv, message in expect.items():
        if message is None:
            continue
        argv = _fill(list(argv), files, tmp_path)
        code, _, stderr = _refused(argv)
        assert code == 2
        names = {**{k: str(v) for k, v in files.items()}, "out": str(tmp_path)}
        assert stderr == message.format(**names)
    code, _, stderr = _refused(_fill(["decode", "{fd_nan}", "-o", "{out}/w.npy"], files,
                                     tmp_path))
    assert code == 2 and stderr.endswith("values must be finite, found NaN\n")


def test_missing_parent_folders_are_created(files, tmp_path, monkeypatch):
    """Documented choice: missing parent folders of an output are created, at the end."""
    import gen.pwl.cli
    from tb.cli.values import fake_pwl
    monkeypatch.setattr(gen.pwl.cli, "rtl_pwl", fake_pwl)
    out = tmp_path / "a" / "b" / "y.npy"
    rep = tmp_path / "c" / "r.json"
    code, _, stderr = _refused(["run", "pwl", "--func", "tanh", "--input", str(files["x1"]),
                                "--out", str(out), "--report", str(rep)])
    assert code == 0, stderr
    assert np.load(out).shape == (8,) and rep.read_text().startswith("{")
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["a", "b", "c", "r.json", "y.npy"]


def test_integer_input_means_codes_everywhere(files, tmp_path, monkeypatch):
    """spmv and fc: integer arrays are codes and the result is the exact integer W @ X;
    pwl: integer input is codes of --in-fmt and the output codes of --out-fmt."""
    from tb.cli.values import fake_fc, fake_pwl
    import gen.fc.cli
    import gen.pwl.cli
    import gen.spmv.cli
    monkeypatch.setattr(gen.fc.cli, "rtl_fc", fake_fc)
    monkeypatch.setattr(gen.pwl.cli, "rtl_pwl", fake_pwl)
    rng = np.random.default_rng(3)
    w = rng.integers(-30000, 30000, (5, 9)).astype(np.int16)
    x = rng.integers(-30000, 30000, (9, 2)).astype(np.int16)
    np.save(tmp_path / "W.npy", w)
    np.save(tmp_path / "X.npy", x)
    code, _, err = _refused(["run", "fc", "--weights", str(tmp_path / "W.npy"), "--x",
                             str(tmp_path / "X.npy"), "--out", str(tmp_path / "Y.npy")])
    assert code == 0, err
    y = np.load(tmp_path / "Y.npy")
    assert y.dtype.kind == "i"
    np.testing.assert_array_equal(y, w.astype(np.int64) @ x.astype(np.int64))
    codes = np.arange(-40, 40, dtype=np.int32)
    np.save(tmp_path / "c.npy", codes)
    code, _, err = _refused(["run", "pwl", "--func", "tanh", "--input",
                             str(tmp_path / "c.npy"), "--out", str(tmp_path / "p.npy")])
    assert code == 0, err
    from gen.pwl import PwlConfig, fit_table, ref_pwl
    np.testing.assert_array_equal(np.load(tmp_path / "p.npy"),
                                  ref_pwl(codes.astype(np.int64),
                                          fit_table(PwlConfig(func="tanh"))))


def test_torch_file_with_pickled_code_does_not_run(files, tmp_path):
    """--model: a .pt whose pickle would run code is refused without running it (with or
    without PyTorch installed)."""
    check_contract(["run", "lstm", "--model", str(files["evil_pt"]), "--input",
                    str(files["seq"])], tmp_path)
    assert not (files["evil_pt"].parent / EVIDENCE).exists()
    assert os.path.exists(files["evil_pt"])


def test_every_config_field_through_set():
    """--set understands every annotation the configs use: each field of each block's
    default configuration, given back as text, rebuilds the same configuration."""
    from gen.registry import BLOCKS
    from gen.core.config import config_from_strings
    from tb.cli.values import default_strings
    for name, block in BLOCKS.items():
        for cfg in block.defaults():
            for field, text in default_strings(cfg).items():
                again = config_from_strings(block.config_cls, {field: text}, base=cfg,
                                            flag="--set")
                assert again == cfg, (name, field, text)
    code, out, err = _refused(["info", "pwl", "--set", "x_max=4", "--set", "func=tanh"])
    assert code == 0 and "x_max = 4.0" in out, err
