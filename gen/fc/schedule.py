# SPDX-License-Identifier: Apache-2.0
"""The FC engine's closed-form timing: the decoder walk (:func:`decode_walk`), the exact
schedule of a job when every stream is always valid / ready (:func:`fc_schedule`), and
the totals derived from them (fixed overhead, dense baseline, cycles from counts)."""

import numpy as np

from gen.fc.config import FcConfig
from gen.fc.fdcsr import FdCsr, segment_popcounts

__all__ = ["decode_walk", "fc_schedule", "model_cycles_from_counts", "dense_cycles",
           "fixed_overhead"]


def fixed_overhead(cols, cfg: FcConfig) -> int:
    """Clocks of one job besides the decoder's: ``cmd`` (1), the activation load
    (``cols``), ``meta`` to the decoder (:attr:`FcConfig.meta_latency`) and the pipeline
    (:attr:`FcConfig.latency`); a job takes ``fixed_overhead + decoder clocks``."""
    return cols + 2 + cfg.meta_latency + cfg.latency


def _beats(fd: FdCsr, cfg: FcConfig):
    """Masks and offsets per meta beat, padded to whole beats per row: arrays of shape
    (rows, beats_per_row, segs_per_beat)."""
    c = cfg.segs_per_beat
    spr = fd.segs_per_row
    bpr = max(1, -(-spr // c))
    masks = np.zeros((fd.rows, bpr * c), dtype=np.int64)
    masks[:, :spr] = fd.masks.astype(np.int64).reshape(fd.rows, spr)
    counts = segment_popcounts(masks, fd.row_width)
    flat_counts = counts.reshape(-1)
    offsets = (np.concatenate([[0], np.cumsum(flat_counts)[:-1]])
               .reshape(fd.rows, bpr * c))
    return masks.reshape(fd.rows, bpr, c), offsets.reshape(fd.rows, bpr, c), \
        counts.reshape(fd.rows, bpr, c).sum(axis=2)


def decode_walk(beat_nnz, k):
    """The decoder's clock-by-clock behaviour from per-beat non-zero counts.

    ``beat_nnz``: (rows, beats_per_row) counts.  Each clock the decoder issues
    ``min(k, left)`` non-zeros of the held beat; if that empties the beat and the beat is
    not its row's last, the group is topped up with the next beat's first non-zeros
    (look-ahead), and the next beat is accepted in the same clock.  A beat with nothing
    left still takes one clock (that clock may issue the next beat's non-zeros).
    Returns ``(finish, groups)``: the clock (1-based) in which each beat is finished and
    the size of every issued group, in order.
    """
    counts = np.asarray(beat_nnz, dtype=np.int64)
    bpr = counts.shape[1]
    flat = counts.reshape(-1).tolist()
    nb = len(flat)
    finish = np.zeros(nb, dtype=np.int64)
    groups = []
    clock, idx = 0, 0
    cur = flat[0] if nb else 0
    while idx < nb:
        clock += 1
        take = min(k, cur)
        cur -= take
        extra = 0
        if cur == 0 and (idx % bpr) != bpr - 1 and idx + 1 < nb:
            extra = min(k - take, flat[idx + 1])
        if take + extra:
            groups.append(take + extra)
        if cur == 0:
            finish[idx] = clock
            idx += 1
            if idx < nb:
                cur = flat[idx] - extra
    return finish, groups


def fc_schedule(fd: FdCsr, cfg: FcConfig) -> dict:
    """Exact cycle model of the engine for one job (all streams always valid/ready).

    Cycle 0 is the ``cmd`` transfer; ``x`` transfers at 1..cols; the first ``meta``
    beat at ``cols + 1`` enters the input register stage, then the two-entry skid buffer,
    and the decoder takes it at ``cols + 1 + meta_latency`` (``cols + 3``).  The decoder
    then runs as :func:`decode_walk` describes: up to ``k = nz_per_clock`` non-zeros per
    clock, a beat boundary inside a row costs nothing (look-ahead), a beat with nothing
    left costs one clock, each beat is accepted in the clock that finishes the previous
    one.  Row ``r``'s result transfers on ``y`` at ``cols + 1 + meta_latency + F_r +
    latency`` where ``F_r`` is the clock that finishes the row's last beat.  So ``cycles
    = S + fixed_overhead(cols)`` with ``S`` the decoder clocks (:func:`fixed_overhead`:
    ``cols + 12``, activation load, input stage, skid buffer and pipeline).  ``meta``
    transfers whenever the input stage is empty or moves on (:func:`_meta_transfers`).
    Returns the per-row ``y`` cycles, the ``meta`` cycles, the memory requests
    ``(addr, count)`` in order, and totals.  With idle inputs or back-pressure use
    :func:`fc_cycle_model` (which equals this with every pattern ``always``).
    """
    k = cfg.nz_per_clock
    _, _, beat_nnz = _beats(fd, cfg)
    finish, groups = decode_walk(beat_nnz, k)
    first_meta = fd.cols + 1              # meta_open is set by the last x transfer
    first_decode = first_meta + cfg.meta_latency
    bpr = beat_nnz.shape[1]
    accept = first_decode + np.concatenate([[0], finish[:-1]])   # decoder takes beat b
    meta_cycles = _meta_transfers(accept, first_meta)
    row_end = finish.reshape(fd.rows, bpr)[:, -1]
    y_cycles = first_decode + row_end + cfg.latency
    requests, addr = [], 0
    for n in groups:
        requests.append((addr, n))
        addr += n
    decode_clocks = int(finish[-1]) if len(finish) else 0
    overhead = fixed_overhead(fd.cols, cfg)
    assert int(y_cycles[-1]) + 1 == overhead + decode_clocks
    return {"y_cycles": y_cycles.astype(np.int64), "meta_cycles": meta_cycles,
            "requests": requests, "decode_clocks": decode_clocks,
            "cycles": int(y_cycles[-1]) + 1, "fixed_overhead": overhead,
            "ideal_cycles": -(-fd.nnz // k), "beats": int(beat_nnz.size)}


def _meta_transfers(accept, first):
    """Cycles of the ``meta`` transfers, replaying the input register stage ``s0`` and the
    two-entry skid buffer (main, spare) clock by clock, given the cycles ``accept`` in
    which the decoder takes each beat.  ``meta`` transfers while ``s0`` is empty or moves
    into the skid buffer (whose spare entry is free); both are registered conditions."""
    n = len(accept)
    out = np.zeros(n, dtype=np.int64)
    s0 = main = spare = None            # beat index held, or None
    cycle, nxt, dec = first, 0, 0       # dec: the beat the decoder takes next
    while dec < n:
        take = dec < n and accept[dec] == cycle
        # The decoder must find each beat at the head of the skid buffer when it wants it.
        assert not take or main == dec, "front-end model inconsistent"
        push = s0 is not None and spare is None
        meta = nxt < n and (s0 is None or spare is None)
        if not (take or push or meta):
            cycle = int(accept[dec])    # nothing moves until the decoder takes a beat
            continue
        if take:
            dec += 1
            main, spare = (spare, None) if spare is not None else (s0 if push else None, None)
        elif push:
            if main is None:
                main = s0
            else:
                spare = s0
        if meta:
            out[nxt] = cycle
            s0, nxt = nxt, nxt + 1
        elif push:
            s0 = None
        cycle += 1
    return out


def dense_cycles(rows, cols, cfg: FcConfig) -> int:
    """The same engine without zero skipping (every weight issued, ``k`` per clock)."""
    return fixed_overhead(cols, cfg) + rows * (-(-cols // cfg.nz_per_clock))


def model_cycles_from_counts(beat_nnz, cols, cfg: FcConfig) -> int:
    """:func:`fc_schedule`'s total from per-beat non-zero counts (rows x beats_per_row),
    for layers too large to encode."""
    finish, _ = decode_walk(beat_nnz, cfg.nz_per_clock)
    return fixed_overhead(cols, cfg) + int(finish[-1])
