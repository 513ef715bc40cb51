# SPDX-License-Identifier: Apache-2.0
"""Cycle-level twins of the shells' shared parts, for exact end-to-end cycle models of a
shell job under any per-port stall pattern.

A shell model (``gen.<block>.cycles``) steps, one clock at a time, the registers that decide
every hand-shake of the block together with the twins here:

* :class:`BenchSource` / :func:`bench_ready`: the AXI bench's stream ends
  (:mod:`gen.core.cocotb_axi`, :mod:`gen.core.native_axi`): a source offers its job's beats
  from the second clock after the start write's response, in the clocks its pattern allows,
  and holds a beat until it is taken; a sink is ready in clock ``c`` when its pattern's bit
  ``c - 1`` is set;
* :class:`Skid` (:class:`hdl.lib.skid.SkidBuffer`: a direct input port's buffer),
  :class:`AxisToWordsTwin` (:class:`hdl.lib.axis.AxisToWords`: a packed input port's two
  beat slots), :class:`WordsToAxisTwin` (:class:`hdl.lib.axis.WordsToAxis`: a packed output
  port's packer);
* :class:`RequantTwin`: :class:`hdl.lib.requant.RequantStage` on a block's results;
* :class:`ShellInput`, :class:`ShellOutput`, :class:`ShellRegister`: one port of
  :class:`hdl.lib.axi_shell.AxiShell` (bench end, adapter, job gate and framing), seen from
  the block's model as a source (``drive``, ``valid``, ``take``) or a sink (``at``,
  ``put``);
* :class:`Monitor`: the job's counters as :class:`hdl.lib.shell.JobControl` counts them
  (``CYCLES``, ``BUSY``, ``STALL_IN``, ``STALL_OUT``) and what the bench's port monitor
  records (first input beat, last output beat, beats and stall clocks summed over the
  ports) in its window around the job (:data:`BENCH_BEFORE`, :func:`bench_after`).

Every twin splits a clock in two, as the RTL does: its outputs (``valid``, ``ready``) are
read from its registers (plus, for :class:`WordsToAxisTwin`'s ``i.ready``, the bus's
``tready`` of the same clock) before anything moves, and :meth:`clock` then applies the
clock's transfers to the registers (the rising edge).  Payload values never decide a
hand-shake and are not kept: a beat is its number of words and its ``tlast`` flag.

Clocks are the bench's: clock 0 is the first after the initial reset (as the patterns of
:mod:`gen.core.stimulus`).  A job begins at its start write's response (the record's
``start_ack``), which the bench's AXI4-Lite sequence decides: it writes the job's registers
and ``CTRL.start`` from clock 0, or from the clock after its record of the job before
(:func:`bench_start`, :func:`bench_window_end`), so the models predict it from the number of
register writes per job; a caller may give the starts instead.  A job the bench cuts with
``aresetn`` (:func:`bench_reset`) stops there; the shell and the block's model restart from
their reset state.  The models read only the jobs and the patterns, never a simulation's
results.
"""

from gen.core.stimulus import Pattern

__all__ = ["BenchSource", "bench_ready", "packet_beats", "Skid", "AxisToWordsTwin",
           "WordsToAxisTwin", "Monitor", "BENCH_BEFORE", "bench_after", "bench_window_end",
           "bench_start", "bench_reset", "RESET_CLOCKS", "ShellInput", "ShellOutput",
           "ShellRegister", "RequantTwin", "run_shell_jobs"]


def bench_ready(pattern: Pattern, cycle: int) -> bool:
    """A bench sink's ``tready`` in clock ``cycle``: its pattern one clock late (as
    cocotbext-axi's sink, which sets ``tready`` from the pause drawn at the previous
    edge)."""
    return cycle >= 1 and pattern.at(cycle - 1) if pattern.kind != "always" else True


def packet_beats(words: int, per_beat: int) -> list:
    """The beats of a packet of ``words`` words at ``per_beat`` words a beat, as the bench
    frames it: ``[(words in the beat, tlast)]``, full beats and a partial last one."""
    n = -(-int(words) // per_beat)
    return [(min(per_beat, words - k * per_beat), k == n - 1) for k in range(n)]


class BenchSource:
    """The bench's AXI4-Stream source of one job's packet (or an idle port).

    Parameters
    ----------
    beats : list
        ``[(words, tlast)]`` (:func:`packet_beats`), empty for a port the job sends nothing
        on.
    pattern : Pattern
        The port's valid pattern.
    open_at : int
        The first clock the source may offer a beat (the start response's clock + 2).

    Per clock: :meth:`drive` (raise ``tvalid`` by the pattern unless holding a beat), then
    read :attr:`valid` / :attr:`beat` and :meth:`take` with the shell's ``tready``.
    """

    def __init__(self, beats, pattern: Pattern, open_at: int):
        self.beats, self.pattern, self.open_at = list(beats), pattern, int(open_at)
        self.idx, self.holding, self.cycles = 0, False, []

    def drive(self, cycle: int):
        if (not self.holding and cycle >= self.open_at and self.idx < len(self.beats)
                and self.pattern.at(cycle)):
            self.holding = True

    @property
    def valid(self) -> bool:
        return self.holding

    @property
    def beat(self):
        """``(words, tlast)`` of the beat on offer (meaningful while :attr:`valid`)."""
        return self.beats[self.idx]

    @property
    def done(self) -> bool:
        return self.idx >= len(self.beats)

    def take(self, ready: bool, cycle: int) -> bool:
        """The clock's transfer (``tvalid & tready``); returns whether a beat moved."""
        if self.holding and ready:
            self.cycles.append(cycle)
            self.idx += 1
            self.holding = False
            return True
        return False


class Skid:
    """:class:`hdl.lib.skid.SkidBuffer`: the main entry (offered on ``o``) and the spare
    entry; ``i.ready`` is "the spare entry is free".  Entries are payloads (any object, e.g.
    a ``tlast`` flag), ``None`` when empty."""

    __slots__ = ("main", "spare")

    def __init__(self):
        self.main = self.spare = None

    @property
    def ready(self) -> bool:
        return self.spare is None

    @property
    def valid(self) -> bool:
        return self.main is not None

    def clock(self, push, out_ready):
        """One rising edge: ``push`` is the payload transferred on ``i`` this clock (or
        ``None``), ``out_ready`` the consumer's ``o.ready``."""
        if self.main is not None and out_ready:
            if self.spare is not None:
                self.main, self.spare = self.spare, None
            else:
                self.main = push
        elif push is not None:
            if self.main is None:
                self.main = push
            else:
                self.spare = push


class AxisToWordsTwin:
    """:class:`hdl.lib.axis.AxisToWords`: two beat slots written at ``wp`` and read at
    ``rp`` in turn.

    ``ready`` (the bus's ``tready`` before the shell's job gate) is "slot ``wp`` is empty",
    a register; ``valid`` (``o.valid``) is "slot ``rp`` has a word left", ``last`` the
    ``o.p.last`` flag (the slot's ``tlast`` on its final word).  A beat without a present
    word leaves its slot free (its ``tlast`` is lost, as the RTL's)."""

    __slots__ = ("left", "lasts", "wp", "rp")

    def __init__(self):
        self.left, self.lasts, self.wp, self.rp = [0, 0], [False, False], 0, 0

    @property
    def ready(self) -> bool:
        return self.left[self.wp] == 0

    @property
    def valid(self) -> bool:
        return self.left[self.rp] > 0

    @property
    def last(self) -> bool:
        return self.lasts[self.rp] and self.left[self.rp] == 1

    def clock(self, beat, taken: bool):
        """One rising edge: ``beat`` is the ``(words, tlast)`` taken from the bus this clock
        (or ``None``), ``taken`` whether the block took the word on offer."""
        if taken:
            self.left[self.rp] -= 1
            if self.left[self.rp] == 0:
                self.rp ^= 1
        if beat is not None:
            words, last = beat
            self.left[self.wp], self.lasts[self.wp] = words, last
            if words:
                self.wp ^= 1


class WordsToAxisTwin:
    """:class:`hdl.lib.axis.WordsToAxis`: the beat being filled (``pos`` words, ``done``
    once full or ended by a ``last`` word) and the beat on the bus (``tvalid``, its words
    and ``tlast``).

    ``i.ready`` (:meth:`ready`) is ``~done | ~tvalid | tready``: the one combinational path
    from the bus into the block.  A finished beat moves out when the bus register is free
    (empty or taken this clock) and is offered from the next clock."""

    __slots__ = ("n", "pos", "done", "done_last", "tvalid", "out")

    def __init__(self, words: int):
        self.n, self.pos, self.done, self.done_last = words, 0, False, False
        self.tvalid, self.out = False, (0, False)

    def ready(self, tready: bool) -> bool:
        return not self.done or not self.tvalid or tready

    def clock(self, tready: bool, word_last):
        """One rising edge: ``tready`` the bus's, ``word_last`` the ``last`` flag of the word
        the block moved in this clock (``None``: none).  Returns the beat ``(words, tlast)``
        that left on the bus this clock, or ``None``."""
        left = self.out if self.tvalid and tready else None
        if left is not None:
            self.tvalid = False
        move = self.done and (not self.tvalid or tready)
        if move:
            self.tvalid, self.out = True, (self.pos, self.done_last)
            self.done, self.pos = False, 0
        if word_last is not None:
            at = 0 if move else self.pos
            self.pos = at + 1
            if word_last or at == self.n - 1:
                self.done, self.done_last = True, bool(word_last)
        return left


# The bench's port monitor (gen.core.cocotb_axi, gen.core.native_axi) counts from the
# start write's issue to its record after the job: the write is offered the clock after its
# issue, the register file takes both beats there and answers on b two clocks later
# (hdl.lib.axil), so the window opens BENCH_BEFORE clocks before the response.
BENCH_BEFORE = 3


def bench_after(reads: int = 0) -> int:
    """Clocks the bench's monitor counts after the last output beat of a job whose end is
    that beat: the ``STATUS`` poll (done by then), the eight counter reads and ``reads``
    more, the ``IRQ_STATUS`` write, one clock's wait and the ``IRQ_STATUS`` read.  An
    access is issued in the clock after the previous one's response; a read is accepted
    the clock it is offered and answered three clocks later (five clocks an access), the
    write two clocks after it is offered (four); the last read's response clock is the
    window's last."""
    return 5 * (1 + 8 + int(reads)) + 4 + 1 + 5


def bench_window_end(start: int, end, job_end: int, reads: int = 0) -> int:
    """The last clock of the bench's window of a job: after the job's packets are in (the
    clock after its last output ``tlast`` beat ``end``; a job taking no packet, ``end``
    None: the clock after the start response) the bench polls ``STATUS`` every five clocks
    until a read sees ``done`` (a read issued in clock ``t`` returns the registers of clock
    ``t + 2``; ``done`` is set from ``job_end + 1``), then reads and writes as
    :func:`bench_after` says."""
    issue = start + 1 if end is None else end + 1
    while issue + 2 < job_end + 1:
        issue += 5
    return issue - 1 + bench_after(reads)


class Monitor:
    """One job's counters (:class:`hdl.lib.shell.JobControl`) and the bench's port monitor.

    The job is busy from ``start + 1`` to its end; each busy clock the model calls
    :meth:`clock` with the shell's counter events (``took``: a transfer on one of the
    block's own streams, ``stall_in``, ``stall_out``).  ``CYCLES`` is ``end - start``; the
    other counters count the busy clocks of their event (the RTL counts a registered copy
    of it, a clock later, with the same final value).  The bench's counts cover its window,
    ``start - BENCH_BEFORE`` to ``end + bench_after(reads)``: each clock of it the model
    calls :meth:`source` / :meth:`sink` with every bus port's ``tvalid``, ``tready`` (and
    ``tlast``), then :meth:`tick`; outside the job only unframed ports (side channels) can
    be ready or valid."""

    def __init__(self, start: int):
        self.start = int(start)
        self.counters = {"cycles": 0, "busy": 0, "stall_in": 0, "stall_out": 0}
        self.first_in = self.end = self.job_end = self.reset_at = None
        self.beats_out_before_reset = None
        self.beats_in = self.beats_out = self.stall_in = self.stall_out = 0
        self.stall_in_any = self.stall_out_any = 0
        self._starving = self._blocked = False
        self.out_cycles = {}

    def source(self, valid: bool, ready: bool, cycle: int):
        if valid and ready:
            self.beats_in += 1
            if self.first_in is None:
                self.first_in = cycle
        if ready and not valid:
            self.stall_in += 1
            self._starving = True

    def sink(self, port: str, valid: bool, ready: bool, last: bool, cycle: int):
        if valid and ready:
            self.beats_out += 1
            self.out_cycles.setdefault(port, []).append(cycle)
            if last:
                self.end = cycle
        if valid and not ready:
            self.stall_out += 1
            self._blocked = True

    def tick(self):
        """The end of a clock of the bench's window (after its ports)."""
        self.stall_in_any += self._starving
        self.stall_out_any += self._blocked
        self._starving = self._blocked = False

    def clock(self, took: bool, stall_in: bool, stall_out: bool):
        """A busy clock's counter events."""
        self.counters["busy"] += bool(took)
        self.counters["stall_in"] += bool(stall_in)
        self.counters["stall_out"] += bool(stall_out)

    def record(self) -> dict:
        """The job's predicted record: the bench's keys (``start_ack``, ``first_in``,
        ``end``: the last output ``tlast`` beat, beats and stall clocks, ``counters``, whose
        ``cycles`` is ``job_end - start``), ``job_end`` (the shell's end, set by the model)
        and ``out_cycles`` (``{port: clock of every output beat}``).  A job cut by a reset
        (:attr:`reset_at` set): the bench's record of it (``reset``, the registers' reset
        values, ``beats_out_before_reset``, ``beats_in``) and ``reset_at``."""
        if self.reset_at is not None:
            return {"reset": True, "start_ack": self.start, "reset_at": self.reset_at,
                    "counters": {name: 0 for name in self.counters}, "status": 0, "irq": 0,
                    "irq_status": 0, "beats_out_before_reset": self.beats_out_before_reset,
                    "beats_in": self.beats_in, "out_cycles": self.out_cycles}
        self.counters["cycles"] = int(self.job_end) - self.start
        return {"start_ack": self.start, "first_in": self.first_in, "end": self.end,
                "job_end": int(self.job_end),
                "beats_in": self.beats_in, "beats_out": self.beats_out,
                "stall_in": self.stall_in, "stall_out": self.stall_out,
                "stall_in_any": self.stall_in_any, "stall_out_any": self.stall_out_any,
                "counters": dict(self.counters), "out_cycles": self.out_cycles}


class ShellInput:
    """An input port of :class:`hdl.lib.axi_shell.AxiShell` with the bench's source on it,
    seen from the block's model as a source of block transfers.

    Parameters
    ----------
    beats : list
        The job's packet ``[(transfers in the beat, tlast)]``: on a direct port one
        transfer a beat, on a packed port the words (or groups) the beat holds.
    pattern : Pattern
        The bench source's valid pattern.
    start : int
        The clock of the start write's response (the source opens at ``start + 2``).
    packed : bool
        A packed port (:class:`AxisToWordsTwin`) or a direct one (:class:`Skid`).
    framed : bool
        Framed: ``tready`` only while the job is busy and the port's ``tlast`` beat has
        not been taken; it ends the job the clock after its last word entered the block.
        Unframed (a side channel): open whenever the shell is.
    enabled : bool
        The port's ``JOB_INPUTS`` bit: a disabled framed port is never ready and takes no
        part in the job's end.
    first : int
        The block transfers of the ports before this job's (:attr:`idx` counts on from it,
        for block models that index the transfers of a run of jobs).
    adapter : Skid or AxisToWordsTwin, optional
        The adapter's registers as the job before left them (a new one by default).

    Each clock: :meth:`bus` (the bench drives, the bus transfer is decided from the
    adapter's registers), then the block model calls :meth:`drive` (nothing),
    :attr:`valid` and :meth:`take`, then :meth:`edge` updates the registers.
    """

    def __init__(self, beats, pattern: Pattern, start: int, *, packed: bool,
                 framed: bool = True, enabled: bool = True, first: int = 0, adapter=None):
        self.src = BenchSource(beats if enabled or not framed else [], pattern, start + 2)
        self.adapter = adapter or (AxisToWordsTwin() if packed else Skid())
        self.packed, self.framed, self.enabled = packed, framed, enabled
        self.n = first + (sum(b[0] for b in beats) if packed else len(beats))
        self.idx, self.cycles = first, []
        self.bus_done = self.word_done = False
        self.tvalid = self.tready = False
        self._beat = self._moved = None

    def bus(self, cycle: int, busy: bool = True):
        """The bus side of clock ``cycle``: ``tvalid``, ``tready`` and the beat taken."""
        self.src.drive(cycle)
        gate = not self.framed or (busy and self.enabled and not self.bus_done)
        self.tvalid, self.tready = self.src.valid, self.adapter.ready and gate
        self._beat = self.src.beat if self.tvalid and self.tready else None
        self.src.take(self.tready, cycle)
        self._moved = None

    def drive(self, cycle: int):
        """(The block's source interface: the adapter's output is a register.)"""

    @property
    def valid(self) -> bool:
        return self.adapter.valid

    @property
    def last(self) -> bool:
        """The ``last`` flag of the transfer on offer (the packet's final word)."""
        return self.adapter.last if self.packed else bool(self.adapter.main)

    def take(self, ready: bool, cycle: int) -> bool:
        if self.adapter.valid and ready:
            self._moved = self.last
            self.idx += 1
            self.cycles.append(cycle)
            return True
        return False

    @property
    def moved(self) -> bool:
        """A transfer into the block in this clock (after the block's model ran)."""
        return self._moved is not None

    @property
    def stall(self) -> bool:
        """``STALL_IN``'s event of this port: framed, ready and not offered a beat."""
        return self.framed and self.tready and not self.tvalid

    @property
    def ok(self) -> bool:
        """The port's part of the job end in this clock (a register)."""
        return self.word_done or not self.framed or not self.enabled

    def edge(self):
        """The rising edge: the adapter's registers and the port's job flags."""
        beat = self._beat
        if self.packed:
            self.adapter.clock(beat, self._moved is not None)
        else:
            self.adapter.clock(None if beat is None else beat[1], self._moved is not None)
        if beat is not None and beat[1]:
            self.bus_done = True
        if self._moved:
            self.word_done = True


class ShellOutput:
    """An output port of :class:`hdl.lib.axi_shell.AxiShell` with the bench's sink on it,
    seen from the block's model as a sink of block transfers.

    Parameters
    ----------
    pattern : Pattern
        The bench sink's ready pattern.
    target : int or None
        The transfers the job counts (``<PORT>_WORDS`` / ``<PORT>_BEATS``; ``tlast`` on the
        transfer with the ``target``-th), ``None`` on an unframed port.
    words : int
        Packed ports: block transfers (words or groups) per beat (:class:`WordsToAxisTwin`);
        0 for a direct port (bus ``tvalid`` = the block's ``valid``, the block's ``ready``
        = ``tready``).
    valid : callable
        Direct ports: returns the block's ``valid`` (a register of the block's model) at the
        start of the clock.
    steps : list of int, optional
        A partial direct port (``AxisPort(partial=True)``): the words of each of the job's
        transfers; ``target`` counts words and ``tlast`` rides on the transfer that reaches
        it (``count + n >= target``).
    packer : WordsToAxisTwin, optional
        A packed port's packer as the job before left it.

    Each clock: :meth:`bus` (the sink's ``tready``, the beat on offer), the block model
    calls :meth:`at` (its ``ready``) and :meth:`put` (a transfer), then :meth:`edge`.
    """

    def __init__(self, pattern: Pattern, target, *, words: int = 0, valid=None, steps=None,
                 packer=None):
        self.pattern, self.target = pattern, target
        self.packer = (packer or WordsToAxisTwin(words)) if words else None
        self.valid_fn, self.steps = valid, steps
        self.count, self.sent, self.cycles = 0, False, []
        self.tvalid = self.tready = self.tlast = False
        self._put = None

    def bus(self, cycle: int):
        self.tready = bench_ready(self.pattern, cycle)
        if self.packer is not None:
            self.tvalid, self.tlast = self.packer.tvalid, self.packer.out[1]
        else:
            self.tvalid = bool(self.valid_fn())
            self.tlast = self.target is not None and self.count + self._step >= self.target \
                if self.steps is not None else \
                self.target is not None and self.count + 1 == self.target
        self._put = None

    @property
    def _step(self) -> int:
        """Words of the transfer on offer (a partial port)."""
        n = len(self.cycles)
        return self.steps[n] if n < len(self.steps) else 0

    def at(self, cycle: int) -> bool:
        """The block's ``ready`` in this clock."""
        return self.packer.ready(self.tready) if self.packer is not None else self.tready

    def put(self, cycle: int):
        """The block moved a transfer out in this clock."""
        if self.steps is not None:
            self.count += self._step
            self._put = self.target is not None and self.count >= self.target
        else:
            self.count += 1
            self._put = self.target is not None and self.count == self.target
        self.cycles.append(cycle)

    @property
    def moved(self) -> bool:
        return self._put is not None

    @property
    def beat_moved(self) -> bool:
        return self.tvalid and self.tready

    @property
    def event(self) -> bool:
        """The ``tlast`` beat leaves in this clock."""
        return self.beat_moved and self.tlast

    @property
    def stall(self) -> bool:
        """``STALL_OUT``'s event of this port: framed, a beat offered and not taken."""
        return self.target is not None and self.tvalid and not self.tready

    @property
    def ok(self) -> bool:
        """The port's part of the job end in this clock."""
        return self.target is None or self.target == 0 or self.sent or self.event

    def edge(self):
        if self.event:
            self.sent = True
        if self.packer is not None:
            self.packer.clock(self.tready, self._put)


class ShellRegister:
    """A descriptor port (:class:`hdl.lib.axi_shell.RegPort`, no ``repeat``): offered to
    the block from the clock after the start until taken; a source of one transfer
    (:attr:`idx` from ``first``, as :class:`ShellInput`; ``pending=False``: before any
    start)."""

    def __init__(self, first: int = 0, pending: bool = True):
        self.pending, self.idx, self.n, self.cycles = pending, first, first + 1, []
        self._moved = False

    def drive(self, cycle: int):
        self._moved = False

    @property
    def valid(self) -> bool:
        return self.pending

    def take(self, ready: bool, cycle: int) -> bool:
        if self.pending and ready:
            self.pending, self._moved = False, True
            self.idx += 1
            self.cycles.append(cycle)
            return True
        return False

    @property
    def moved(self) -> bool:
        return self._moved

    @property
    def ok(self) -> bool:
        return not self.pending or self._moved


class RequantTwin:
    """:class:`hdl.lib.requant.RequantStage` between a block's result stream and its
    output port (``rq_width`` > 0): the block's model sees it as a sink (:meth:`at`,
    :meth:`put`), the shell's output port as its source; it persists from job to job.

    Rules: ``i.ready = ~waiting & (held < LATENCY + 2)``, ``held`` counting the sums in
    flight and the results waiting; a sum taken in clock ``t`` is written into the output
    FIFO (:class:`amaranth.lib.fifo.SyncFIFOBuffered`) in clock ``t + LATENCY - 2`` and
    offered from ``t + LATENCY`` at the earliest (the FIFO's output register loads when it
    is empty or read, from the words written before the clock); the parameters (a
    descriptor port, always ready) are taken in the clock after the start and set
    ``waiting`` when the job loads biases, which the last of its ``channels`` bias words
    clears; a bias word is taken whenever the parameters are not on offer.

    Each clock, after the block's model: :meth:`clock` (parameters, biases, the output
    hand-shake with the shell's port, then the rising edge).
    """

    def __init__(self, latency: int):
        self.latency, self.depth = latency, latency + 2
        self.waiting, self.held, self.b_addr, self.ch_last = False, 0, 0, 0
        self.pipe = [False] * (latency - 2)        # the valid chain v1 .. v9
        self.inner, self.out_valid = 0, False      # the output FIFO: RAM words, head
        self.out = self.q = self.b = None
        self.bias, self.channels = False, 1
        self._take = False

    def attach(self, out, q, b, bias: bool, channels: int):
        """A job's ports: the shell's output port ``out``, the parameters' descriptor port
        ``q``, the bias port ``b`` (a :class:`ShellInput`); whether the job loads its
        ``channels`` biases."""
        self.out, self.q, self.b = out, q, b
        self.bias, self.channels = bias, channels

    def at(self, cycle: int) -> bool:
        """The stage's ``i.ready`` (registers)."""
        return not self.waiting and self.held < self.depth

    def put(self, cycle: int):
        self._take = True

    def ports(self, k, start, before, out, pattern: Pattern, words: int, bias: bool,
              channels: int):
        """Job ``k``'s parameter and bias ports (:func:`run_shell_jobs`' ``make_ports``;
        ``k`` None: before the first start), attached with the output port ``out``: the
        bias port ``s_axis_b`` packed at ``words`` a beat, enabled when the job loads its
        ``channels`` biases.  Returns ``(("s_axis_b", b), q)``."""
        b = ShellInput(packet_beats(channels, words) if bias else [], pattern, start or 0,
                       packed=True, enabled=bias, adapter=before and before["b"].adapter)
        q = ShellRegister(pending=k is not None)
        self.attach(out, q, b, bias, channels)
        return ("s_axis_b", b), q

    def clock(self, cycle: int):
        """The stage's hand-shakes in clock ``cycle`` and its rising edge."""
        self.q.drive(cycle)
        q_valid = self.q.valid
        took_q = self.q.take(True, cycle)
        took_b = self.b.take(not q_valid, cycle)
        give = self.out_valid and self.out.at(cycle)
        if give:
            self.out.put(cycle)
        w_en = self.pipe[-1]
        self.held += int(self._take) - int(give)
        if not self.out_valid or self.out.at(cycle):
            self.out_valid = self.inner > 0
            self.inner -= self.out_valid
        self.inner += w_en
        self.pipe = [self._take] + self.pipe[:-1]
        self._take = False
        if took_q:
            self.waiting, self.b_addr, self.ch_last = self.bias, 0, self.channels - 1
        if took_b:
            if self.b_addr == self.ch_last:
                self.waiting = False
            self.b_addr += 1


def _watcher(c, starts, mons, window_end):
    """The job whose bench window holds clock ``c`` (windows do not overlap), or None."""
    for j in range(len(starts) - 1, -1, -1):
        if c >= starts[j] - BENCH_BEFORE:
            return mons[j] if window_end[j] is None or c <= window_end[j] else None
    return None


# aresetn is held low for RESET_CLOCKS clocks; the shell and its block work again from the
# clock after (their first clock after the reset)
RESET_CLOCKS = 4


def bench_reset(start: int, reset_after: int) -> tuple:
    """``(clock aresetn falls, last clock of the bench's window)`` of a job the bench cuts
    ``reset_after`` clocks after its start (``reset_after`` >= 1): it waits that many
    clocks from the clock after the start response, holds ``aresetn`` low for
    :data:`RESET_CLOCKS` clocks (its sources drop their beats, its sinks are not ready),
    waits two clocks and reads ten registers (the counters, ``STATUS``, ``IRQ_STATUS``:
    five clocks each)."""
    fall = int(start) + 1 + int(reset_after)
    return fall, fall + RESET_CLOCKS + 2 + 5 * 10 - 1


def bench_start(writes: int, after=None) -> int:
    """The clock of a job's start response: the bench writes the job's ``writes``
    registers, then ``CTRL.start``, one access after the other (four clocks a write: issued,
    offered and taken, held, answered), from clock 0 for the first job (``after`` None) or
    from the clock after the window of the job before (``after``, its last clock: the
    bench's record)."""
    return (0 if after is None else int(after) + 1) + 4 * int(writes) + 3


def run_shell_jobs(starts, make_ports, clock, *, writes=None, resets=None, rebuild=None,
                   reads: int = 0, max_cycles: int = 1_000_000) -> list:
    """Step a shell's jobs clock by clock from clock 0 to the last job's bench window.

    Parameters
    ----------
    starts : sequence of int or None
        Per job the clock of the start write's response (the records' ``start_ack``); None:
        predicted from ``writes`` (:func:`bench_start`).
    make_ports : callable
        ``make_ports(k, start, before)`` returns job ``k``'s ports ``{"ins": [(bus name,
        ShellInput)], "outs": [(bus name, ShellOutput)], "regs": [ShellRegister]}`` and
        attaches them to the block's model; ``before`` is the job before's (``k`` and
        ``start`` are None, ``before`` None: the idle ports before the first start or
        after a reset).  A job's ports take over at ``start + 1``, its first busy clock.
    clock : callable
        ``clock(cycle)``: one clock of the block's model, which reads and moves the
        attached ports' block side.
    writes : sequence of int, optional
        With ``starts`` None: per job the registers the bench writes before its start
        (the job's ``regs``).
    resets : sequence, optional
        Per job its ``reset_after`` (None: not cut): the bench cuts the job with ``aresetn``
        (:func:`bench_reset`); nothing moves while it is low.
    rebuild : callable, optional
        With ``resets``: ``rebuild(k)`` returns the ``clock`` of a block model in its reset
        state for the jobs after job ``k``, called in the first clock after the reset.
    reads : int
        Registers the bench reads after each job besides the counters.
    max_cycles : int
        Guard against a job that never ends.

    Returns
    -------
    list of Monitor
        One per job, ``job_end`` (or ``reset_at``) set; :meth:`Monitor.record` gives its
        record.
    """
    n = len(writes) if starts is None else len(starts)
    resets = list(resets) if resets is not None else [None] * n
    known = [bench_start(writes[0])] if starts is None else [int(v) for v in starts]
    mons = [Monitor(v) for v in known]
    window_end = [None] * len(known)
    ports, k, busy, cycle, fall = make_ports(None, None, None), -1, False, 0, None

    def next_start(after):
        if starts is None and k + 1 < n:
            known.append(bench_start(writes[k + 1], after))
            mons.append(Monitor(known[-1]))
            window_end.append(None)

    while k < n - 1 or busy or cycle <= window_end[k]:
        if k + 1 < len(known) and cycle == known[k + 1] + 1:
            k += 1
            ports, busy = make_ports(k, known[k], ports), True
            if resets[k] is not None:
                fall, window_end[k] = bench_reset(known[k], resets[k])
                mons[k].reset_at = fall
                next_start(window_end[k])
        if fall is not None and cycle >= fall:          # aresetn low: nothing moves
            if cycle == fall:
                mons[k].beats_out_before_reset, busy = mons[k].beats_out, False
            if cycle == fall + RESET_CLOCKS - 1:
                clock, ports, fall = rebuild(k), make_ports(None, None, None), None
            cycle += 1
            continue
        if busy and cycle - known[k] > max_cycles:
            raise RuntimeError(f"shell cycle model: job {k} not done after {max_cycles} "
                               f"clocks")
        _shell_clock(cycle, ports, clock, busy, _watcher(cycle, known, mons, window_end))
        if busy:
            mon = mons[k]
            every = [p for _, p in ports["ins"] + ports["outs"]] + ports["regs"]
            mon.clock(any(p.moved for p in every), any(p.stall for _, p in ports["ins"]),
                      any(p.stall for _, p in ports["outs"]))
            if all(p.ok for p in every):
                mon.job_end, busy = cycle, False
                if resets[k] is None:       # (a cut job's window is the reset's)
                    window_end[k] = bench_window_end(known[k], mon.end, cycle, reads)
                    next_start(window_end[k])
        for _, port in ports["ins"] + ports["outs"]:
            port.edge()
        cycle += 1
    return mons


def _shell_clock(cycle, ports, clock, busy, watch):
    """One clock of :func:`run_shell_jobs` up to the rising edge: the buses, the block's
    model, the bench's port monitor (``watch``, None outside every window)."""
    ins, outs = ports["ins"], ports["outs"]
    for _, port in ins:
        port.bus(cycle, busy)
    for _, port in outs:
        port.bus(cycle)
    clock(cycle)
    if watch is not None:
        for _, port in ins:
            watch.source(port.tvalid, port.tready, cycle)
        for name, port in outs:
            watch.sink(name, port.tvalid, port.tready, port.tlast, cycle)
        watch.tick()
