# SPDX-License-Identifier: Apache-2.0
"""Feature and weight banks of the banked array: wide writes, rotated window reads."""

from amaranth.hdl import Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from gen.conv.banked import BankedConfig
from hdl.conv.banked.util import _wrapped

__all__ = ["FeatureBanks", "WeightBanks", "FEATURE_READ_LATENCY", "WEIGHT_READ_LATENCY"]

FEATURE_READ_LATENCY = 3     # r_f at cycle t -> r_data at t + 3
WEIGHT_READ_LATENCY = 3      # r_addr at cycle t -> r_data at t + 3


def _rotate_in(m, nb, lanes, first, sig_at):
    """Per bank ``b``: the lane ``(b - first) mod nb`` and whether it is ``< lanes``."""
    out = []
    for b in range(nb):
        lane = Signal(range(nb), name=f"lane{b}")
        m.d.comb += lane.eq((b - first) % nb)
        out.append((lane, lane < lanes))
    return out


class FeatureBanks(wiring.Component):
    """Two sets of ``nb`` feature banks (``feat_depth`` words of ``signed(data_width)``
    each).  Flat word ``f`` of a set lives in bank ``f mod nb`` at address ``f div nb``.

    Members
    -------
    w_en, w_set : In(1)
        Write a beat into set ``w_set`` (cycle ``t``; the banks are written at the end of
        ``t + 1``).
    w_f : In(unsigned(fbits))
        Flat index of lane 0; lane ``k`` goes to word ``w_f + k``.
    w_data : In(ArrayLayout(signed(data_width), bus_words))
    r_set : In(1)
        The set the copies read (cycle ``t``).
    r_f : In(ArrayLayout(unsigned(fbits), copies))
        Per copy the flat index of its column 0 (cycle ``t``).
    r_data : Out(ArrayLayout(ArrayLayout(signed(data_width), cols), copies))
        Per copy and column ``c`` the word ``r_f + c`` (cycle ``t + 3``).
    """

    def __init__(self, cfg: BankedConfig):
        self.cfg = cfg
        word = signed(cfg.data_width)
        super().__init__({
            "w_en": In(1), "w_set": In(1), "w_f": In(unsigned(cfg.fbits)),
            "w_data": In(data.ArrayLayout(word, cfg.bus_words)),
            "r_set": In(1), "r_f": In(data.ArrayLayout(unsigned(cfg.fbits), cfg.copies)),
            "r_data": Out(data.ArrayLayout(data.ArrayLayout(word, cfg.cols), cfg.copies)),
        })

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        nb, lg = cfg.nb, cfg.nb.bit_length() - 1
        abits = (cfg.feat_depth - 1).bit_length()
        word = signed(cfg.data_width)
        mems = [[Memory(shape=word, depth=cfg.feat_depth, init=[]) for _ in range(nb)]
                for _ in range(2)]
        for s in range(2):
            for b in range(nb):
                m.submodules[f"f{s}_{b}"] = mems[s][b]
        # write: lane -> bank rotation, registered, written the clock after
        first = self.w_f[:lg] if lg else 0
        base = self.w_f[lg:]
        wset = Signal()
        m.d.sync += wset.eq(self.w_set)
        for b, (lane, ok) in enumerate(_rotate_in(m, nb, cfg.bus_words, first, None)):
            en, addr, dat = Signal(name=f"we{b}"), Signal(abits, name=f"wa{b}"), \
                Signal(word, name=f"wd{b}")
            m.d.sync += [en.eq(self.w_en & ok),
                         addr.eq(base + _wrapped(b, first, nb) if lg else base),
                         dat.eq(self.w_data[lane] if cfg.bus_words > 1 else self.w_data[0])]
            for s in range(2):
                wp = mems[s][b].write_port()
                m.d.comb += [wp.en.eq(en & (wset == s)), wp.addr.eq(addr), wp.data.eq(dat)]
        # read: per copy the bank addresses of its window, then the rotation into columns
        rset2, rset3 = Signal(), Signal()
        m.d.sync += [rset2.eq(self.r_set), rset3.eq(rset2)]
        for g in range(cfg.copies):
            f = self.r_f[g]
            rot2, rot3 = Signal(range(nb), name=f"rot2_{g}"), Signal(range(nb), name=f"rot3_{g}")
            m.d.sync += [rot2.eq(f[:lg] if lg else 0), rot3.eq(rot2)]
            words = []
            for b in range(nb):
                addr = Signal(abits, name=f"ra{g}_{b}")
                m.d.sync += addr.eq(f[lg:] + _wrapped(b, f[:lg], nb) if lg else f)
                ports = [mems[s][b].read_port() for s in range(2)]
                for p in ports:
                    m.d.comb += p.addr.eq(addr)
                w = Signal(word, name=f"rd{g}_{b}")
                m.d.comb += w.eq(Mux(rset3, ports[1].data, ports[0].data))
                words.append(w)
            table = data.ArrayLayout(word, nb)
            arr = Signal(table, name=f"bank_words{g}")
            m.d.comb += [arr[b].eq(words[b]) for b in range(nb)]
            for c in range(cfg.cols):
                idx = Signal(range(nb), name=f"ix{g}_{c}")
                m.d.comb += idx.eq(rot3 + c)
                m.d.sync += self.r_data[g][c].eq(arr[idx] if nb > 1 else arr[0])
        return m


class WeightBanks(wiring.Component):
    """One weight bank per row (``2 weight_depth`` words of ``signed(weight_width)``: two
    sets, the set in the address MSB).

    Members
    -------
    w_en : In(1)
        Write a beat (cycle ``t``; written at the end of ``t + 1``).
    w_addr : In(unsigned(wbits))
        Bank address of the beat.
    w_j : In(unsigned(6))
        Row group: lane ``k`` goes to row ``w_j bus_words + k`` if that is ``< nR``.
    w_data : In(ArrayLayout(signed(weight_width), bus_words))
    nR : In(unsigned(rbits))
        Rows in use (``n R``).
    r_addr : In(unsigned(wbits))
        Address every row reads (cycle ``t``).
    r_data : Out(ArrayLayout(signed(weight_width), rows))
        Each row's word (cycle ``t + 3``).
    """

    def __init__(self, cfg: BankedConfig):
        self.cfg = cfg
        word = signed(cfg.weight_width)
        super().__init__({
            "w_en": In(1), "w_addr": In(unsigned(cfg.wbits)), "w_j": In(unsigned(6)),
            "w_data": In(data.ArrayLayout(word, cfg.bus_words)), "nR": In(unsigned(cfg.rbits)),
            "r_addr": In(unsigned(cfg.wbits)),
            "r_data": Out(data.ArrayLayout(word, cfg.rows)),
        })

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        word = signed(cfg.weight_width)
        waddr = Signal(cfg.wbits)
        raddr = Signal(cfg.wbits)
        m.d.sync += [waddr.eq(self.w_addr), raddr.eq(self.r_addr)]
        for r in range(cfg.rows):
            mem = m.submodules[f"w{r}"] = Memory(shape=word, depth=2 * cfg.weight_depth,
                                                 init=[])
            en, dat = Signal(name=f"we{r}"), Signal(word, name=f"wd{r}")
            m.d.sync += [en.eq(self.w_en & (self.w_j == r // cfg.bus_words) & (r < self.nR)),
                         dat.eq(self.w_data[r % cfg.bus_words])]
            wp = mem.write_port()
            m.d.comb += [wp.en.eq(en), wp.addr.eq(waddr), wp.data.eq(dat)]
            rp = mem.read_port()
            m.d.comb += rp.addr.eq(raddr)
            m.d.sync += self.r_data[r].eq(rp.data)
        return m
