# SPDX-License-Identifier: Apache-2.0
"""The SpMV engine's exact cycle model.

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

import numpy as np

from gen.core.fixed import REQUANT_LATENCY
from gen.core.stimulus import ModelSource, pattern_for
from gen.spmv.beats import beat_count
from gen.spmv.config import SpmvConfig

__all__ = ["cycle_model", "shell_cycles"]


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

    Returns a dict with the cycle lists ``w``, ``x``, ``o`` (one entry per transfer:
    ``drain_lanes`` results) and, per block,
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
    n_out = sum(cfg.out_transfers(plan.rows) for plan, _ in jobs if plan.last)
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
            state, release = _compute_step(c, cfg, fifo, rem, pipe, info, xsrc, stall, cycle)
        else:  # DRAIN: never stalls; a row is issued only with a free result slot
            finished, out_q, cred = _drain_step(c, out_q, cred, o_ready, o_cycles, cycle)
            if finished:
                state, release = "IDLE", True
        if release:
            full[cbank] = None
            cbank ^= 1
        if loads and loads[0][0] == cycle:
            _, bk, blk = loads.popleft()
            full[bk] = blk
        cycle += 1
    _block_totals(jobs, info, o_cycles)
    return {"w": wsrc.cycles, "x": xsrc.cycles, "o": o_cycles, "jobs": info,
            "cycles_run": cycle}


def _compute_step(c, cfg, fifo, rem, pipe, info, xsrc, stall, cycle):
    """One clock of the COMPUTE state: PE issue, FIFO push, activation accept; updates
    ``c``, ``fifo``, ``rem``, ``pipe`` and ``info`` in place and returns the next
    ``(state, release)``."""
    P = cfg.pes
    state, release = "COMPUTE", False
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
    return state, release


def _drain_step(c, out_q, cred, o_ready, o_cycles, cycle):
    """One clock of the DRAIN state: result pop, row issue; returns ``(finished, out_q,
    cred)``."""
    pop = out_q > 0 and o_ready
    if pop:
        o_cycles.append(cycle)
    n = c["plan"].cfg.out_transfers(c["plan"].rows)   # drain_lanes rows per transfer
    finished = c["k"] == n and not any(c["dv"]) and out_q == 0
    issue = c["k"] < n and cred > 0
    out_q += int(c["dv"][-1]) - int(pop)
    c["dv"] = [issue] + c["dv"][:-1]
    c["k"] += issue
    cred += int(pop) - int(issue)
    return finished, out_q, cred


def _block_totals(jobs, info, o_cycles):
    """``compute_cycles`` per block and ``total_cycles`` per block row, into ``info``."""
    for (plan, _), d in zip(jobs, info):
        start = d["compute_start"] if d["compute_start"] is not None else d["done"]
        d["compute_cycles"] = d["done"] - start if plan.cols else 0
    # per block row: first activation to last result (never-stalled outputs)
    opos, row_start = 0, None
    for (plan, _), d in zip(jobs, info):
        if plan.first or row_start is None:
            row_start = d["compute_start"] if d["compute_start"] is not None else d["done"]
        if plan.last:
            n = plan.cfg.out_transfers(plan.rows)
            outs = o_cycles[opos:opos + n]
            opos += n
            d["total_cycles"] = (outs[-1] if outs else d["drain_start"]) - row_start + 1


def shell_cycles(jobs, cfg: SpmvConfig) -> int:
    """End-to-end clocks of one job ``[(plan, x_codes), ...]`` through the accelerator shell
    at full rate (every beat offered and taken at once), from its first input beat to its
    last result beat, both counted: the engine's last result transfer
    (:func:`cycle_model`) + 1, + 1 (the weight beats pass the shell's skid buffer), + 2 with
    ``drain_lanes`` = 1 (the results are packed into beats: the word enters the beat
    register, then the beat is offered), + ``REQUANT_LATENCY`` with a requantisation stage
    (``rq_width``; its biases in before the first result).  Exact (tb/spmv/test_shell.py);
    idle inputs and back-pressure add clocks it does not model."""
    rq = REQUANT_LATENCY if cfg.rq_width else 0
    return cycle_model(jobs, cfg)["o"][-1] + 2 + (2 if cfg.drain_lanes == 1 else 0) + rq
