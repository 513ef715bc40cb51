# SPDX-License-Identifier: Apache-2.0
"""Output side of the banked array: the drain (shadow rows -> ping-pong output banks, adding
earlier chunks' partial sums) and the streamer (banks -> ``bus_words`` sums per beat)."""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from gen.conv.banked import BankedConfig
from hdl.conv.banked.util import _wrapped

__all__ = ["CaptureInfo", "OutputBanks", "OUT_FIFO_DEPTH"]

OUT_FIFO_DEPTH = 8


def CaptureInfo(cfg: BankedConfig):
    """What the drain needs of one round: the output index of its first position, its
    valid positions, ``R`` (channels to drain), the channel pitch, the output set, whether
    it is the chunk that starts the sums and whether it ends a strip."""
    cw, ob = cfg.count_width, cfg.obits
    return data.StructLayout({
        "e": unsigned(ob), "nv": unsigned(cw), "R": unsigned(cfg.rbits), "cp": unsigned(ob),
        "oset": unsigned(1), "first": unsigned(1), "strip_end": unsigned(1)})


class OutputBanks(wiring.Component):
    """Two sets of ``nb`` output banks (``out_depth`` sums each), the drain and the streamer.

    A strip's sums sit at flat word ``(oset nb out_depth + e) mod (2 nb out_depth)``: in
    its output set, or (``span``) from its set on into the other one.

    Members
    -------
    cap : In(1)
        The grid loads its shadow rows at the end of this clock; ``info`` describes them.
    info : In(CaptureInfo(cfg))
    taps : In(ArrayLayout(signed(acc_width), copies x cols))
        The grid's shadow rows ``0 .. copies - 1``: one channel's sums of the round's
        positions.
    shift : Out(1)
        A channel drained this clock (cycles ``C .. C + R - 1`` after a capture at
        ``C - 1``).
    shift_n : Out(1)
        ``shift`` of the next clock.
    drained : Out(1)
        Strobe in the clock before a strip's last bank write (``C + R + 1``; the streamer's
        first read of the strip is two clocks after that write).
    obeats : In(unsigned(count_width))
        Beats of a strip, latched per output set when ``oset_load`` (at a strip's start).
    oset_load, oset : In(1)
    streamed : Out(unsigned(count_width))
        Strips whose banks the streamer has read (all jobs).
    sinc : Out(1)
        ``streamed`` steps at the end of this clock.
    o : Out(stream.Signature(ArrayLayout(signed(acc_width), bus_words)))
        The sums, ``bus_words`` per beat, strip by strip in ``(channel, row, column)`` order.
    """

    def __init__(self, cfg: BankedConfig):
        self.cfg = cfg
        acc = signed(cfg.acc_width)
        super().__init__({
            "cap": In(1), "info": In(CaptureInfo(cfg)),
            "taps": In(data.ArrayLayout(acc, cfg.window)), "shift": Out(1), "shift_n": Out(1),
            "drained": Out(1),
            "obeats": In(unsigned(cfg.count_width)), "oset_load": In(1), "oset": In(1),
            "streamed": Out(unsigned(cfg.count_width)), "sinc": Out(1),
            "o": Out(stream.Signature(data.ArrayLayout(acc, cfg.bus_words))),
        })

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        nb, lg = cfg.nb, cfg.nb.bit_length() - 1
        abits = (cfg.out_depth - 1).bit_length()
        acc = signed(cfg.acc_width)
        # bank b holds both sets (the set in the address MSB) and has a read port for the
        # drain and one for the streamer (no set multiplexer behind the banks, no address
        # multiplexer before them)
        mems = [Memory(shape=acc, depth=2 << abits, init=[]) for _ in range(nb)]
        for b in range(nb):
            m.submodules[f"o{b}"] = mems[b]
        wports = [mems[b].write_port() for b in range(nb)]
        dports = [mems[b].read_port() for b in range(nb)]
        sports = [mems[b].read_port() for b in range(nb)]
        self._drain(m, nb, lg, abits, wports, dports)
        self._streamer(m, nb, lg, abits, sports)
        return m

    def _drain(self, m, nb, lg, abits, wports, rports):
        """Channels ``k = 0 .. R - 1`` in clocks ``C + k``: the window's bank addresses and
        sums registered (``+1``), the old sums read (``+2``, ``rports``: the drain's read
        ports) and registered (``+3``), the new ones written at the end of ``+3``."""
        cfg = self.cfg
        acc = signed(cfg.acc_width)
        info = Signal(CaptureInfo(cfg), reset_less=True)
        busy = Signal()
        k = Signal(cfg.rbits)
        # e and the captured info without reset (used from a capture on; the lanes after
        # a reset are don't-cares until then): fewer loads on the reset net
        e = Signal(cfg.obits, reset_less=True)
        last = busy & (k + 1 == info.R)
        # e's next value: each bank's lane below is registered from it (a clock ahead); from
        # the capture on the flat word in both sets (the strip's set in its MSB)
        ob = cfg.obits
        e_n = Signal(cfg.obits)
        m.d.comb += e_n.eq(Mux(self.cap,
                               Cat(self.info.e[:ob - 1], self.info.e[ob - 1] ^ self.info.oset),
                               Mux(busy, e + info.cp, e)))
        m.d.sync += e.eq(e_n)
        with m.If(self.cap):
            m.d.sync += [info.eq(self.info), busy.eq(1), k.eq(0)]
        with m.Elif(busy):
            m.d.sync += k.eq(k + 1)
            with m.If(last):
                m.d.sync += busy.eq(0)
        m.d.comb += [self.shift.eq(busy), self.shift_n.eq(Mux(self.cap, 1, busy & ~last))]
        first = e[:lg] if lg else 0
        base = e[lg:]
        first1, first2, first3, end1, end2 = (
            Signal(name=n) for n in ("first1", "first2", "first3", "end1", "end2"))
        m.d.sync += [first1.eq(info.first), first2.eq(first1), first3.eq(first2),
                     end1.eq(last & info.strip_end), end2.eq(end1)]
        m.d.comb += self.drained.eq(end2)
        # plain signals, no array views (see hdl.conv.banked.banks)
        win = [self.taps[i] for i in range(cfg.window)] + [Const(0, acc)] * (nb - cfg.window)
        awin = Array(win)
        for b in range(nb):
            # the tap bank b takes, (b - e) mod nb, a register per bank (from e's next
            # value): no decode of e between its flip-flops and the 32-bit tap multiplexers
            lane = Signal(range(nb), name=f"dl{b}", init=b)
            m.d.sync += lane.eq((b - e_n[:lg]) % nb if lg else 0)
            en1, en2, en3 = (Signal(name=f"de{i}_{b}") for i in (1, 2, 3))
            # addresses (both sets) and sums: no reset (used with their enables only)
            a1, a2, a3 = (Signal(abits + 1, name=f"da{i}_{b}", reset_less=True)
                          for i in (1, 2, 3))
            v1, v2, v3 = (Signal(acc, name=f"dv{i}_{b}", reset_less=True) for i in (1, 2, 3))
            m.d.sync += [en1.eq(busy & (lane < info.nv)),
                         a1.eq(base + _wrapped(b, first, nb) if lg else base),
                         v1.eq(awin[lane] if nb > 1 else win[0]),
                         en2.eq(en1), a2.eq(a1), v2.eq(v1), en3.eq(en2), a3.eq(a2), v3.eq(v2)]
            # the old sum, registered; a sum written at the end of the clock in which it
            # was read (a capture two clocks after the one that wrote it) is forwarded
            # no reset: a clock after a reset it is en3's (reset) value
            fen = Signal(name=f"dfe{b}", reset_less=True)
            fa = Signal(abits + 1, name=f"dfa{b}", reset_less=True)
            fd = Signal(acc, name=f"dfd{b}", reset_less=True)
            old3 = Signal(acc, name=f"do3_{b}", reset_less=True)
            new = Signal(acc, name=f"dn{b}")
            m.d.comb += rports[b].addr.eq(a1)
            m.d.sync += old3.eq(Mux(fen & (fa == a2), fd, rports[b].data))
            m.d.comb += new.eq(Mux(first3, v3, v3 + old3))
            m.d.sync += [fen.eq(en3), fa.eq(a3), fd.eq(new)]
            m.d.comb += [wports[b].en.eq(en3), wports[b].addr.eq(a3),
                         wports[b].data.eq(new)]

    def _streamer(self, m, nb, lg, abits, rports):
        """A beat per clock while fewer than ``OUT_FIFO_DEPTH`` beats are read and not yet
        taken: bank addresses registered (``+1``), the words read (``+2``, ``rports``: the
        streamer's read ports) and registered (``+3``), rotated into lanes and pushed
        (``+4``)."""
        cfg = self.cfg
        acc = signed(cfg.acc_width)
        bw = cfg.bus_words
        m.submodules.fifo = q = fifo.SyncFIFOBuffered(width=bw * cfg.acc_width,
                                                      depth=OUT_FIFO_DEPTH)
        # latched a clock after oset_load (the descriptor's obeats holds while the job runs,
        # and the strip's first drain is many clocks later): the load's enable from registers
        # (per set: obeats == 1 and obeats - 2)
        oload1, oset1 = Signal(), Signal()
        m.d.sync += [oload1.eq(self.oset_load), oset1.eq(self.oset)]
        ob1 = [Signal(name=f"ob1_{s}") for s in range(2)]
        obm2 = [Signal(cfg.count_width, name=f"obm2_{s}") for s in range(2)]
        with m.If(oload1):
            for s in range(2):
                with m.If(oset1 == s):
                    m.d.sync += [ob1[s].eq(self.obeats == 1), obm2[s].eq(self.obeats - 2)]
        active = Signal()
        # the strip's beats as a down-count (beats after the next one) and the flag "this
        # beat is the strip's last", a register: no compare between the count and the
        # strip's end (streamed, pend)
        left = Signal(cfg.count_width)
        lastb = Signal()
        e0 = Signal(cfg.obits, reset_less=True)          # loaded at a strip's start
        v1, v2, v3, v4 = Signal(), Signal(), Signal(), Signal()
        # beats read and not yet taken at o (in the pipeline or in the FIFO)
        inflight = Signal(range(OUT_FIFO_DEPTH + 1))
        step = Signal()
        m.d.comb += step.eq(active & (inflight < OUT_FIFO_DEPTH))
        m.d.sync += inflight.eq(inflight + step - (self.o.valid & self.o.ready))
        # drained_total != streamed, a register compared a clock ahead on both counts' next
        # values: each count steps by at most 1 a clock, so the next values are the
        # counts or the counts + 1 (registers beside them), and drained and streamed's
        # step choose among the compares of registers at the end (no adder in front of
        # them; drained + 1 != streamed + 1 is the compare without either)
        pend = Signal()
        sinc = Signal()
        streamed1 = Signal(cfg.count_width, init=1)
        # strips drained so far (all jobs, from 0 after reset; the streamer runs while it
        # has streamed fewer) and that + 1
        dtot = Signal(cfg.count_width, name="drained_total")
        dtot1 = Signal(cfg.count_width, init=1, name="drained_total1")
        with m.If(self.drained):
            m.d.sync += [dtot.eq(dtot1), dtot1.eq(dtot1 + 1)]
        c00, c01, c10 = dtot != self.streamed, dtot != streamed1, dtot1 != self.streamed
        m.d.sync += pend.eq(Mux(self.drained, Mux(sinc, c00, c10), Mux(sinc, c01, c00)))
        with m.If(~active & pend):
            # e0: the flat word in both sets, from the strip's set on
            m.d.sync += [active.eq(1),
                         e0.eq(Cat(Const(0, cfg.obits - 1), self.streamed[0])),
                         lastb.eq(Mux(self.streamed[0], ob1[1], ob1[0])),
                         left.eq(Mux(self.streamed[0], obm2[1], obm2[0]))]
        with m.If(step):
            m.d.sync += [left.eq(left - 1), lastb.eq(left == 0), e0.eq(e0 + bw)]
            with m.If(lastb):
                m.d.sync += [active.eq(0), self.streamed.eq(self.streamed + 1),
                             streamed1.eq(streamed1 + 1)]
        m.d.comb += [sinc.eq(step & lastb), self.sinc.eq(sinc)]
        first = e0[:lg] if lg else 0
        base = e0[lg:]
        addr = []
        for b in range(nb):
            a = Signal(abits + 1, name=f"sa{b}", reset_less=True)   # used with v1 only
            m.d.sync += a.eq(base + _wrapped(b, first, nb) if lg else base)
            addr.append(a)
        rot1, rot2, rot3 = Signal(range(nb)), Signal(range(nb)), Signal(range(nb))
        m.d.sync += [v1.eq(step), rot1.eq(first), v2.eq(v1),
                     rot2.eq(rot1), v3.eq(v2), rot3.eq(rot2), v4.eq(v3)]
        words = [Signal(acc, name=f"ow{b}", reset_less=True) for b in range(nb)]
        awords = Array(words)
        for b in range(nb):
            m.d.comb += rports[b].addr.eq(addr[b])
            m.d.sync += words[b].eq(rports[b].data)
        beat = [Signal(acc, name=f"ob{k}", reset_less=True) for k in range(bw)]
        for k in range(bw):
            idx = Signal(range(nb), name=f"si{k}")
            m.d.comb += idx.eq(rot3 + k)
            m.d.sync += beat[k].eq(awords[idx] if nb > 1 else words[0])
        m.d.comb += [q.w_en.eq(v4), q.w_data.eq(Cat(*beat)),
                     self.o.payload.eq(q.r_data), self.o.valid.eq(q.r_rdy),
                     q.r_en.eq(self.o.ready)]
