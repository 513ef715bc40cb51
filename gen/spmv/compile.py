# SPDX-License-Identifier: Apache-2.0
"""The SpMV weight compiler: pruning, row allocation, per-PE memory images and
checkerboard tiling.

Weight compiler
---------------
Rows are dealt to ``P`` processing elements (PEs) by an allocator:

``interleave``  row ``r`` -> PE ``r mod P`` (EIE baseline);
``zigzag``      the seed: rows sorted by non-zero count (most first, stable), dealt
                ``0..P-1`` then ``P-1..0`` and so on;
``lpt``         greedy longest-processing-time: rows sorted most-first, each to the
                PE with the smallest load so far (lowest index on ties);
``balanced``    LPT that also evens per-column loads: among the PEs whose load is
                within ``slack`` (= 1) of the smallest, the row goes to the one
                holding the fewest non-zeros in that row's columns (then the least
                loaded, then the lowest index).  Even per-column loads keep the
                per-PE activation FIFOs from drifting apart.

A row's PE-local index is its position in the order rows were dealt to that PE.

Memory layout (per PE, column-packed; loaded at run time, two banks)
--------------------------------------------------------------------
* ``entries[bank][a]`` = ``(weight code, local row)``: the PE's non-zeros of a block,
  column by column (column 0 first), rows ascending inside a column.  No terminators.
* ``ptr[bank][j]`` = ``(start, count)``: where column ``j``'s entries begin in
  ``entries`` and how many there are (``count`` may be 0).
* ``rowmap[lane][bank][r div L]`` = ``(pe, local row)`` for row ``r`` of the block
  row (lane ``r mod L``): results leave in original row order.  With ``drain_lanes``
  ``D > 1`` (``= L``) the rows ``k D .. k D + D - 1`` drain in one clock, row ``r`` from a
  PE of lane ``r mod D``: the allocator then deals each lane's rows (``r mod D = l``)
  to that lane's PEs (``p mod D = l``) only.
* ``acc[local row]``: the accumulators (``acc_fmt``), kept across the blocks of a
  block row, cleared behind the drain (and for ``rows_per_pe`` clocks after reset).

The broadcaster reads every PE's ``ptr[j]`` in parallel and pushes ``(x_j, start,
count)`` only into the FIFOs of PEs with ``count > 0``; a PE then issues one entry
read per clock, back to back across FIFO items.  So a PE spends exactly one clock
per non-zero and none on columns (or zero activations) that hold nothing for it.

Checkerboard tiling (:func:`compile_tiled`)
-------------------------------------------
A matrix larger than ``pes * rows_per_pe`` rows, ``max_cols`` columns or
``mem_depth`` entries per PE is cut into blocks, block row by block row; the rows
of a block row share one allocation, so partial sums stay in the accumulators and
are drained once, after the block row's last block.  The hardware loads the next
block into the second bank while it computes on the current one.
"""

from dataclasses import dataclass, replace
import math

import numpy as np

from gen.core.fixed import check_codes
from gen.spmv.config import ALLOCATORS, SpmvConfig

__all__ = ["SpmvPlan", "allocate", "compile_weights", "compile_tiled", "spread_rows",
           "tile_jobs", "order_free", "gather_tiled", "prune", "load_report"]


def prune(w, density: float):
    """Magnitude pruning: keep the ``round(density * size)`` largest ``|w|`` (ties: first)."""
    w = np.asarray(w, dtype=np.float64)
    if not 0.0 <= density <= 1.0:
        raise ValueError(f"density must be between 0 and 1, not {density}")
    keep = int(round(density * w.size))
    out = np.zeros_like(w)
    if keep:
        order = np.argsort(-np.abs(w).ravel(), kind="stable")[:keep]
        out.ravel()[order] = w.ravel()[order]
    return out


def allocate(row_nnz, pes: int, alloc: str = "balanced", mask=None, slack: int = 1,
             capacity: int | None = None):
    """Assign rows to PEs: returns ``(row_pe, row_local)`` int arrays.

    ``row_nnz`` is the non-zero count per row; ``mask`` (bool rows x cols) is needed
    by ``balanced`` only.  ``capacity`` limits the rows per PE for ``lpt`` and
    ``balanced`` (full PEs are skipped).  Local indices follow the order rows are
    dealt to a PE.
    """
    row_nnz = np.asarray(row_nnz, dtype=np.int64)
    n = len(row_nnz)
    if alloc not in ALLOCATORS:
        raise ValueError(f"alloc must be one of {', '.join(ALLOCATORS)}, not {alloc!r}")
    row_pe = np.zeros(n, dtype=np.int64)
    big = np.iinfo(np.int64).max // 4
    cap = capacity if capacity is not None else max(1, n)
    nrows = np.zeros(pes, dtype=np.int64)
    order = np.argsort(-row_nnz, kind="stable")
    if alloc == "interleave":
        order = np.arange(n)
        row_pe = order % pes
    elif alloc == "zigzag":
        k = np.arange(n)
        lap, pos = k // pes, k % pes
        row_pe[order] = np.where(lap % 2 == 0, pos, pes - 1 - pos)
    elif alloc == "lpt":
        loads = np.zeros(pes, dtype=np.int64)
        for r in order:
            p = int(np.argmin(np.where(nrows < cap, loads, big)))
            row_pe[r] = p
            loads[p] += row_nnz[r]
            nrows[p] += 1
    else:  # balanced
        if mask is None:
            raise ValueError("alloc 'balanced' needs the non-zero mask")
        mask = np.asarray(mask, dtype=bool)
        loads = np.zeros(pes, dtype=np.int64)
        colload = np.zeros((pes, mask.shape[1]), dtype=np.int64)
        for r in order:
            cols = np.flatnonzero(mask[r])
            eff = np.where(nrows < cap, loads, big)
            cand = np.flatnonzero(eff <= eff.min() + slack)
            overlap = colload[cand][:, cols].sum(axis=1) if len(cols) else np.zeros(len(cand))
            best = np.lexsort((cand, loads[cand], overlap))[0]
            p = int(cand[best])
            row_pe[r] = p
            loads[p] += row_nnz[r]
            nrows[p] += 1
            colload[p, cols] += 1
    row_local = np.zeros(n, dtype=np.int64)
    seen = np.zeros(pes, dtype=np.int64)
    for r in order:
        row_local[r] = seen[row_pe[r]]
        seen[row_pe[r]] += 1
    return row_pe, row_local


@dataclass
class SpmvPlan:
    """A compiled job: the allocation and every PE's memory images."""

    cfg: SpmvConfig
    alloc: str
    shape: tuple
    row_pe: np.ndarray          # per original row
    row_local: np.ndarray
    counts: np.ndarray          # (P, cols): non-zeros of PE p in column j  (= ptr count)
    starts: np.ndarray          # (P, cols): ptr start
    entries: list               # per PE: list of (weight code, local row), column-packed
    entry_cols: list            # per PE: column of each entry (for the cycle model/docs)
    first: bool = True          # first block of its block row: carries the ROW words
    last: bool = True           # last block of its block row: results are drained after it
    row_offset: int = 0         # position of the block in the whole matrix (tiled jobs)
    col_offset: int = 0
    col_ids: np.ndarray | None = None   # the matrix columns of the block's columns, in block
    #                                     order (None: col_offset .. col_offset + cols - 1)
    row_span: np.ndarray | None = None  # (w_lanes, 2): per lane l, the positions [lo, hi) of
    #                                     the lane's rows (r = l + w_lanes * i) whose ROW words
    #                                     this block carries (None: all of them in the first
    #                                     block of its block row, none in the others)

    @property
    def rows(self) -> int:
        return self.shape[0]

    @property
    def cols(self) -> int:
        return self.shape[1]

    @property
    def columns(self) -> np.ndarray:
        """The matrix columns of the block's columns, in the order the block holds them."""
        if self.col_ids is not None:
            return np.asarray(self.col_ids, dtype=np.int64)
        return np.arange(self.col_offset, self.col_offset + self.cols)

    def lane_rows(self, lane: int) -> range:
        """The rows of the block row whose ROW words this block carries on ``lane``, in
        order (rows ``r = lane mod w_lanes``)."""
        L = self.cfg.w_lanes
        if self.row_span is None:
            return range(lane, self.rows if self.first else 0, L)
        lo, hi = (int(v) for v in self.row_span[lane])
        return range(lane + L * lo, lane + L * hi, L)

    @property
    def row_words(self) -> np.ndarray:
        """ROW words this block carries per lane."""
        return np.array([len(self.lane_rows(lane)) for lane in range(self.cfg.w_lanes)],
                        dtype=np.int64)

    @property
    def loads(self) -> np.ndarray:
        return self.counts.sum(axis=1)

    @property
    def nnz(self) -> int:
        return int(self.counts.sum())

    def memory_images(self) -> dict:
        """Hex text images: ``pe<p>_entries.hex`` (``{row, weight}``), ``pe<p>_ptr.hex``
        (``{nonzero, count, start}``) and ``rowmap.hex`` (``{pe, idx}``, original row
        order), one word per line, MSBs first (as the RTL memories hold them)."""
        cfg = self.cfg
        wmask = (1 << cfg.w_fmt.width) - 1
        out = {}
        for p in range(cfg.pes):
            out[f"pe{p}_entries.hex"] = "".join(
                f"{(row << cfg.w_fmt.width) | (w & wmask):x}\n" for w, row in self.entries[p])
            nz_shift = cfg.addr_bits + cfg.count_bits
            out[f"pe{p}_ptr.hex"] = "".join(
                f"{(int(c > 0) << nz_shift) | (int(c) << cfg.addr_bits) | int(s):x}\n"
                for s, c in zip(self.starts[p], self.counts[p]))
        out["rowmap.hex"] = "".join(f"{(int(pe) << cfg.idx_bits) | int(i):x}\n"
                                    for pe, i in zip(self.row_pe, self.row_local))
        return out


def _weight_codes(w_codes, cfg: SpmvConfig):
    """A 2-D matrix of ``w_fmt`` codes as int64 (ValueError / TypeError otherwise)."""
    w = np.asarray(w_codes)
    if w.ndim != 2:
        raise ValueError(f"weights must be a 2-D matrix, not {w.ndim}-D")
    if w.dtype.kind not in "iu":
        raise TypeError(f"weight codes must be integers, not {w.dtype}")
    return check_codes(w, cfg.w_fmt, "weight")


def compile_weights(w_codes, cfg: SpmvConfig, alloc: str = "balanced") -> SpmvPlan:
    """Integer weight codes (rows x cols) -> an :class:`SpmvPlan`; checks the sizes fit."""
    w = _weight_codes(w_codes, cfg)
    rows, cols = w.shape
    if rows > cfg.max_rows:
        raise ValueError(f"rows must be at most pes * rows_per_pe = {cfg.max_rows}, "
                         f"not {rows}")
    if cols > cfg.max_cols:
        raise ValueError(f"cols must be at most max_cols = {cfg.max_cols}, not {cols}")
    mask = w != 0
    row_pe, row_local = _allocate_rows(mask, cfg, alloc)
    return _block(w, row_pe, row_local, cfg, alloc)


def _allocate_rows(mask, cfg, alloc):
    D = cfg.drain_lanes
    if D == 1:
        row_pe, row_local = allocate(mask.sum(axis=1), cfg.pes, alloc, mask,
                                     capacity=cfg.rows_per_pe)
    else:
        # the wide drain reads row r from lane r mod D: each lane's rows are dealt to the
        # lane's own PEs (p mod D = lane) by the same allocator
        row_pe = np.zeros(mask.shape[0], dtype=np.int64)
        row_local = np.zeros(mask.shape[0], dtype=np.int64)
        for lane in range(D):
            rows = np.arange(lane, mask.shape[0], D)
            pe, local = allocate(mask[rows].sum(axis=1), cfg.pes // D, alloc, mask[rows],
                                 capacity=cfg.rows_per_pe)
            row_pe[rows], row_local[rows] = pe * D + lane, local
    per_pe_rows = np.bincount(row_pe, minlength=cfg.pes) if len(row_pe) \
        else np.zeros(cfg.pes, int)
    if per_pe_rows.max(initial=0) > cfg.rows_per_pe:
        raise ValueError(f"allocator {alloc} gave a PE {per_pe_rows.max()} rows; "
                         f"rows_per_pe is {cfg.rows_per_pe}")
    return row_pe, row_local


def _block(w, row_pe, row_local, cfg, alloc, **where):
    rows, cols = w.shape
    mask = w != 0
    counts = np.zeros((cfg.pes, cols), dtype=np.int64)
    starts = np.zeros((cfg.pes, cols), dtype=np.int64)
    entries = [[] for _ in range(cfg.pes)]
    entry_cols = [[] for _ in range(cfg.pes)]
    for j in range(cols):
        nz = np.flatnonzero(mask[:, j])
        for p in range(cfg.pes):
            starts[p, j] = len(entries[p])
        # rows ascending by local index inside a column
        for r in nz[np.lexsort((row_local[nz], row_pe[nz]))]:
            p = int(row_pe[r])
            entries[p].append((int(w[r, j]), int(row_local[r])))
            entry_cols[p].append(j)
            counts[p, j] += 1
    loads = counts.sum(axis=1)
    if loads.max(initial=0) > cfg.mem_depth:
        raise ValueError(f"a PE needs {loads.max()} weight entries; mem_depth is "
                         f"{cfg.mem_depth}")
    return SpmvPlan(cfg, alloc, (rows, cols), row_pe, row_local, counts, starts, entries,
                    entry_cols, **where)


def compile_tiled(w_codes, cfg: SpmvConfig, alloc: str = "balanced", block_rows=None,
                  block_cols=None, col_starts=None, col_order=None) -> list:
    """Cut a matrix larger than the on-chip memories into a checkerboard of blocks.

    Blocks are ``block_rows x block_cols`` (defaults: ``pes * rows_per_pe`` and
    ``max_cols``; ``block_cols`` is halved until every PE's entries of every block fit
    ``mem_depth``), listed block row by block row, column blocks left to right.  All
    blocks of a block row share one row allocation (made on the whole block row), so
    the accumulators sum the partial products across column blocks in column order:
    the result equals :func:`ref_spmv` of the whole matrix.  Returns a list of
    :class:`SpmvPlan` (``first``/``last`` mark the ends of each block row).
    ``col_starts`` (instead of ``block_cols``): the first column of each column block,
    ascending from 0 (blocks of any widths up to ``max_cols``, e.g. from
    :func:`gen.spmv.plan_columns`).
    ``col_order``: a permutation of the columns; the blocks then cut the columns in this
    order (``col_starts`` count positions in it) and each block's ``col_ids`` names its
    matrix columns (:func:`tile_jobs` sends their activations).  The row allocation does not
    depend on it; the accumulators then add a row's products in this order, which is the
    column order's result whenever no partial sum can saturate (:func:`order_free`).
    """
    w = _weight_codes(w_codes, cfg)
    rows, cols = w.shape
    order = None
    if col_order is not None:
        order = np.asarray(col_order, dtype=np.int64).ravel()
        if not np.array_equal(np.sort(order), np.arange(cols)):
            raise ValueError(f"col_order must be a permutation of the {cols} columns")
        w = w[:, order]
    br = cfg.max_rows if block_rows is None else int(block_rows)
    bc = cfg.max_cols if block_cols is None else int(block_cols)
    if not 1 <= br <= cfg.max_rows:
        raise ValueError(f"block_rows must be between 1 and {cfg.max_rows}, not {br}")
    if not 1 <= bc <= cfg.max_cols:
        raise ValueError(f"block_cols must be between 1 and {cfg.max_cols}, not {bc}")
    allocs = []
    for r0 in range(0, max(rows, 1), br):
        sub = w[r0:r0 + br] != 0
        allocs.append((r0, *_allocate_rows(sub, cfg, alloc)))
    if col_starts is None:
        bc = _fit_block_cols(w, allocs, br, bc, cfg)
        col_starts = list(range(0, max(cols, 1), bc)) if cols else [0]
    else:       # explicit blocks: _block checks each one's entries against mem_depth
        col_starts = _check_starts(col_starts, cols, cfg)
    blocks = []
    ends = col_starts[1:] + [max(cols, col_starts[-1])]
    for r0, row_pe, row_local in allocs:
        for n, (c0, c1) in enumerate(zip(col_starts, ends)):
            blocks.append(_block(w[r0:r0 + br, c0:c1], row_pe, row_local, cfg, alloc,
                                 first=(n == 0), last=(n == len(col_starts) - 1),
                                 row_offset=r0, col_offset=c0,
                                 col_ids=None if order is None else order[c0:c1]))
    return blocks


def spread_rows(blocks, row_words) -> list:
    """The ``blocks`` with their ROW words spread over the blocks of each block row:
    ``row_words[k][l]`` ROW words of lane ``l`` in block ``k`` (each lane's rows in order,
    the next ones after those of the block row's earlier blocks).  The engine writes a ROW
    word into the rowmap bank of the block row being loaded whatever block carries it (its
    lane's row counter counts on until the block row's last END), so any split is valid as
    long as every block row's blocks carry exactly its rows; a lane with fewer words in a
    block than the block's longest lane fills NOP padding with them, so rows spread into
    the lanes' padding cost no beats.  Returns new plans (``row_span`` set)."""
    if len(row_words) != len(blocks):
        raise ValueError(f"row_words needs one entry per block ({len(blocks)}), "
                         f"not {len(row_words)}")
    out, pos = [], None
    for plan, words in zip(blocks, row_words):
        L = plan.cfg.w_lanes
        words = np.asarray(words, dtype=np.int64).ravel()
        if len(words) != L or (words < 0).any():
            raise ValueError(f"row_words per block must be {L} counts >= 0, not {list(words)}")
        if plan.first or pos is None:
            pos = np.zeros(L, dtype=np.int64)
        span = np.stack([pos, pos + words], axis=1)
        pos = pos + words
        if plan.last:
            need = np.array([len(range(lane, plan.rows, L)) for lane in range(L)])
            if not np.array_equal(pos, need):
                raise ValueError(f"row_words of a block row must add up to its rows per lane "
                                 f"{list(need)}, not {list(pos)}")
        out.append(replace(plan, row_span=span))
    if pos is not None and not blocks[-1].last:
        raise ValueError("row_words: the blocks must end with a block row's last block")
    return out


def _fit_block_cols(w, allocs, br, bc, cfg):
    """``bc`` halved until every PE's entries of every ``br x bc`` block fit ``mem_depth``."""
    cols = w.shape[1]
    while True:
        need = 0
        for r0, row_pe, _ in allocs:
            sub = w[r0:r0 + br] != 0
            for c0 in range(0, max(cols, 1), bc):
                per = np.zeros(cfg.pes, dtype=np.int64)
                np.add.at(per, row_pe, sub[:, c0:c0 + bc].sum(axis=1))
                need = max(need, int(per.max(initial=0)))
        if need <= cfg.mem_depth or bc == 1:
            break
        bc = (bc + 1) // 2
    if need > cfg.mem_depth:
        raise ValueError(f"a PE needs {need} weight entries for one column; mem_depth is "
                         f"{cfg.mem_depth}")
    return bc


def _check_starts(col_starts, cols, cfg):
    starts = [int(c) for c in col_starts]
    widths = [b - a for a, b in zip(starts, starts[1:] + [cols])]
    if not starts or starts[0] != 0 or min(widths) < (1 if cols else 0) \
            or max(widths) > cfg.max_cols:
        raise ValueError(f"col_starts must rise from 0 in blocks of 1 to max_cols = "
                         f"{cfg.max_cols} columns, not {starts} for {cols} columns")
    return starts


def tile_jobs(blocks, x_codes) -> list:
    """``[(block, its activations), ...]`` for :func:`run_jobs` / :func:`cycle_model` (the
    activations of each block's columns, in the block's column order)."""
    x = np.asarray(x_codes, dtype=np.int64).ravel()
    return [(b, x[b.columns]) for b in blocks]


def order_free(w_codes, cfg: SpmvConfig, x_codes=None) -> bool:
    """True when no row's partial sum can saturate the accumulator, so that every column
    order gives the column order's result bit for bit: ``sum_j |W_rj| * |x_j|`` within
    ``acc_fmt`` for every row, for these activations ``x_codes`` or, without them, for any
    (``|x_j| = 2**(x_width - 1)``)."""
    w = np.abs(np.asarray(w_codes, dtype=np.int64))
    if w.size == 0:
        return True
    if x_codes is None:
        bound = int(w.sum(axis=1).max()) << (cfg.x_fmt.width - 1)
    else:
        x = np.abs(np.asarray(x_codes, dtype=np.int64).ravel()).astype(object)
        bound = max(int(v) for v in w.astype(object) @ x)
    return bound <= (1 << (cfg.acc_width - 1)) - 1


def gather_tiled(blocks, ys) -> np.ndarray:
    """Concatenate the per-block-row results of a tiled run into ``y``."""
    return np.concatenate([y for b, y in zip(blocks, ys) if b.last] or
                          [np.zeros(0, dtype=np.int64)])


def load_report(plan: SpmvPlan) -> dict:
    """Per-PE loads, max/mean and the ideal cycle count ``ceil(nnz / P)``."""
    loads = plan.loads
    mean = loads.mean() if len(loads) else 0.0
    return {"allocator": plan.alloc, "pes": plan.cfg.pes, "nnz": plan.nnz,
            "loads": [int(v) for v in loads], "max_load": int(loads.max(initial=0)),
            "mean_load": float(mean),
            "max_over_mean": float(loads.max() / mean) if mean else 1.0,
            "ideal_cycles": math.ceil(plan.nnz / plan.cfg.pes)}
