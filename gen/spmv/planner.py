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

Block planning (:func:`plan_blocks`, the default of ``spnn run spmv --bus-words``)
----------------------------------------------------------------------------------
At full rate the weight stream is the bottleneck (16 words per clock against 32 non-zeros
per clock on the seed matrix), so a plan is as fast as its weight beats plus the tail
after the last one: with block ``k`` carrying ``B_k`` beats and its busiest PE ``m_k``
non-zeros (at least its columns: one activation per clock), and no wait anywhere, the
last result transfer comes

    sum_k B_k - 1  +  (load_delay + 2) + m_last + (push_delay + 1 + pe_latency)
                   +  (done_delay + 1) + drain_latency + (result transfers - 1)

clocks after the first weight beat (11 + m_last + 16 + 5 + 15 + 63 for P = 32, 1024
rows at 16 per clock).  Nothing waits while every block's load covers the previous
block's compute: ``B_(k+1) >= m_k + load_delay + 2 + push_delay + 1 + pe_latency +
done_delay`` (31 for P = 32: the bank of block ``k`` is free when block ``k + 2`` is
due), and for the last block ``B_last >= m_k + push_delay + 1 + pe_latency + done_delay
+ 2`` (22: only the compute side must be free).  :func:`plan_blocks` therefore minimises
the beats and the last block's work at once, with two freedoms the hardware leaves to the
host:

* **ROW words anywhere in their block row.**  A lane's row counter counts on across the
  blocks of a block row (the rowmap bank switches at its last END), so the ROW words may
  ride in any of its blocks (:func:`gen.spmv.spread_rows`).  A block costs its *longest*
  lane, so ROW words placed in the other lanes' NOP padding are free, and ROW words of
  the longest lane placed in a late block give that block the load time its predecessor
  needs to compute: the beats then reach ``max over lanes (ROW + entry + SKIP words) +
  blocks`` (1249 + 7 on the seed matrix: every block's lane imbalance absorbed).
* **Column order** (only when no partial sum can saturate, :func:`gen.spmv.order_free`,
  so the result is the column order's bit for bit): the activations are sent in the
  blocks' column order, so the host may cut any set of columns into a block.  Blocks
  whose lanes and PEs are evenly loaded are found by simulated annealing (swaps and moves
  of columns between blocks, for 4..7 blocks) on the formula above (``max`` smoothed).

Every candidate (the three best column-order cuts of :func:`column_candidates` with the
ROW words spread, one annealed plan per block count) and the :func:`plan_columns` plan
(column order, ROW words in the first block) is then timed by the exact cycle model and
the fastest kept.  On the seed matrix (P = 32, 16 lanes, 16 results per clock) this gives
7 blocks of 26, 48, 30, 19, 16, 11 and 3 columns, 1256 weight beats (1249 + 7 END beats)
and 1380 clocks end to end through the shell, against 1330 beats and 1489 clocks with
:func:`plan_columns` (roofline 1214: 1.137x against 1.227x).

Roofline (:func:`roofline_beats`)
---------------------------------
The words that must cross each port: the weight words of the whole matrix compiled as
one block (non-zeros, a ROW word per row, a SKIP word per empty (column, PE) pair), packed
perfectly into beats of ``w_lanes`` (a matrix larger than the memories: its blocks at
``max_cols`` columns, the activations once per block); the activations and results at
``bus_words`` words per beat (results at ``drain_lanes`` when it is above 1).  Lane
imbalance and the END beats of the blocks are costs of the schedule, not of the roofline.
"""

import math

import numpy as np

from gen.spmv.compile import compile_tiled, order_free, spread_rows, tile_jobs
from gen.spmv.config import SpmvConfig
from gen.spmv.cycles import cycle_model

__all__ = ["plan_columns", "plan_blocks", "column_candidates", "roofline_beats"]


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


def _fits_one_block(w, cfg) -> bool:
    rows, cols = w.shape
    return rows <= cfg.max_rows and 2 <= cols <= cfg.max_cols


def _end_cycles(blocks, x, cfg) -> int:
    """First weight beat to the last result transfer, inclusive (:func:`cycle_model`)."""
    run = cycle_model(tile_jobs(blocks, x), cfg)
    return run["o"][-1] + 1 if run["o"] else run["cycles_run"]


class _Costs:
    """Per-column weight words per lane and work per PE of a one-block compile, and the
    end-to-end formula of the module docstring (constants dropped)."""

    def __init__(self, one, x, cfg: SpmvConfig):
        L = cfg.w_lanes
        words = np.where(one.counts > 0, one.counts, 1)        # entries or one SKIP word
        self.lane = np.zeros((one.cols, L), dtype=np.int64)      # (cols, L)
        for p in range(cfg.pes):
            self.lane[:, p % L] += words[p]
        self.work = (one.counts * (np.asarray(x) != 0)).T        # (cols, P)
        self.rows = np.array([len(range(lane, one.rows, L)) for lane in range(L)])
        self.beats_floor = int((self.lane.sum(axis=0) + self.rows).max())
        fill = cfg.push_delay + 1 + cfg.pe_latency
        self.gap = cfg.load_delay + 2 + fill + cfg.done_delay    # next-but-one bank free
        self.gap_last = fill + cfg.done_delay + 2                # compute side only

    def spare(self, top, work):
        """Load beats block ``k + 1`` needs beyond its own words so that nothing waits."""
        K = len(top)
        return [max(0, work[k] + (self.gap_last if k == K - 2 else self.gap) - top[k + 1] - 1)
                for k in range(K - 1)]

    def cost(self, top, work) -> float:
        """``top``: the longest lane's entry/SKIP words per block, ``work``: the busiest PE's
        non-zeros (at least the block's columns: one activation per clock)."""
        spare = sum(self.spare(top, work))
        return len(top) + max(sum(top) + spare, self.beats_floor) + work[-1]

    def row_words(self, groups) -> np.ndarray:
        """ROW words per block and lane (:func:`spread_rows`): each block's spare beats
        (the longest lane padded to what the next block needs), then the ROW words fill
        every lane's padding, the last blocks first."""
        lane = np.array([self.lane[g].sum(axis=0) for g in groups])          # (K, L)
        work = [max(int(self.work[g].sum(axis=0).max(initial=0)), len(g)) for g in groups]
        top = lane.max(axis=1)
        extra = np.array([0] + self.spare(list(top), work))
        short = int((lane.sum(axis=0) + self.rows).max() - (top + extra).sum())
        extra[-1] += max(0, short)
        room = top[:, None] + extra[:, None] - lane                          # (K, L) >= 0
        out = np.zeros_like(lane)
        for l in range(lane.shape[1]):
            left = int(self.rows[l])
            for k in range(len(groups) - 1, -1, -1):
                out[k, l] = take = min(left, int(room[k, l]))
                left -= take
            out[-1, l] += left
        return out


def _lse(v, tau):
    top = v.max()
    return top + tau * math.log(np.exp((v - top) / tau).sum())


def _anneal(costs, K, rng, iters) -> list:
    """Columns cut into ``K`` blocks (lists of columns, in block order) by simulated
    annealing on :meth:`_Costs.cost` (each block's maxima smoothed by log-sum-exp): swaps
    of two columns between blocks and moves of one, from geometric block sizes (ratio 1.6
    from the last block back) of randomly ordered columns."""
    lane, work = costs.lane, costs.work
    n = len(lane)
    share = np.array([1.6 ** (K - 1 - k) for k in range(K)])
    sizes = np.maximum(1, np.floor(share / share.sum() * n).astype(int))
    sizes[0] += n - sizes.sum()
    while sizes.min() < 1:      # few columns: take from the widest block
        sizes[np.argmin(sizes)] += 1
        sizes[np.argmax(sizes)] -= 1
    cut = np.cumsum(np.r_[0, sizes])
    perm = rng.permutation(n)
    groups = [list(perm[cut[k]:cut[k + 1]]) for k in range(K)]
    E = np.array([lane[g].sum(axis=0) for g in groups], dtype=float)
    W = np.array([work[g].sum(axis=0) for g in groups], dtype=float)
    tau = 1.0

    def top(k):
        return _lse(E[k], tau)

    def busy(k):
        return max(_lse(W[k], tau), len(groups[k]))

    def exact():
        return costs.cost([int(e.max()) for e in E],
                          [max(int(v.max()), len(g)) for v, g in zip(W, groups)])
    best = (exact(), [list(g) for g in groups])
    for it in range(iters):
        f = it / iters
        if it % 2000 == 0:
            tau = 0.2 ** f
            tops = [top(k) for k in range(K)]
            busys = [busy(k) for k in range(K)]
            cur = costs.cost(tops, busys)
        temp = 3.0 * (1 - f) + 0.02
        a = int(rng.integers(K))
        b = int(rng.integers(K - 1))
        b += b >= a
        i = int(rng.integers(len(groups[a])))
        ca = groups[a][i]
        move = rng.random() < 0.25
        if move:
            if len(groups[a]) == 1:
                continue
            dE, dW = -lane[ca], -work[ca]
            groups[b].append(groups[a].pop(i))
        else:
            j = int(rng.integers(len(groups[b])))
            cb = groups[b][j]
            dE, dW = lane[cb] - lane[ca], work[cb] - work[ca]
            groups[a][i], groups[b][j] = cb, ca
        E[a] += dE
        E[b] -= dE
        W[a] += dW
        W[b] -= dW
        old = tops[a], tops[b], busys[a], busys[b]
        tops[a], tops[b], busys[a], busys[b] = top(a), top(b), busy(a), busy(b)
        new = costs.cost(tops, busys)
        if new <= cur or rng.random() < math.exp((cur - new) / temp):
            cur = new
            val = exact()
            if val < best[0]:
                best = (val, [list(g) for g in groups])
            continue
        E[a] -= dE      # undo
        E[b] += dE
        W[a] -= dW
        W[b] += dW
        tops[a], tops[b], busys[a], busys[b] = old
        if move:
            groups[a].insert(i, groups[b].pop())
        else:
            groups[a][i], groups[b][j] = ca, cb
    return best[1]


def plan_blocks(w_codes, x_codes, cfg: SpmvConfig, alloc: str = "balanced",
                reorder="auto", block_counts=range(4, 8), iters: int = 20000,
                seed: int = 0) -> list:
    """The compiled blocks (:class:`gen.spmv.SpmvPlan` list) with the fewest end-to-end
    cycles for this matrix and vector by the exact cycle model (module docstring):
    the :func:`plan_columns` plan, its cuts and the other :func:`column_candidates` with the
    ROW words spread (:func:`gen.spmv.spread_rows`), and, when ``reorder`` allows it, blocks
    of reordered columns (``block_counts``: the block counts annealed, ``iters`` steps each,
    ``seed``).  ``reorder``: ``"auto"`` (default) when :func:`gen.spmv.order_free` holds
    (no partial sum can saturate for any activations, so every column order gives the same
    result), ``True`` (the caller vouches, e.g. for its own ``x``) or ``False`` (column
    order kept).  A matrix that does not fit one block keeps :func:`compile_tiled`'s
    ``max_cols`` tiling.  Deterministic."""
    w = np.asarray(w_codes)
    if not _fits_one_block(w, cfg):
        return compile_tiled(w, cfg, alloc)
    x = np.asarray(x_codes, dtype=np.int64).ravel()
    best = None

    def consider(plan):
        nonlocal best
        end = _end_cycles(plan, x, cfg)
        if best is None or end < best[0]:
            best = (end, plan)
    consider(compile_tiled(w, cfg, alloc, col_starts=plan_columns(w, x, cfg, alloc)))
    try:
        whole = compile_tiled(w, cfg, alloc)
    except ValueError:
        return best[1]
    if len(whole) != 1:         # mem_depth splits the columns: keep the plan above
        return best[1]
    one = whole[0]
    costs = _Costs(one, x, cfg)
    cols = w.shape[1]
    natural = [[list(range(a, b)) for a, b in zip(starts, starts[1:] + [cols])]
               for starts in column_candidates(cols, cfg.max_cols)]
    # the column-order cuts by the formula first, the best three exactly
    plans = [(False, g) for g in sorted(natural, key=lambda g: _formula(costs, g))[:3]]
    if reorder == "auto":
        reorder = order_free(w, cfg)
    if reorder:
        plans += [(True, _anneal(costs, K, np.random.default_rng([seed, K]), iters))
                  for K in block_counts if K <= cols]
    for reordered, groups in plans:
        starts = [int(v) for v in np.cumsum([0] + [len(g) for g in groups[:-1]])]
        order = np.concatenate(groups) if reordered else None
        try:
            blocks = compile_tiled(w, cfg, alloc, col_starts=starts, col_order=order)
        except ValueError:          # a block beyond mem_depth
            continue
        consider(spread_rows(blocks, costs.row_words(groups)))
    return best[1]


def _formula(costs, groups) -> float:
    top = [int(costs.lane[g].sum(axis=0).max()) for g in groups]
    work = [max(int(costs.work[g].sum(axis=0).max(initial=0)), len(g)) for g in groups]
    return costs.cost(top, work)
