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
    """Loads ``total`` blocks of beats from ``src`` in order; a block may start once ``fin
    >= need`` (``fin``: steps whose bank reads are over) and counts in ``done`` when its
    last beat is taken.  ``src.ready`` is ``run``, a block pending and its permission.

    Members
    -------
    src : In(stream.Signature(ArrayLayout(signed(word), bus_words)))
    start, run : In(1)
        A descriptor is taken (the counters restart) / a job is active.
    d : In(desc_layout(cfg))
    dn : In(desc_layout(cfg))
        The descriptor at the ``c`` port: the job's constants are registered from it at
        ``start``.
    fin : In(unsigned(count_width))
    done : Out(unsigned(count_width))
        Blocks loaded in this job.
    en : Out(1)
        A beat is taken this clock (its bank write follows, see the subclasses).
    """

    def __init__(self, cfg, word):
        self.cfg = cfg
        super().__init__({
            "src": In(stream.Signature(data.ArrayLayout(signed(word), cfg.bus_words))),
            "start": In(1), "run": In(1), "d": In(desc_layout(cfg)), "dn": In(desc_layout(cfg)),
            "fin": In(unsigned(cfg.count_width)), "done": Out(unsigned(cfg.count_width)),
            "en": Out(1),
        })

    def _counts(self, m, total, size_m1, need):
        """The beat counter of the block in flight (``size_m1``: the block's beats - 1,
        ``need``: its ``fin`` permission, a register); returns it and the block's end (its
        last beat taken this clock)."""
        cfg = self.cfg
        bc = Signal(cfg.count_width + 6)
        end = Signal()
        m.d.comb += [self.src.ready.eq(self.run & (self.done != total) & (self.fin >= need)),
                     self.en.eq(self.src.valid & self.src.ready),
                     end.eq(self.en & (bc == size_m1))]
        with m.If(self.start):
            m.d.sync += [self.done.eq(0), bc.eq(0)]
        with m.Elif(self.en):
            m.d.sync += bc.eq(bc + 1)
            with m.If(end):
                m.d.sync += [bc.eq(0), self.done.eq(self.done + 1)]
        return bc, end


class WeightLoader(_Loader):
    """Weights: per step (``res`` = 0: set ``step mod 2``, block ``l`` needs ``fin >= l -
    1``) or, ``res``, chunk ``q`` of group ``g`` once at ``q K_q`` (needs the previous
    group's last step of chunk ``q`` over: ``fin >= (g S - 1) Q + q + 1``).

    Extra outputs (valid with ``en``): ``w_addr`` (bank address), ``w_j`` (channel group
    of the beat)."""

    def __init__(self, cfg):
        super().__init__(cfg, cfg.weight_width)
        self.w_addr = Signal(cfg.wbits)
        self.w_j = Signal(6)

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        d = self.d
        cw = cfg.count_width
        q, g = Signal(cw), Signal(cw)
        gsq = Signal(cw)                 # g S Q
        wres = Signal(cfg.wbits)         # q K_q
        dn = self.dn
        Qm1, wgm1 = Signal(cw), Signal(6)
        wbqm1, wblm1 = Signal(cw + 6), Signal(cw + 6)
        with m.If(self.start):
            m.d.sync += [Qm1.eq(dn.Q - 1), wgm1.eq(dn.wg - 1), wbqm1.eq(dn.wbq - 1),
                         wblm1.eq(dn.wbl - 1)]
        lastq = q == Qm1
        # the next block's fin permission, a register: (g S - 1) Q + q + 1 for g > 0 (res),
        # else the blocks done - 1
        need = Signal(cw)
        bc, end = self._counts(m, Mux(d.res, d.gq, d.nsteps), Mux(lastq, wblm1, wbqm1), need)
        a = Signal(cfg.wbits)
        j = Signal(6)
        with m.If(self.start):
            m.d.sync += [q.eq(0), g.eq(0), gsq.eq(0), wres.eq(0), a.eq(0), j.eq(0),
                         need.eq(0)]
        with m.Elif(self.en):
            m.d.sync += j.eq(Mux(j == wgm1, 0, j + 1))
            with m.If(j == wgm1):
                m.d.sync += a.eq(a + 1)
            with m.If(end):
                m.d.sync += [a.eq(0), j.eq(0), q.eq(Mux(lastq, 0, q + 1)),
                             wres.eq(Mux(lastq, 0, wres + d.kq)),
                             need.eq(Mux(d.res, Mux(lastq, gsq + d.sq - d.Q + 1,
                                                    Mux(g == 0, 0, need + 1)),
                                         self.done))]
                with m.If(lastq):
                    m.d.sync += [g.eq(g + 1), gsq.eq(gsq + d.sq)]
        base = Mux(d.res, wres, self.done[0] << (cfg.wbits - 1))
        m.d.comb += [self.w_addr.eq(base + a), self.w_j.eq(j)]
        return m


class FeatureLoader(_Loader):
    """Features: per step into set ``step mod 2`` (block ``l`` needs ``fin >= l - 1``), row
    by row: ``bpr`` beats a row, rows ``D`` words apart, but ``ipj`` after the last of an
    image's ``hrows`` rows when another image of the channel follows (channel ``c``, image
    ``b``, row ``r`` from flat word ``c CPf + b IP + r D``).

    Extra outputs (valid with ``en``): ``w_f`` (flat index of lane 0), ``w_set``."""

    def __init__(self, cfg):
        super().__init__(cfg, cfg.data_width)
        self.w_f = Signal(cfg.fbits)
        self.w_set = Signal()

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        d = self.d
        cw = cfg.count_width
        q = Signal(cw)
        dn = self.dn
        Qm1, bprm1, xbqm1, xblm1, hrm1, foldm1 = (Signal(cw) for _ in range(6))
        with m.If(self.start):
            m.d.sync += [Qm1.eq(dn.Q - 1), bprm1.eq(dn.bpr - 1), xbqm1.eq(dn.xbq - 1),
                         xblm1.eq(dn.xbl - 1), hrm1.eq(dn.hrows - 1), foldm1.eq(dn.fold - 1)]
        lastq = q == Qm1
        need = Signal(cw)                # the blocks done - 1, a register
        bc, end = self._counts(m, d.nsteps, Mux(lastq, xblm1, xbqm1), need)
        row, f = Signal(cfg.fbits), Signal(cfg.fbits)
        j, hr, fi = Signal(cw), Signal(cw), Signal(cw)
        with m.If(self.start):
            m.d.sync += [q.eq(0), row.eq(0), f.eq(0), j.eq(0), hr.eq(0), fi.eq(0), need.eq(0)]
        with m.Elif(self.en):
            with m.If(j == bprm1):
                img_end = hr == hrm1
                pitch = Mux(img_end & (fi != foldm1), d.ipj, d.D)
                m.d.sync += [j.eq(0), row.eq(row + pitch), f.eq(row + pitch),
                             hr.eq(Mux(img_end, 0, hr + 1))]
                with m.If(img_end):
                    m.d.sync += fi.eq(Mux(fi == foldm1, 0, fi + 1))
            with m.Else():
                m.d.sync += [j.eq(j + 1), f.eq(f + cfg.bus_words)]
            with m.If(end):
                m.d.sync += [row.eq(0), f.eq(0), j.eq(0), hr.eq(0), fi.eq(0),
                             q.eq(Mux(lastq, 0, q + 1)), need.eq(self.done)]
        m.d.comb += [self.w_f.eq(f), self.w_set.eq(self.done[0])]
        return m
