# SPDX-License-Identifier: Apache-2.0
"""The FC engine's golden model: the exact integer ``W @ X``."""

from gen.core.fixed import check_codes
from gen.fc.config import FcConfig

__all__ = ["ref_fc"]


def ref_fc(w, x, cfg: FcConfig):
    """Golden model: integer codes ``W`` (rows x cols) and ``X`` (cols x N) -> ``W @ X``
    (int64), exactly what the RTL outputs (no rounding: the accumulator is wide enough)."""
    w = check_codes(w, cfg.w_fmt, "weights")
    x = check_codes(x, cfg.x_fmt, "activations")
    # Python ints via object dtype would be exact too; int64 suffices for <= 2*24+16 bits.
    return w @ x
