# SPDX-License-Identifier: Apache-2.0
"""Argument checks shared by ``spnn run conv`` and ``spnn run conv --banked``."""

import re

from gen.core.config import SpnnError
from gen.core.runutil import check_not_empty, int_codes, load_npy

__all__ = ["array_arg", "check_codes", "load_layer_arrays"]

_ARRAY_RE = re.compile(r"^(\d+)x(\d+)$")


def array_arg(text) -> tuple:
    """``(rows, cols)`` of ``--array ROWSxCOLS`` (ROWS 1..512, COLS a power of two 1..64)."""
    m = _ARRAY_RE.match(str(text))
    if not m:
        raise SpnnError(f"--array must be ROWSxCOLS, e.g. 16x4, not {text!r}")
    rows, cols = int(m.group(1)), int(m.group(2))
    if not 1 <= rows <= 512 or cols not in (1, 2, 4, 8, 16, 32, 64):
        raise SpnnError(f"--array must be ROWSxCOLS with ROWS 1..512 and COLS a power of two "
                        f"1..64, not {text!r}")
    return rows, cols


def check_codes(arr, name, width, flag):
    """``arr`` as signed ``width``-bit codes (integers only; the range names ``flag``)."""
    if arr.dtype.kind not in "biu":
        raise SpnnError(f"{name} must hold integers, not {arr.dtype}")
    lo, hi = -(1 << (width - 1)), (1 << (width - 1)) - 1
    return int_codes(arr, name, lo, hi, f"{width}-bit signed codes of {flag} {width}")


def load_layer_arrays(args) -> tuple:
    """``(w, x)`` from ``--weights`` ``(Oc, Ic, kh, kw)`` and ``--input`` ``(Ic, H, W)`` or
    ``(B, Ic, H, W)``: shapes, emptiness and the input channels checked."""
    w = load_npy(args.weights, "--weights")
    x = load_npy(args.input, "--input")
    if w.ndim != 4:
        raise SpnnError(f"--weights must have shape (Oc, Ic, kh, kw), not {w.shape}")
    if x.ndim not in (3, 4):
        raise SpnnError(f"--input must have shape (Ic, H, W) or (B, Ic, H, W), not {x.shape}")
    check_not_empty(w, "--weights")
    check_not_empty(x, "--input")
    if w.shape[1] != x.shape[-3]:
        raise SpnnError(f"--weights has {w.shape[1]} input channels but --input has "
                        f"{x.shape[-3]}")
    return w, x
