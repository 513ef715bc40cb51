# SPDX-License-Identifier: Apache-2.0
"""Feature and weight banks of the banked array: wide writes, rotated window reads."""

from amaranth.hdl import Array, Cat, Const, Module, Signal, signed, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from gen.conv.banked import BankedConfig
from hdl.conv.banked.util import _wrapped

__all__ = ["FeatureBanks", "WeightBanks", "FEATURE_READ_LATENCY", "WEIGHT_READ_LATENCY"]

FEATURE_READ_LATENCY = 5     # r_f at cycle t -> r_data at t + 5
WEIGHT_READ_LATENCY = 5      # r_addr at cycle t -> r_data at t + 5


class FeatureBanks(wiring.Component):
    """Two sets of ``nb`` feature banks (``feat_depth`` words of ``signed(data_width)``
    each).  Flat word ``f`` of a set lives in bank ``f mod nb`` at address ``f div nb``; bank
    ``b`` of both sets is one memory (the set in the address MSB).

    Members
    -------
    w_en, w_set : In(1)
        Write a beat into set ``w_set`` (cycle ``t``; the banks are written at the end of
        ``t + 2``: a read is two clocks after its ``r_f``, so the writes keep their order
        against the reads).
    w_f : In(unsigned(fbits))
        Flat index of lane 0; lane ``k`` goes to word ``w_f + k``.
    w_data : In(ArrayLayout(signed(data_width), bus_words))
    r_set : In(1)
        The set the window is read from (cycle ``t``).
    r_f : In(unsigned(fbits))
        Flat index of window column 0 (cycle ``t``).
    r_x : In(ArrayLayout(unsigned(abits), window))
        Per window column ``k`` the extra bank address of its word: column ``k`` reads
        word ``r_f + k + nb r_x[k]`` (the rows the window crosses, see
        :mod:`gen.conv.banked.job`).
    r_data : Out(ArrayLayout(signed(data_width), window))
        The window (cycle ``t + 5``: the per-bank offsets registered, the bank addresses
        registered, the banks read, the words registered, rotated and registered).
    """

    def __init__(self, cfg: BankedConfig):
        self.cfg = cfg
        word = signed(cfg.data_width)
        self.abits = max((cfg.feat_depth - 1).bit_length(), 1)
        super().__init__({
            "w_en": In(1), "w_set": In(1), "w_f": In(unsigned(cfg.fbits)),
            "w_data": In(data.ArrayLayout(word, cfg.bus_words)),
            "r_set": In(1), "r_f": In(unsigned(cfg.fbits)),
            "r_x": In(data.ArrayLayout(unsigned(self.abits), cfg.window)),
            "r_data": Out(data.ArrayLayout(word, cfg.window)),
        })

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        nb, lg = cfg.nb, cfg.nb.bit_length() - 1
        abits = (cfg.feat_depth - 1).bit_length()
        word = signed(cfg.data_width)
        mems = [Memory(shape=word, depth=2 << abits, init=[]) for _ in range(nb)]
        for b in range(nb):
            m.submodules[f"f{b}"] = mems[b]
        self._write(m, mems, nb, lg, abits, word)
        # read: bank b serves window column k = (b - rot) mod nb at base + wrap + r_x[k];
        # t + 1: per bank its column's offset and wrap bit; t + 2: the address; t + 3: the
        # words; t + 4: the words registered; t + 5: rotated into the columns
        f = self.r_f
        rset = [self.r_set]
        for i in range(2):
            rset.append(Signal(name=f"rset{i + 1}"))
            m.d.sync += rset[-1].eq(rset[-2])
        rot = [f[:lg] if lg else 0]
        for i in range(4):
            rot.append(Signal(range(nb), name=f"rot{i + 1}"))
            m.d.sync += rot[-1].eq(rot[-2])
        fhi1 = Signal(abits)
        m.d.sync += fhi1.eq(f[lg:])
        # plain signals, no array views: Yosys 0.70's abc9 can confuse a wire's bit k with
        # a wire named ``name[k]`` (a view's element) and drive both from one flip-flop
        xs = Array([self.r_x[k] for k in range(cfg.window)]
                   + [Const(0, self.abits)] * (nb - cfg.window))
        words = [Signal(word, name=f"fw{b}", reset_less=True) for b in range(nb)]
        awords = Array(words)
        for b in range(nb):
            col = Signal(range(nb), name=f"col{b}")
            m.d.comb += col.eq((b - f[:lg]) % nb if lg else 0)
            xo1, wr1 = Signal(self.abits, name=f"xo{b}"), Signal(name=f"wr{b}")
            m.d.sync += [xo1.eq(xs[col]), wr1.eq(_wrapped(b, f[:lg], nb) if lg else 0)]
            addr = Signal(abits, name=f"ra{b}")
            m.d.sync += addr.eq(fhi1 + wr1 + xo1)
            port = mems[b].read_port()
            m.d.comb += port.addr.eq(Cat(addr, rset[2]))
            m.d.sync += words[b].eq(port.data)
        for k in range(cfg.window):
            idx = Signal(range(nb), name=f"ix{k}")
            m.d.comb += idx.eq(rot[4] + k)
            m.d.sync += self.r_data[k].eq(awords[idx] if nb > 1 else words[0])
        return m

    def _write(self, m, mems, nb, lg, abits, word):
        """Lane -> bank rotation, registered, registered again, written the clock after."""
        cfg = self.cfg
        first = self.w_f[:lg] if lg else 0
        base = self.w_f[lg:]
        wset, wset2 = Signal(), Signal()
        m.d.sync += [wset.eq(self.w_set), wset2.eq(wset)]
        for b in range(nb):
            lane = Signal(range(nb), name=f"lane{b}")
            m.d.comb += lane.eq((b - first) % nb)
            en, addr, dat = Signal(name=f"we{b}"), Signal(abits, name=f"wa{b}"), \
                Signal(word, name=f"wd{b}", reset_less=True)
            m.d.sync += [en.eq(self.w_en & (lane < cfg.bus_words)),
                         addr.eq(base + _wrapped(b, first, nb) if lg else base),
                         dat.eq(self.w_data[lane] if cfg.bus_words > 1 else self.w_data[0])]
            en2, addr2, dat2 = Signal(name=f"we2_{b}"), Signal(abits, name=f"wa2_{b}"), \
                Signal(word, name=f"wd2_{b}", reset_less=True)
            m.d.sync += [en2.eq(en), addr2.eq(addr), dat2.eq(dat)]
            wp = mems[b].write_port()
            m.d.comb += [wp.en.eq(en2), wp.addr.eq(Cat(addr2, wset2)), wp.data.eq(dat2)]


class WeightBanks(wiring.Component):
    """One weight bank per row (``2 weight_depth`` words of ``signed(weight_width)``: two
    sets, the set in the address MSB).  Row ``r`` computes channel ``r >> nl`` of the
    group (copy ``r mod n``).

    Members
    -------
    w_en : In(1)
        Write a beat (cycle ``t``; written at the end of ``t + 2``).
    w_addr : In(unsigned(wbits))
        Bank address of the beat.
    w_j : In(unsigned(6))
        Channel group: lane ``k`` is channel ``w_j bus_words + k``, written into the row of
        every copy of that channel if it is ``< R``.
    w_data : In(ArrayLayout(signed(weight_width), bus_words))
    nl, R : In(unsigned(2)), In(unsigned(rbits))
        ``log2 n`` and the channels of a group.
    r_addr : In(unsigned(wbits))
        Address every row reads (cycle ``t``).
    r_data : Out(ArrayLayout(signed(weight_width), rows))
        Each row's word (cycle ``t + 5``: the address registered twice, the bank read,
        the word registered twice).
    """

    def __init__(self, cfg: BankedConfig):
        self.cfg = cfg
        word = signed(cfg.weight_width)
        super().__init__({
            "w_en": In(1), "w_addr": In(unsigned(cfg.wbits)), "w_j": In(unsigned(6)),
            "w_data": In(data.ArrayLayout(word, cfg.bus_words)), "nl": In(unsigned(2)),
            "R": In(unsigned(cfg.rbits)), "r_addr": In(unsigned(cfg.wbits)),
            "r_data": Out(data.ArrayLayout(word, cfg.rows)),
        })

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        word = signed(cfg.weight_width)
        bw = cfg.bus_words
        waddr = Signal(cfg.wbits)
        waddr2, raddr1, raddr = Signal(cfg.wbits), Signal(cfg.wbits), Signal(cfg.wbits)
        m.d.sync += [waddr.eq(self.w_addr), waddr2.eq(waddr), raddr1.eq(self.r_addr),
                     raddr.eq(raddr1)]
        # the beat registered first (t + 1), each row's enable and word from those
        # registers (t + 2): the loader's enable (the stream's valid & ready) reaches one
        # register, not the rows' decodes spread over the banks
        w_en1, w_j1 = Signal(), Signal(6)
        w_data1 = Signal(data.ArrayLayout(word, bw), reset_less=True)
        m.d.sync += [w_en1.eq(self.w_en), w_j1.eq(self.w_j), w_data1.eq(self.w_data)]
        logs = [k for k in range(4) if 1 << k <= cfg.copies]
        for r in range(cfg.rows):
            mem = m.submodules[f"w{r}"] = Memory(shape=word, depth=2 * cfg.weight_depth,
                                                 init=[])
            # the row's channel group, lane and whether its channel is < R, registered every
            # clock from nl and R (the job's: they change at a descriptor, before its first
            # beat): the write decode reads local registers only
            grp = Signal(6, name=f"wgrp{r}")
            lane = Signal(range(bw), name=f"wlane{r}") if bw > 1 else None
            ok = Signal(name=f"wok{r}")
            with m.Switch(self.nl):
                for k in logs:
                    ch = r >> k
                    with m.Case(k):
                        m.d.sync += [grp.eq(ch // bw), ok.eq(ch < self.R)]
                        if lane is not None:
                            m.d.sync += lane.eq(ch % bw)
            en, dat = Signal(name=f"we{r}"), Signal(word, name=f"wd{r}", reset_less=True)
            m.d.sync += [en.eq(w_en1 & (w_j1 == grp) & ok),
                         dat.eq(w_data1[lane] if lane is not None else w_data1[0])]
            wp = mem.write_port()
            m.d.comb += [wp.en.eq(en), wp.addr.eq(waddr2), wp.data.eq(dat)]
            rp = mem.read_port()
            m.d.comb += rp.addr.eq(raddr)
            # the second register reset-less too (the port would reset): fewer loads on
            # the reset net
            rd1 = Signal(word, name=f"rd{r}", reset_less=True)
            rd2 = Signal(word, name=f"rd2_{r}", reset_less=True)
            m.d.sync += [rd1.eq(rp.data), rd2.eq(rd1)]
            m.d.comb += self.r_data[r].eq(rd2)
        return m
