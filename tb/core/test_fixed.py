# SPDX-License-Identifier: Apache-2.0
"""The fixed-point core: numpy rules, format notation, and the Amaranth twins agree."""

import numpy as np
from numpy.testing import assert_array_equal
import pytest
from amaranth.hdl import Module, Signal, signed
from amaranth.sim import Simulator

from gen.core.fixed import (QFormat, decode, parse_format, quantise, requantise, round_shift,
                            saturate)
from hdl.lib import arith as hfixed


def test_parse_format():
    assert parse_format("Q4.12") == QFormat(4, 12)
    assert parse_format("q1.15").width == 16
    assert parse_format("int8") == QFormat(8, 0)
    for bad in ("Q4", "4.12", "Q0.8", "float"):
        with pytest.raises(ValueError):
            parse_format(bad, "--in-fmt")
    for bad in ("Q4", "Q0.8", "Q40.40"):
        with pytest.raises(ValueError) as err:
            parse_format(bad, "--in-fmt")
        assert str(err.value) == ("--in-fmt must be a fixed-point format like Q4.12 or int16 "
                                  "(Qm.n: m >= 1 integer bits including the sign, n >= 0 "
                                  f"fraction bits, m + n <= 64), not {bad!r}")


def test_format_range():
    f = QFormat(4, 12)
    assert (f.min_code, f.max_code, f.min_value, f.max_value) == (-32768, 32767, -8.0,
                                                                  8 - 2 ** -12)
    assert str(f) == "Q4.12"
    with pytest.raises(ValueError, match="integer bits must be at least 1"):
        QFormat(0, 8)


def test_round_half_up():
    # Ties go towards +infinity, for both signs.
    assert_array_equal(round_shift(np.array([1, 2, 3, -1, -2, -3, 5, -5]), 1),
                       [1, 1, 2, 0, -1, -1, 3, -2])
    assert_array_equal(quantise([0.5, -0.5, 1.5, -1.5, 0.49], QFormat(8, 0)), [1, 0, 2, -1, 0])


def test_saturate_and_quantise():
    f = QFormat(2, 6)
    assert_array_equal(quantise([10.0, -10.0, 1.0], f), [127, -128, 64])
    assert_array_equal(saturate(np.array([200, -200, 5]), f), [127, -128, 5])
    assert_array_equal(decode(np.array([64, -128]), f), [1.0, -2.0])
    assert_array_equal(requantise(np.array([1 << 10, 3 << 3, -(3 << 3)]), 10, f), [64, 2, -1])
    with pytest.raises(ValueError, match="NaN"):
        quantise([np.nan], f)


@pytest.mark.parametrize("shift, fmt", [(0, QFormat(4, 4)), (3, QFormat(4, 4)),
                                        (7, QFormat(2, 6)), (-2, QFormat(8, 2))])
def test_amaranth_helpers_match_numpy(shift, fmt):
    """Amaranth round_shift + saturate == gen.core.fixed on random 20-bit values (Amaranth sim)."""
    value = Signal(signed(20))
    out = Signal(signed(fmt.width))
    m = Module()
    m.d.comb += out.eq(hfixed.saturate(hfixed.round_shift(value, shift), fmt))
    samples = np.random.default_rng(shift + 10).integers(-(1 << 19), 1 << 19, 300)
    samples = np.concatenate([samples, [-(1 << 19), (1 << 19) - 1, 0, -1, 1]])
    expected = saturate(round_shift(samples, shift), fmt)
    got = []

    async def bench(ctx):
        for s in samples:
            ctx.set(value, int(s))
            got.append(ctx.get(out))

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    assert_array_equal(got, expected)


def test_bit_patterns_and_code_checks():
    from gen.core.fixed import check_codes, index_bits, to_signed, to_unsigned
    codes = np.array([0, 1, -1, -128, 127])
    assert to_unsigned(codes, 8) == [0, 1, 255, 128, 127]
    assert_array_equal(to_signed(to_unsigned(codes, 8), 8), codes)
    assert_array_equal(to_signed([(1 << 64) - 1, 1 << 63], 64), [-1, -(1 << 63)])
    assert [index_bits(n) for n in (0, 1, 2, 3, 4, 5, 1024, 1025)] == [1, 1, 1, 2, 2, 3, 10, 11]
    with pytest.raises(TypeError, match="^x must hold integer codes, not float64$"):
        check_codes(np.zeros(2), QFormat(8, 0), "x")
    with pytest.raises(ValueError, match=r"^x codes must lie in \[-128, 127\] for Q8.0, "
                                         r"found -129..3$"):
        check_codes(np.array([-129, 3]), QFormat(8, 0), "x")
