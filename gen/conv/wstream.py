# SPDX-License-Identifier: Apache-2.0
"""The conv array's weight stream: one weight per transfer, or beats of ``w_lanes`` weights.

With ``w_lanes`` = 1 the stream is each chunk's weights in C order ``(o, ic, ky, kx)``.
With ``w_lanes`` ``L > 1`` it is the contents of the row weight banks, beat by beat: per
chunk, per pass (output channels ``cbase .. cbase + R * count``), per block ``b`` of the
pass, per bank address ``a < kq`` of the block (``a = kx * q * kh + ic * kh + ky``, the
order the array reads them), per group ``j < ceil(R / L)`` one beat whose lane ``k`` holds
the weight of output channel ``cbase + b * R + j * L + k`` at that address (0 for
``j * L + k >= R``: the lane writes nothing).  The array writes lane ``k`` into the banks of
rows ``g * R + j * L + k`` of every copy ``g < n`` of the pass, at address
``block * kq + a`` (blocks numbered across the chunk's passes).
"""

import numpy as np

__all__ = ["weight_beats", "chunk_weight_beats"]


def chunk_weight_beats(sched, q: int) -> int:
    """Weight transfers of a chunk of ``q`` input channels: ``Oc q kh kw`` words at one
    lane, else ``sum over passes of count x q kh kw x ceil(R / L)`` beats."""
    layer, L = sched.layer, sched.cfg.w_lanes
    kq = q * layer.kh * layer.kw
    if L == 1:
        return layer.oc * kq
    return sum(p.count * kq * -(-p.r // L) for p in sched.passes)


def weight_beats(w, sched) -> np.ndarray:
    """The weight codes of ``w`` ``(Oc, Ic, kh, kw)`` in stream order (module docstring):
    an ``(n, L)`` integer array, one row per transfer (``(n, 1)`` at one lane)."""
    layer, L = sched.layer, sched.cfg.w_lanes
    w = np.asarray(w, dtype=np.int64)
    out, start = [], 0
    for q in sched.chunk_sizes:
        chunk = w[:, start:start + q]
        start += q
        if L == 1:
            out.append(chunk.reshape(-1, 1))
            continue
        cbase = 0
        for p in sched.passes:
            blocks = chunk[cbase:cbase + p.r * p.count].reshape(
                p.count, p.r, q, layer.kh, layer.kw)
            cbase += p.r * p.count
            # (block, kx, ic, ky, row): the bank address order, rows last
            rows = blocks.transpose(0, 4, 2, 3, 1).reshape(p.count, -1, p.r)
            groups = -(-p.r // L)
            pad = np.zeros((p.count, rows.shape[1], groups * L), dtype=np.int64)
            pad[:, :, :p.r] = rows
            out.append(pad.reshape(-1, L))
    return np.concatenate(out) if out else np.zeros((0, L), dtype=np.int64)
