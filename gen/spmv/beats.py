# SPDX-License-Identifier: Apache-2.0
"""The SpMV weight stream: a compiled block as packed beats of words.

Weight stream (see :func:`weight_beats`)
----------------------------------------
A beat holds ``w_lanes`` packed words ``{value: w_width, idx: idx_bits, pe: pe_bits,
kind: 3}`` (``value`` in the LSBs, lane 0 in the beat's LSBs).  Lane ``l`` feeds the
PEs ``p`` with ``p mod L = l``.  Kinds: 0 ENTRY (append ``(value, idx)`` to PE ``pe``'s
entries), 1 LAST (the same, then close PE ``pe``'s current column: ``ptr[col] =
(start, count)``, ``col += 1``), 2 SKIP (close PE ``pe``'s column with count 0),
3 ROW (``rowmap[lane][row] = (pe, idx)``), 4 END (the whole beat; ``value`` 1 = last
block of its block row; the block's column count is what the PEs closed), 5 NOP.
Per lane: the ROW words the block carries (by default all of the block row's rows in its
first block; :func:`gen.spmv.spread_rows` spreads them over its blocks, each lane's rows
in order), then per column, per PE of the lane, ENTRY* LAST or one SKIP.  So a block costs
``max over lanes of (ROW words + non-zeros + empty (column, PE) pairs of the lane) + 1``
beats: one word per non-zero.
"""

import numpy as np

from gen.core.lanes import lane_beats

from gen.spmv.compile import SpmvPlan
from gen.spmv.config import KIND_END, KIND_ENTRY, KIND_LAST, KIND_NOP, KIND_ROW, KIND_SKIP

__all__ = ["weight_beats", "beat_count"]


def _packer(cfg):
    """``pack(kind, pe, idx, value)`` for ``cfg`` (the field offsets computed once)."""
    ww = cfg.w_fmt.width
    vmask, pe_at = (1 << ww) - 1, ww + cfg.idx_bits
    kind_at = pe_at + cfg.pe_bits

    def pack(kind, pe, idx, value):
        return (int(value) & vmask) | (int(idx) << ww) | (int(pe) << pe_at) | (kind << kind_at)
    return pack


def beat_count(plan: SpmvPlan) -> int:
    """``len(weight_beats(plan))`` without building the beats."""
    cfg = plan.cfg
    L = cfg.w_lanes
    lane = plan.row_words.copy()
    per_pe = plan.loads + (plan.counts == 0).sum(axis=1)
    lane += np.bincount(np.arange(cfg.pes) % L, weights=per_pe, minlength=L).astype(np.int64)
    return int(lane.max()) + 1


def weight_beats(plan: SpmvPlan) -> list:
    """The weight-stream beats of a block, each ``w_lanes`` packed words (lane 0 in the
    LSBs).  Lane ``l`` carries the ROW words of its rows ``r = l mod L`` that the block
    carries (:meth:`SpmvPlan.lane_rows`: all of them in the first block of a block row
    unless :func:`gen.spmv.spread_rows` spread them), then column by column, for each of
    its PEs ``p = l mod L``, the PE's entries (ENTRY ... LAST, the LAST word closing the
    PE's column) or one SKIP word when the PE has nothing in that column.  Lanes are
    padded with NOP words to equal length and closed by one beat of END words (value 1 =
    last block of its block row).
    """
    cfg = plan.cfg
    L = cfg.w_lanes
    pack = _packer(cfg)
    lanes = [[pack(KIND_ROW, plan.row_pe[r], plan.row_local[r], 0)
              for r in plan.lane_rows(lane)] for lane in range(L)]
    pos = [0] * cfg.pes
    for j in range(plan.cols):
        for p in range(cfg.pes):
            c = int(plan.counts[p, j])
            if c == 0:
                lanes[p % L].append(pack(KIND_SKIP, p, 0, 0))
            for n in range(c):
                wv, row = plan.entries[p][pos[p]]
                kind = KIND_LAST if n == c - 1 else KIND_ENTRY
                lanes[p % L].append(pack(kind, p, row, wv))
                pos[p] += 1
    return lane_beats(lanes, cfg.word_width, pack(KIND_NOP, 0, 0, 0),
                      pack(KIND_END, 0, 0, int(plan.last)))
