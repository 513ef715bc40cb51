# SPDX-License-Identifier: Apache-2.0
"""The SpMV engine's bit-exact golden model.

What the block computes
-----------------------
``y = W @ x`` for a sparse ``rows x cols`` weight matrix ``W`` (codes of ``w_fmt``)
and a dense activation vector ``x`` (codes of ``x_fmt``).  Each row accumulates its
products **in column order** in a signed ``acc_width``-bit accumulator with
``w_fmt.frac_bits + x_fmt.frac_bits`` fraction bits that *saturates on every add*::

    acc_r = 0;  for j in 0..cols-1 with W[r, j] != 0 and x[j] != 0:
                    acc_r = saturate(acc_r + W[r, j] * x[j], acc_width)
    y_r   = saturate(round_shift(acc_r, acc_frac - out_fmt.frac_bits), out_fmt)

(:mod:`gen.core.fixed` rules: round half up, saturate).  With no saturation this is the
exact integer ``W @ x`` re-scaled to ``out_fmt``.
"""

import numpy as np

from gen.core.fixed import requantise, saturate
from gen.spmv.config import SpmvConfig

__all__ = ["ref_spmv"]


def ref_spmv(w_codes, x_codes, cfg: SpmvConfig):
    """Golden model: codes in, ``out_fmt`` codes out (saturating, column-ordered sums)."""
    w = np.asarray(w_codes, dtype=np.int64)
    x = np.asarray(x_codes, dtype=np.int64).ravel()
    if w.ndim != 2 or w.shape[1] != len(x):
        raise ValueError(f"shapes do not match: weights {w.shape}, x {x.shape}")
    acc = np.zeros(w.shape[0], dtype=np.int64)
    afmt = cfg.acc_fmt
    if cfg.acc_width >= 63:  # python ints: no int64 overflow before saturation
        acc = [0] * w.shape[0]
        lo, hi = afmt.min_code, afmt.max_code
        for j in np.flatnonzero(x):
            for r in np.flatnonzero(w[:, j]):
                acc[r] = min(hi, max(lo, acc[r] + int(w[r, j]) * int(x[j])))
        return requantise(np.array(acc, dtype=object).astype(np.int64), cfg.acc_frac,
                          cfg.out_fmt)
    for j in np.flatnonzero(x):
        col = w[:, j]
        acc = saturate(acc + col * x[j], afmt)
    return requantise(acc, cfg.acc_frac, cfg.out_fmt)
