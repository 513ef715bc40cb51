# SPDX-License-Identifier: Apache-2.0
"""The conv array's golden model (exact integer im2col x GEMM) and an independent float
reference."""

import numpy as np

from gen.core.fixed import to_signed, to_unsigned  # noqa: F401 - re-exported for callers

__all__ = ["ref_conv", "direct_conv", "to_signed", "to_unsigned"]


def ref_conv(x, w, stride=1, pad=0):
    """Golden model: exact integer convolution (cross-correlation, as in CNNs).

    ``x`` is ``(Ic, H, W)`` or a batch ``(B, Ic, H, W)``, ``w`` is ``(Oc, Ic, kh, kw)``,
    integers; returns the ``(Oc, Ho, Wo)`` (or ``(B, Oc, Ho, Wo)``) int64 result.  Computed
    as im2col x GEMM in int64 over all images at once (exact while ``|sum| < 2**63``).
    """
    x = np.asarray(x, dtype=np.int64)
    w = np.asarray(w, dtype=np.int64)
    if x.ndim not in (3, 4) or w.ndim != 4:
        raise ValueError(f"x must be (Ic, H, W) or (B, Ic, H, W) and w (Oc, Ic, kh, kw), "
                         f"not {x.shape} and {w.shape}")
    batched = x.ndim == 4
    if not batched:
        x = x[None]
    b, ic, h, wd = x.shape
    oc, ic2, kh, kw = w.shape
    if ic != ic2:
        raise ValueError(f"weights have {ic2} input channels but the input has {ic}")
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    ho = (h + 2 * pad - kh) // stride + 1
    wo = (wd + 2 * pad - kw) // stride + 1
    cols = np.empty((ic, kh, kw, b, ho, wo), dtype=np.int64)
    for ky in range(kh):
        for kx in range(kw):
            cols[:, ky, kx] = xp[:, :, ky: ky + stride * (ho - 1) + 1: stride,
                                 kx: kx + stride * (wo - 1) + 1: stride].transpose(1, 0, 2, 3)
    y = (w.reshape(oc, -1) @ cols.reshape(-1, b * ho * wo)).reshape(oc, b, ho, wo)
    y = np.ascontiguousarray(y.transpose(1, 0, 2, 3))
    return y if batched else y[0]


def direct_conv(x, w, stride=1, pad=0):
    """Independent float reference: ``scipy.signal.correlate`` per (Oc, Ic) pair (and per
    image for a ``(B, Ic, H, W)`` batch)."""
    from scipy.signal import correlate
    x = np.asarray(x, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    if x.ndim == 4:
        return np.stack([direct_conv(xi, w, stride, pad) for xi in x])
    xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad)))
    out = []
    for o in range(w.shape[0]):
        acc = sum(correlate(xp[i], w[o, i], mode="valid", method="direct")
                  for i in range(x.shape[0]))
        out.append(acc[::stride, ::stride])
    return np.array(out)
