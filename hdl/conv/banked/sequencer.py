# SPDX-License-Identifier: Apache-2.0
"""The sequencer of the banked array: steps, rounds, beats, the window walker and the issue
registers."""

from amaranth.hdl import Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from gen.conv.banked import BankedConfig
from hdl.conv.banked.loaders import desc_layout
from hdl.conv.banked.outbanks import CaptureInfo
from hdl.conv.banked.util import late_mux

__all__ = ["Sequencer"]


class Sequencer(wiring.Component):
    """Runs the job's steps (``(group, strip, chunk)``), each as ``rounds`` rounds of ``K``
    beats; round ``j`` computes the strip's positions ``j W .. j W + W - 1`` (``W = n
    cols``).

    After a descriptor the sequencer walks the window's ``copies x cols`` columns once (one
    a clock: each column's starting position in its output row and the rows it is below
    column 0).  A round starts (``go`` in cycle ``u``; its beats are in the counters in
    cycles ``u + 1 .. u + K``) once ``P = K + max(0, max(R, 2) - K_next)`` clocks have passed
    since the previous round's ``go`` (so that each capture finds the shadow rows drained,
    and a sum that the next chunk reads back is written first) and,
    for a step's first round, once the step's weights and features are loaded and, for a
    strip's first chunk, once its output set has been streamed out (with ``span``, or after
    a ``span`` strip, every strip before it).  ``fin`` counts the
    steps whose bank reads are over; it counts a step two clocks after its last beat left
    the counters.

    Members
    -------
    start, run : In(1)
        ``start``: a descriptor is taken (job counters restart); ``run``: a job is active.
    d : In(desc_layout(cfg))
    dn : In(desc_layout(cfg))
        The descriptor at the ``c`` port (``d`` from the clock after ``start``): the job's
        constants are registered from it at ``start``.
    wdone, xdone : In(unsigned(count_width))
        Weight blocks / feature steps loaded.
    streamed : In(unsigned(count_width))
        Strips streamed out (all jobs).
    sinc : In(1)
        ``streamed`` steps at the end of this clock.
    fin : Out(unsigned(count_width))
    fin1 : Out(unsigned(count_width))
        ``fin + 1`` (a register beside ``fin``).
    fin_inc : Out(1)
        ``fin`` stepped at the last clock edge (a register).
    v, first, last : Out(1)
        Issue registers (cycle ``t + 1`` for a beat in the counters in cycle ``t``).
    fa : Out(unsigned(fbits))
        Flat feature index of window column 0.
    fx : Out(ArrayLayout(unsigned(abits), copies x cols))
        Per window column the rows it is below column 0, in bank addresses.
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
        self.abits = max((cfg.feat_depth - 1).bit_length(), 1)
        super().__init__({
            "start": In(1), "run": In(1), "d": In(desc_layout(cfg)), "dn": In(desc_layout(cfg)),
            "wdone": In(unsigned(cw)), "xdone": In(unsigned(cw)), "streamed": In(unsigned(cw)),
            "sinc": In(1),
            "fin": Out(unsigned(cw)), "fin1": Out(unsigned(cw), init=1),
            "fin_inc": Out(1), "v": Out(1), "first": Out(1), "last": Out(1),
            "fa": Out(unsigned(cfg.fbits)),
            "fx": Out(data.ArrayLayout(unsigned(self.abits), cfg.window)), "fset": Out(1),
            "wa": Out(unsigned(cfg.wbits)), "busy": Out(unsigned(cfg.busy_bits)),
            "info": Out(CaptureInfo(cfg)), "oset_load": Out(1), "oset": Out(1),
            "ts": Out(unsigned(cw)),
        })

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        d = self.d
        cw = cfg.count_width
        i, q, rd, sc, gq = (Signal(cw, name=n) for n in ("i", "q", "rd", "sc", "gq"))
        cd = Signal(cw + 1)
        wres = Signal(cfg.wbits)
        # the job's constants, registered from the descriptor at start (no arithmetic
        # between the counters and go or the registers it loads)
        dn = self.dn
        Qm2, Sm2, rdm2 = (Signal(cw, name=n) for n in ("Qm2", "Sm2", "rdm2"))
        kqm1, klm1 = Signal(cw, name="kqm1"), Signal(cw, name="klm1")
        busy_w, busy_l = Signal(cfg.busy_bits), Signal(cfg.busy_bits)
        # P - 1 after go by (K is kl, K_next is kl): K - 1 + max(0, max(R, 2) - K_next)
        cdt = [[Signal(cw + 1, name=f"cd{a}{b}") for b in range(2)] for a in range(2)]
        # Q == 1, rounds == 1, S == 1 (1 after reset, as Q - 1 == 0 was)
        q1z, r1z, s1z = Signal(init=1), Signal(init=1), Signal(init=1)
        with m.If(self.start):
            m.d.sync += [Qm2.eq(dn.Q - 2), Sm2.eq(dn.S - 2), rdm2.eq(dn.rounds - 2),
                         kqm1.eq(dn.kq - 1), klm1.eq(dn.kl - 1),
                         q1z.eq(dn.Q == 1), r1z.eq(dn.rounds == 1), s1z.eq(dn.S == 1)]
        # the products R W and R lastw (modulo 2**busy_bits) in two stages: at start the
        # partial products of W's low and high halves (sums of shifted R from the
        # descriptor at the port: a product would be mapped to a DSP block), every clock
        # their sum; first read at a job's first go_r, at least two clocks after start
        # (the init walk, go)
        bb = cfg.busy_bits
        h = bb // 2
        for prod, w in ((busy_w, "W"), (busy_l, "lastw")):
            lo, hi = (Signal(bb, name=f"{w}_{n}", reset_less=True) for n in ("plo", "phi"))
            wv = getattr(dn, w)
            with m.If(self.start):
                m.d.sync += [lo.eq(sum(Mux(wv[j], dn.R << j, 0) for j in range(h))),
                             hi.eq(sum(Mux(wv[j], dn.R << (j - h), 0) for j in range(h, bb)))]
            m.d.sync += prod.eq(lo + (hi << h))
        # cdt in two steps: K - 1 and max(0, max(R, 2) - K_next) at start, their sums every
        # clock (ready from the clock after d, a job's earliest go)
        km1 = [kqm1, klm1]
        gap = [Signal(cw, name=f"gap{b}") for b in range(2)]
        rgap = Mux(dn.R < 2, 2, dn.R)
        with m.If(self.start):
            for a, ka in enumerate((dn.kq, dn.kl)):
                m.d.sync += gap[a].eq(Mux(rgap > ka, rgap - ka, 0))
        for a in range(2):
            for b in range(2):
                m.d.sync += cdt[a][b].eq(km1[a] + gap[b])
        self._cdtz = [[(km1[a] == 0) & (gap[b] == 0) for b in range(2)] for a in range(2)]
        self._cdt1 = [[((km1[a] == 0) & (gap[b] == 1)) | ((km1[a] == 1) & (gap[b] == 0))
                       for b in range(2)] for a in range(2)]
        # q == Q - 1, rd == rounds - 1, sc == S - 1 as flags (registers stepped with q,
        # rd, sc: q + 1 == Q - 1 is q == Qm2)
        lastq, lastrd, scl = (Signal(init=1, name=n) for n in ("lastq", "lastrd", "scl"))
        # q == Q - 2 a flag too, exact every clock: registered from q's next value (q
        # changes only at ea), Qm3 = Q - 3 and Q == 2 registered at start
        qeq, Qm3, q2z = Signal(name="qeq"), Signal(cw, name="Qm3"), Signal(name="q2z")
        with m.If(self.start):
            m.d.sync += [Qm3.eq(dn.Q - 3), q2z.eq(dn.Q == 2)]
        # K_next is kl: the next round's chunk is the last one
        knext_kl = Mux(lastrd, Mux(lastq, q1z, qeq), lastq)
        cdv = Mux(lastq, Mux(knext_kl, cdt[1][1], cdt[1][0]), Mux(knext_kl, cdt[0][1], cdt[0][0]))
        self._kcm1 = Mux(lastq, klm1, kqm1)
        self._busy_w, self._busy_l = busy_w, busy_l
        self._init_walk(m)
        # i + 1, g Q + q + 1 (gq + 1 and gq + Q + 1 kept beside gq), kept as registers
        i1, gq1, gqq1 = (Signal(cw, init=1, name=n) for n in ("i1", "gq1", "gqq1"))
        # for go's compares (_go_ready): i + 2, gqq1 + 1, gqq1 - 1, stepped with them
        i2, gqq2 = (Signal(cw, init=2, name=n) for n in ("i2", "gqq2"))
        gqq0 = Signal(cw, name="gqq0")
        # go a net of its own (keep): without it ABC merges go's two LUT levels into the
        # enables of the counters below, six LUTs deep across the chip (e288612, seeds 1, 2)
        go = Signal(attrs={"keep": 1})
        # each counter group's enable (go & lastrd [& lastq [& scl]]) is not built from go
        # but beside it, from registered flags that fold the group's condition in (see
        # _go_ready), kept nets: with the enables as LUTs of go, ABC (for which a kept go is
        # an input that arrives early) chained them behind it (88bea03: 5-6 LUTs from the
        # flip-flops to the enables)
        ea, es, eg = (Signal(name=n, attrs={"keep": 1}) for n in ("ea", "es", "eg"))
        # the flags' next values (every clock; start loads them from the descriptor)
        # (the values with go set are kept below for _go_ready's flags)
        lastrd_g, lastq_g, scl_g = (Mux(lastrd, r1z, rd == rdm2), Mux(lastq, q1z, qeq),
                                    Mux(scl, s1z, sc == Sm2))
        lastrd_n = Mux(self.start, dn.rounds == 1, Mux(go, lastrd_g, lastrd))
        lastq_n = Mux(self.start, dn.Q == 1, Mux(ea, lastq_g, lastq))
        scl_n = Mux(self.start, dn.S == 1, Mux(es, scl_g, scl))
        m.d.sync += [lastrd.eq(lastrd_n), lastq.eq(lastq_n), scl.eq(scl_n)]
        # the values if go is set (ea = go & lastrd, es = ea & lastq), for _go_ready
        self._if_go = {"lastrd": lastrd_g, "lastq": Mux(lastrd, lastq_g, lastq),
                       "scl": Mux(lastrd & lastq, scl_g, scl)}
        # the counters' reset values at start are constants (a synchronous reset, so the
        # enables are ea / es / eg alone)
        with m.If(self.start):
            m.d.sync += rd.eq(0)
        with m.Elif(go):
            m.d.sync += rd.eq(Mux(lastrd, 0, rd + 1))
        # cd: loaded at go, else counted down to 0 (cdz: cd == 0, a register)
        self._cdz = cdz = Signal(init=1, name="cdz")    # cd == 0, a register (_go_ready)
        with m.If(self.start):
            m.d.sync += cd.eq(0)
        with m.Elif(go | ~cdz):
            m.d.sync += cd.eq(Mux(go, cdv, cd - 1))
        m.d.sync += qeq.eq(Mux(self.start, dn.Q == 2,
                               Mux(ea, Mux(lastq, q2z, q == Qm3), q == Qm2)))
        with m.If(self.start):
            m.d.sync += [i.eq(0), q.eq(0), wres.eq(0), i1.eq(1), gqq1.eq(1), i2.eq(2),
                         gqq2.eq(2), gqq0.eq(0)]
        with m.Elif(ea):
            m.d.sync += [i.eq(i + 1), i1.eq(i1 + 1), q.eq(Mux(lastq, 0, q + 1)),
                         wres.eq(Mux(lastq, 0, wres + d.kq)), i2.eq(i2 + 1)]
            with m.If(~lastq):
                m.d.sync += [gqq1.eq(gqq1 + 1), gqq2.eq(gqq2 + 1), gqq0.eq(gqq1)]
            with m.Elif(~scl):
                m.d.sync += [gqq1.eq(gq1), gqq2.eq(gq1 + 1), gqq0.eq(gq)]
            with m.Else():
                m.d.sync += [gqq1.eq(gq1 + d.Q), gqq2.eq(gq1 + d.Q + 1), gqq0.eq(gq + d.Q)]
        with m.If(self.start):
            m.d.sync += sc.eq(0)
        with m.Elif(es):
            m.d.sync += sc.eq(Mux(scl, 0, sc + 1))
        with m.If(es):
            m.d.sync += self.ts.eq(self.ts + 1)
        with m.If(self.start):
            m.d.sync += [gq.eq(0), gq1.eq(1)]
        with m.Elif(eg):
            m.d.sync += [gq.eq(gq + d.Q), gq1.eq(gq1 + d.Q)]
        go_r = self._go_ready(m, go, ea, es, eg, lastrd, lastq, knext_kl, cdt,
                              i, i1, i2, gq, gq1, gqq0, gqq1, gqq2, scl, cd)
        rdnz, qnz = self._rdnz, self._qnz   # rd != 0, q != 0 (registers)
        m.d.comb += [self.oset_load.eq(go & ~rdnz & ~qnz), self.oset.eq(self.ts[0])]
        # go's own loads are the counters above (through ea, es, eg) and the flags of
        # _go_ready; the walker, the round's registers and the beat counters take go_r (go
        # a clock later, one flip-flop) instead (see _walker, _round and _beats)
        rd0_r = Signal()
        m.d.sync += rd0_r.eq(~rdnz)
        walk = self._walker(m, go_r, rd0_r)
        info, busy, round_last = self._round(m, go_r, ~rdnz, lastrd, lastq, ~qnz, i, wres)
        beats = self._beats(m, go_r, self._kcm1)
        self._issue(m, go_r, walk, info, busy, round_last, *beats)
        return m

    def _go_ready(self, m, go, ea, es, eg, lastrd, lastq, knext_kl, cdt,
                  i, i1, i2, gq, gq1, gqq0, gqq1, gqq2, scl, cd):
        """``go`` two LUT levels from flip-flops, no compare or carry chain before it.

        ``go = run & init_done & (i != nsteps) & (cd == 0) & ((rd != 0) | ready)`` with
        ``ready = (wdone >= tw) & (xdone >= i1) & ((q != 0) | ts - streamed in {0, 1})``
        (``ts - streamed == 0`` with ``span`` or after a ``span`` strip)
        and ``tw = res ? gqq1 : i1``.  Every term is a flag registered from its next-state
        value (``h``, ``hr``), except the counts of the loaders and the streamer, which come
        in as the previous clock's count compared with the next target a clock ahead
        (``wg``, ``wm``: ``count >= T``, ``count >= T - 1`` of the clock before, ``T`` the
        target after this clock's ``go``) and their increment, which is whether the
        count's bit 0 toggled (a count steps by at most 1 a clock):
        ``count >= T  <=>  wg | (wm & inc)``; the streamer's term uses ``ts - streamed``,
        a register, whose values -1..2 are flags registered a clock ahead (``s0``, ``s1``
        for streamed's step or not).  ``start`` resets the counts and the targets;
        go is off for the window's clocks after it (the init walk), so the flags are
        exact again by then.  The flags that depend on ``go`` are late choices
        (:func:`hdl.conv.banked.util.late_mux`).  Returns ``go_r``, ``go`` a clock later."""
        cfg = self.cfg
        d, dn = self.d, self.dn
        cw = cfg.count_width
        # control flags, exact every clock: i != nsteps, cd == 0, rd != 0, q != 0
        inz, rdnz, qnz = Signal(), Signal(), Signal()
        cdz = self._cdz
        cdtz = [[Signal(name=f"cdz{a}{b}") for b in range(2)] for a in range(2)]
        m.d.sync += [cdtz[a][b].eq(self._cdtz[a][b]) for a in range(2) for b in range(2)]
        cdvz = Mux(lastq, Mux(knext_kl, cdtz[1][1], cdtz[1][0]),
                   Mux(knext_kl, cdtz[0][1], cdtz[0][0]))
        # cd == 1 a flag too (cdt == 1 registered beside cdt as cdz## beside cdt##)
        cd1 = Signal(name="cd1")
        cdt1 = [[Signal(name=f"cd1{a}{b}") for b in range(2)] for a in range(2)]
        m.d.sync += [cdt1[a][b].eq(self._cdt1[a][b]) for a in range(2) for b in range(2)]
        cdv1 = Mux(lastq, Mux(knext_kl, cdt1[1][1], cdt1[1][0]),
                   Mux(knext_kl, cdt1[0][1], cdt1[0][0]))
        m.d.sync += cd1.eq(Mux(self.start, 0, Mux(go, cdv1, ~cdz & (cd == 2))))
        # the flags' next values without start, if go is set (g) and if not (n)
        inz_g, cdz_g, rdnz_g = Mux(lastrd, i1 != d.nsteps, inz), cdvz, ~lastrd
        inz_ng, cdz_ng = inz, cdz | cd1
        inz_n = Mux(self.start, dn.nsteps != 0, Mux(ea, i1 != d.nsteps, inz))
        cdz_n = Mux(self.start, 1, Mux(go, cdz_g, cdz_ng))
        rdnz_n = Mux(self.start, 0, Mux(go, rdnz_g, rdnz))
        qnz_n = Mux(self.start, 0, Mux(ea, ~lastq, qnz))
        # h: init_done & inz & cdz; hr: h & rdnz; and each with the groups' conditions
        # (lastrd, & lastq, & scl) folded in, all registered from their next values: each
        # a kept choice by go between its values with and without go (late_mux), so go is
        # one LUT from these flip-flops (start clears them all: init_done)
        # Each kept value is built as its own chain of ANDs, the flag's own terms first,
        # so that none is a subexpression of another (Yosys would share the cell, and a
        # kept net inside another's cone is one more LUT level)
        ig = self._if_go
        idn = self._init_done_run       # init_done's next value without start
        conds_g = ([], [ig["lastrd"]], [ig["lastrd"], ig["lastq"]],
                   [ig["lastrd"], ig["lastq"], ig["scl"]])
        conds_ng = ([], [lastrd], [lastrd, lastq], [lastrd, lastq, scl])

        def conj(*terms):
            out = terms[0]
            for t in terms[1:]:
                out = out & t
            return out
        flags = {}
        for name, cg, cn in zip(("", "a", "s", "g"), conds_g, conds_ng):
            fh, fhr = Signal(name=f"h{name}"), Signal(name=f"hr{name}")
            m.d.sync += [
                fh.eq(~self.start & late_mux(m, go, conj(*cg, idn, inz_g, cdz_g),
                                             conj(*cn, idn, inz_ng, cdz_ng), f"h{name}")),
                fhr.eq(~self.start & late_mux(
                    m, go, conj(*cg, rdnz_g, idn, inz_g, cdz_g),
                    conj(*cn, rdnz, idn, inz_ng, cdz_ng), f"hr{name}"))]
            flags[name] = (fh, fhr)
        m.d.sync += [inz.eq(inz_n), cdz.eq(cdz_n), rdnz.eq(rdnz_n), qnz.eq(qnz_n)]
        self._rdnz, self._qnz = rdnz, qnz
        # the targets now (T) and after a step's last round starting now (TA), and minus 1,
        # multiplexers of registers.  gqq1's value after a strip's last step (jt: gq1, or
        # gq1 + Q after a group's last strip) and jt - 1 are registered every clock from
        # sc and gq, which change only at such a go; a go in the next clock (P = 1: K = 1)
        # starts a step of chunk 0, not the last (Q >= 2), so it does not read them
        jt, jtm = Signal(cw, name="jt"), Signal(cw, name="jtm")
        m.d.sync += [jt.eq(Mux(scl, gq1 + d.Q, gq1)), jtm.eq(Mux(scl, gq + d.Q, gq))]
        res = d.res
        tw = Mux(res, gqq1, i1)
        twm = Mux(res, gqq0, i)
        ta = Mux(res, Mux(lastq, jt, gqq2), i2)
        tam = Mux(res, Mux(lastq, jtm, gqq1), i1)

        def ge(count, t, tm, ta, tam, name):
            g, gm, c0 = (Signal(name=f"{name}{n}") for n in ("g", "m", "0"))
            # ea: go & lastrd (after start go waits for the init walk, by when these are
            # exact again)
            m.d.sync += [g.eq(Mux(ea, count >= ta, count >= t)),
                         gm.eq(Mux(ea, count >= tam, count >= tm)), c0.eq(count[0])]
            return g | (gm & (count[0] ^ c0))

        wge = ge(self.wdone, tw, twm, ta, tam, "w")
        xge = ge(self.xdone, i1, i, i2, i1, "x")
        # (q != 0) | ts - streamed in {0, 1}, with D = ts - streamed of the clock before:
        # ts steps at tinc, streamed by sinc: D + tinc - sinc in {0, 1}
        # D == -1, 0, 1, 2 as flags registered from D's next value, D a register beside
        # ts and streamed (both 0 after reset; ts steps at es, streamed at sinc): the
        # compares are of D's register, es and sinc choose among them at the end
        dts = Signal(cw, name="dts")
        vals = {v: dts == (v % (1 << cw)) for v in range(-2, 4)}
        m.d.sync += dts.eq(Mux(es, Mux(self.sinc, dts, dts + 1),
                               Mux(self.sinc, dts - 1, dts)))
        e_m1, e_0, e_1, e_2 = (Signal(name=f"dts_is{n}", init=n == "0")
                               for n in ("m1", "0", "1", "2"))
        for f, v in ((e_m1, -1), (e_0, 0), (e_1, 1), (e_2, 2)):
            m.d.sync += f.eq(Mux(es, Mux(self.sinc, vals[v], vals[v - 1]),
                                 Mux(self.sinc, vals[v + 1], vals[v])))
        # with span, or after a span strip (pspan: the last strip started), D must be 0:
        # the strip before streamed out too (its sums fill both sets); span_n is the
        # condition in the next clock (the descriptor changes at start, pspan at a strip's
        # first round)
        pspan, pspan_n = Signal(), Signal()
        m.d.comb += pspan_n.eq(Mux(go & ~rdnz & ~qnz, d.span, pspan))
        m.d.sync += pspan.eq(pspan_n)
        s0, s1, sp = Signal(), Signal(), Signal()

        def sflags(g):
            # s0, s1's next values if go is g (tinc = es = go & lastrd & lastq), without
            # start (start is the last choice: go is clear with it, no job runs)
            qz = Mux(lastrd, ~lastq, qnz) if g else qnz
            ps = Mux(~rdnz & ~qnz, d.span, pspan) if g else pspan
            sn = d.span | ps
            ti = (lastrd & lastq) if g else 0
            return (qz | Mux(sn, Mux(ti, e_m1, e_0), Mux(ti, e_m1 | e_0, e_0 | e_1)),
                    qz | Mux(sn, Mux(ti, e_0, e_1), Mux(ti, e_0 | e_1, e_1 | e_2)))
        (s0_g, s1_g), (s0_ng, s1_ng) = sflags(1), sflags(0)
        sn0 = dn.span | pspan
        m.d.sync += [s0.eq(Mux(self.start, Mux(sn0, e_0, e_0 | e_1),
                               late_mux(m, go, s0_g, s0_ng, "s0"))),
                     s1.eq(Mux(self.start, Mux(sn0, e_1, e_1 | e_2),
                               late_mux(m, go, s1_g, s1_ng, "s1"))),
                     sp.eq(self.streamed[0])]
        sok = Mux(self.streamed[0] ^ sp, s1, s0)
        # go and the groups' enables, each two LUT levels from flip-flops (the ready
        # terms shared); run is left out: h implies run (a job's last step has gone, i ==
        # nsteps, before its last strip drains and run falls; h is 0 after reset and from
        # start until the init walk is over)
        rdy = wge & xge & sok
        for sig, name in ((go, ""), (ea, "a"), (es, "s"), (eg, "g")):
            fh, fhr = flags[name]
            m.d.comb += sig.eq(fhr | (fh & rdy))
        go_r = Signal()
        m.d.sync += go_r.eq(go)
        return go_r

    def _init_walk(self, m):
        """After a descriptor: per window column ``k`` (position ``k`` of the strip) its
        column minus ``thr``, its row minus ``ythr`` and its rows and images below column 0
        in bank addresses (``mx`` a row, ``ex`` more an image), one column a clock."""
        cfg = self.cfg
        d = self.d
        cw = cfg.count_width
        self.init_oy = [Signal(signed(cw + 1), name=f"ioy{k}") for k in range(cfg.window)]
        self.init_y = [Signal(signed(cw + 1), name=f"iy{k}") for k in range(cfg.window)]
        self.init_x = [Signal(self.abits, name=f"ix{k}") for k in range(cfg.window)]
        k = Signal(range(cfg.window + 1))
        ox, oy, x = Signal(cw), Signal(cw), Signal(self.abits)
        done = Signal()
        klast = Signal(init=cfg.window == 1)     # k == window - 1
        # ox == segw - 1 (wrap) and oy == rs - 1 (iwrap) as flags registered from the
        # counters' next values (compares with segw - 2 / rs - 2 of the registers), and
        # mx + ex registered at start: a column's x is a flag's choice of constants and
        # one adder (clock rate)
        wrap, iwrap, seg1, rs1 = Signal(), Signal(), Signal(), Signal()
        segm2, rsm2 = Signal(cw), Signal(cw)
        mxe = Signal(self.abits)
        dn = self.dn
        with m.If(self.start):
            m.d.sync += [k.eq(0), ox.eq(0), oy.eq(0), x.eq(0), done.eq(0),
                         klast.eq(cfg.window == 1), segm2.eq(dn.segw - 2),
                         rsm2.eq(dn.rs - 2), mxe.eq(dn.mx + dn.ex),
                         seg1.eq(dn.segw == 1), rs1.eq(dn.rs == 1),
                         wrap.eq(dn.segw == 1), iwrap.eq(dn.rs == 1)]
        with m.Elif(~done & self.run):
            for c in range(cfg.window):
                with m.If(k == c):
                    m.d.sync += [self.init_oy[c].eq(ox - d.thr), self.init_y[c].eq(oy - d.ythr),
                                 self.init_x[c].eq(x)]
            m.d.sync += [k.eq(k + 1), ox.eq(Mux(wrap, 0, ox + 1)),
                         wrap.eq(Mux(wrap, seg1, ox == segm2))]
            with m.If(wrap):
                m.d.sync += [oy.eq(Mux(iwrap, 0, oy + 1)),
                             iwrap.eq(Mux(iwrap, rs1, oy == rsm2)),
                             x.eq(x + Mux(iwrap, mxe, d.mx))]
            m.d.sync += klast.eq((k == cfg.window - 2) if cfg.window >= 2 else 0)
            with m.If(klast):
                m.d.sync += done.eq(1)
        # init_done's next value when start is clear (go's flags clear with start)
        self._init_done_run = done | (self.run & klast)

    def _walker(self, m, go_r, rd0_r):
        """At ``go``: the round's first position (flat feature index ``f0``) and per window
        column its column, row and rows / images below column 0 (``xs``); a round advances
        them by ``W = A PI + a segw + r`` positions: ``fstep``, ``fwrap`` when column 0
        passes the row end (a row carry), ``fimg`` when its row passes the image's last
        (an image carry), ``fimgw`` both; a column that carries while column 0 does not is
        ``mx`` (a row) or ``ex`` (an image) further below, and the other way round.

        Timing: the walker's registers are the values a clock late, updated at ``go_r``
        (``go`` a clock later, a flip-flop) with ``rd0_r`` (``rd == 0`` at that ``go``):
        ``go``'s enable net drives none of these ~500 flip-flops.  The values of the clock
        itself, which only the issue registers read, are ``Mux(go_r, next, current)``.
        Returns ``(f0, f0 next, xs, xs next)``.  No reset (a job's first round loads them
        all)."""
        cfg = self.cfg
        d = self.d
        cw = cfg.count_width
        f0 = Signal(cfg.fbits, reset_less=True)
        # per column its column minus thr and its row minus ythr: a column carry when the
        # column's is non-negative, an image carry when the row's plus the column carry is
        oys = [Signal(signed(cw + 1), name=f"oy{k}", reset_less=True) for k in range(cfg.window)]
        ys = [Signal(signed(cw + 1), name=f"y{k}", reset_less=True) for k in range(cfg.window)]
        # ys + 1 beside ys: the image carry (ys + column carry >= 0) is a sign bit's choice
        ys1 = [Signal(signed(cw + 1), name=f"y1_{k}", reset_less=True)
               for k in range(cfg.window)]
        xs = [Signal(self.abits, name=f"x{k}", reset_less=True) for k in range(cfg.window)]
        # the carries as flags registered with the registers from their next values
        # (wraps[k] = oys[k] >= 0, imgs[k] = (wraps[k] ? ys1[k] : ys[k]) >= 0), and
        # whether a column's carries equal column 0's (sw, si): the column steps below
        # choose with flip-flops only (clock rate)
        wraps, imgs, sw, si = ([Signal(name=f"{n}{k}", reset_less=True)
                                for k in range(cfg.window)] for n in ("wr", "im", "sw", "si"))
        oys_n, ys_n, ys1_n = ([Signal(signed(cw + 1), name=f"{n}{k}_n")
                               for k in range(cfg.window)] for n in ("oy", "y", "y1_"))
        for k in range(cfg.window):
            m.d.comb += [
                oys_n[k].eq(Mux(rd0_r, self.init_oy[k],
                                oys[k] + Mux(wraps[k], d.rwrap.as_signed(), d.rstep))),
                ys_n[k].eq(Mux(rd0_r, self.init_y[k],
                               ys[k] + Mux(imgs[k], d.ywrap.as_signed(), d.ystep) + wraps[k])),
                ys1_n[k].eq(Mux(rd0_r, self.init_y[k] + 1,
                                ys1[k] + Mux(imgs[k], d.ywrap.as_signed(), d.ystep) + wraps[k]))]
        wraps_n = [~oy[-1] for oy in oys_n]
        imgs_n = [Mux(wraps_n[k], ~ys1_n[k][-1], ~ys_n[k][-1]) for k in range(cfg.window)]
        # the stepped f0 and xs registered every clock from the walker's registers: they
        # change only at go_r, and a go_r in the clock after one reloads (rd == 0: of two
        # go in consecutive clocks (P = 1) the second starts a step), so at a go_r with
        # rd0_r clear the registered steps are those of the registers' values
        f0_s = Signal(cfg.fbits, reset_less=True)
        xs_s = [Signal(self.abits, name=f"x{k}_s", reset_less=True) for k in range(cfg.window)]
        m.d.sync += f0_s.eq(f0 + Mux(imgs[0], Mux(wraps[0], d.fimgw, d.fimg),
                                     Mux(wraps[0], d.fwrap, d.fstep)))
        f0_n = Signal(cfg.fbits)
        xs_n = [Signal(self.abits, name=f"x{k}_n") for k in range(cfg.window)]
        m.d.comb += f0_n.eq(Mux(rd0_r, 0, f0_s))
        # a column's step beside column 0's: dm + de, dm in {0, mx, -mx} (the column
        # carries a row and column 0 does not / the other way round), de likewise in {0,
        # ex, -ex}; the eight non-zero sums registered from d every clock (first read at a
        # round after a job's first), so a column's step is a choice of registers and one
        # adder (clock rate)
        sums = {}
        for a, va in ((1, d.mx), (2, -d.mx), (0, 0)):
            for b, vb in ((1, d.ex), (2, -d.ex), (0, 0)):
                sums[a, b] = Signal(self.abits, name=f"xd{a}{b}", reset_less=True)
                m.d.sync += sums[a, b].eq(va + vb)
        for k in range(cfg.window):
            def pick(a):
                return Mux(si[k], sums[a, 0], Mux(imgs[k], sums[a, 1], sums[a, 2]))
            step = Mux(sw[k], pick(0), Mux(wraps[k], pick(1), pick(2)))
            m.d.sync += xs_s[k].eq(xs[k] + step)
            m.d.comb += xs_n[k].eq(Mux(rd0_r, self.init_x[k], xs_s[k]))
        with m.If(go_r):
            m.d.sync += f0.eq(f0_n)
            m.d.sync += [xs[k].eq(xs_n[k]) for k in range(cfg.window)]
            for k in range(cfg.window):
                m.d.sync += [oys[k].eq(oys_n[k]), ys[k].eq(ys_n[k]), ys1[k].eq(ys1_n[k]),
                             wraps[k].eq(wraps_n[k]), imgs[k].eq(imgs_n[k]),
                             sw[k].eq(wraps_n[k] == wraps_n[0]), si[k].eq(imgs_n[k] == imgs_n[0])]
        return f0, f0_n, xs, xs_n

    def _round(self, m, go_r, rd0, lastrd, lastq, q0, i, wres):
        """At ``go``: the round's capture info, its busy cells per beat, the weight base and
        the feature set.

        Timing: each is ``Mux(go_r, pre, hold)``: ``pre`` registers the value from the
        clock's state every clock (the state changes only at ``go``, so at ``go_r`` it holds
        the value ``go`` took), ``hold`` the value of the clock before; no load of ``go``."""
        cfg = self.cfg
        d = self.d

        def at_go(shape, value_of, name):
            pre, hold, cur = (Signal(shape, name=f"{name}{n}") for n in ("_pre", "_hold", ""))
            m.d.comb += cur.eq(Mux(go_r, pre, hold))
            m.d.sync += [pre.eq(value_of(cur)), hold.eq(cur)]
            return cur

        nv = Mux(lastrd, d.lastw, d.W)
        info = Signal(CaptureInfo(cfg))
        e = at_go(cfg.obits, lambda e: Mux(rd0, 0, e + d.W), "e0")
        m.d.comb += [info.e.eq(e),
                     info.nv.eq(at_go(info.nv.shape(), lambda _: nv, "i_nv")),
                     info.R.eq(at_go(info.R.shape(), lambda _: d.R, "i_R")),
                     info.cp.eq(at_go(info.cp.shape(), lambda _: d.cp, "i_cp")),
                     info.oset.eq(at_go(1, lambda _: self.ts[0], "i_oset")),
                     info.first.eq(at_go(1, lambda _: q0, "i_first")),
                     info.strip_end.eq(at_go(1, lambda _: lastq & lastrd, "i_end"))]
        round_last = at_go(1, lambda _: lastrd, "round_last")
        busy = at_go(cfg.busy_bits, lambda _: Mux(lastrd, self._busy_l, self._busy_w), "busy")
        self._wa_base = at_go(cfg.wbits, lambda cur: Mux(
            rd0, Mux(self.d.res, wres, i[0] << (cfg.wbits - 1)), cur), "wa_base")
        self._fset = at_go(1, lambda cur: Mux(rd0, i[0], cur), "fset_r")
        return info, busy, round_last

    def _beats(self, m, go_r, K):
        """Beat counters of the round in flight (``K``: the round's ``K - 1``): ``b`` and
        the feature offset ``off`` over ``(ic, ky, kx)``; ``px`` / ``py`` count ``kx`` /
        ``ky`` modulo the stride (the phase-ordered rows and columns).

        Timing: as the walker's, the counters' registers are loaded a clock late, at
        ``go_r``: a round's first beat (the clock after ``go``) is ``Mux(go_r, first
        beat's value, register)``, the first beat's values constants and ``K`` registered
        every clock (it changes only at ``go``): ``go``'s enable net drives none of these
        flip-flops.  The counters' wraps (``kx == kw - 1``, ``px == s - 1``, ...), the
        round's last beat (``b == K - 1``) and the next beat's offset increment are flags
        and a register computed a beat ahead, so ``off``'s adder and the issue registers
        have no compare in front.  Returns the values of the clock ``(b, bl, issuing)``
        (``bl``: the round's last beat) and the register ``off_h`` (``off`` where not
        ``go_r``)."""
        cfg = self.cfg
        d = self.d
        cw = cfg.count_width
        b_h, kcm1_h, kpm1 = (Signal(cw, name=n) for n in ("b", "kcm1", "kcm1_pre"))
        off_h, inc_h, inc_first = (Signal(cfg.fbits, name=n) for n in ("off", "inc", "inc0"))
        iss_h = Signal(name="issuing")
        kx_h, ky_h = Signal(4, name="kx"), Signal(4, name="ky")
        px_h, py_h = Signal(3, name="px"), Signal(3, name="py")
        # kx == kw - 1, ky == kh - 1, px == s - 1, py == s - 1, b == K - 1: the flags, and
        # their values at a round's first beat (kw == 1, kh == 1, s == 1, K - 1 == 0)
        xl_h, yl_h, pxl_h, pyl_h, bl_h = (Signal(name=n) for n in ("xl", "yl", "pxl", "pyl",
                                                                    "bl"))
        kw1, kh1, s1, kz = (Signal(name=n) for n in ("kw1", "kh1", "s1", "kz"))
        kwm2, khm2, sm2 = Signal(4, name="kwm2"), Signal(4, name="khm2"), Signal(3, name="sm2")

        def incsel(xl, pxl, yl, pyl):
            return Mux(~xl, Mux(pxl, d.d_xwrap, d.d_xin),
                       Mux(~yl, Mux(pyl, d.d_ywrap, d.d_yin), d.d_ic))
        # the job's constants from d every clock (first read at a job's first go_r, two
        # clocks after d at least), K's every clock (it changes only at go)
        m.d.sync += [kw1.eq(d.kw == 1), kh1.eq(d.kh == 1), s1.eq(d.s == 1),
                     kwm2.eq(d.kw - 2), khm2.eq(d.kh - 2), sm2.eq(d.s - 2),
                     inc_first.eq(incsel(d.kw == 1, d.s == 1, d.kh == 1, d.s == 1)),
                     kpm1.eq(K - 1), kz.eq(K == 0)]

        def cur(reg, first):
            return Mux(go_r, first, reg)
        b, off, kcm1, inc = cur(b_h, 0), cur(off_h, 0), cur(kcm1_h, kpm1), cur(inc_h, inc_first)
        kx, ky, px, py = cur(kx_h, 0), cur(ky_h, 0), cur(px_h, 0), cur(py_h, 0)
        xl, yl, pxl, pyl = cur(xl_h, kw1), cur(yl_h, kh1), cur(pxl_h, s1), cur(pyl_h, s1)
        bl = cur(bl_h, kz)
        issuing = Signal()
        m.d.comb += issuing.eq(go_r | iss_h)
        # the flags after this beat
        xl_n, yl_n, pxl_n, pyl_n = (Signal(name=f"{n}_n") for n in ("xl", "yl", "pxl", "pyl"))
        m.d.comb += [xl_n.eq(Mux(xl, kw1, kx == kwm2)),
                     pxl_n.eq(Mux(xl, s1, Mux(pxl, s1, px == sm2))),
                     yl_n.eq(Mux(xl, Mux(yl, kh1, ky == khm2), yl)),
                     pyl_n.eq(Mux(xl, Mux(yl, s1, Mux(pyl, s1, py == sm2)), pyl))]
        with m.If(self.start):
            m.d.sync += iss_h.eq(0)
        with m.Elif(issuing):
            m.d.sync += [b_h.eq(b + 1), kcm1_h.eq(kcm1), bl_h.eq(b == kcm1), iss_h.eq(~bl),
                         off_h.eq(off + inc), inc_h.eq(incsel(xl_n, pxl_n, yl_n, pyl_n)),
                         xl_h.eq(xl_n), yl_h.eq(yl_n), pxl_h.eq(pxl_n), pyl_h.eq(pyl_n),
                         kx_h.eq(Mux(xl, 0, kx + 1)), px_h.eq(Mux(xl | pxl, 0, px + 1)),
                         ky_h.eq(ky), py_h.eq(py)]
            with m.If(xl):
                m.d.sync += [ky_h.eq(Mux(yl, 0, ky + 1)), py_h.eq(Mux(yl | pyl, 0, py + 1))]
        return b, bl, issuing, off_h

    def _issue(self, m, go_r, walk, info, busy, round_last, b, bl, issuing, off_h):
        """Issue registers, one clock after the counters; ``fin``."""
        cfg = self.cfg
        f0, f0_n, xs, xs_n = walk
        last = issuing & bl
        # the walker's values of this clock (see _walker); at go_r the beat counters hold a
        # round's first beat (off == 0)
        m.d.sync += [self.v.eq(issuing), self.first.eq(b == 0), self.last.eq(last),
                     self.busy.eq(Mux(issuing, busy, 0))]
        # the addresses and the capture info without reset (read with v / last only):
        # fewer loads on the reset net
        fset, wa, fa, info_r = (Signal.like(p, name=f"{n}_r", reset_less=True) for p, n in (
            (self.fset, "fset"), (self.wa, "wa"), (self.fa, "fa"), (self.info, "info")))
        fx = [Signal(self.abits, name=f"fx{k}_r", reset_less=True) for k in range(cfg.window)]
        m.d.sync += [fset.eq(self._fset), wa.eq(self._wa_base + b),
                     fa.eq(Mux(go_r, f0_n, f0 + off_h))]
        m.d.sync += [fx[k].eq(Mux(go_r, xs_n[k], xs[k])) for k in range(cfg.window)]
        # every clock, not only at the round's last beat: info changes only at go_r, a
        # round's first beat (the clock after go; P >= K, so the previous round's beats are
        # over), so info_r after a last beat is that round's; the drain reads it only with
        # the last beat's cap.  No enable: the last-beat compare b == kcur has no fan-out
        # into these ~60 flip-flops (it was the shell's worst path on seeds 1 and 2)
        m.d.sync += info_r.eq(info)
        m.d.comb += [self.fset.eq(fset), self.wa.eq(wa), self.fa.eq(fa), self.info.eq(info_r)]
        m.d.comb += [self.fx[k].eq(fx[k]) for k in range(cfg.window)]
        fin_pre = Signal()
        m.d.sync += fin_pre.eq(last & round_last)
        with m.If(self.start):
            m.d.sync += [self.fin.eq(0), self.fin1.eq(1)]
        with m.Elif(fin_pre):
            m.d.sync += [self.fin.eq(self.fin + 1), self.fin1.eq(self.fin1 + 1)]
        m.d.sync += self.fin_inc.eq(fin_pre & ~self.start)
