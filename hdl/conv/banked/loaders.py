# SPDX-License-Identifier: Apache-2.0
"""The two loaders of the banked array: weights and features, ``bus_words`` per beat, into
the set that the sequencer has finished reading."""

from amaranth.hdl import Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from gen.conv.banked import BankedConfig, descriptor_widths

__all__ = ["WeightLoader", "FeatureLoader", "desc_layout"]


def desc_layout(cfg: BankedConfig):
    """The descriptor register's layout (:func:`gen.conv.banked.descriptor_widths`)."""
    return data.StructLayout({k: unsigned(v) for k, v in descriptor_widths(cfg).items()})


class _Loader(wiring.Component):
    """Loads ``total`` blocks of beats from ``src`` in order; block ``l`` may start once
    ``fin >= need(l)`` (steps whose reads are over) and counts in ``done`` when its last
    beat is taken.  ``ready`` is ``run``, a block pending and its permission."""

    def __init__(self, cfg, word, lanes):
        self.cfg = cfg
        super().__init__({
            "src": In(stream.Signature(data.ArrayLayout(signed(word), lanes))),
            "start": In(1), "run": In(1), "d": In(desc_layout(cfg)),
            "fin": In(unsigned(cfg.count_width)),
            "done": Out(unsigned(cfg.count_width)),
            "en": Out(1), "beat": Out(unsigned(cfg.count_width + 6)),
        })

    def _counts(self, m, total, size, need_next):
        cfg = self.cfg
        need = Signal(cfg.count_width)
        bc = Signal(cfg.count_width + 6)
        pending = Signal()
        m.d.comb += [pending.eq(self.done != total),
                     self.src.ready.eq(self.run & pending & (self.fin >= need)),
                     self.en.eq(self.src.valid & self.src.ready), self.beat.eq(bc)]
        with m.If(self.start):
            m.d.sync += [self.done.eq(0), need.eq(0), bc.eq(0)]
        with m.Elif(self.en):
            m.d.sync += bc.eq(bc + 1)
            with m.If(bc == size - 1):
                m.d.sync += [bc.eq(0), self.done.eq(self.done + 1), need.eq(need_next(need))]
        return bc


class WeightLoader(_Loader):
    """Weights: per step (``res`` = 0, set ``step mod 2``, block ``l`` needs ``fin >= l - 1``)
    or once per group for all chunks (``res``, block ``g`` needs ``fin >= g S Q``).

    Extra members: ``w_addr`` (bank address), ``w_j`` (row group) Out, valid with ``en``."""

    def __init__(self, cfg):
        super().__init__(cfg, cfg.weight_width, cfg.bus_words)
        self.w_addr = Signal(cfg.wbits)
        self.w_j = Signal(6)

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        d = self.d
        q = Signal(cfg.count_width)
        lastq = q == d.Q - 1
        size = Mux(d.res, d.wbr, Mux(lastq, d.wbl, d.wbq))
        total = Mux(d.res, d.G, d.nsteps)
        bc = self._counts(m, total, size,
                          lambda need: Mux(d.res, need + d.sq, self.done))
        a = Signal(cfg.wbits)
        j = Signal(6)
        with m.If(self.start):
            m.d.sync += [q.eq(0), a.eq(0), j.eq(0)]
        with m.Elif(self.en):
            m.d.sync += j.eq(Mux(j == d.wg - 1, 0, j + 1))
            with m.If(j == d.wg - 1):
                m.d.sync += a.eq(a + 1)
            with m.If(bc == size - 1):
                m.d.sync += [a.eq(0), j.eq(0), q.eq(Mux(lastq, 0, q + 1))]
        base = Mux(d.res, 0, self.done[0] << (cfg.wbits - 1))
        m.d.comb += [self.w_addr.eq(base + a), self.w_j.eq(j)]
        return m


class FeatureLoader(_Loader):
    """Features: per step into set ``step mod 2`` (block ``l`` needs ``fin >= l - 1``).

    Extra members: ``w_f`` (flat index of lane 0), ``w_set`` Out, valid with ``en``."""

    def __init__(self, cfg):
        super().__init__(cfg, cfg.data_width, cfg.bus_words)
        self.w_f = Signal(cfg.fbits)
        self.w_set = Signal()

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        d = self.d
        q = Signal(cfg.count_width)
        lastq = q == d.Q - 1
        size = Mux(lastq, d.xbl, d.xbq)
        bc = self._counts(m, d.nsteps, size, lambda need: self.done)
        f = Signal(cfg.fbits)
        with m.If(self.start):
            m.d.sync += [q.eq(0), f.eq(0)]
        with m.Elif(self.en):
            m.d.sync += f.eq(f + cfg.bus_words)
            with m.If(bc == size - 1):
                m.d.sync += [f.eq(0), q.eq(Mux(lastq, 0, q + 1))]
        m.d.comb += [self.w_f.eq(f), self.w_set.eq(self.done[0])]
        return m
