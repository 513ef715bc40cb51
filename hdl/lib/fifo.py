# SPDX-License-Identifier: Apache-2.0
"""The project's one FIFO: a stream queue on :mod:`amaranth.lib.fifo`."""

from amaranth.hdl import Module, Mux, Signal, Value
from amaranth.lib import stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

__all__ = ["Queue"]


class Queue(wiring.Component):
    """A first-word-fall-through stream queue of ``depth`` words.

    Both forms behave exactly like :class:`amaranth.lib.fifo.SyncFIFO` of ``depth`` words
    at their ports: a word taken on ``i`` at clock ``t`` is offered on ``o`` from ``t + 1``
    (no same-clock pass-through), ``i.ready`` is low only while ``depth`` words are held
    (a word is refused when the queue is full, even if one leaves in the same clock), and
    ``level`` counts the words held.

    * ``registered=False``: a :class:`~amaranth.lib.fifo.SyncFIFO` of ``depth`` words,
      its head read combinationally from the (distributed) RAM.
    * ``registered=True``: a RAM of ``depth - 1`` words (rounded up to a power of two, 2
      at least; combinational read, as a SyncFIFO's) behind a head register;
      ``o.payload``, ``o.valid``, ``i.ready`` and ``level`` are flip-flops, so a reader's
      decisions and the data it uses start at registers, and so is "the RAM holds a
      word", so the RAM's enables come from registers too.  The head is refilled from
      the RAM or, when the RAM is empty, straight from ``i`` (which is what keeps the
      one-clock latency).
      :class:`~amaranth.lib.fifo.SyncFIFOBuffered` has a registered head too but loads
      it from the RAM's synchronous read port only, so a word written into an empty
      queue appears a clock later: that would add a clock to every user's pipeline.

    Parameters
    ----------
    shape : shape-like
        The payload of both streams.
    depth : int
        Words held, at least 1 (2 with ``registered``).
    registered : bool
        Output from a head register (see above).

    Members
    -------
    i : In(stream.Signature(shape))
        Writes.  ``i.ready`` is ``level != depth`` (a register if ``registered``).
    o : Out(stream.Signature(shape))
        The oldest word; ``o.valid`` is ``level != 0``.
    level : Out(range(depth + 1))
        Words held (register), the head included.

    Latency/throughput
    ------------------
    :attr:`latency` = 1 clock from a transfer on ``i`` to ``o.valid``; one transfer per
    clock on each side.

    Raises
    ------
    TypeError
        ``depth`` or ``registered`` of the wrong type.
    ValueError
        ``depth`` out of range.
    """

    latency = 1
    ii = 1

    def __init__(self, shape, depth: int, *, registered: bool = False):
        if not isinstance(depth, int) or isinstance(depth, bool):
            raise TypeError(f"`depth` must be an integer, not {depth!r}")
        if not isinstance(registered, bool):
            raise TypeError(f"`registered` must be a bool, not {registered!r}")
        if depth < 1 + registered:
            raise ValueError(f"`depth` must be at least {1 + registered}"
                             f"{' with a registered head' if registered else ''}, not {depth}")
        self.depth, self.registered = depth, registered
        super().__init__({"i": In(stream.Signature(shape)), "o": Out(stream.Signature(shape)),
                          "level": Out(range(depth + 1))})

    def elaborate(self, platform):
        m = Module()
        w_data = Value.cast(self.i.payload)
        if not self.registered:
            m.submodules.fifo = fifo = SyncFIFO(width=len(w_data), depth=self.depth)
            m.d.comb += [fifo.w_data.eq(w_data), fifo.w_en.eq(self.i.valid),
                         self.i.ready.eq(fifo.w_rdy), self.o.payload.eq(fifo.r_data),
                         self.o.valid.eq(fifo.r_rdy), fifo.r_en.eq(self.o.ready),
                         self.level.eq(fifo.level)]
            return m

        # The words behind the head sit in a RAM of its own (a power of two of at least
        # depth - 1 words, so the pointers wrap by themselves), with "the RAM holds a
        # word" a register: no comparison of a level counter lies between the RAM's
        # count and the enables that change it (clock rate; a SyncFIFO's level ->
        # r_rdy -> read/write enables -> level loop was a critical path).  The RAM holds
        # at most depth - 1 words: `ready` admits depth words, the head holding one.
        ram_depth = 1 << max(1, (self.depth - 2).bit_length())
        m.submodules.ram = ram = Memory(shape=len(w_data), depth=ram_depth, init=[])
        wr, rd = ram.write_port(), ram.read_port(domain="comb")
        produce = Signal(range(ram_depth), name="produce")
        consume = Signal(range(ram_depth), name="consume")
        ram_ne = Signal(name="ram_ne")                 # the RAM holds a word
        head = Signal(len(w_data), name="head", reset_less=True)
        ready = Signal(init=1, name="ready")
        do_write = self.i.valid & ready
        do_read = self.o.valid & self.o.ready
        need = ~self.o.valid | self.o.ready            # the head is free after this clock
        bypass = need & ~ram_ne & do_write             # empty RAM: the word goes to the head
        ram_write = do_write & ~bypass
        ram_read = need & ram_ne                       # the head refills from the RAM
        m.d.comb += [self.i.ready.eq(ready), self.o.payload.eq(head),
                     wr.addr.eq(produce), wr.data.eq(w_data), wr.en.eq(ram_write),
                     rd.addr.eq(consume)]
        with m.If(ram_write):
            m.d.sync += produce.eq(produce + 1)
        with m.If(ram_read):
            m.d.sync += consume.eq(consume + 1)
        # while the RAM holds a word the head is valid, so the RAM holds level - 1 words:
        # a read without a write empties it iff level == 2
        with m.If(ram_write & ~ram_read):
            m.d.sync += ram_ne.eq(1)
        with m.Elif(ram_read & ~ram_write):
            m.d.sync += ram_ne.eq(self.level != 2)
        with m.If(need):
            m.d.sync += [self.o.valid.eq(ram_ne | do_write),
                         head.eq(Mux(ram_ne, rd.data, w_data))]
        # (the count of the whole queue, so that `level` and `i.ready` are flip-flops)
        with m.If(do_write & ~do_read):
            m.d.sync += [self.level.eq(self.level + 1),
                         ready.eq(self.level != self.depth - 1)]
        with m.Elif(do_read & ~do_write):
            m.d.sync += [self.level.eq(self.level - 1), ready.eq(1)]
        return m
