# SPDX-License-Identifier: Apache-2.0
"""The LSTM engine's exact cycle model.

Cycle model
-----------
:func:`cycle_model` steps the same registers as the RTL clock by clock (loader,
bias initialisation, feeders, per-PE FIFOs and MAC pipelines, element-wise sweep,
output drain), reading each port's own handshake pattern (:mod:`gen.core.stimulus`: idle
inputs and back-pressure), so it predicts the cycle of every transfer exactly.
"""

from collections import deque

import numpy as np

from gen.core.fixed import REQUANT_LATENCY
from gen.core.stimulus import ModelSource, pattern_for
from gen.lstm.compile import LstmPlan, plan_quant
from gen.lstm.config import XK_X
from gen.lstm.golden import ref_lstm
from gen.lstm.words import seq_words, weight_beats

__all__ = ["cycle_model", "step_cycles", "shell_cycles"]


LOAD, INIT, IDLE, SEQ, SEQW, XFEED, HFEED, EW, EWW = range(9)


def cycle_model(plan: LstmPlan, seqs, *, w_valid_prob=1.0, x_valid_prob=1.0,
                o_ready_prob=1.0, seed=0, max_cycles=100_000_000):
    """Predict the RTL's transfer cycles for sequences ``[(xs, h0, c0), ...]`` (codes).

    Mirrors :class:`hdl.lstm.LstmEngine` register by register and the stream testbench
    port by port: ``w``, ``x`` and ``o`` each have their own pattern (a probability gives
    the port's own seeded Bernoulli pattern, as in :func:`rtl_lstm`); cycle 0 is the
    first clock after reset.  Returns ``{"w", "x", "o": transfer cycles, "steps":
    [{"start": first input accepted, "ew_start", "end": last h written}, ...]}``; one
    step's period is ``end - start + 2`` when inputs are always available.
    """
    cfg = plan.cfg
    P, D = cfg.pes, cfg.fifo_depth
    wsrc = ModelSource(weight_beats(plan), pattern_for(w_valid_prob, seed, "w"))
    o_pat = pattern_for(o_ready_prob, seed, "o")
    xdata = []
    nsteps = 0
    for xs, h0, c0 in seqs:
        xw = seq_words(plan, xs, h0, c0)
        xdata += [(w >> cfg.xv_width, w) for w in xw]
        nsteps += len(np.asarray(xs).reshape(-1, plan.inputs))
    xsrc = ModelSource(xdata, pattern_for(x_valid_prob, seed, "x"))
    H, X, R, S = plan.hidden, plan.inputs, plan.r_run, plan.slots
    n_out = nsteps * H
    counts = plan.counts
    # h values as the broadcaster sees them: only whether they are zero matters, so
    # the golden model gives them (per step); x values come from the stream.
    hz = _h_nonzero(plan, seqs)
    o_cycles = []
    state, cnt = LOAD, 0
    nw, nd = 0, 0               # h halves written / drained (mod 4)
    out_flag = [False, False]
    col, qn, t_glob, lcnt, ewcnt = 0, 0, 0, 0, 0
    s1v, s1nz, s1col = False, False, 0
    fifo = [deque() for _ in range(P)]
    rem = [0] * P
    vb, vc, vo, vd, ve = ([False] * P for _ in range(5))   # MAC stage valid bits
    dr_active, dk, dv0, dv1, dov = False, 0, False, False, False
    steps = []
    cur = None
    cycle = 0
    while True:
        if (wsrc.idx >= wsrc.n and xsrc.idx >= xsrc.n and len(o_cycles) >= n_out
                and state == IDLE and not dr_active and nw == nd):
            break
        if cycle >= max_cycles:
            raise RuntimeError("lstm cycle model: timeout")
        wsrc.drive(cycle)
        xsrc.drive(cycle)
        o_ready = o_pat.at(cycle)
        n_state = state
        pending = (nw - nd) & 3
        # ---- drain (independent)
        dr_active, dk, dv0, dv1, dov, nd = _drain_step(
            (dr_active, dk, dv0, dv1, dov), nd, pending, out_flag, H, o_ready, o_cycles, cycle)
        # ---- PEs (state at the start of the cycle)
        all_idle, advance = _pe_step(fifo, rem, (vb, vc, vo, vd, ve), counts,
                                     (s1v, s1nz, s1col), D)
        issue_v, issue_nz, issue_col = False, False, 0
        # ---- controller
        if state == LOAD:
            if wsrc.take(True, cycle) and wsrc.idx == wsrc.n:
                n_state, cnt = INIT, 0
        elif state == INIT:
            if cnt == cfg.rows_per_pe - 1:
                n_state = IDLE
            cnt += 1
        elif state == IDLE:
            if xsrc.valid:
                kind = xsrc.data[xsrc.idx][0]
                if kind == XK_X:
                    n_state, col = XFEED, 0
                    cur = {"start": None}
                    steps.append(cur)
                elif pending < 2:
                    n_state, cnt = SEQ, 0
        elif state == SEQ:
            if xsrc.take(True, cycle):
                if cnt == 2 * H - 1:
                    n_state = SEQW
                cnt += 1
        elif state == SEQW:
            out_flag[nw & 1] = False
            nw = (nw + 1) & 3
            n_state = IDLE
        elif state == XFEED:
            if xsrc.take(advance and col < X, cycle):
                if cur["start"] is None:
                    cur["start"] = cycle
                value = xsrc.data[xsrc.idx - 1][1] & ((1 << cfg.x_fmt.width) - 1)
                issue_v, issue_nz, issue_col = True, value != 0, col
                if col == X - 1:
                    n_state, qn = HFEED, 0
                col += 1
        elif state == HFEED:
            if qn == S and not s1v and all_idle and pending < 2:
                n_state, lcnt = EW, 0
                cur["ew_start"] = cycle + 1
            if advance and qn < S:
                issue_v, issue_nz, issue_col = True, hz[t_glob][qn], col
                qn += 1
                col += 1
        elif state == EW:
            if lcnt == R - 1:
                n_state, ewcnt = EWW, cfg.ew_latency - 1
            lcnt += 1
        elif state == EWW:
            if ewcnt == 0:
                out_flag[nw & 1] = True
                nw = (nw + 1) & 3
                cur["end"] = cycle
                t_glob += 1
                n_state = IDLE
            ewcnt -= 1
        if advance:
            s1v, s1nz, s1col = issue_v, issue_nz, issue_col
        state = n_state
        cycle += 1
    return {"w": wsrc.cycles, "x": xsrc.cycles, "o": o_cycles, "steps": steps,
            "cycles_run": cycle}


def _drain_step(dr, nd, pending, out_flag, H, o_ready, o_cycles, cycle):
    """One clock of the output drain, independent of the controller: ``dr`` is its state
    ``(active, issued rows, the two result-pipeline valid bits, output valid)``; appends to
    ``o_cycles`` and returns the next state and ``nd`` (h halves drained, mod 4)."""
    dr_active, dk, dv0, dv1, dov = dr
    if dr_active:
        if dov and o_ready:
            o_cycles.append(cycle)
        adv = (not dov) or o_ready
        fin = dk == H and not (dv0 or dv1 or dov)
        if adv:
            issue = dk < H
            dov, dv1, dv0 = dv1, dv0, issue
            dk += issue
        if fin:
            dr_active = False
            nd = (nd + 1) & 3
    elif pending:
        if out_flag[nd & 1]:
            dr_active, dk, dv0, dv1, dov = True, 0, False, False, False
        else:
            nd = (nd + 1) & 3
    return dr_active, dk, dv0, dv1, dov, nd


def _pe_step(fifo, rem, mac, counts, s1, D):
    """One clock of the PEs, from their state at the start of the cycle: issue from the
    FIFOs into the MAC stages ``mac`` (valid bits, updated in place) and push the
    registered broadcast ``s1 = (valid, non-zero, column)`` unless a FIFO it feeds is full.
    Returns ``(all_idle, advance)``."""
    vb, vc, vo, vd, ve = mac
    s1v, s1nz, s1col = s1
    P = len(fifo)
    all_idle = (not any(fifo) and not any(rem) and not any(vb) and not any(vc)
                and not any(vo) and not any(vd) and not any(ve))
    stall = s1v and s1nz and any(counts[p, s1col] > 0 and len(fifo[p]) == D
                                 for p in range(P))
    advance = not stall
    for p in range(P):
        ve[p] = vd[p]
        vd[p] = vo[p]
        vo[p] = vc[p]
        vc[p] = vb[p]
        if rem[p] > 0:
            rem[p] -= 1
            vb[p] = True
        elif fifo[p]:
            rem[p] = fifo[p].popleft() - 1
            vb[p] = True
        else:
            vb[p] = False
    if advance and s1v and s1nz:
        for p in range(P):
            if counts[p, s1col] > 0:
                fifo[p].append(int(counts[p, s1col]))
    return all_idle, advance


def _h_nonzero(plan: LstmPlan, seqs) -> list:
    """Per global step: which h slots (of h_{t-1}) the broadcaster sees as non-zero."""
    cfg = plan.cfg
    out = []
    quant = plan_quant(plan)
    for xs, h0, c0 in seqs:
        xs = np.asarray(xs, np.int64).reshape(-1, plan.inputs)
        hseq, _ = ref_lstm(quant, xs, cfg, h0, c0)
        prev = np.zeros(plan.hidden, np.int64) if h0 is None else np.asarray(h0).ravel()
        for t in range(len(xs)):
            nz = np.zeros(plan.slots, bool)
            ok = plan.slot_unit >= 0
            nz[ok] = prev[plan.slot_unit[ok]] != 0
            out.append(nz)
            prev = hseq[t]
    return out


def step_cycles(model: dict) -> list:
    """Per step: cycles from its first input to the element-wise stage's last ``h`` write,
    plus the 2 clocks to the next step's first input (the step period at full rate)."""
    return [s["end"] + 2 - s["start"] for s in model["steps"]]


def shell_cycles(plan: LstmPlan, seqs) -> int:
    """End-to-end clocks of one job carrying the weights and the sequences ``seqs`` through
    the accelerator shell at full rate, from its first input beat to its last ``h`` beat,
    both counted: the engine's last ``h`` transfer (:func:`cycle_model`) + 1, + 1 (the
    weights enter through the shell's beat-to-word adapter, or its skid buffer with
    ``w_lanes`` > 1), + 2 (the ``h`` words are packed into beats), + ``REQUANT_LATENCY``
    with a requantisation stage (``rq_width``; its biases in before the first ``h``).
    Exact (tb/lstm/test_shell.py); idle inputs and back-pressure add clocks it does not
    model."""
    rq = REQUANT_LATENCY if plan.cfg.rq_width else 0
    return cycle_model(plan, seqs)["o"][-1] + 4 + rq
