# SPDX-License-Identifier: Apache-2.0
"""Arithmetic gateware: twins of :mod:`gen.core.fixed` (the same rounding and saturation)
and the radix-4 multiplier the SpMV PE and the MAC array share.

``round_shift`` and ``saturate`` are combinational expressions; the golden models call the numpy
functions of the same names in :mod:`gen.core.fixed`, so the two cannot drift.
"""

from amaranth.hdl import Cat, Const, Mux, Signal, signed

from gen.core.fixed import QFormat

__all__ = ["round_shift", "saturate", "radix4_product"]


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


def radix4_product(m, w, x, x3, xn, name="pp_sum"):
    """Signed ``w * x`` in LUTs and carry chains, over two clocks.

    ``x3 = 3x`` and ``xn = -x`` are registers beside ``x``.  The radix-4 digits of ``w``
    (unsigned 0..3, the top one signed -2..1) select partial products from them; they are
    added in pairs into registers ``<name><k>`` (clock 1) and the pairs summed
    combinationally (the caller registers the result, clock 2).  Returns that sum; its
    low ``len(w) + len(x)`` bits are the exact product.
    """
    pw = len(w) + len(x)
    wd = Cat(w, w[-1]) if len(w) % 2 else w                # even width, same value
    nd = len(wd) // 2
    pps = []
    for i in range(nd):
        d0, d1 = wd[2 * i], wd[2 * i + 1]
        if i < nd - 1:                                       # unsigned digit 0..3
            pp = Mux(d1, Mux(d0, x3, x << 1), Mux(d0, x, 0))
        else:                                                # signed digit -2..1
            pp = Mux(d1, Mux(d0, xn, xn << 1), Mux(d0, x, 0))
        pps.append((pp, 2 * i))
    pairs = []
    for k in range(0, nd, 2):
        (a_pp, a_sh), rest = pps[k], pps[k + 1:k + 2]
        total = a_pp if not rest else a_pp + (rest[0][0] << 2)
        reg = Signal(signed(min(len(total), pw + 2)), name=f"{name}{k // 2}",
                     reset_less=True)
        m.d.sync += reg.eq(total)
        pairs.append((reg, a_sh))
    prod = pairs[0][0]
    for reg, sh in pairs[1:]:
        prod = prod + (reg << sh)
    return prod
