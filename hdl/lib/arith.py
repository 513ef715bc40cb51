# SPDX-License-Identifier: Apache-2.0
"""Amaranth twins of :mod:`gen.core.fixed`: the same rounding and saturation, as gateware.

Both helpers are combinational expressions; the golden models call the numpy
functions of the same names in :mod:`gen.core.fixed`, so the two cannot drift.
"""

from amaranth.hdl import Const, Mux, signed

from gen.core.fixed import QFormat

__all__ = ["round_shift", "saturate"]


def round_shift(value, shift: int):
    """Drop ``shift`` LSBs of a signed value with round-half-up (arithmetic shift).

    ``shift <= 0`` shifts left exactly.  The result is signed and one bit wider
    than needed, so it never overflows; saturate it afterwards.
    """
    value = value.as_signed()
    if shift <= 0:
        return value << (-shift)
    return (value + Const(1 << (shift - 1), signed(shift + 1))) >> shift


def saturate(value, fmt: QFormat):
    """Clamp a signed value to ``fmt``'s range; the result has shape ``signed(fmt.width)``."""
    value = value.as_signed()
    hi = Const(fmt.max_code, signed(fmt.width))
    lo = Const(fmt.min_code, signed(fmt.width))
    if len(value) <= fmt.width:
        return value.as_signed()
    return Mux(value > hi, hi, Mux(value < lo, lo, value[:fmt.width].as_signed()))
