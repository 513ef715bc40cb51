# SPDX-License-Identifier: Apache-2.0
"""Column blocks chosen for end-to-end time, and the SpMV roofline.

Column planning (:func:`plan_columns`)
--------------------------------------
A matrix that fits the engine in one block still loads faster than it computes only
once it is cut into column blocks: the engine loads block ``k + 1`` into its second bank
while block ``k`` computes, so with several blocks only the first block's load and the
last block's compute are not overlapped.  Every block costs one END beat and its lanes'
imbalance, and the result drain follows the last block, so the best cut is short blocks
at the end.  :func:`plan_columns` tries uniform cuts into 1..12 blocks and cuts whose
widths grow geometrically from the last block back to the first, and keeps the one with
the fewest end-to-end cycles by the exact cycle model (:func:`gen.spmv.cycle_model`: first
weight beat to the last result transfer).

Roofline (:func:`roofline_beats`)
---------------------------------
The words that must cross each port: the weight words of the whole matrix compiled as
one block (non-zeros, a ROW word per row, a SKIP word per empty (column, PE) pair), packed
perfectly into beats of ``w_lanes`` (a matrix larger than the memories: its blocks at
``max_cols`` columns, the activations once per block); the activations and results at
``bus_words`` words per beat (results at ``drain_lanes`` when it is above 1).  Lane imbalance and the END beats of the blocks
are costs of the schedule, not of the roofline.
"""

import numpy as np

from gen.spmv.compile import compile_tiled, tile_jobs
from gen.spmv.config import SpmvConfig
from gen.spmv.cycles import cycle_model

__all__ = ["plan_columns", "column_candidates", "roofline_beats"]


def column_candidates(cols: int, max_cols: int) -> list:
    """Candidate ``col_starts``: uniform cuts into 1..12 blocks and geometric ones (last
    block 2..12 columns, each earlier one 1.3..2 times the next), each block at most
    ``max_cols`` wide; no duplicates, in a fixed order."""
    seen, out = set(), []

    def add(sizes):
        sizes = [s for s in sizes if s > 0]
        if not sizes or max(sizes) > max_cols:
            return
        starts = tuple(int(v) for v in np.cumsum([0] + sizes[:-1]))
        if starts not in seen:
            seen.add(starts)
            out.append(list(starts))

    for n in range(1, 13):
        size = -(-cols // n)
        add([min(size, cols - a) for a in range(0, cols, size)])
    for last in (2, 4, 6, 8, 12):
        for grow in (1.3, 1.5, 1.7, 2.0):
            sizes, size = [], float(last)
            while sum(sizes) < cols:
                sizes.append(max(1, int(round(size))))
                size *= grow
            sizes[-1] -= sum(sizes) - cols
            add(sizes[::-1])
    return out


def plan_columns(w_codes, x_codes, cfg: SpmvConfig, alloc: str = "balanced") -> list:
    """The ``col_starts`` with the fewest end-to-end cycles for this matrix and vector
    (first weight beat to last result, by :func:`gen.spmv.cycle_model` at full rate);
    ``[0]`` for a matrix that does not fit one block (it is tiled by ``max_cols``)."""
    w = np.asarray(w_codes)
    rows, cols = w.shape
    if rows > cfg.max_rows or cols > cfg.max_cols or cols < 2:
        return [0]
    best = None
    for starts in column_candidates(cols, cfg.max_cols):
        try:
            blocks = compile_tiled(w, cfg, alloc, col_starts=starts)
        except ValueError:
            continue
        run = cycle_model(tile_jobs(blocks, x_codes), cfg)
        end = run["o"][-1] + 1 if run["o"] else run["cycles_run"]
        if best is None or end < best[0]:
            best = (end, starts)
    return best[1] if best is not None else [0]


def roofline_beats(w_codes, cfg: SpmvConfig, alloc: str = "balanced") -> dict:
    """The beats each shell port must carry at least (module docstring)."""
    w = np.asarray(w_codes)
    rows, cols = w.shape
    words = xwords = 0
    for b in compile_tiled(w, cfg, alloc):
        words += b.nnz + int((b.counts == 0).sum()) + (b.rows if b.first else 0)
        xwords += b.cols
    out_words = cfg.drain_lanes if cfg.drain_lanes > 1 else cfg.bus_words
    return {"s_axis_w": -(-words // cfg.w_lanes), "s_axis_x": -(-xwords // cfg.bus_words),
            "m_axis_y": -(-rows // out_words)}
