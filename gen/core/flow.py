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
* :class:`Monitor`: the job's counters as :class:`hdl.lib.shell.JobControl` counts them
  (``CYCLES``, ``BUSY``, ``STALL_IN``, ``STALL_OUT``) and what the bench's port monitor
  records (first input beat, last output beat, beats and stall clocks per port).

Every twin splits a clock in two, as the RTL does: its outputs (``valid``, ``ready``) are
read from its registers (plus, for :class:`WordsToAxisTwin`'s ``i.ready``, the bus's
``tready`` of the same clock) before anything moves, and :meth:`clock` then applies the
clock's transfers to the registers (the rising edge).  Payload values never decide a
hand-shake and are not kept: a beat is its number of words and its ``tlast`` flag.

Clocks are the bench's: clock 0 is the first after the initial reset (as the patterns of
:mod:`gen.core.stimulus`).  A model starts at the start write's response (``start``, the
record's ``start_ack``): that clock is software's choice, made by the bench's AXI4-Lite
sequence around the jobs (register writes, polling, counter reads), not by the shell, so
the models take it as an input and predict everything after it.
"""

from gen.core.stimulus import Pattern

__all__ = ["BenchSource", "bench_ready", "packet_beats", "Skid", "AxisToWordsTwin",
           "WordsToAxisTwin", "Monitor"]


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


class Monitor:
    """One job's counters (:class:`hdl.lib.shell.JobControl`) and the bench's port monitor.

    The job is busy from ``start + 1`` to its end; each clock the model calls
    :meth:`clock` with the shell's counter events (``took``: a transfer on one of the
    block's own streams, ``stall_in``, ``stall_out``) and :meth:`source` / :meth:`sink` with
    each bus port's ``tvalid``, ``tready`` (and ``tlast``), as the bench samples them.
    ``CYCLES`` is ``end - start``; the other counters count the busy clocks of their event
    (the RTL counts a registered copy of it, a clock later, with the same final value).
    The bench's counts cover the job's clocks only: a port that can be ready or valid after
    the end (an unframed side channel) adds clocks the bench counts until its next start
    and the model does not."""

    def __init__(self, start: int):
        self.start = int(start)
        self.counters = {"cycles": 0, "busy": 0, "stall_in": 0, "stall_out": 0}
        self.first_in = self.end = None
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

    def clock(self, took: bool, stall_in: bool, stall_out: bool):
        """The clock's counter events (call once per busy clock, after the ports)."""
        self.counters["busy"] += bool(took)
        self.counters["stall_in"] += bool(stall_in)
        self.counters["stall_out"] += bool(stall_out)
        self.stall_in_any += self._starving
        self.stall_out_any += self._blocked
        self._starving = self._blocked = False

    def record(self, end: int) -> dict:
        """The job's predicted record: the bench's keys (``start_ack``, ``first_in``,
        ``end``, beats and stall clocks, ``counters``) and ``out_cycles`` (``{port: clock
        of every output beat}``)."""
        self.counters["cycles"] = int(end) - self.start
        return {"start_ack": self.start, "first_in": self.first_in, "end": int(end),
                "beats_in": self.beats_in, "beats_out": self.beats_out,
                "stall_in": self.stall_in, "stall_out": self.stall_out,
                "stall_in_any": self.stall_in_any, "stall_out_any": self.stall_out_any,
                "counters": dict(self.counters), "out_cycles": self.out_cycles}
