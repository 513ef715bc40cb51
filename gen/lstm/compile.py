# SPDX-License-Identifier: Apache-2.0
"""The LSTM weight compiler: unit allocation, per-PE memory images, column order, and
its inverse (:func:`plan_quant`).

Weight compiler (one row permutation for all four gates)
--------------------------------------------------------
Hidden unit ``k`` owns the four rows ``g*H + k`` (g = i, f, g, o).  Units, not rows,
are dealt to the ``P`` PEs by :func:`gen.spmv.allocate` on the *combined* per-unit
non-zero count (the seed merges the gate matrices), at most ``R = ceil(H / P)`` units
per PE; unit ``k`` gets ``(pe, local)``.  Its four gate rows live in the same PE
(local row ``gate << lbits | local``), so a PE holds every gate of its units and
the element-wise stage runs in all PEs in parallel.  The fed-back ``h`` is broadcast
in *slot* order ``q = local * P + pe`` (``R * P`` slots, empty slots are zero) and
the columns of ``W_hh`` are permuted to slot order, so ``h`` is never reordered in
hardware; results leave in the original unit order through the rowmap.
"""

from dataclasses import dataclass
import math

import numpy as np

from gen.core.fixed import check_codes
from gen.lstm.config import LstmConfig
from gen.lstm.weights import LstmQuant

__all__ = ["LstmPlan", "compile_lstm", "plan_quant"]


@dataclass
class LstmPlan:
    """A compiled layer: unit allocation, per-PE memory images and column order."""

    cfg: LstmConfig
    alloc: str
    hidden: int
    inputs: int
    unit_pe: np.ndarray       # per original unit
    unit_local: np.ndarray
    r_run: int                # ceil(H / P): units per PE (slots per PE)
    slot_unit: np.ndarray     # per slot q = local * P + pe: original unit or -1
    counts: np.ndarray        # (P, cols): entries of PE p in column j
    entries: list             # per PE: [(weight code, local row)], column-packed
    bias: np.ndarray          # (P, 4, r_run) bias codes
    nnz: int

    @property
    def slots(self) -> int:
        return self.r_run * self.cfg.pes

    @property
    def cols(self) -> int:
        return self.inputs + self.slots

    @property
    def loads(self) -> np.ndarray:
        return self.counts.sum(axis=1)

    @property
    def ideal_cycles(self) -> int:
        """``ceil(nnz / P)``: one step's MACs spread perfectly over the PEs."""
        return math.ceil(self.nnz / self.cfg.pes)

    def load_report(self) -> dict:
        loads = self.loads
        mean = float(loads.mean()) if len(loads) else 0.0
        return {"allocator": self.alloc, "pes": self.cfg.pes, "nnz": self.nnz,
                "max_load": int(loads.max(initial=0)), "mean_load": mean,
                "max_over_mean": float(loads.max() / mean) if mean else 1.0,
                "ideal_cycles": self.ideal_cycles}


def compile_lstm(q: LstmQuant, cfg: LstmConfig, alloc: str = "balanced") -> LstmPlan:
    """Codes -> :class:`LstmPlan`: one unit permutation for all gates, ``W_hh`` columns in
    slot order; checks that the layer fits the config."""
    from gen.spmv import allocate
    hid, nx = q.hidden, q.inputs
    if hid > cfg.max_hidden:
        raise ValueError(f"hidden size must be at most max_hidden = {cfg.max_hidden}, "
                         f"not {hid}")
    if nx > cfg.max_inputs:
        raise ValueError(f"input size must be at most max_inputs = {cfg.max_inputs}, "
                         f"not {nx}")
    check_codes(q.w_ih, cfg.w_fmt, "w_ih")
    check_codes(q.w_hh, cfg.w_fmt, "w_hh")
    check_codes(q.b, cfg.b_fmt, "bias")
    P = cfg.pes
    w = np.hstack([q.w_ih, q.w_hh]).astype(np.int64)            # (4H, X + H)
    gates = w.reshape(4, hid, nx + hid)
    unit_mask = (gates != 0).any(axis=0)
    unit_nnz = (gates != 0).sum(axis=(0, 2))
    r_run = -(-hid // P)
    unit_pe, unit_local = allocate(unit_nnz, P, alloc, unit_mask, capacity=r_run)
    unit_pe, unit_local = np.asarray(unit_pe), np.asarray(unit_local)
    slot_unit = np.full(r_run * P, -1, np.int64)
    slot_unit[unit_local * P + unit_pe] = np.arange(hid)
    ncols = nx + r_run * P
    # column j of the compiled matrix: x_j, then the h slot j - X
    col_src = np.concatenate([np.arange(nx), np.where(slot_unit >= 0, nx + slot_unit, -1)])
    counts = np.zeros((P, ncols), np.int64)
    entries = [[] for _ in range(P)]
    lb = cfg.lbits
    for j in range(ncols):
        src = col_src[j]
        if src < 0:
            continue
        col = gates[:, :, src]                                   # (4, H)
        gs, ks = np.nonzero(col)
        rows = (gs << lb) | unit_local[ks]
        pes = unit_pe[ks]
        order = np.lexsort((rows, pes))
        for n in order:
            p = int(pes[n])
            entries[p].append((int(col[gs[n], ks[n]]), int(rows[n])))
            counts[p, j] += 1
    loads = counts.sum(axis=1)
    if loads.max(initial=0) > cfg.mem_depth:
        raise ValueError(f"a PE needs {loads.max()} weight entries; mem_depth is "
                         f"{cfg.mem_depth}")
    bias = np.zeros((P, 4, r_run), np.int64)
    for k in range(hid):
        bias[unit_pe[k], :, unit_local[k]] = q.b.reshape(4, hid)[:, k]
    return LstmPlan(cfg, alloc, hid, nx, unit_pe, unit_local, r_run, slot_unit, counts,
                    entries, bias, int(np.count_nonzero(w)))


def plan_quant(plan: LstmPlan) -> LstmQuant:
    """Recover the layer's codes (original order) from a plan."""
    cfg = plan.cfg
    H, X, P = plan.hidden, plan.inputs, cfg.pes
    lb = cfg.lbits
    w = np.zeros((4, H, X + H), np.int64)
    local_to_unit = {(int(p), int(l)): k for k, (p, l) in
                     enumerate(zip(plan.unit_pe, plan.unit_local))}
    for p in range(P):
        pos = 0
        for j in range(plan.cols):
            for _ in range(plan.counts[p, j]):
                wv, row = plan.entries[p][pos]
                pos += 1
                g, loc = row >> lb, row & ((1 << lb) - 1)
                k = local_to_unit[(p, loc)]
                src = j if j < X else X + plan.slot_unit[j - X]
                w[g, k, src] = wv
    b = np.zeros((4, H), np.int64)
    for k in range(H):
        b[:, k] = plan.bias[plan.unit_pe[k], :, plan.unit_local[k]]
    w = w.reshape(4 * H, X + H)
    return LstmQuant(w[:, :X], w[:, X:], b.ravel())
