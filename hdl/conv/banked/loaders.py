# SPDX-License-Identifier: Apache-2.0
"""The two loaders of the banked array: weights and features, ``bus_words`` per beat, into
the set that the sequencer has finished reading."""

from amaranth.hdl import Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from gen.conv.banked import BankedConfig, descriptor_widths
from hdl.conv.banked.util import late_mux

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
    fin1 : In(unsigned(count_width))
        ``fin + 1`` (the sequencer's register).
    fin_inc : In(1)
        ``fin`` stepped at the last clock edge (the sequencer's register).
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
            "fin": In(unsigned(cfg.count_width)), "fin1": In(unsigned(cfg.count_width)),
            "fin_inc": In(1),
            "done": Out(unsigned(cfg.count_width)),
            "en": Out(1),
        })

    def _counts(self, m, total_dn, sizes, need, need_new):
        """The beat counter of the block in flight and ``src.ready`` from registers only.

        ``sizes``: ``(lastq, lastq_next, qb_m1, lb_m1, lastq_dn, qb_dn, lb_dn)``: the
        block's beats - 1 is ``lb_m1`` for the last chunk (``lastq``, a register), else
        ``qb_m1``; ``lastq_next``: ``lastq`` after this block's end; ``lastq_dn`` and the
        beats of a block ``qb_dn`` / ``lb_dn`` at ``start`` from the descriptor.  ``need``:
        the block's ``fin`` permission, a register, ``need_new`` the value it takes at a
        block's end; ``total_dn``: the job's blocks, from the descriptor at ``start``
        (then a register).

        ``ready`` is ``run & done != total & fin >= need`` of the same clock, one LUT from
        registers: ``done != total`` implies ``run`` (a job ends after the sequencer has
        used every block), and the compares are registered a clock ahead: ``fin`` (the
        sequencer's) steps by at most 1 a clock, so ``fin >= need`` is ``fin >= need`` or
        ``fin + 1 >= need`` of the clock before (against the next ``need``), chosen by
        whether ``fin`` stepped (``fin_inc``, a register of the sequencer's: ``ready`` and
        ``en`` are each one LUT4 of registers).  Returns ``bc`` and ``bclast``: the beat on
        offer is the block's last (a register; with ``en`` the block ends this clock).
        Under ``en`` the updates test ``bclast``, not ``en & bclast``, so ``en`` (which
        comes from the other block's stream and the sequencer's ``fin``) reaches the
        counters' clock enables only, not their next-value logic (clock rate)."""
        cfg = self.cfg
        lastq, lastq_next, qb_m1, lb_m1, lastq_dn, qb_dn, lb_dn = sizes
        bc = Signal(cfg.count_width + 6)
        bclast = Signal()                # bc == the block's beats - 1
        # bc + 1 == beats - 1 as bc == beats - 2, and blocks of one beat as flags (no adder
        # before the compares)
        qb_m2, lb_m2 = Signal(len(bc), name="qb_m2"), Signal(len(bc), name="lb_m2")
        qb1, lb1 = Signal(name="qb1"), Signal(name="lb1")
        with m.If(self.start):
            m.d.sync += [qb_m2.eq(qb_dn - 2), lb_m2.eq(lb_dn - 2), qb1.eq(qb_dn == 1),
                         lb1.eq(lb_dn == 1)]
        left = Signal()                  # done != total
        # left & fin >= need, left & fin + 1 >= need (of the clock before)
        perm_a, perm_b = Signal(name="perm_a"), Signal(name="perm_b")
        end = Signal()
        # the job's blocks and done + 1, registers (no adder before the compare)
        tot, done1 = Signal.like(self.done, name="tot"), Signal.like(self.done, name="done1")
        m.d.comb += [self.src.ready.eq(Mux(self.fin_inc, perm_b, perm_a)),
                     self.en.eq(self.src.valid & self.src.ready),
                     end.eq(self.en & bclast)]
        fin, fin1 = self.fin, self.fin1
        with m.If(self.start):
            m.d.sync += [self.done.eq(0), done1.eq(1), tot.eq(total_dn), bc.eq(0),
                         left.eq(total_dn != 0),
                         bclast.eq(Mux(lastq_dn, lb_dn, qb_dn) == 1),
                         perm_a.eq(total_dn != 0), perm_b.eq(total_dn != 0)]
        with m.Else():
            # each the block end's (late: en) choice of values from registers (late_mux)
            left_end = done1 != tot
            m.d.sync += [
                left.eq(Mux(end, left_end, left)),
                perm_a.eq(late_mux(m, end, left_end & (fin >= need_new), left & (fin >= need),
                                   "perm_a")),
                perm_b.eq(late_mux(m, end, left_end & (fin1 >= need_new), left & (fin1 >= need),
                                   "perm_b"))]
            with m.If(self.en):
                m.d.sync += [bc.eq(bc + 1),
                             bclast.eq(bc == Mux(lastq, lb_m2, qb_m2))]
                with m.If(bclast):
                    m.d.sync += [bc.eq(0), self.done.eq(done1), done1.eq(done1 + 1),
                                 bclast.eq(Mux(lastq_next, lb1, qb1))]
        return bc, bclast


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
        wres = Signal(cfg.wbits)         # q K_q
        dn = self.dn
        Qm2, wgm1 = Signal(cw), Signal(6)
        wbqm1, wblm1 = Signal(cw + 6), Signal(cw + 6)
        with m.If(self.start):
            m.d.sync += [Qm2.eq(dn.Q - 2), wgm1.eq(dn.wg - 1), wbqm1.eq(dn.wbq - 1),
                         wblm1.eq(dn.wbl - 1)]
        # q == Qm1 and Q == 1, registers
        lastq, Q1 = Signal(), Signal()
        # the next block's fin permission, a register: (g S - 1) Q + q + 1 for g > 0 (res),
        # else the blocks done - 1; gsqn = (g + 1) S Q - Q + 1, its value for the last chunk
        need, gsqn = Signal(cw), Signal(cw)
        g0 = Signal()                    # g == 0
        lastq_next = Mux(lastq, Q1, q == Qm2)          # q + 1 == Q - 1
        need1 = Signal(cw, name="need1")          # need + 1, a register beside it
        need_new = Mux(d.res, Mux(lastq, gsqn, Mux(g0, 0, need1)), self.done)
        bc, bclast = self._counts(m, Mux(dn.res, dn.gq, dn.nsteps),
                               (lastq, lastq_next, wbqm1, wblm1, dn.Q == 1, dn.wbq, dn.wbl),
                               need, need_new)
        a = Signal(cfg.wbits)
        j = Signal(6)
        jlast, wg1 = Signal(), Signal()  # j == wgm1, wg == 1
        with m.If(self.start):
            m.d.sync += [q.eq(0), g.eq(0), gsqn.eq(dn.sq - dn.Q + 1), wres.eq(0), a.eq(0),
                         j.eq(0), need.eq(0), need1.eq(1), lastq.eq(dn.Q == 1),
                         Q1.eq(dn.Q == 1),
                         g0.eq(1), jlast.eq(dn.wg == 1), wg1.eq(dn.wg == 1)]
        with m.Elif(self.en):
            m.d.sync += [j.eq(Mux(jlast, 0, j + 1)), jlast.eq(Mux(jlast, wg1, j + 1 == wgm1))]
            with m.If(jlast):
                m.d.sync += a.eq(a + 1)
            with m.If(bclast):      # the block's end (under en)
                m.d.sync += [a.eq(0), j.eq(0), jlast.eq(wg1), q.eq(Mux(lastq, 0, q + 1)),
                             lastq.eq(lastq_next), wres.eq(Mux(lastq, 0, wres + d.kq)),
                             need.eq(need_new), need1.eq(need_new + 1)]
                with m.If(lastq):
                    m.d.sync += [g.eq(g + 1), g0.eq(0), gsqn.eq(gsqn + d.sq)]
        base = Mux(d.res, wres, self.done[0] << (cfg.wbits - 1))
        m.d.comb += [self.w_addr.eq(base + a), self.w_j.eq(j)]
        return m


class FeatureLoader(_Loader):
    """Features: per step into set ``step mod 2`` (block ``l`` needs ``fin >= l - 1``), row
    by row: ``bpr`` beats a row, rows ``D`` words apart, but ``ipj`` after the last of an
    image's ``hrows`` rows when another image of the channel follows and ``cpj`` after the
    channel's last (channel ``c``, image ``b``, row ``r`` from flat word ``c CPf + b IP + r
    D``).  A job with ``pack`` (:func:`gen.conv.banked.make_job`) is the same walk with one
    "channel" a step whose rows each hold the step's channels side by side: the loader
    does not know.

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
        Qm2, bprm1, xbqm1, xblm1, hrm1, foldm1 = (Signal(cw) for _ in range(6))
        with m.If(self.start):
            m.d.sync += [Qm2.eq(dn.Q - 2), bprm1.eq(dn.bpr - 1), xbqm1.eq(dn.xbq - 1),
                         xblm1.eq(dn.xbl - 1), hrm1.eq(dn.hrows - 1), foldm1.eq(dn.fold - 1)]
        lastq, Q1 = Signal(), Signal()   # q == Qm1, Q == 1
        need = Signal(cw)                # the blocks done - 1, a register
        lastq_next = Mux(lastq, Q1, q == Qm2)          # q + 1 == Q - 1
        bc, bclast = self._counts(m, dn.nsteps,
                               (lastq, lastq_next, xbqm1, xblm1, dn.Q == 1, dn.xbq, dn.xbl),
                               need, self.done)
        row, f = Signal(cfg.fbits), Signal(cfg.fbits)
        j, hr, fi = Signal(cw), Signal(cw), Signal(cw)
        jlast, bpr1 = Signal(), Signal()  # j == bprm1, bpr == 1
        hlast, hr1 = Signal(), Signal()   # hr == hrows - 1, hrows == 1
        flast, fold1 = Signal(), Signal()  # fi == fold - 1, fold == 1
        with m.If(self.start):
            m.d.sync += [q.eq(0), row.eq(0), f.eq(0), j.eq(0), hr.eq(0), fi.eq(0), need.eq(0),
                         lastq.eq(dn.Q == 1), Q1.eq(dn.Q == 1), jlast.eq(dn.bpr == 1),
                         bpr1.eq(dn.bpr == 1), hlast.eq(dn.hrows == 1),
                         hr1.eq(dn.hrows == 1), flast.eq(dn.fold == 1), fold1.eq(dn.fold == 1)]
        with m.Elif(self.en):
            with m.If(jlast):
                # a row's last beat: the next row D on, ipj at an image's last row when
                # another image of the channel follows, cpj at the channel's last row
                pitch = Mux(hlast, Mux(flast, d.cpj, d.ipj), d.D)
                m.d.sync += [j.eq(0), jlast.eq(bpr1), row.eq(row + pitch), f.eq(row + pitch),
                             hr.eq(Mux(hlast, 0, hr + 1)),
                             hlast.eq(Mux(hlast, hr1, hr + 1 == hrm1))]
                with m.If(hlast):
                    m.d.sync += [fi.eq(Mux(flast, 0, fi + 1)),
                                 flast.eq(Mux(flast, fold1, fi + 1 == foldm1))]
            with m.Else():
                m.d.sync += [j.eq(j + 1), jlast.eq(j + 1 == bprm1), f.eq(f + cfg.bus_words)]
            with m.If(bclast):      # the block's end (under en)
                m.d.sync += [row.eq(0), f.eq(0), j.eq(0), jlast.eq(bpr1), hr.eq(0), fi.eq(0),
                             hlast.eq(hr1), flast.eq(fold1),
                             q.eq(Mux(lastq, 0, q + 1)), lastq.eq(lastq_next),
                             need.eq(self.done)]
        m.d.comb += [self.w_f.eq(f), self.w_set.eq(self.done[0])]
        return m
