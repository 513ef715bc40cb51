# SPDX-License-Identifier: Apache-2.0
"""AXI4-Stream at bus width: the signature and the adapters between a bus beat of
``words`` words and a block's internal one-word-per-transfer stream.

Words sit in a beat little-endian, as AXI4-Stream orders bytes: word ``k`` in
``tdata[k*W +: W]`` with its ``ceil(W / 8)`` bytes' ``tkeep`` bits (W = word width).  A
word is present when the ``tkeep`` bit of its lowest byte is set (the adapters write every
byte's bit of a word alike); ``tlast`` ends a packet (a tensor or a layer, as each block
documents per port).
"""

from amaranth.hdl import Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["AxisSignature", "WordLayout", "AxisToWords", "WordsToAxis", "keep_bytes"]


def keep_bytes(word_width: int) -> int:
    """Bytes (``tkeep`` bits) per word."""
    return (word_width + 7) // 8


class AxisSignature(wiring.Signature):
    """AXI4-Stream from the transmitter's side (``Out`` = driven by the transmitter):
    ``tdata`` (``words * word_width``), ``tkeep`` (``words * keep_bytes(word_width)``),
    ``tlast``, ``tvalid``; ``tready`` from the receiver.  ``tdata`` is padded to whole
    bytes per word."""

    def __init__(self, word_width: int, words: int):
        self.word_width, self.words = word_width, words
        self.lane_bits = 8 * keep_bytes(word_width)
        super().__init__({
            "tdata": Out(words * self.lane_bits),
            "tkeep": Out(words * keep_bytes(word_width)),
            "tlast": Out(1),
            "tvalid": Out(1),
            "tready": In(1),
        })


def WordLayout(word_width: int):
    """One word of a packet: ``data`` and ``last`` (the packet's final word)."""
    return data.StructLayout({"data": word_width, "last": 1})


def _lowest(mask, n):
    """(index, one-hot) of the lowest set bit of the ``n``-bit ``mask`` (0, 0 if none)."""
    index = Const(0, range(max(n, 2)))
    for k in reversed(range(n)):
        index = Mux(mask[k], k, index)
    return index, mask & (~mask + 1)


class AxisToWords(wiring.Component):
    """AXI4-Stream beats of ``words`` words in, one word per transfer out.

    Parameters
    ----------
    word_width : int
        Bits per word (the block's stream payload width).
    words : int
        Words per beat (``bus_words``).

    Attributes
    ----------
    s : In(AxisSignature(word_width, words))
        The bus.  Two beat slots: ``tready`` is high while the slot the next beat goes to
        is empty (it depends on this adapter's registers only, never on ``o.ready``), so
        a beat can wait beside the one being sent and a word stream running at one word
        per clock sees no gap between beats.  Beats with no present word are dropped (a
        ``tlast`` on one is lost: keep at least one word in a packet's last beat).
    o : Out(stream.Signature(WordLayout(word_width)))
        The present words of each beat in lane order; ``last`` on the last present word of
        a beat with ``tlast``.
    """

    def __init__(self, word_width: int, words: int):
        self.word_width, self.words = word_width, words
        super().__init__({"s": In(AxisSignature(word_width, words)),
                          "o": Out(stream.Signature(WordLayout(word_width)))})

    def elaborate(self, platform):
        m = Module()
        n, kb, lane = self.words, keep_bytes(self.word_width), 8 * keep_bytes(self.word_width)
        # two slots, written at wp and read at rp in turn: the wide beat registers load on
        # the adapter's own state, never on tvalid or the block's ready (clock rate); they
        # have no reset (read only while their lanes are in ``left``, which has one)
        beats = [Signal(n * lane, name=f"beat{k}", reset_less=True) for k in range(2)]
        lasts = [Signal(name=f"last{k}", reset_less=True) for k in range(2)]
        lefts = [Signal(n, name=f"left{k}") for k in range(2)]  # lanes still to send
        wp, rp = Signal(), Signal()
        left = Mux(rp, lefts[1], lefts[0])
        index, onehot = _lowest(left, n)
        final = left == onehot               # the word on offer is the beat's last
        beat = Mux(rp, beats[1], beats[0])
        m.d.comb += [
            self.o.valid.eq(left.any()),
            self.o.p.data.eq(beat.word_select(index, lane)[:self.word_width]),
            self.o.p.last.eq(Mux(rp, lasts[1], lasts[0]) & final),
            self.s.tready.eq(~Mux(wp, lefts[1], lefts[0]).any()),
        ]
        keep = Const(0, n) | sum((self.s.tkeep[k * kb] << k) for k in range(n))
        take = self.s.tvalid & self.s.tready
        for k in range(2):
            # a slot is written only while empty and read only while full: never both
            with m.If(self.o.valid & self.o.ready & (rp == k)):
                m.d.sync += lefts[k].eq(left & ~onehot)
            # the empty slot samples the bus every clock (a word counts only once its
            # lane is in ``left``), so the wide registers' enable is this adapter's own
            # state, not the bus's tvalid
            with m.If((wp == k) & ~lefts[k].any()):
                m.d.sync += [beats[k].eq(self.s.tdata), lasts[k].eq(self.s.tlast)]
            with m.If(take & (wp == k)):
                m.d.sync += lefts[k].eq(keep)
        with m.If(self.o.valid & self.o.ready & final):
            m.d.sync += rp.eq(~rp)
        with m.If(take & keep.any()):         # an empty beat leaves its slot free
            m.d.sync += wp.eq(~wp)
        return m


class WordsToAxis(wiring.Component):
    """One word per transfer in, AXI4-Stream beats of ``words`` words out.

    Parameters
    ----------
    word_width, words : int
        As :class:`AxisToWords`.

    Attributes
    ----------
    i : In(stream.Signature(WordLayout(word_width)))
        Words; ``last`` ends a packet.
    m : Out(AxisSignature(word_width, words))
        Full beats, and a packet's last beat with only its words kept (``tkeep`` low and
        ``tdata`` 0 on the lanes after them) and ``tlast``.  A beat is offered the clock after its last
        word arrives; words keep flowing at one per clock into the next beat while it
        waits, so back-pressure stalls ``i`` only when that beat is full too.
    """

    def __init__(self, word_width: int, words: int):
        self.word_width, self.words = word_width, words
        super().__init__({"i": In(stream.Signature(WordLayout(word_width))),
                          "m": Out(AxisSignature(word_width, words))})

    def elaborate(self, platform):
        m = Module()
        n, kb, lane = self.words, keep_bytes(self.word_width), 8 * keep_bytes(self.word_width)
        fill = Signal(n * lane)              # the beat being filled
        pos = Signal(range(n + 1))
        done = Signal()                      # fill holds a finished beat not yet moved out
        # (no reset on the beat on offer and done_last: read only under tvalid / done)
        done_last = Signal(reset_less=True)
        tdata = Signal(n * lane, reset_less=True)
        tkeep = Signal(n * kb, reset_less=True)
        tlast = Signal(reset_less=True)
        m.d.comb += [self.m.tdata.eq(tdata), self.m.tkeep.eq(tkeep), self.m.tlast.eq(tlast)]
        out_free = ~self.m.tvalid | self.m.tready
        move = done & out_free
        m.d.comb += self.i.ready.eq(~done | out_free)
        with m.If(self.m.tvalid & self.m.tready):
            m.d.sync += self.m.tvalid.eq(0)
        with m.If(move):
            keep = Signal(n * kb)
            m.d.comb += keep.eq(sum(Mux(k < pos, (1 << kb) - 1, 0) << (k * kb)
                                    for k in range(n)))
            m.d.sync += [tdata.eq(fill), tkeep.eq(keep),
                         tlast.eq(done_last), self.m.tvalid.eq(1),
                         done.eq(0), pos.eq(0), fill.eq(0)]     # absent lanes read 0
        with m.If(self.i.valid & self.i.ready):
            at = Mux(move, 0, pos)
            m.d.sync += fill.word_select(at, lane).eq(self.i.p.data)
            m.d.sync += pos.eq(at + 1)
            with m.If(self.i.p.last | (at == n - 1)):
                m.d.sync += [done.eq(1), done_last.eq(self.i.p.last)]
        return m
