# SPDX-License-Identifier: Apache-2.0
"""The sequencer of the banked array: steps, rounds, beats, the copies' tile walkers and
the issue registers."""

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from gen.conv.banked import BankedConfig
from hdl.conv.banked.loaders import desc_layout
from hdl.conv.banked.outbanks import CaptureInfo

__all__ = ["Sequencer"]


class Sequencer(wiring.Component):
    """Runs the job's steps (``(group, strip, chunk)``), each as ``rounds`` rounds of ``K``
    beats; copy ``g`` of round ``j`` computes tile ``j n + g`` of the strip.

    A round starts (``go`` in cycle ``u``; its beats are in the counters in cycles
    ``u + 1 .. u + K``) once ``P = K + max(0, dr - K_next)`` clocks have passed since the
    previous round's ``go`` (so that each capture finds the shadow rows drained) and, for a
    step's first round, once the step's weights and features are loaded and, for a strip's
    first chunk, once its output set has been streamed out.  ``fin`` counts the steps whose
    bank reads are over; it counts a step two clocks after its last beat left the counters.

    Members
    -------
    start, run : In(1)
        ``start``: a descriptor is taken (job counters restart); ``run``: a job is active.
    d : In(desc_layout(cfg))
    wdone, xdone : In(unsigned(count_width))
        Weight blocks / feature steps loaded.
    streamed : In(unsigned(count_width))
        Strips streamed out (all jobs).
    fin : Out(unsigned(count_width))
    v, first, last : Out(1)
        Issue registers (cycle ``t + 1`` for a beat in the counters in cycle ``t``).
    fa : Out(ArrayLayout(unsigned(fbits), copies))
        Per copy the flat feature index of its column 0.
    fset : Out(1)
        The feature set the beat reads.
    wa : Out(unsigned(wbits))
        The weight-bank address.
    busy : Out(unsigned(busy_bits))
        MAC cells the beat keeps busy (0 without a beat).
    info : Out(CaptureInfo(cfg))
        The round's capture info, registered with its last beat.
    oset_load, oset : Out(1)
        A strip's first round starts: latch its beat count for output set ``oset``.
    ts : Out(unsigned(count_width))
        Strips started (all jobs); a strip's output set is ``ts mod 2``.
    """

    def __init__(self, cfg: BankedConfig):
        self.cfg = cfg
        cw = cfg.count_width
        super().__init__({
            "start": In(1), "run": In(1), "d": In(desc_layout(cfg)),
            "wdone": In(unsigned(cw)), "xdone": In(unsigned(cw)), "streamed": In(unsigned(cw)),
            "fin": Out(unsigned(cw)), "v": Out(1), "first": Out(1), "last": Out(1),
            "fa": Out(data.ArrayLayout(unsigned(cfg.fbits), cfg.copies)), "fset": Out(1),
            "wa": Out(unsigned(cfg.wbits)), "busy": Out(unsigned(cfg.busy_bits)),
            "info": Out(CaptureInfo(cfg)), "oset_load": Out(1), "oset": Out(1),
            "ts": Out(unsigned(cw)),
        })

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        d = self.d
        cw = cfg.count_width
        i, q, rd, g, sc = (Signal(cw, name=n) for n in ("i", "q", "rd", "grp", "sc"))
        cd = Signal(cw + 1)
        wres = Signal(cfg.wbits)
        lastq = q == d.Q - 1
        lastrd = rd == d.rounds - 1
        K = Mux(lastq, d.kl, d.kq)
        qn = Mux(lastq, 0, q + 1)
        knext = Mux(lastrd, Mux(qn == d.Q - 1, d.kl, d.kq), K)
        dr = Mux(lastrd, d.drl, d.drq)
        ready = ((self.wdone >= Mux(d.res, g + 1, i + 1)) & (self.xdone >= i + 1)
                 & ((q != 0) | ((self.ts - self.streamed)[:cw] <= 1)))
        go = Signal()
        m.d.comb += go.eq(self.run & (i != d.nsteps) & (cd == 0) & ((rd != 0) | ready))
        with m.If(self.start):
            m.d.sync += [i.eq(0), q.eq(0), rd.eq(0), g.eq(0), sc.eq(0), cd.eq(0), wres.eq(0)]
        with m.Elif(go):
            m.d.sync += [cd.eq(K - 1 + Mux(dr > knext, dr - knext, 0)),
                         rd.eq(Mux(lastrd, 0, rd + 1))]
            with m.If(lastrd):
                m.d.sync += [i.eq(i + 1), q.eq(qn), wres.eq(Mux(lastq, 0, wres + d.kq))]
                with m.If(lastq):
                    m.d.sync += [self.ts.eq(self.ts + 1), sc.eq(Mux(sc == d.S - 1, 0, sc + 1))]
                    with m.If(sc == d.S - 1):
                        m.d.sync += g.eq(g + 1)
        with m.Elif(cd != 0):
            m.d.sync += cd.eq(cd - 1)
        m.d.comb += [self.oset_load.eq(go & (rd == 0) & (q == 0)), self.oset.eq(self.ts[0])]
        fw, info, busy, round_last = self._round(m, go, rd, dr, lastrd, lastq, q, i, wres)
        b, off, kcur, issuing = self._beats(m, go, K)
        self._issue(m, fw, info, busy, round_last, b, off, kcur, issuing)
        return m

    def _round(self, m, go, rd, dr, lastrd, lastq, q, i, wres):
        """At ``go``: the copies' tiles (walkers: output columns left in the row, feature and
        output index of column 0), the round's capture info, its busy cells per beat, the
        weight base and the feature set."""
        cfg = self.cfg
        d = self.d
        cw = cfg.count_width
        nc = cfg.copies
        rem = [Signal(cw, name=f"rem{c}") for c in range(nc)]
        fw = [Signal(cfg.fbits, name=f"fw{c}") for c in range(nc)]
        ew = [Signal(cfg.obits, name=f"ew{c}") for c in range(nc)]
        init = [(d.segw, 0, 0), (d.r1, d.f1, d.e1)]
        nxt = []
        for c in range(nc):
            wrap = rem[c] <= d.rstep
            adv = (rem[c] - Mux(wrap, d.rwrap, d.rstep), fw[c] + Mux(wrap, d.fwrap, d.fstep),
                   ew[c] + Mux(wrap, d.ewrap, d.estep))
            nxt.append([Mux(rd == 0, init[c][k], adv[k]) for k in range(3)])
        act1 = ~lastrd & d.n2 | lastrd & d.last_n2
        nv = []
        for c in range(nc):
            v = Signal(cw, name=f"nv{c}")
            left = nxt[c][0][:cw]
            m.d.comb += v.eq(Mux(left < cfg.cols, left, cfg.cols))
            nv.append(Mux(act1, v, 0) if c else v)
        info = Signal(CaptureInfo(cfg))
        busy = Signal(cfg.busy_bits)
        round_last = Signal()
        wa_base = Signal(cfg.wbits)
        fset = Signal()
        with m.If(go):
            for c in range(nc):
                m.d.sync += [rem[c].eq(nxt[c][0]), fw[c].eq(nxt[c][1]), ew[c].eq(nxt[c][2]),
                             info.e[c].eq(nxt[c][2]), info.nv[c].eq(nv[c])]
            m.d.sync += [info.dr.eq(dr), info.R.eq(d.R), info.cp.eq(d.cp),
                         info.oset.eq(self.ts[0]), info.first.eq(q == 0),
                         info.strip_end.eq(lastq & lastrd), round_last.eq(lastrd),
                         busy.eq(d.R * (nv[0] + nv[1] if nc == 2 else nv[0]))]
            with m.If(rd == 0):
                m.d.sync += [wa_base.eq(Mux(d.res, wres, i[0] << (cfg.wbits - 1))),
                             fset.eq(i[0])]
        self._wa_base, self._fset = wa_base, fset
        return fw, info, busy, round_last

    def _beats(self, m, go, K):
        """Beat counters of the round in flight: ``b`` and the feature offset ``off`` over
        ``(ic, ky, kx)`` (``ph`` counts ``kx`` modulo the stride)."""
        cfg = self.cfg
        d = self.d
        b, kcur = Signal(cfg.count_width), Signal(cfg.count_width)
        off = Signal(cfg.fbits)
        issuing = Signal()
        kx, ky, ph = Signal(4), Signal(4), Signal(3)
        with m.If(self.start):
            m.d.sync += issuing.eq(0)
        with m.Elif(go):
            m.d.sync += [issuing.eq(1), b.eq(0), off.eq(0), kx.eq(0), ky.eq(0), ph.eq(0),
                         kcur.eq(K)]
        with m.Elif(issuing):
            m.d.sync += b.eq(b + 1)
            with m.If(b == kcur - 1):
                m.d.sync += issuing.eq(0)
            with m.If(kx != d.kw - 1):
                m.d.sync += [kx.eq(kx + 1), ph.eq(Mux(ph == d.s - 1, 0, ph + 1)),
                             off.eq(off + Mux(ph == d.s - 1, d.d_wrap, d.d_in))]
            with m.Else():
                m.d.sync += [kx.eq(0), ph.eq(0)]
                with m.If(ky != d.kh - 1):
                    m.d.sync += [ky.eq(ky + 1), off.eq(off + d.d_ky)]
                with m.Else():
                    m.d.sync += [ky.eq(0), off.eq(off + d.d_ic)]
        return b, off, kcur, issuing

    def _issue(self, m, fw, info, busy, round_last, b, off, kcur, issuing):
        """Issue registers, one clock after the counters; ``fin``."""
        cfg = self.cfg
        last = issuing & (b == kcur - 1)
        m.d.sync += [self.v.eq(issuing), self.first.eq(b == 0), self.last.eq(last),
                     self.fset.eq(self._fset), self.wa.eq(self._wa_base + b),
                     self.busy.eq(Mux(issuing, busy, 0))]
        for c in range(cfg.copies):
            m.d.sync += self.fa[c].eq(fw[c] + off)
        with m.If(last):
            m.d.sync += self.info.eq(info)
        fin_pre = Signal()
        m.d.sync += fin_pre.eq(last & round_last)
        with m.If(self.start):
            m.d.sync += self.fin.eq(0)
        with m.Elif(fin_pre):
            m.d.sync += self.fin.eq(self.fin + 1)
