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
:func:`spmv_shell_cycle_model` steps the same registers inside the accelerator shell's ports
(:mod:`gen.core.flow`) under the AXI bench's per-port patterns.
"""

from collections import deque

import numpy as np

from gen.core.fixed import REQUANT_LATENCY
from gen.core.stimulus import ModelSource, pattern_for
from gen.spmv.beats import beat_count
from gen.spmv.config import SpmvConfig

__all__ = ["cycle_model", "shell_cycles", "spmv_shell_cycle_model"]


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
    nbeats = sum(beat_count(plan) for plan, _ in jobs)
    wsrc = ModelSource(nbeats, pattern_for(w_valid_prob, seed, "w"))
    xsrc = ModelSource(sum(np.asarray(x).size for _, x in jobs),
                       pattern_for(x_valid_prob, seed, "x"))
    o_pat = pattern_for(o_ready_prob, seed, "o")
    n_out = sum(cfg.out_transfers(plan.rows) for plan, _ in jobs if plan.last)
    model = _SpmvModel(jobs, cfg, wsrc, xsrc, o_pat)
    cycle = 0
    while not (wsrc.idx >= wsrc.n and xsrc.idx >= xsrc.n and len(model.o_cycles) >= n_out
               and model.idle):
        if cycle >= max_cycles:
            raise RuntimeError("cycle model: timeout")
        wsrc.drive(cycle)
        xsrc.drive(cycle)
        model.clock(cycle)
        cycle += 1
    _block_totals(jobs, model.info, model.o_cycles)
    return {"w": wsrc.cycles, "x": xsrc.cycles, "o": model.o_cycles, "jobs": model.info,
            "cycles_run": cycle}


class _SpmvModel:
    """The registers of :class:`hdl.spmv.SpmvEngine` that decide a hand-shake (loader
    banks, accumulator clear, activation accept, pointer read, FIFO push, PE issue,
    multiply, accumulate, result drain), stepped one clock at a time (:meth:`clock`)
    against the ``w`` and ``x`` sources (``take(ready, cycle)``, after the caller's
    ``drive``) and the ``o`` sink (``at(cycle)``: its ``ready``; ``put(cycle)``, when it has
    one, on every transfer).  The sources and the sink may be replaced between clocks (a
    shell's ports, job by job)."""

    def __init__(self, jobs, cfg: SpmvConfig, wsrc, xsrc, osink):
        self.jobs, self.cfg = jobs, cfg
        self.wsrc, self.xsrc, self.osink = wsrc, xsrc, osink
        self.nbeats = [beat_count(plan) for plan, _ in jobs]
        self.xs = [np.asarray(x, dtype=np.int64).ravel() for _, x in jobs]
        self.o_cycles = []
        P = cfg.pes
        self.info = [{"load_start": None, "load_end": None, "compute_start": None,
                      "last_write": None, "done": None, "drain_start": None} for _ in jobs]
        # loader: which block is being loaded into which bank
        self.lblock, self.wpos, self.lbank = 0, 0, 0
        self.full = [None, None]        # bank -> block index held (None = free)
        self.loads = deque()            # (cycle the bank becomes full, bank, block)
        # compute side
        self.state, self.clr, self.cbank = "INIT", 0, 0
        self.fifo = [deque() for _ in range(P)]
        self.rem = [0] * P
        self.pipe = [[False] * SpmvConfig.pe_latency for _ in range(P)]  # after issue
        self.high = deque([False] * cfg.stall_delay)  # stall(t): a FIFO >= D at t - delay
        self.out_q, self.cred = 0, cfg.out_slots      # result FIFO level, drain credits
        self.c = None

    @property
    def idle(self) -> bool:
        """No block loading, held or computing, no result pending."""
        return (self.state in ("IDLE", "INIT") and self.full == [None, None]
                and not self.loads)

    @property
    def o_valid(self) -> bool:
        """The engine's ``o.valid`` (the result FIFO is not empty), a register."""
        return self.out_q > 0

    def clock(self, cycle: int):
        """One clock: every hand-shake from the registers, then the rising edge."""
        cfg, info = self.cfg, self.info
        o_ready = self.osink.at(cycle)
        release = False
        # ---- loader
        w_ready = self.full[self.lbank] is None and \
            not any(bk == self.lbank for _, bk, _ in self.loads)
        if self.wsrc.take(w_ready, cycle):
            d = info[self.lblock]
            if d["load_start"] is None:
                d["load_start"] = cycle
            if self.wpos == self.nbeats[self.lblock] - 1:   # the END beat
                d["load_end"] = cycle
                self.loads.append((cycle + cfg.load_delay, self.lbank, self.lblock))
                self.lblock, self.wpos, self.lbank = self.lblock + 1, 0, self.lbank ^ 1
            else:
                self.wpos += 1
        # ---- broadcaster stall: registered, delayed FIFO-level flags
        stall = self.high.popleft()
        self.high.append(any(len(f) >= cfg.fifo_depth for f in self.fifo))
        # ---- compute side
        if self.state == "INIT":
            self.clr += 1
            if self.clr == cfg.rows_per_pe:
                self.state = "IDLE"
        elif self.state == "IDLE":
            if self.full[self.cbank] is not None:
                b = self.full[self.cbank]
                self.state = "COMPUTE"
                self.c = {"b": b, "plan": self.jobs[b][0], "x": self.xs[b], "cols_in": 0,
                          "pipe": [None] * cfg.push_delay, "idle": [False] * cfg.done_delay}
        elif self.state == "COMPUTE":
            self.state, release = _compute_step(self.c, cfg, self.fifo, self.rem, self.pipe,
                                                info, self.xsrc, stall, cycle)
        else:  # DRAIN: never stalls; a row is issued only with a free result slot
            sent = len(self.o_cycles)
            finished, self.out_q, self.cred = _drain_step(self.c, self.out_q, self.cred,
                                                          o_ready, self.o_cycles, cycle)
            if len(self.o_cycles) > sent and hasattr(self.osink, "put"):
                self.osink.put(cycle)
            if finished:
                self.state, release = "IDLE", True
        if release:
            self.full[self.cbank] = None
            self.cbank ^= 1
        if self.loads and self.loads[0][0] == cycle:
            _, bk, blk = self.loads.popleft()
            self.full[bk] = blk


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


def _job_parts(job) -> tuple:
    """``(blocks whose weights the job sends, blocks whose activations it sends)`` of a shell
    job of :func:`spmv_shell_cycle_model`."""
    if isinstance(job, dict):
        return list(job.get("w", [])), list(job.get("x", []))
    return list(job), list(job)


def _shell_ports(cfg: SpmvConfig, jobs, patterns: dict, engine, stage, bias_loads, k, start,
                 before):
    """Job ``k``'s :class:`hdl.spmv.SpmvShell` ports (:mod:`gen.core.flow` twins; ``k``
    None: the idle ports before the first start), attached to the engine's model; the
    adapters carry over from ``before``."""
    from gen.core.flow import ShellInput, ShellOutput, packet_beats
    w_blocks, x_blocks = ([], []) if k is None else _job_parts(jobs[k])
    n_w = sum(beat_count(plan) for plan, _ in w_blocks)
    n_x = sum(np.asarray(x).size for _, x in x_blocks)
    rows = [plan.rows for plan, _ in x_blocks if plan.last]
    target = None if k is None else sum(rows)
    dl = cfg.drain_lanes
    steps = [min(dl, r - i * dl) for r in rows for i in range(cfg.out_transfers(r))]
    w = ShellInput([(1, i == n_w - 1) for i in range(n_w)], patterns["s_axis_w"],
                   start or 0, packed=False, enabled=bool(w_blocks),
                   adapter=before and before["w"].adapter)
    x = ShellInput(packet_beats(n_x, cfg.bus_words), patterns["s_axis_x"], start or 0,
                   packed=True, enabled=bool(x_blocks), adapter=before and before["x"].adapter)
    if dl == 1:
        y = ShellOutput(patterns["m_axis_y"], target, words=cfg.bus_words,
                        packer=before and before["y"].packer)
    else:
        y = ShellOutput(patterns["m_axis_y"], target, valid=lambda: engine.o_valid,
                        steps=steps)
    engine.wsrc, engine.xsrc, engine.osink = w, x, y
    ports = {"w": w, "x": x, "y": y, "ins": [("s_axis_w", w), ("s_axis_x", x)],
             "outs": [("m_axis_y", y)], "regs": []}
    if stage is not None:          # the requantisation stage between o and its port
        engine.osink = stage
        b, q = stage.ports(k, start, before, y, patterns["s_axis_b"], cfg.bus_words,
                           k is not None and bool(bias_loads[k]), max(1, target or 0))
        ports["b"] = b[1]
        ports["ins"].append(b)
        ports["regs"].append(q)
    return ports


def spmv_shell_cycle_model(jobs, cfg: SpmvConfig, patterns: dict, starts=None, *,
                           writes=2, bias_loads=None, resets=None, reads: int = 0,
                           max_cycles: int = 1_000_000) -> list:
    """Exact cycle model of jobs of the SpMV shell (:class:`hdl.spmv.SpmvShell`) under the
    bench's per-port patterns.

    The engine's registers (:class:`_SpmvModel`, :func:`cycle_model`'s) are stepped from
    reset (its accumulator clear) with the shell's ports around them
    (:func:`gen.core.flow.run_shell_jobs`): ``s_axis_w`` through a skid buffer (one
    weight beat a transfer), ``s_axis_x`` through the two-slot
    :class:`hdl.lib.axis.AxisToWords` (``bus_words`` activations a beat), ``m_axis_y``
    packed by :class:`hdl.lib.axis.WordsToAxis` (``drain_lanes`` 1) or one drain transfer
    a beat (``tkeep`` on its rows, ``tlast`` on the transfer reaching ``Y_WORDS``).  Each
    job sends all its blocks' weight beats and activations and takes every result
    (``Y_WORDS`` = the rows of its last blocks, both inputs enabled); it ends with its
    ``tlast`` result beat.  A job of no blocks enables no input and expects no result
    (``JOB_INPUTS`` 0, ``Y_WORDS`` 0): it ends in its first clock.  A job may also split
    its blocks' streams, ``{"w": blocks, "x": blocks}``: the weights of ``w`` (the engine
    takes the blocks in the order their weights arrive, each with its ``x``) and the
    activations of ``x``, each port enabled when it sends something, ``Y_WORDS`` the rows
    of the last blocks of ``x`` (e.g. the weights in one job, the activations and results
    in the next: the loaded bank waits between them).  The bench's sources open at
    ``start + 2``; its sink is ready by its pattern one clock late.

    With ``rq_width`` > 0 the requantisation stage sits between the engine's results and
    ``m_axis_y`` (:class:`gen.core.flow.RequantTwin`: one channel per row, the rows'
    biases on ``s_axis_b`` when the job loads them).  Not modelled: jobs that split a product
    with ``JOB_INPUTS``.

    Parameters
    ----------
    jobs : list
        Per shell job its blocks ``[(plan, x_codes), ...]`` (:func:`gen.spmv.tile_jobs`), or
        ``{"w": blocks, "x": blocks}`` (see above).
    cfg : SpmvConfig
    patterns : dict
        ``{bus port: Pattern}`` for ``s_axis_w``, ``s_axis_x`` (valid) and ``m_axis_y``
        (ready), as :func:`gen.spmv.twin.axi_ports` gives them.
    starts : sequence of int, optional
        Per job the clock of the start write's response (the records' ``start_ack``);
        None: predicted from ``writes`` (:func:`gen.core.flow.bench_start`).
    writes : int or sequence of int
        Per job the registers the bench writes before its start (2: those of
        :func:`gen.spmv.twin.axi_job`, Y_WORDS, IRQ_ENABLE).
    bias_loads : sequence of bool, optional
        ``rq_width`` > 0: per job whether it loads the rows' biases (default none does).
    resets : sequence, optional
        Per job the bench's ``reset_after`` (None: not cut): the shell and the engine
        restart from their reset state (the accumulator clear again); the job's record is
        the bench's record of a cut job.
    reads : int
        Registers the bench reads after each job besides the counters.
    max_cycles : int
        Guard against a stimulus that never ends a job.

    Returns
    -------
    list of dict
        Per job as :func:`gen.pwl.shell_cycle_model`: the bench record's clocks and
        counts, ``counters``, ``job_end``, ``out_cycles`` (``{"m_axis_y": every beat's
        clock}``).
    """
    from gen.core.flow import RequantTwin, run_shell_jobs
    bias_loads = list(bias_loads) if bias_loads is not None else [False] * len(jobs)
    box = {}

    def rebuild(k=-1):
        """The engine (for the blocks of the jobs after job ``k``) and the stage in their
        reset state."""
        blocks = [block for job in jobs[k + 1:] for block in _job_parts(job)[0]]
        box["engine"] = _SpmvModel(blocks, cfg, None, None, None)
        box["stage"] = RequantTwin(REQUANT_LATENCY) if cfg.rq_width else None
        return clock

    def make_ports(k, start, before):
        return _shell_ports(cfg, jobs, patterns, box["engine"], box["stage"], bias_loads, k,
                            start, before)

    def clock(cycle):
        box["engine"].clock(cycle)
        if box["stage"] is not None:
            box["stage"].clock(cycle)

    if isinstance(writes, int):
        writes = [writes] * len(jobs)
    mons = run_shell_jobs(None if starts is None else list(starts), make_ports, rebuild(),
                          writes=writes, resets=resets, rebuild=rebuild, reads=reads,
                          max_cycles=max_cycles)
    return [mon.record() for mon in mons]
