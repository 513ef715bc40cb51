# SPDX-License-Identifier: Apache-2.0
"""Sparse matrix-vector engine (seed 000): config, weight compiler, golden and cycle models.

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
  row (lane ``r mod L``): results leave in original row order.
* ``acc[local row]``: the accumulators (``acc_fmt``), kept across the blocks of a
  block row, cleared behind the drain (and for ``rows_per_pe`` clocks after reset).

The broadcaster reads every PE's ``ptr[j]`` in parallel and pushes ``(x_j, start,
count)`` only into the FIFOs of PEs with ``count > 0``; a PE then issues one entry
read per clock, back to back across FIFO items.  So a PE spends exactly one clock
per non-zero and none on columns (or zero activations) that hold nothing for it.

Weight stream (see :func:`weight_beats`)
----------------------------------------
A beat holds ``w_lanes`` packed words ``{value: w_width, idx: idx_bits, pe: pe_bits,
kind: 3}`` (``value`` in the LSBs, lane 0 in the beat's LSBs).  Lane ``l`` feeds the
PEs ``p`` with ``p mod L = l``.  Kinds: 0 ENTRY (append ``(value, idx)`` to PE ``pe``'s
entries), 1 LAST (the same, then close PE ``pe``'s current column: ``ptr[col] =
(start, count)``, ``col += 1``), 2 SKIP (close PE ``pe``'s column with count 0),
3 ROW (``rowmap[lane][row] = (pe, idx)``), 4 END (the whole beat; ``value`` 1 = last
block of its block row; the block's column count is what the PEs closed), 5 NOP.
Per lane: the ROW words of its rows (first block of a block row only), then per
column, per PE of the lane, ENTRY* LAST or one SKIP.  So a block costs
``max over lanes of (rows + non-zeros + empty (column, PE) pairs of the lane) + 1``
beats: one word per non-zero.

Checkerboard tiling (:func:`compile_tiled`)
-------------------------------------------
A matrix larger than ``pes * rows_per_pe`` rows, ``max_cols`` columns or
``mem_depth`` entries per PE is cut into blocks, block row by block row; the rows
of a block row share one allocation, so partial sums stay in the accumulators and
are drained once, after the block row's last block.  The hardware loads the next
block into the second bank while it computes on the current one.

Cycle model
-----------
:func:`cycle_model` steps the same registers as the RTL (loader banks, accumulator
clear, activation accept, pointer read, FIFO push, PE issue, multiply, accumulate,
result drain) clock by clock, reading each port's own handshake pattern
(:mod:`gen.core.stimulus`: idle inputs and back-pressure; ``w_valid_prob`` is the
weight-bandwidth model: random gaps, ``w_lanes * w_valid_prob`` words per clock on
average), and so predicts the cycle number of every transfer exactly.
"""

from collections import deque
from dataclasses import dataclass
import math

import numpy as np

from gen.core.config import check_format, check_int
from gen.core.fixed import QFormat, check_codes, index_bits, requantise, saturate, to_signed
from gen.core.stimulus import ModelSource, make_job, pattern_for

__all__ = ["SpmvConfig", "SpmvPlan", "ALLOCATORS", "allocate", "compile_weights",
           "compile_tiled", "tile_jobs", "gather_tiled",
           "prune", "ref_spmv", "cycle_model", "load_report", "weight_beats", "beat_count", "KIND_ENTRY", "KIND_LAST", "KIND_SKIP",
           "KIND_ROW", "KIND_END", "KIND_NOP"]

ALLOCATORS = ("interleave", "zigzag", "lpt", "balanced")
KIND_ENTRY, KIND_LAST, KIND_SKIP, KIND_ROW, KIND_END, KIND_NOP = 0, 1, 2, 3, 4, 5


@dataclass(frozen=True)
class SpmvConfig:
    """Parameters of the sparse matrix-vector engine.

    Parameters
    ----------
    pes : int
        Processing elements ``P``, 1..256.
    fifo_depth : int
        Depth of each PE's activation FIFO, 1..64.
    rows_per_pe : int
        Accumulators per PE (rows a PE can own), 2..4096.
    max_cols : int
        Columns per job (pointer-table depth), 2..65536.
    mem_depth : int
        Non-zero entries per PE, 2..65536.
    w_fmt, x_fmt : QFormat
        Weight and activation formats (2..32 bits each).
    acc_width : int
        Accumulator width in bits (>= w width + x width, <= 64); fraction bits
        ``w_fmt.frac_bits + x_fmt.frac_bits``; saturates on every add.
    out_fmt : QFormat
        Result format (2..64 bits).
    w_lanes : int
        Words per weight-stream beat ``L``, 1..min(pes, 64): lane ``l`` feeds the PEs
        ``p`` with ``p mod L = l`` and the rowmap of the rows ``r`` with ``r mod L = l``.
    """

    pes: int = 32
    fifo_depth: int = 16
    rows_per_pe: int = 32
    max_cols: int = 256
    mem_depth: int = 1024
    w_fmt: QFormat = QFormat(1, 7)
    x_fmt: QFormat = QFormat(4, 12)
    acc_width: int = 32
    out_fmt: QFormat = QFormat(8, 12)
    w_lanes: int = 1

    def __post_init__(self):
        for name, lo, hi in (("pes", 1, 256), ("fifo_depth", 1, 64), ("rows_per_pe", 2, 4096),
                             ("max_cols", 2, 65536), ("mem_depth", 2, 65536),
                             ("acc_width", 2, 64), ("w_lanes", 1, 64)):
            check_int(self, name, lo, hi)
        check_format(self, "w_fmt", 2, 32)
        check_format(self, "x_fmt", 2, 32)
        check_format(self, "out_fmt", 2, 64)
        if self.w_lanes > self.pes:
            raise ValueError(f"w_lanes must be between 1 and pes = {self.pes}, "
                             f"not {self.w_lanes}")
        need = self.w_fmt.width + self.x_fmt.width
        if self.acc_width < need:
            raise ValueError(f"acc_width must be at least w_fmt + x_fmt width = {need}, "
                             f"not {self.acc_width}")

    # ---- derived sizes
    @property
    def module_name(self) -> str:
        return "spmv"

    @property
    def acc_frac(self) -> int:
        return self.w_fmt.frac_bits + self.x_fmt.frac_bits

    @property
    def acc_fmt(self) -> QFormat:
        return QFormat(self.acc_width - self.acc_frac, self.acc_frac)

    @property
    def max_rows(self) -> int:
        return self.pes * self.rows_per_pe

    @property
    def pe_bits(self) -> int:
        return index_bits(self.pes)

    @property
    def idx_bits(self) -> int:
        return index_bits(self.rows_per_pe)

    @property
    def addr_bits(self) -> int:
        return index_bits(self.mem_depth)

    @property
    def count_bits(self) -> int:
        return (self.rows_per_pe).bit_length()

    @property
    def col_bits(self) -> int:
        return self.max_cols.bit_length()

    @property
    def row_bits(self) -> int:
        return self.max_rows.bit_length()

    @property
    def word_width(self) -> int:
        return self.w_fmt.width + self.idx_bits + self.pe_bits + 3

    @property
    def beat_width(self) -> int:
        return self.w_lanes * self.word_width

    @property
    def lane_rows(self) -> int:
        """Rowmap entries per lane."""
        return -(-self.max_rows // self.w_lanes)

    # Pipeline constants used by the cycle model (see hdl/spmv.py).
    # PE issue -> final sum: address register, entry register, operand register,
    # product register (beside the DSP), product register, product/accumulator
    # register, add
    pe_latency = 7

    @property
    def tree_levels(self) -> int:
        """Register levels of the binary broadcast trees from the engine to the ``P``
        PEs: ``ceil(log2 P)``."""
        return (self.pes - 1).bit_length()

    @property
    def reduce_levels(self) -> int:
        """Register levels of the 4-way OR/AND trees from the PEs back to the
        engine: ``ceil(log4 P)``."""
        return ((self.pes - 1).bit_length() + 1) // 2

    @property
    def load_delay(self) -> int:
        """Weight END beat accepted -> its bank full: engine register, broadcast tree, PE
        register, PE 0's column count register, one register back to the engine."""
        return 4 + self.tree_levels

    @property
    def push_delay(self) -> int:
        """Activation accepted -> pushed into the FIFOs: broadcast tree, pointer read,
        pointer register."""
        return 3 + self.tree_levels

    @property
    def stall_delay(self) -> int:
        """FIFO level -> broadcaster stall: PE flag, OR tree."""
        return 1 + self.reduce_levels

    @property
    def done_delay(self) -> int:
        """PEs idle -> block done: PE idle flag, AND tree."""
        return 1 + self.reduce_levels

    @property
    def fifo_slack(self) -> int:
        """Pushes that can reach a FIFO after its level was last compared with
        ``fifo_depth``: ``stall_delay`` clocks of accepts plus those in the pointer
        pipeline."""
        return self.stall_delay + self.push_delay

    @property
    def fifo_slots(self) -> int:
        """RAM words of a PE's FIFO: ``fifo_depth + fifo_slack`` rounded up to a power of
        two (the broadcaster stops at ``fifo_depth`` items with a registered, delayed
        flag; the slots beyond absorb what is in flight; the head register is spare)."""
        return 1 << (self.fifo_depth + self.fifo_slack - 1).bit_length()

    @property
    def out_slots(self) -> int:
        """RAM words of the result FIFO: credits for one result per clock."""
        return 1 << self.drain_latency.bit_length()

    @property
    def drain_latency(self) -> int:
        """Row issue -> result valid: rowmap read, its register, the broadcast tree, the
        PE's address register (and clear), accumulator read, its register, the OR
        tree (the last level also rounds; one rounding stage when P = 1), saturate
        (register), result FIFO."""
        return 7 + self.tree_levels + max(1, self.reduce_levels)


# ------------------------------------------------------------------ compiler

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

    @property
    def rows(self) -> int:
        return self.shape[0]

    @property
    def cols(self) -> int:
        return self.shape[1]

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
    row_pe, row_local = allocate(mask.sum(axis=1), cfg.pes, alloc, mask,
                                 capacity=cfg.rows_per_pe)
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
                  block_cols=None) -> list:
    """Cut a matrix larger than the on-chip memories into a checkerboard of blocks.

    Blocks are ``block_rows x block_cols`` (defaults: ``pes * rows_per_pe`` and
    ``max_cols``; ``block_cols`` is halved until every PE's entries of every block fit
    ``mem_depth``), listed block row by block row, column blocks left to right.  All
    blocks of a block row share one row allocation (made on the whole block row), so
    the accumulators sum the partial products across column blocks in column order:
    the result equals :func:`ref_spmv` of the whole matrix.  Returns a list of
    :class:`SpmvPlan` (``first``/``last`` mark the ends of each block row).
    """
    w = _weight_codes(w_codes, cfg)
    rows, cols = w.shape
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
    blocks = []
    col_starts = list(range(0, max(cols, 1), bc)) if cols else [0]
    for r0, row_pe, row_local in allocs:
        for n, c0 in enumerate(col_starts):
            blocks.append(_block(w[r0:r0 + br, c0:c0 + bc], row_pe, row_local, cfg, alloc,
                                 first=(n == 0), last=(n == len(col_starts) - 1),
                                 row_offset=r0, col_offset=c0))
    return blocks


def tile_jobs(blocks, x_codes) -> list:
    """``[(block, x slice), ...]`` for :func:`run_jobs` / :func:`cycle_model`."""
    x = np.asarray(x_codes, dtype=np.int64).ravel()
    return [(b, x[b.col_offset:b.col_offset + b.cols]) for b in blocks]


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


def _pack(kind, pe, idx, value, cfg):
    ww = cfg.w_fmt.width
    return ((int(value) & ((1 << ww) - 1)) | (int(idx) << ww)
            | (int(pe) << (ww + cfg.idx_bits)) | (kind << (ww + cfg.idx_bits + cfg.pe_bits)))


def beat_count(plan: SpmvPlan) -> int:
    """``len(weight_beats(plan))`` without building the beats."""
    cfg = plan.cfg
    L = cfg.w_lanes
    lane = np.zeros(L, dtype=np.int64)
    if plan.first:
        lane += np.bincount(np.arange(plan.rows) % L, minlength=L)[:L]
    per_pe = plan.loads + (plan.counts == 0).sum(axis=1)
    lane += np.bincount(np.arange(cfg.pes) % L, weights=per_pe, minlength=L).astype(np.int64)
    return int(lane.max()) + 1


def weight_beats(plan: SpmvPlan) -> list:
    """The weight-stream beats of a block, each ``w_lanes`` packed words (lane 0 in the
    LSBs).  Lane ``l`` carries the ROW words of rows ``r = l mod L`` (first block of a
    block row only), then column by column, for each of its PEs ``p = l mod L``, the
    PE's entries (ENTRY ... LAST, the LAST word closing the PE's column) or one SKIP word
    when the PE has nothing in that column.  Lanes are padded with NOP words to equal
    length and closed by one beat of END words (value 1 = last block of its block row).
    """
    cfg = plan.cfg
    L = cfg.w_lanes
    lanes = [[] for _ in range(L)]
    if plan.first:
        for r, (pe, i) in enumerate(zip(plan.row_pe, plan.row_local)):
            lanes[r % L].append(_pack(KIND_ROW, pe, i, 0, cfg))
    pos = [0] * cfg.pes
    for j in range(plan.cols):
        for p in range(cfg.pes):
            c = int(plan.counts[p, j])
            if c == 0:
                lanes[p % L].append(_pack(KIND_SKIP, p, 0, 0, cfg))
            for n in range(c):
                wv, row = plan.entries[p][pos[p]]
                kind = KIND_LAST if n == c - 1 else KIND_ENTRY
                lanes[p % L].append(_pack(kind, p, row, wv, cfg))
                pos[p] += 1
    n = max(len(lane) for lane in lanes)
    nop = _pack(KIND_NOP, 0, 0, 0, cfg)
    end = _pack(KIND_END, 0, 0, int(plan.last), cfg)
    beats = []
    for i in range(n + 1):
        beat = 0
        for lane_no, lane in enumerate(lanes):
            word = end if i == n else (lane[i] if i < len(lane) else nop)
            beat |= word << (lane_no * cfg.word_width)
        beats.append(beat)
    return beats


# ------------------------------------------------------------------ golden model

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


# ------------------------------------------------------------------ cycle model

def cycle_model(jobs, cfg: SpmvConfig, *, w_valid_prob=1.0, x_valid_prob=1.0,
                o_ready_prob=1.0, seed=0, max_cycles=50_000_000):
    """Predict the RTL's transfer cycles for a sequence of blocks ``[(plan, x_codes), ...]``.

    Mirrors :class:`hdl.spmv.SpmvEngine` register by register and the stream testbench
    port by port: each port (``w``, ``x``, ``o``) has its own handshake pattern
    (:mod:`gen.core.stimulus`; a probability gives the port's own seeded Bernoulli pattern, as
    in :func:`run_jobs`), so the model reads the same bit per port and clock as the
    testbench; cycle 0 is the first clock after reset.  ``w_valid_prob`` is the
    weight-stream bandwidth model: each clock the next word is offered with that
    probability (random gaps; mean bandwidth ``w_valid_prob`` words per clock).

    Returns a dict with the cycle lists ``w``, ``x``, ``o`` and, per block,
    ``load_start``/``load_end`` (first/last weight word), ``compute_start`` (first
    activation accepted, None without columns), ``last_write`` (last accumulator
    update or None), ``done`` (the clock the PEs are seen idle), ``drain_start`` (last
    blocks only) and ``compute_cycles`` = ``done - compute_start`` (first activation
    to the last busy clock, = the last accumulator write when there is one).  With
    the result stream never stalled the first result leaves at
    ``drain_start + cfg.drain_latency``.
    """
    nbeats = [beat_count(plan) for plan, _ in jobs]
    xs = [np.asarray(x, dtype=np.int64).ravel() for _, x in jobs]
    wsrc = ModelSource(sum(nbeats), pattern_for(w_valid_prob, seed, "w"))
    xsrc = ModelSource(sum(len(v) for v in xs), pattern_for(x_valid_prob, seed, "x"))
    o_pat = pattern_for(o_ready_prob, seed, "o")
    n_out = sum(plan.rows for plan, _ in jobs if plan.last)
    o_cycles = []
    P, D, R = cfg.pes, cfg.fifo_depth, cfg.rows_per_pe
    info = [{"load_start": None, "load_end": None, "compute_start": None,
             "last_write": None, "done": None, "drain_start": None} for _ in jobs]

    # loader: which block is being loaded into which bank
    lblock, wpos, lbank = 0, 0, 0
    full = [None, None]             # bank -> block index held (None = free)
    loads = deque()                 # (cycle the bank becomes full, bank, block)
    # compute side
    state, clr, cbank = "INIT", 0, 0
    fifo = [deque() for _ in range(P)]
    rem = [0] * P
    pipe = [[False] * SpmvConfig.pe_latency for _ in range(P)]   # PE stages after issue
    high = deque([False] * cfg.stall_delay)   # stall(t) = some FIFO >= D at t - delay
    out_q, cred = 0, cfg.out_slots            # result FIFO level, drain credits
    cycle = 0
    c = None
    while True:
        if wsrc.idx >= wsrc.n and xsrc.idx >= xsrc.n and len(o_cycles) >= n_out \
                and state in ("IDLE", "INIT") and full == [None, None] and not loads:
            break
        if cycle >= max_cycles:
            raise RuntimeError("cycle model: timeout")
        wsrc.drive(cycle)
        xsrc.drive(cycle)
        o_ready = o_pat.at(cycle)
        release = False
        # ---- loader
        w_ready = full[lbank] is None and not any(bk == lbank for _, bk, _ in loads)
        if wsrc.take(w_ready, cycle):
            d = info[lblock]
            if d["load_start"] is None:
                d["load_start"] = cycle
            if wpos == nbeats[lblock] - 1:   # the END beat
                d["load_end"] = cycle
                loads.append((cycle + cfg.load_delay, lbank, lblock))
                lblock, wpos, lbank = lblock + 1, 0, lbank ^ 1
            else:
                wpos += 1
        # ---- broadcaster stall: registered, delayed FIFO-level flags
        stall = high.popleft()
        high.append(any(len(f) >= D for f in fifo))
        # ---- compute side
        if state == "INIT":
            clr += 1
            if clr == R:
                state = "IDLE"
        elif state == "IDLE":
            if full[cbank] is not None:
                b = full[cbank]
                state = "COMPUTE"
                c = {"b": b, "plan": jobs[b][0], "x": xs[b], "cols_in": 0,
                     "pipe": [None] * cfg.push_delay, "idle": [False] * cfg.done_delay}
        elif state == "COMPUTE":
            plan, x, counts = c["plan"], c["x"], c["plan"].counts
            if any(stages[-1] for stages in pipe):
                info[c["b"]]["last_write"] = cycle
            idle = (c["cols_in"] == plan.cols and all(v is None for v in c["pipe"])
                    and not any(fifo) and not any(rem) and not any(any(st) for st in pipe))
            if idle and info[c["b"]]["done"] is None:
                info[c["b"]]["done"] = cycle
            c["idle"].append(idle)
            done = c["idle"].pop(0)          # seen idle done_delay clocks ago
            # accept -> broadcast tree -> pointer read -> pointer register, push (never
            # stalls: only the accept of x waits for the registered stall flag)
            took = xsrc.take(not stall and c["cols_in"] < plan.cols, cycle)
            for p in range(P):
                if rem[p] > 0:
                    rem[p] -= 1
                    issued = True
                elif fifo[p]:
                    rem[p] = fifo[p].popleft() - 1
                    issued = True
                else:
                    issued = False
                pipe[p] = [issued] + pipe[p][:-1]
            j = c["pipe"].pop()
            if j is not None:
                for p in range(P):
                    if counts[p, j] > 0:
                        assert len(fifo[p]) < cfg.fifo_slots, "FIFO overflow"
                        fifo[p].append(int(counts[p, j]))
            new = None
            if took:
                if info[c["b"]]["compute_start"] is None:
                    info[c["b"]]["compute_start"] = cycle
                if x[c["cols_in"]] != 0:
                    new = c["cols_in"]
                c["cols_in"] += 1
            c["pipe"].insert(0, new)
            if done:
                if plan.last:
                    state = "DRAIN"
                    info[c["b"]]["drain_start"] = cycle + 1
                    c.update(k=0, dv=[False] * (cfg.drain_latency - 1))
                else:
                    state, release = "IDLE", True
        else:  # DRAIN: never stalls; a row is issued only with a free result slot
            pop = out_q > 0 and o_ready
            if pop:
                o_cycles.append(cycle)
            finished = c["k"] == c["plan"].rows and not any(c["dv"]) and out_q == 0
            issue = c["k"] < c["plan"].rows and cred > 0
            out_q += int(c["dv"][-1]) - int(pop)
            c["dv"] = [issue] + c["dv"][:-1]
            c["k"] += issue
            cred += int(pop) - int(issue)
            if finished:
                state, release = "IDLE", True
        if release:
            full[cbank] = None
            cbank ^= 1
        if loads and loads[0][0] == cycle:
            _, bk, blk = loads.popleft()
            full[bk] = blk
        cycle += 1
    for (plan, _), d in zip(jobs, info):
        start = d["compute_start"] if d["compute_start"] is not None else d["done"]
        d["compute_cycles"] = d["done"] - start if plan.cols else 0
    # per block row: first activation to last result (never-stalled outputs)
    opos, row_start = 0, None
    for (plan, _), d in zip(jobs, info):
        if plan.first or row_start is None:
            row_start = d["compute_start"] if d["compute_start"] is not None else d["done"]
        if plan.last:
            outs = o_cycles[opos:opos + plan.rows]
            opos += plan.rows
            d["total_cycles"] = (outs[-1] if outs else d["drain_start"]) - row_start + 1
    return {"w": wsrc.cycles, "x": xsrc.cycles, "o": o_cycles, "jobs": info,
            "cycles_run": cycle}
