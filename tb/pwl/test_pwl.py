# SPDX-License-Identifier: Apache-2.0
"""PWL sigmoid/tanh unit: table fit, golden model, and the RTL under both simulators."""

import numpy as np
from numpy.testing import assert_array_equal
import pytest

from gen.core.fixed import QFormat, decode
from gen.pwl import PwlConfig, cycle_model, fit_table, float_func, ref_pwl
from gen.pwl.twin import rtl_pwl
from gen.core.stimulus import Pattern

# The format sets the exhaustive RTL sweep covers (16-bit inputs).
FORMAT_SETS = {
    "q4.12-q2.14-32": dict(in_fmt=QFormat(4, 12), out_fmt=QFormat(2, 14), segments=32),
    "q3.13-q1.15-16u": dict(in_fmt=QFormat(3, 13), out_fmt=QFormat(1, 15), segments=16,
                            boundaries="uniform"),
}
ALL_CODES = np.arange(-32768, 32768, dtype=np.int64)

# Stated accuracy of the default unit (16-bit in/out, 32 segments) vs scipy/numpy float.
BOUND = {"sigmoid": 2.0 ** -11, "tanh": 2.0 ** -10}


# ----------------------------------------------------------------------- config validation

@pytest.mark.parametrize("kwargs, message", [
    (dict(func="relu"), "func must be one of sigmoid, tanh, not 'relu'"),
    (dict(segments=12), "segments must be a power of two between 2 and 256, not 12"),
    (dict(segments=512), "segments must be a power of two between 2 and 256, not 512"),
    (dict(in_fmt=QFormat(20, 12)), "in_fmt must be 4 to 24 bits wide, not 32 (Q20.12)"),
    (dict(out_fmt=QFormat(8, 0)),
     "out_fmt must be 4 to 24 bits wide with at least 2 fraction bits, not Q8.0"),
    (dict(x_max=9.0), "x_max must be between 0.0078125 and 8 for Q4.12 with 32 segments, not 9.0"),
    (dict(boundaries="log"), "boundaries must be auto, uniform or optimal, not 'log'"),
    (dict(slope_width=4), "slope_width must be between 8 and 27, not 4"),
    (dict(guard_bits=9), "guard_bits must be between 0 and 8, not 9"),
])
def test_config_rejects(kwargs, message):
    with pytest.raises(ValueError) as info:
        PwlConfig(**kwargs)
    assert str(info.value) == message


def test_config_type_error():
    with pytest.raises(TypeError, match="in_fmt must be a QFormat"):
        PwlConfig(in_fmt="Q4.12")


# ----------------------------------------------------------------------- fit and golden model

@pytest.mark.parametrize("func", ["sigmoid", "tanh"])
def test_default_accuracy_bound(func):
    """Golden model vs scipy.special.expit / numpy.tanh over every 16-bit input code."""
    cfg = PwlConfig(func=func)
    table = fit_table(cfg)
    y = decode(ref_pwl(ALL_CODES, table), cfg.out_fmt)
    err = np.abs(y - float_func(func)(decode(ALL_CODES, cfg.in_fmt)))
    assert err.max() <= BOUND[func]
    assert err.max() == pytest.approx(table.max_abs_error)


@pytest.mark.parametrize("func", ["sigmoid", "tanh"])
def test_optimal_boundaries_beat_uniform(func):
    uniform = fit_table(PwlConfig(func=func, boundaries="uniform"))
    optimal = fit_table(PwlConfig(func=func, boundaries="optimal"))
    assert optimal.max_abs_error < uniform.max_abs_error
    assert fit_table(PwlConfig(func=func)).max_abs_error == optimal.max_abs_error


def test_symmetry_is_exact():
    codes = np.arange(1, 32768, dtype=np.int64)
    tanh = fit_table(PwlConfig(func="tanh"))
    assert_array_equal(ref_pwl(-codes, tanh), -ref_pwl(codes, tanh))
    sig = fit_table(PwlConfig(func="sigmoid"))
    assert_array_equal(ref_pwl(-codes, sig), (1 << 14) - ref_pwl(codes, sig))


def test_monotone_and_in_range():
    for func in ("sigmoid", "tanh"):
        cfg = PwlConfig(func=func)
        y = ref_pwl(ALL_CODES, fit_table(cfg))
        assert np.all(np.diff(y) >= 0)
        lo = 0 if func == "sigmoid" else -(1 << 14)
        assert y.min() >= lo and y.max() <= 1 << 14


def test_saturates_outside_fitted_range():
    cfg = PwlConfig(func="tanh", x_max=4.0)
    table = fit_table(cfg)
    outside = np.arange(4 << 12, 32768, 97, dtype=np.int64)
    y = ref_pwl(outside, table)
    assert np.all(y == y[0])
    assert_array_equal(ref_pwl(-outside, table), -y)
    assert decode(y[0], cfg.out_fmt) == pytest.approx(np.tanh(4.0), abs=2.0 ** -10)


def test_fit_is_deterministic():
    a = fit_table(PwlConfig(func="sigmoid", segments=16, slope_width=16))
    from gen.pwl import fit as pwl
    pwl._CACHE.clear()
    b = fit_table(PwlConfig(func="sigmoid", segments=16, slope_width=16))
    assert a == b


# ----------------------------------------------------------------------- RTL, both simulators

@pytest.mark.parametrize("func", ["sigmoid", "tanh"])
@pytest.mark.parametrize("formats", sorted(FORMAT_SETS))
def test_rtl_exhaustive(sim, cycle_log, func, formats):
    """Every 16-bit input code at full rate: RTL == golden, cycles == n + latency."""
    cfg = PwlConfig(func=func, **FORMAT_SETS[formats])
    y, result = rtl_pwl(ALL_CODES, cfg, sim, name=f"exhaustive-{func}-{formats}")
    assert_array_equal(y, ref_pwl(ALL_CODES, fit_table(cfg)))
    in_cycles, out_cycles = result["sources"]["i"]["cycles"], result["sinks"]["o"]["cycles"]
    assert in_cycles == list(range(len(ALL_CODES)))
    assert out_cycles[0] - in_cycles[0] == cfg.latency
    cycle_log(out_cycles[-1] - in_cycles[0] + 1, len(ALL_CODES) + cfg.latency)


@pytest.mark.parametrize("valid_prob, ready_prob, seed", [(0.6, 0.5, 1), (1.0, 0.3, 2),
                                                          (0.2, 1.0, 3)])
def test_rtl_backpressure(sim, valid_prob, ready_prob, seed):
    """Random idle cycles on the input and back-pressure on the output."""
    cfg = PwlConfig(func="tanh")
    rng = np.random.default_rng(seed)
    x = np.concatenate([[-32768, 32767, 0, -1, 1], rng.integers(-32768, 32768, 3000)])
    y, result = rtl_pwl(x, cfg, sim, valid_prob=valid_prob, ready_prob=ready_prob, seed=seed,
                        name=f"bp-{seed}")
    assert_array_equal(y, ref_pwl(x, fit_table(cfg)))
    model = cycle_model(len(x), cfg, valid=valid_prob, ready=ready_prob, seed=seed)
    assert result["sources"]["i"]["cycles"] == model["i"]
    assert result["sinks"]["o"]["cycles"] == model["o"]


def test_rtl_explicit_patterns(sim, cycle_log):
    """Explicit per-port bit patterns (bursts in, 1 clock in 3 out): every transfer on the
    cycle the model predicts."""
    cfg = PwlConfig(func="sigmoid", segments=8)
    x = np.random.default_rng(9).integers(-32768, 32768, 400)
    valid, ready = Pattern.bits([1, 1, 1, 0, 0]), Pattern.bits([0, 0, 1])
    y, result = rtl_pwl(x, cfg, sim, valid_prob=valid, ready_prob=ready, name="bits")
    assert_array_equal(y, ref_pwl(x, fit_table(cfg)))
    model = cycle_model(len(x), cfg, valid=valid, ready=ready)
    assert result["sources"]["i"]["cycles"] == model["i"]
    cycle_log(result["sinks"]["o"]["cycles"][-1], model["o"][-1])
    assert result["sinks"]["o"]["cycles"] == model["o"]


def test_cycle_model_full_rate_and_stalls():
    """Without stalls every sample leaves `latency` clocks after it entered; with a slow
    sink an output transfers only on its ready clocks."""
    cfg = PwlConfig(func="tanh", segments=4)
    full = cycle_model(50, cfg)
    assert full["i"] == list(range(50)) and full["o"] == [c + cfg.latency for c in range(50)]
    ready = Pattern.bits([1, 0, 0, 0])
    slow = cycle_model(50, cfg, ready=ready)
    assert all(ready.at(c) for c in slow["o"])
    assert all(b - a >= 4 for a, b in zip(slow["o"], slow["o"][1:]))


@pytest.mark.native_agree
def test_rtl_reset_mid_stream(sim):
    """A reset in the middle drops what is in flight; the restarted stream is exact."""
    cfg = PwlConfig(func="sigmoid")
    x = np.random.default_rng(7).integers(-32768, 32768, 2000)
    y, result = rtl_pwl(x, cfg, sim, ready_prob=0.7, seed=7, reset_at=600, name="reset")
    golden = ref_pwl(x, fit_table(cfg))
    assert_array_equal(y, golden)
    before = result["before_reset"]["o"]["data"]
    assert 0 < len(before) < len(x)
    from gen.pwl import to_signed
    assert_array_equal(to_signed(before, cfg.out_fmt.width), golden[:len(before)])
