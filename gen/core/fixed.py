# SPDX-License-Identifier: Apache-2.0
"""Signed fixed-point formats and the one set of rules every block follows.

Notation
--------
``Qm.n`` is a signed two's-complement number of ``m + n`` bits: ``m`` integer
bits *including the sign bit* and ``n`` fraction bits.  A code ``c`` stands for
the real value ``c / 2**n``; the range is ``[-2**(m-1), 2**(m-1) - 2**-n]``.
``Q4.12`` is 16 bits with range ``[-8, 8)`` and resolution ``2**-12``.  A pure
integer format is written ``Q16.0`` (or ``int16``).

Rules (used by the golden models *and* the gateware, see :mod:`hdl.fixed`)
---------------------------------------------------------------------------
* **Rounding** is *round half up* (towards +infinity on a tie):
  ``round(v) = floor(v + 1/2)``.  In integers, dropping ``s`` fraction bits is
  ``(c + 2**(s-1)) >> s`` with an arithmetic shift, which is what the hardware
  does.
* **Saturation** clamps to the format's most negative / most positive code;
  nothing ever wraps.
* Quantising a real number = scale by ``2**n``, round, saturate.
"""

from dataclasses import dataclass
import re

import numpy as np

__all__ = ["QFormat", "parse_format", "round_shift", "saturate", "quantise", "decode",
           "requantise", "requant_sums", "Requant", "REQUANT_LATENCY", "MULT_WIDTH", "SHIFT_WIDTH", "check_codes",
           "to_unsigned", "to_signed", "index_bits"]

_FORMAT_RE = re.compile(r"^(?:[Qq](\d+)\.(\d+)|int(\d+))$")


@dataclass(frozen=True)
class QFormat:
    """A signed fixed-point format ``Q{int_bits}.{frac_bits}``.

    Parameters
    ----------
    int_bits : int
        Integer bits including the sign bit, >= 1.
    frac_bits : int
        Fraction bits, >= 0.
    """

    int_bits: int
    frac_bits: int

    def __post_init__(self):
        if not isinstance(self.int_bits, int) or not isinstance(self.frac_bits, int):
            raise TypeError(f"format bit counts must be integers, not {self.int_bits!r}, "
                            f"{self.frac_bits!r}")
        if self.int_bits < 1:
            raise ValueError(f"format integer bits must be at least 1 (the sign bit), "
                             f"not {self.int_bits}")
        if self.frac_bits < 0:
            raise ValueError(f"format fraction bits must be at least 0, not {self.frac_bits}")
        if self.width > 64:
            raise ValueError(f"format width must be at most 64 bits, not {self.width}")

    @property
    def width(self) -> int:
        return self.int_bits + self.frac_bits

    @property
    def min_code(self) -> int:
        return -(1 << (self.width - 1))

    @property
    def max_code(self) -> int:
        return (1 << (self.width - 1)) - 1

    @property
    def lsb(self) -> float:
        return 2.0 ** -self.frac_bits

    @property
    def min_value(self) -> float:
        return self.min_code * self.lsb

    @property
    def max_value(self) -> float:
        return self.max_code * self.lsb

    def __str__(self) -> str:
        return f"Q{self.int_bits}.{self.frac_bits}"

    def to_dict(self) -> dict:
        return {"name": str(self), "width": self.width, "int_bits": self.int_bits,
                "frac_bits": self.frac_bits, "signed": True,
                "min": self.min_value, "max": self.max_value, "lsb": self.lsb}


def parse_format(text: str, name: str = "format") -> QFormat:
    """Parse ``Q4.12`` / ``q4.12`` / ``int16``; any problem is one ValueError line naming
    ``name`` and the text (``"--w-fmt must be ..., not 'Q0.0'"``)."""
    if isinstance(text, QFormat):
        return text
    match = _FORMAT_RE.match(str(text).strip())
    allowed = (f"{name} must be a fixed-point format like Q4.12 or int16 (Qm.n: m >= 1 "
               f"integer bits including the sign, n >= 0 fraction bits, m + n <= 64)")
    if not match:
        raise ValueError(f"{allowed}, not {text!r}")
    try:
        if match.group(3) is not None:
            return QFormat(int(match.group(3)), 0)
        return QFormat(int(match.group(1)), int(match.group(2)))
    except ValueError:
        raise ValueError(f"{allowed}, not {text!r}") from None


def _as_int_array(codes):
    arr = np.asarray(codes)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"fixed-point codes must be integers, not {arr.dtype}")
    return arr.astype(np.int64)


def round_shift(codes, shift: int):
    """Drop ``shift`` fraction bits with round-half-up (``shift`` may be <= 0: exact shift left)."""
    c = _as_int_array(codes)
    if shift <= 0:
        return c << (-shift)
    return (c + (1 << (shift - 1))) >> shift


def saturate(codes, fmt: QFormat):
    """Clamp integer codes to ``fmt``'s range."""
    return np.clip(_as_int_array(codes), fmt.min_code, fmt.max_code)


def quantise(values, fmt: QFormat):
    """Real values -> codes of ``fmt`` (scale, round half up, saturate).  NaN is rejected."""
    v = np.asarray(values, dtype=np.float64)
    if not np.all(np.isfinite(v)):
        raise ValueError("cannot quantise NaN or infinite values")
    scaled = np.floor(v * (2.0 ** fmt.frac_bits) + 0.5)
    scaled = np.clip(scaled, fmt.min_code, fmt.max_code)
    return scaled.astype(np.int64)


def decode(codes, fmt: QFormat):
    """Codes of ``fmt`` -> real values (float64, exact)."""
    return _as_int_array(codes).astype(np.float64) * fmt.lsb


def requantise(codes, frac_bits: int, fmt: QFormat):
    """Codes with ``frac_bits`` fraction bits -> codes of ``fmt`` (round half up, saturate)."""
    return saturate(round_shift(codes, frac_bits - fmt.frac_bits), fmt)


def check_codes(values, fmt: QFormat, name: str):
    """Integer codes of ``fmt`` as int64; a wrong dtype is a TypeError and a code outside the
    format a ValueError, both naming ``name``."""
    arr = np.asarray(values)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{name} must hold integer codes, not {arr.dtype}")
    arr = arr.astype(np.int64)
    if arr.size and (arr.min() < fmt.min_code or arr.max() > fmt.max_code):
        raise ValueError(f"{name} codes must lie in [{fmt.min_code}, {fmt.max_code}] for "
                         f"{fmt}, found {arr.min()}..{arr.max()}")
    return arr


def to_unsigned(codes, width: int) -> list:
    """Signed codes -> the unsigned ``width``-bit patterns a simulator port carries."""
    return [int(c) & ((1 << width) - 1) for c in np.asarray(codes, dtype=np.int64).ravel()]


def to_signed(patterns, width: int):
    """Unsigned ``width``-bit patterns (any Python ints, up to 64 bits) -> signed int64 codes."""
    return np.array([v - (1 << width) if v >> (width - 1) else v for v in map(int, patterns)],
                    dtype=np.int64)


def index_bits(n: int) -> int:
    """Bits of an index over ``n`` items (at least 1)."""
    return max(1, (int(n) - 1).bit_length())


# The requantisation stage's multiplier (unsigned) and right-shift widths, and its clocks
# from a sum taken to its result offered (hdl/lib/requant.py).
MULT_WIDTH = 16
SHIFT_WIDTH = 6
REQUANT_LATENCY = 11


def requant_sums(sums, bias, *, mult: int, shift: int, width: int, relu: bool = False):
    """The shells' requantisation stage (:class:`hdl.lib.requant.RequantStage`), bit exact:
    ``clamp(floor(((s + b) * mult + 2**(shift-1)) / 2**shift), lo, 2**(width-1) - 1)`` (no
    rounding term at ``shift`` 0, i.e. round half up), ``lo = 0`` with ``relu`` else
    ``-2**(width-1)``.  ``bias`` broadcasts against ``sums`` (e.g. ``b[None, :, None, None]``
    for the conv array's ``(B, Oc, Ho, Wo)``); both are integer codes in the sums' fraction
    bits.  Exact for any widths (Python integers where int64 could overflow)."""
    if not 0 <= mult < 1 << MULT_WIDTH:
        raise ValueError(f"mult must be between 0 and {(1 << MULT_WIDTH) - 1}, not {mult}")
    if not 0 <= shift < 1 << SHIFT_WIDTH:
        raise ValueError(f"shift must be between 0 and {(1 << SHIFT_WIDTH) - 1}, not {shift}")
    s, b = np.asarray(sums), np.asarray(bias)
    wide = (max(int(np.abs(s).max(initial=0)), 1) + max(int(np.abs(b).max(initial=0)), 1)) \
        * max(mult, 1) + (1 << shift) >= 1 << 62
    dtype = object if wide else np.int64
    total = (s.astype(dtype) + b.astype(dtype)) * mult
    if shift:
        total = (total + (1 << (shift - 1))) >> shift
    lo = 0 if relu else -(1 << (width - 1))
    return np.clip(total, lo, (1 << (width - 1)) - 1).astype(np.int64)


@dataclass(frozen=True)
class Requant:
    """One job's requantisation (the shells' output stage, :func:`requant_sums`).

    ``bias``: the per-channel biases (integer codes in the sums' fraction bits) this job
    loads, or None to keep the last loaded ones (0 after power-up); ``relu`` clamps at 0."""

    mult: int = 1
    shift: int = 0
    relu: bool = False
    bias: tuple = None

    def __post_init__(self):
        if self.bias is not None:
            object.__setattr__(self, "bias", tuple(int(b) for b in np.ravel(self.bias)))
        requant_sums([0], 0, mult=self.mult, shift=self.shift, width=2)   # range checks

    def scale_word(self) -> int:
        """The ``RQ_SCALE`` register."""
        return (self.mult | self.shift << 16 | int(self.relu) << 22
                | int(self.bias is not None) << 23)
