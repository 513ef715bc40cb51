# SPDX-License-Identifier: Apache-2.0
"""Property-based layer of the CLI contract (hypothesis): arbitrary arrays and flag values.

For every generated command line the checks either refuse it with one SpnnError line, or
accept it -- and then what they accepted is exact: integer input became the same codes,
float input became codes within half an LSB of it (nothing clipped).  No other exception
is ever allowed.  Only the check-and-convert step of each command runs (no simulation),
so the whole module takes a few seconds.
"""

import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings, strategies as st

from gen.cli import build_parser
from gen.core.config import SpnnError
from gen.core.fixed import decode
from gen.core.runutil import float_arg, format_arg, int_arg

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])

DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "bool"]
FLAG_TEXT = st.sampled_from(["1", "2", "4", "8", "16", "0.5", "Q1.7", "Q4.12", "int8"])
TEXT = st.one_of(st.text(max_size=12), FLAG_TEXT, FLAG_TEXT,
                 st.sampled_from(["0", "1", "2", "-1", "1.5", "nan", "inf", "1e400", "Q4.12",
                                  "Q1.7", "int8", "Q0.0", "Q40.40", "256", "65536", "16x4"]),
                 st.integers(-10 ** 20, 10 ** 20).map(str),
                 st.floats(allow_nan=True, allow_infinity=True).map(repr))


@st.composite
def arrays(draw, ndim=None, max_side=5, shape=None):
    """A numeric array of any supported dtype, empty sides, extremes, NaN and Inf included."""
    dtype = np.dtype(draw(st.sampled_from(DTYPES)))
    nd = draw(st.integers(1, 2)) if ndim is None else ndim
    if shape is None:
        shape = tuple(draw(st.lists(st.integers(0, max_side), min_size=nd, max_size=nd)))
    n = int(np.prod(shape))
    # extremes are rare per element (an array holding one is refused as a whole)
    rare = draw(st.booleans())
    if dtype.kind == "f":
        bad = st.sampled_from([np.nan, np.inf, -np.inf, 1e30, 20.0])
        values = draw(st.lists(st.one_of(st.floats(-1, 1), st.just(0.0),
                                         *([bad] if rare else [])), min_size=n, max_size=n))
        with np.errstate(over="ignore"):     # 1e30 -> inf in float16/32: Inf is wanted
            arr = np.array(values, dtype=np.float64).astype(dtype)
    elif dtype.kind == "b":
        arr = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    else:
        info = np.iinfo(dtype)
        bad = st.sampled_from([int(info.min), int(info.max)])
        values = draw(st.lists(st.one_of(st.integers(-300, 300), st.integers(-3, 3),
                                         *([bad] if rare else [])), min_size=n, max_size=n))
        arr = np.array([min(max(v, int(info.min)), int(info.max)) for v in values],
                       dtype=dtype)
    return arr.reshape(shape)


def _prepare(argv, files: dict):
    """Parse ``argv`` (with {name} file placeholders) and run the command's checks."""
    with tempfile.TemporaryDirectory() as tmp:
        paths = {}
        for name, arr in files.items():
            paths[name] = str(Path(tmp) / f"{name}.npy")
            np.save(paths[name], arr)
        try:
            args = build_parser().parse_args(
                [paths[a[1:-1]] if a[1:-1] in paths and a[0] == "{" else a for a in argv])
        except SystemExit as exc:     # argparse's one-line usage error
            assert exc.code == 2
            return None
        args.argv = argv
        module = __import__(f"gen.{args.block}.cli", fromlist=["_prepare"])
        try:
            return module._prepare(args)
        except SpnnError as exc:
            assert "\n" not in str(exc) and str(exc), repr(str(exc))
            return None


def _exact(arr, codes, fmt):
    """Accepted input became codes that stand for exactly it (ints) or within lsb/2."""
    if arr.dtype.kind in "biu":
        assert np.array_equal(np.asarray(codes).ravel(), arr.astype(np.int64).ravel())
        return
    real = decode(np.asarray(codes), fmt)
    assert np.all(np.abs(real.ravel() - arr.astype(np.float64).ravel()) <= fmt.lsb / 2)


@st.composite
def operands(draw, x_ndim):
    """(W, X) with matching inner sizes most of the time (mismatches are refused)."""
    w = draw(arrays(ndim=2))
    if draw(st.integers(0, 4)) == 0:
        return w, draw(arrays(ndim=x_ndim))
    shape = (w.shape[1],) if x_ndim == 1 else (w.shape[1], draw(st.integers(0, 4)))
    return w, draw(arrays(shape=shape))


@SETTINGS
@given(wx=operands(1), flags=st.lists(
    st.tuples(st.sampled_from(["--pes", "--w-fmt", "--x-fmt", "--acc-width", "--w-lanes",
                               "--fifo-depth", "--density", "--w-valid-prob"]), TEXT),
    max_size=2))
def test_spmv_checks(wx, flags):
    w, x = wx
    argv = ["run", "spmv", "--weights", "{w}", "--x", "{x}"]
    argv += [f"{flag}={value}" for flag, value in flags]
    got = _prepare(argv, {"w": w, "x": x})
    event("refused" if got is None else "accepted")
    if got is None:
        return
    cfg, _blocks, _bw, w2, x2, w_codes, x_codes, _ints, _out = got
    assert w.size and w.shape[1] == x.shape[0]
    if "--density" not in [f for f, _ in flags]:
        _exact(w, w_codes, cfg.w_fmt)
    _exact(x, x_codes, cfg.x_fmt)


@SETTINGS
@given(wx=operands(2), flags=st.lists(
    st.tuples(st.sampled_from(["--lanes", "--w-fmt", "--x-fmt", "--segs-per-beat"]), TEXT),
    max_size=2), raw=st.booleans())
def test_fc_checks(wx, flags, raw):
    w, x = wx
    argv = ["run", "fc", "--weights", "{w}", "--x", "{x}"] + (["--raw"] if raw else [])
    argv += [f"{flag}={value}" for flag, value in flags]
    got = _prepare(argv, {"w": w, "x": x})
    event("refused" if got is None else "accepted")
    if got is None:
        return
    _w, _x, wc, xc, codes_out, cfg, _fd, _plan, _out = got
    assert not raw or codes_out
    _exact(w, wc, cfg.w_fmt)
    _exact(x, xc, cfg.x_fmt)


@SETTINGS
@given(x=arrays(), flags=st.lists(
    st.tuples(st.sampled_from(["--segments", "--in-fmt", "--out-fmt", "--seed"]), TEXT),
    max_size=2), raw=st.booleans())
def test_pwl_checks(x, flags, raw):
    argv = ["run", "pwl", "--func", "tanh", "--input", "{x}"] + (["--raw"] if raw else [])
    argv += [f"{flag}={value}" for flag, value in flags]
    got = _prepare(argv, {"x": x})
    event("refused" if got is None else "accepted")
    if got is None:
        return
    cfg, codes, codes_out, _out = got
    assert codes_out == (x.dtype.kind in "biu")
    _exact(x, codes, cfg.in_fmt)


@SETTINGS
@given(text=TEXT, lo=st.integers(-5, 5), span=st.integers(0, 300))
def test_number_and_format_parsers(text, lo, span):
    """Any text: a value within the stated range, or one SpnnError line naming the flag."""
    for parse, check in (
            (lambda: int_arg(text, "--n", lo, lo + span), lambda v: lo <= v <= lo + span),
            (lambda: float_arg(text, "--f", lo, lo + span),
             lambda v: np.isfinite(v) and lo <= v <= lo + span),
            (lambda: format_arg(text, "--fmt", 2, 32), lambda f: 2 <= f.width <= 32)):
        try:
            value = parse()
        except SpnnError as exc:
            assert str(exc).startswith("--") and "\n" not in str(exc)
            continue
        assert check(value), (text, value)


def test_hypothesis_finds_a_refusal():
    """The strategies reach refusals and acceptances alike (the layer can fail)."""
    with pytest.raises(SpnnError):
        int_arg("nan", "--n")
    assert _prepare(["run", "pwl", "--func", "tanh", "--input", "{x}"],
                    {"x": np.array([np.nan])}) is None
    assert _prepare(["run", "pwl", "--func", "tanh", "--input", "{x}"],
                    {"x": np.array([0.5])}) is not None
