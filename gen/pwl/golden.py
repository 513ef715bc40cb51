# SPDX-License-Identifier: Apache-2.0
"""The fitted segment table (:class:`PwlTable`) and the bit-exact golden model.

The unit evaluates ``f(x)`` for ``x >= 0`` only and mirrors the result
(``tanh(-x) = -tanh(x)``, ``sigmoid(-x) = 1 - sigmoid(x)``), so the table
covers the magnitude ``a = min(|x|, a_max)`` where ``a_max`` is the last input
code inside the fitted range (inputs beyond it saturate).

For segment ``s`` (found by a binary search over ``segments - 1`` boundary
codes, i.e. ``s = #{boundaries <= a}``) the datapath computes, in integers::

    F   = max(slope_frac + in_frac, icpt_frac)
    acc = (slope[s] * a << (F - slope_frac - in_frac)) + (intercept[s] << (F - icpt_frac))
    y+  = min(saturate(round_shift(acc, F - out_frac), out_fmt), one)
    y   = y+              if x >= 0
          one - y+        if x < 0 and f = sigmoid    (one = 2**out_frac, i.e. 1.0)
          -y+             if x < 0 and f = tanh
    y   = saturate(y, out_fmt)

with the project's one rounding rule (round half up, :mod:`gen.core.fixed`).  ``F`` is the
product's fraction count except when the intercept has more fraction bits (a pure-integer
or coarse input format): then the product is shifted up instead of the intercept.
"""

from dataclasses import dataclass

import numpy as np

from gen.core.fixed import round_shift, saturate, to_signed, to_unsigned
from gen.pwl.config import PwlConfig

__all__ = ["PwlTable", "ref_pwl", "to_signed", "to_unsigned"]


@dataclass(frozen=True)
class PwlTable:
    """A fitted, quantised segment table (what the ROM holds) plus its measured error."""

    config: PwlConfig
    boundaries: tuple      # segments - 1 magnitude codes; segment s starts at boundaries[s-1]
    slopes: tuple          # signed codes, slope_frac fraction bits
    intercepts: tuple      # signed codes, icpt_frac fraction bits
    slope_frac: int
    icpt_frac: int
    icpt_width: int
    placement: str         # "uniform" or "optimal"
    max_abs_error: float
    mean_abs_error: float

    @property
    def product_frac(self) -> int:
        return self.slope_frac + self.config.in_fmt.frac_bits

    @property
    def acc_frac(self) -> int:
        """Fraction bits of ``slope * a + intercept``: the product's, or the intercept's
        when those are more (then the product is shifted up, not the intercept)."""
        return max(self.product_frac, self.icpt_frac)

    def to_dict(self) -> dict:
        return {"placement": self.placement, "boundaries": list(self.boundaries),
                "slopes": list(self.slopes), "intercepts": list(self.intercepts),
                "slope_width": self.config.slope_width, "slope_frac": self.slope_frac,
                "intercept_width": self.icpt_width, "intercept_frac": self.icpt_frac,
                "max_abs_error": self.max_abs_error, "mean_abs_error": self.mean_abs_error}


def _eval_positive(a, seg, slopes, icpts, cfg, slope_frac, icpt_frac):
    """Bit-exact ``y+`` for magnitudes ``a`` in segments ``seg``."""
    pf = slope_frac + cfg.in_fmt.frac_bits
    af = max(pf, icpt_frac)     # PwlTable.acc_frac
    acc = ((np.asarray(slopes)[seg] * a) << (af - pf)) \
        + (np.asarray(icpts)[seg] << (af - icpt_frac))
    y = saturate(round_shift(acc, af - cfg.out_fmt.frac_bits), cfg.out_fmt)
    return np.minimum(y, 1 << cfg.out_fmt.frac_bits)   # never above 1.0: both functions <= 1


def ref_pwl(x, table: PwlTable):
    """Golden model: input codes (any integer array) -> output codes, bit-exact with the RTL."""
    cfg = table.config
    x = np.asarray(x, dtype=np.int64)
    neg = x < 0
    a = np.minimum(np.abs(x), cfg.a_max)
    seg = np.searchsorted(np.asarray(table.boundaries, dtype=np.int64), a, side="right")
    y = _eval_positive(a, seg, table.slopes, table.intercepts, cfg, table.slope_frac,
                       table.icpt_frac)
    if cfg.func == "sigmoid":
        y = np.where(neg, (1 << cfg.out_fmt.frac_bits) - y, y)
    else:
        y = np.where(neg, -y, y)
    return saturate(y, cfg.out_fmt)
