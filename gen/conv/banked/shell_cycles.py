# SPDX-License-Identifier: Apache-2.0
"""Clock-stepped cycle model of the banked array (:class:`ArrayModel`) and the exact
end-to-end cycle model of its accelerator shell (:func:`banked_shell_cycle_model`).

:func:`gen.conv.banked.cycles.run_cycles` is an *event* model: it asks each bench source for
"the first clock from ``t`` its pattern allows", which holds only for a source whose valid
does not depend on the array.  In the shell a skid buffer sits between the bus and each of
``w`` and ``x`` (:class:`hdl.lib.axi_shell.AxiShell`, direct ports), whose output depends
on when the array took the beats before; so the shell's model steps the array's registers
one clock at a time (:class:`ArrayModel`) against sources and sinks that are themselves
clock-stepped (:mod:`gen.core.flow`'s port twins, or the stream bench's
:class:`gen.core.stimulus.ModelSource` and a pattern sink for :func:`array_cycle_model`).

The array's rules are :mod:`gen.conv.banked.cycles`' (its docstring), as registers:

* ``c.ready = ~run``; a descriptor taken in ``T0`` restarts the job's counters and the
  init walk, which is over after ``cfg.window`` running clocks (rounds from
  ``T0 + 1 + window``);
* each loader is ready while ``run``, a block is left and ``fin >= need`` (its block's
  permission); its ``done`` counts a block at the end of its last beat's clock;
* the sequencer's ``go`` (``run``, the init walk over, steps left, the round countdown 0;
  a step's first round also needs its weight and feature blocks ``done`` and, for a
  strip's first chunk, ``ts - streamed <= 1``, or ``ts == streamed`` when the job's or
  the previous strip's sums fill both output sets, ``span``) loads the countdown with ``P - 1``
  (``P = K + max(0, max(R, 2) - K_next)``); a step's last round counts in ``fin`` from
  ``u + K + 2``; a strip's last round increments ``ts`` at the end of ``u`` and drains the
  strip at ``W = u + K + CAPTURE + R + 1`` (``drained_job``, ``drained_total`` at the end of
  ``W``);
* ``s.valid = run & drained_job == gs``; its transfer clears ``run``;
* the streamer starts a strip when idle and ``drained_total != streamed``, reads a beat in
  each clock in which fewer than ``FIFO_DEPTH`` beats are read and not taken, counts the
  strip streamed at the end of its last read; a beat read in ``v`` is offered at ``o`` from
  ``max(v + STREAM_OFFER, previous beat taken + 1)``.

The constants come from :mod:`gen.conv.banked.cycles`, so a timing change there reaches this
model; :func:`array_cycle_model` equals :func:`run_cycles` transfer for transfer
(``tb/conv/test_banked_shell.py``), and the shell model equals the RTL's bench records and
every ``m_axis_o`` beat's clock under both simulators.
"""

from collections import defaultdict, deque

from gen.core.stimulus import ModelSource, Pattern

from gen.conv.banked.cycles import CAPTURE, FIFO_DEPTH, STREAM_OFFER
from gen.conv.banked.job import BankedConfig, descriptor_widths, steps

__all__ = ["ArrayModel", "array_cycle_model", "banked_shell_cycle_model",
           "banked_shell_writes", "BANKED_SHELL_READS"]

# the statistics registers the bench reads after each job (gen.conv.twin.banked_axi_job)
BANKED_SHELL_READS = 3


class _PatternSink:
    """The stream bench's sink: ready in the clocks its pattern allows."""

    def __init__(self, pattern: Pattern):
        self.pattern, self.cycles = pattern, []

    def at(self, cycle: int) -> bool:
        return self.pattern.at(cycle)

    def put(self, cycle: int):
        self.cycles.append(cycle)


class _StatSink:
    """The shell's statistics sink (:class:`hdl.lib.axi_shell.RegSink`, no ``repeat``):
    always ready; the job cannot end before its one transfer (``ok``: taken before or in
    this clock)."""

    def __init__(self):
        self.got, self._moved, self.cycles = False, False, []

    def drive(self, cycle: int):
        if self._moved:
            self.got = True
        self._moved = False

    def at(self, cycle: int) -> bool:
        return True

    def put(self, cycle: int):
        self._moved = True
        self.cycles.append(cycle)

    @property
    def moved(self) -> bool:
        return self._moved

    @property
    def ok(self) -> bool:
        return self.got or self._moved


class _Job:
    """What the registers need of one :class:`BankedJob`: its steps, the loaders' blocks
    ``(beats, fin needed)``, per step the weight blocks its first round needs."""

    def __init__(self, job, cfg: BankedConfig):
        self.job = job
        self.st = list(steps(job))
        self.nsteps = len(self.st)
        Q, S = job.Q, job.S
        if job.resident:
            self.wblocks = [(job.wbeats(b % Q),
                             0 if b < Q else ((b // Q) * S - 1) * Q + b % Q + 1)
                            for b in range(job.G * Q)]
            self.wneed = [g * Q + q + 1 for _i, g, _t, q in self.st]
        else:
            self.wblocks = [(job.wbeats(q), max(i - 1, 0)) for i, _g, _t, q in self.st]
            self.wneed = [i + 1 for i, _g, _t, _q in self.st]
        self.xblocks = [(job.xbeats(q), max(i - 1, 0)) for i, _g, _t, q in self.st]
        self.gs = job.G * S
        # one (K, countdown after go, last round) per round of a step of chunk q
        self.rounds = [self._rounds(q) for q in range(Q)]

    def _rounds(self, q):
        job = self.job
        K, out = job.k_of(q), []
        for j in range(job.rounds):
            knext = K if j < job.rounds - 1 else job.k_of((q + 1) % job.Q)
            period = K + max(0, max(job.R, 2) - knext)      # cycles.run_cycles' P
            out.append((K, period - 1, j == job.rounds - 1))
        return out


class _Loader:
    """A loader's block counter and beat counter."""

    __slots__ = ("blocks", "done", "bc")

    def __init__(self, blocks=()):
        self.blocks, self.done, self.bc = list(blocks), 0, 0

    def ready(self, run: bool, fin: int) -> bool:
        return run and self.done < len(self.blocks) and fin >= self.blocks[self.done][1]

    def took(self):
        self.bc += 1
        if self.bc == self.blocks[self.done][0]:
            self.bc, self.done = 0, self.done + 1


class ArrayModel:
    """The registers of :class:`hdl.conv.banked.BankedArray` that decide a hand-shake,
    stepped one clock at a time (:meth:`clock`).

    Ports (attributes, replaceable between clocks, e.g. a shell's ports job by job):
    sources ``c``, ``w``, ``x`` (``drive(cycle)``, ``valid``, ``take(ready, cycle)``) and
    sinks ``o``, ``s`` (``at(cycle)``: ready, ``put(cycle)``: a transfer).  The ``k``-th
    descriptor taken is ``jobs[k]``.  :attr:`o_valid` is ``o.valid`` in the coming clock (a
    register); per job :attr:`records` holds ``job`` (its index plus ``first``), ``T0``
    (descriptor taken), ``stat`` (``s`` taken) and the clock of every round's ``go``.
    """

    def __init__(self, jobs, cfg: BankedConfig, first: int = 0):
        self.cfg, self.first = cfg, first
        self.jobs = [_Job(job, cfg) for job in jobs]
        self.c = self.w = self.x = self.o = self.s = None
        self.records = []
        self.taken = 0                      # descriptors taken
        self.run, self.job = False, None
        self.ld = {"w": _Loader(), "x": _Loader()}
        self.fin = 0
        # sequencer
        self.init_left, self.i, self.rd, self.cd = 0, 0, 0, 0
        self.drained_job = 0
        self.later = defaultdict(list)      # clock -> register updates visible from it
        # global (all jobs): strips started, drained, streamed; the streamer and its FIFO
        self.ts = self.drained_total = self.streamed = 0
        self.pspan = False                  # the last strip started fills both sets
        self.strip_beats = []
        self.active, self.bi, self.slast = False, 0, 0
        self.fifo = deque()                 # read clocks of the beats read, not taken
        self.last_take = None
        self.o_valid = False

    # ------------------------------------------------------------------ combinational
    def _go(self) -> bool:
        jb = self.job
        if not self.run or self.init_left or self.i == jb.nsteps or self.cd:
            return False
        if self.rd:
            return True
        i, _g, _t, q = jb.st[self.i]
        return (self.ld["w"].done >= jb.wneed[i] and self.ld["x"].done >= i + 1
                and (q != 0 or self.ts - self.streamed
                     <= (0 if jb.job.span or self.pspan else 1)))

    def _offer(self, cycle: int) -> bool:
        if not self.fifo:
            return False
        at = self.fifo[0] + STREAM_OFFER
        if self.last_take is not None:
            at = max(at, self.last_take + 1)
        return cycle >= at

    # ------------------------------------------------------------------ one clock
    def clock(self, cycle: int):
        """One clock: every hand-shake from the registers and the ports, then the rising
        edge."""
        for port in (self.c, self.w, self.x, self.s):
            drive = getattr(port, "drive", None)
            if drive is not None:
                drive(cycle)
        start = not self.run and self.c.valid
        self.c.take(not self.run, cycle)
        took = {}
        for name in ("w", "x"):
            took[name] = getattr(self, name).take(self.ld[name].ready(self.run, self.fin),
                                                  cycle)
        go = self._go()
        s_took = (self.run and self.drained_job == self.job.gs) and self.s.at(cycle)
        if s_took:
            self.s.put(cycle)
        o_took = self.o_valid and self.o.at(cycle)
        if o_took:
            self.o.put(cycle)
        step = self.active and len(self.fifo) < FIFO_DEPTH
        begin = not self.active and self.drained_total != self.streamed
        # ---- the rising edge
        if start:
            self._start(cycle)
        else:
            for name in ("w", "x"):
                if took[name]:
                    self.ld[name].took()
            if self.run and self.init_left:
                self.init_left -= 1
        if go:
            self._round(cycle)
        elif self.cd and not start:
            self.cd -= 1
        if s_took:
            self.run = False
            self.records[-1]["stat"] = cycle
        if o_took:
            self.fifo.popleft()
            self.last_take = cycle
        if step:
            self.fifo.append(cycle)
            if self.bi == self.slast:
                self.active, self.streamed = False, self.streamed + 1
            self.bi += 1
        if begin:
            self.active, self.bi = True, 0
            self.slast = self.strip_beats[self.streamed] - 1
        for update in self.later.pop(cycle + 1, ()):
            update()
        self.o_valid = self._offer(cycle + 1)

    def _start(self, cycle):
        self.job = jb = self.jobs[self.taken]
        self.taken += 1
        self.run = True
        self.ld = {"w": _Loader(jb.wblocks), "x": _Loader(jb.xblocks)}
        self.fin, self.i, self.rd, self.cd, self.drained_job = 0, 0, 0, 0, 0
        self.init_left = self.cfg.window
        self.records.append({"job": self.first + self.taken - 1, "T0": cycle, "stat": None,
                             "go": []})

    def _round(self, u):
        """A round's ``go`` in clock ``u``: the countdown, the step / strip counters and
        the later events of its beats (``fin``, the strip's drain)."""
        jb, job = self.job, self.job.job
        i, _g, _t, q = jb.st[self.i]
        K, wait, last = jb.rounds[q][self.rd]
        self.records[-1]["go"].append(u)
        self.cd = wait
        if self.rd == 0 and q == 0:                 # oset_load: the strip's beat count
            self.strip_beats.append(job.obeats)
            self.pspan = job.span
        if not last:
            self.rd += 1
            return
        self.rd, self.i = 0, self.i + 1
        self.later[u + K + 2].append(self._fin)
        if q == job.Q - 1:
            self.ts += 1
            W = u + K + CAPTURE + job.R + 1
            self.later[W + 1].append(self._drained)

    def _fin(self):
        self.fin += 1

    def _drained(self):
        self.drained_job += 1
        self.drained_total += 1


def array_cycle_model(jobs, cfg: BankedConfig, patterns: dict | None = None,
                      max_cycles: int = 1_000_000) -> dict:
    """:class:`ArrayModel` against the stream bench (:func:`gen.conv.twin.rtl_banked`):
    ``patterns`` ``{port: Pattern}`` for ``c``, ``w``, ``x`` (valid) and ``o``, ``s``
    (ready), a missing port transferring whenever it can.  Returns ``{"c", "w", "x", "o",
    "s": [clock of every transfer], "jobs": ArrayModel.records}`` (as
    :func:`gen.conv.banked.run_cycles`' lists)."""
    jobs = list(jobs)
    pat = {p: (patterns or {}).get(p) or Pattern.always() for p in "cwxos"}
    m = ArrayModel(jobs, cfg)
    m.c = ModelSource(len(jobs), pat["c"])
    m.w = ModelSource(sum(j.weight_beat_count for j in jobs), pat["w"])
    m.x = ModelSource(sum(j.feature_beat_count for j in jobs), pat["x"])
    m.o, m.s = _PatternSink(pat["o"]), _PatternSink(pat["s"])
    n_o = sum(j.G * j.S * j.obeats for j in jobs)
    cycle = 0
    while len(m.s.cycles) < len(jobs) or len(m.o.cycles) < n_o:
        if cycle >= max_cycles:
            raise RuntimeError(f"banked array model: not done after {max_cycles} clocks")
        m.clock(cycle)
        cycle += 1
    return {"c": m.c.cycles, "w": m.w.cycles, "x": m.x.cycles, "o": m.o.cycles,
            "s": m.s.cycles, "jobs": m.records}


def banked_shell_writes(cfg: BankedConfig) -> int:
    """Registers the bench writes before a job's start (:func:`gen.conv.twin.banked_axi_job`:
    the ``DESC_k``, ``O_WORDS``, ``IRQ_ENABLE``; with ``rq_width`` > 0 also ``RQ_SCALE``,
    ``RQ_POSITIONS``, ``RQ_CHANNELS``, ``RQ_STRIPS`` and ``JOB_INPUTS``).  The descriptor's
    fields fill 32-bit registers from bit 0, a field that would cross a register boundary
    moved to the next (:func:`hdl.conv.banked.shell.banked_desc_layout`)."""
    regs, at = 1, 0
    for width in descriptor_widths(cfg).values():
        if at + width > 32:
            regs, at = regs + 1, 0
        at += width
    return regs + 2 + (5 if cfg.rq_width else 0)


def _shell_ports(cfg, jobs, patterns, arr, stage, bias_loads, k, start, before):
    """Job ``k``'s :class:`hdl.conv.banked.BankedShell` ports (``k`` None: the idle ports
    before the first start), attached to the array's model and (``rq_width`` > 0) the
    requantisation stage's twin ``stage`` between the array's ``o`` and ``m_axis_o``; the
    skid buffers and the bias port's adapter carry over."""
    from gen.core.flow import ShellInput, ShellOutput, ShellRegister
    if k is None:
        nw = nx = 0
        target, words = None, []
    else:
        job = jobs[k]
        nw, nx = job.weight_beat_count, job.feature_beat_count
        target = job.G * job.S * job.E
        words = job.beat_words() * (job.G * job.S)
    w = ShellInput([(1, i == nw - 1) for i in range(nw)], patterns["s_axis_w"], start or 0,
                   packed=False, adapter=before and before["w"].adapter)
    x = ShellInput([(1, i == nx - 1) for i in range(nx)], patterns["s_axis_x"], start or 0,
                   packed=False, adapter=before and before["x"].adapter)
    o = ShellOutput(patterns["m_axis_o"], target, steps=words,
                    valid=(lambda: arr.o_valid) if stage is None else
                    (lambda: stage.out_valid))
    c = ShellRegister(k or 0, pending=k is not None)
    s = _StatSink()
    arr.c, arr.w, arr.x, arr.o, arr.s = c, w, x, o, s
    ports = {"w": w, "x": x, "o": o, "ins": [("s_axis_w", w), ("s_axis_x", x)],
             "outs": [("m_axis_o", o)], "regs": [c, s]}
    if stage is not None:          # the requantisation stage between o and its port
        arr.o = stage
        b, q = stage.ports(k, start, before, o, patterns["s_axis_b"], cfg.bus_words,
                           k is not None and bool(bias_loads[k]),
                           1 if k is None else jobs[k].G * jobs[k].R)
        ports["b"] = b[1]
        ports["ins"].append(b)
        ports["regs"].append(q)
    return ports


def banked_shell_cycle_model(jobs, cfg: BankedConfig, patterns: dict, starts=None, *,
                             writes=None, bias_loads=None, resets=None,
                             reads: int = BANKED_SHELL_READS,
                             max_cycles: int = 1_000_000) -> list:
    """Exact cycle model of jobs of the banked array's shell
    (:class:`hdl.conv.banked.shell.BankedShell`) under the bench's per-port patterns.

    The array's registers (:class:`ArrayModel`) are stepped with the shell's ports around
    them (:func:`gen.core.flow.run_shell_jobs`): the descriptor from the ``DESC_k``
    registers, offered from the clock after the start until the array takes it (it is idle
    by then: ``T0`` = start + 1); ``s_axis_w`` and ``s_axis_x`` through skid buffers (one
    array beat a bus beat); ``m_axis_o`` direct, a strip's last beat holding its ``olast``
    words (:class:`hdl.conv.banked.shell._Framed`), ``tlast`` on the beat reaching
    ``O_WORDS = G S R P``; the statistics always taken (a :class:`hdl.lib.axi_shell.RegSink`,
    one transfer a job, counted in ``BUSY``).  The job ends with its ``tlast`` sum beat.

    With ``rq_width`` > 0 the requantisation stage sits between the array's ``o`` and
    ``m_axis_o`` (:class:`gen.core.flow.RequantTwin`: its parameters taken the clock after
    the start, the job's ``G R`` biases on ``s_axis_b`` at ``bus_words`` a beat when it
    loads them, no beat into the stage before the last of them), the jobs channel-aligned:
    each channel's last beat holds its remaining words.

    Parameters
    ----------
    jobs : list of gen.conv.banked.BankedJob
    cfg : BankedConfig
    patterns : dict
        ``{bus port: Pattern}`` for ``s_axis_w``, ``s_axis_x`` (valid) and ``m_axis_o``
        (ready), as :func:`gen.core.sim.axi_ports` gives them for
        :func:`hdl.conv.banked.shell.banked_shell_ports`.
    starts : sequence of int, optional
        Per job the clock of the start write's response; None: predicted from ``writes``.
    writes : int or sequence of int, optional
        Per job the registers the bench writes before its start (default
        :func:`banked_shell_writes`, those of :func:`gen.conv.twin.banked_axi_job`).
    bias_loads : sequence of bool, optional
        ``rq_width`` > 0: per job whether it loads its biases (``RQ_SCALE.bias``,
        ``JOB_INPUTS.b_en``; default none does); the patterns then name ``s_axis_b``.
    resets : sequence, optional
        Per job the bench's ``reset_after`` (None: not cut): ``aresetn`` low for
        :data:`gen.core.flow.RESET_CLOCKS` clocks (:func:`gen.core.flow.bench_reset`), after
        which the shell and the array run from their reset state (skid buffers empty, no
        strip in flight, the strip counters 0); the job's record is the bench's record of a
        cut job.
    reads : int
        Registers the bench reads after each job besides the counters (the three
        statistics registers).
    max_cycles : int
        Guard against a stimulus that never ends a job.

    Returns
    -------
    list of dict
        Per job the bench record's clocks and counts (``start_ack``, ``first_in``, ``end``,
        beats, stall clocks, ``counters``), ``job_end``, ``out_cycles`` (``{"m_axis_o":
        every beat's clock}``) and ``array`` (the array's ``T0``, ``stat`` and round
        ``go`` clocks; None if it took no descriptor).
    """
    from gen.core.fixed import REQUANT_LATENCY
    from gen.core.flow import RequantTwin, run_shell_jobs
    jobs = list(jobs)
    bias_loads = list(bias_loads) if bias_loads is not None else [False] * len(jobs)
    models, box = [], {}

    def clock(cycle):
        models[-1].clock(cycle)
        if box["stage"] is not None:
            box["stage"].clock(cycle)

    def rebuild(k=-1):
        """The array (and the stage) in its reset state, for the jobs after job ``k``."""
        models.append(ArrayModel(jobs[k + 1:], cfg, first=k + 1))
        box["stage"] = RequantTwin(REQUANT_LATENCY) if cfg.rq_width else None
        return clock

    if starts is None:
        writes = banked_shell_writes(cfg) if writes is None else writes
        writes = [writes] * len(jobs) if isinstance(writes, int) else list(writes)
    else:
        starts = list(starts)

    def make_ports(k, start, before):
        return _shell_ports(cfg, jobs, patterns, models[-1], box["stage"], bias_loads, k,
                            start, before)

    mons = run_shell_jobs(starts, make_ports, rebuild(), writes=writes, resets=resets,
                          rebuild=rebuild, reads=reads, max_cycles=max_cycles)
    array = {rec["job"]: rec for m in models for rec in m.records}
    out = []
    for k, mon in enumerate(mons):
        d = mon.record()
        d["array"] = array.get(k)
        out.append(d)
    return out
