# SPDX-License-Identifier: Apache-2.0
"""The conv array's loaders: the weight loader (weight stream -> row weight banks, by the
weight mapping) and the feature loader (feature stream -> padded feature banks).

Both walk nested counters, one word per transfer (weights: kx, ky, ic, row of the block,
block of the pass, output channel; features: xp, yp, ic, image).  So that no enable or
select is a deep function of the counters, every counter level keeps two registered
flags, e (at its last value) and p (one step before it), and the ANDs of the e flags of
the lower levels are registers too (tw*/tx*, each loaded with the AND of the next e
values): each counter's enable is then a transfer AND one registered flag, and every wrap
loads registered constants.
"""

from types import SimpleNamespace

from amaranth.hdl import Cat, Module, Mux, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from gen.conv import ConvConfig
from hdl.conv._util import _S, _any, _bits, _sel
from hdl.lib.skid import SkidBuffer

__all__ = ["Loaders", "weight_layout"]


def weight_layout(cfg: ConvConfig):
    """The weight-stream payload: one weight, or ``w_lanes`` (lane ``k`` in bits
    ``k * weight_width ..``)."""
    word = signed(cfg.weight_width)
    return word if cfg.w_lanes == 1 else data.ArrayLayout(word, cfg.w_lanes)

# The sizes' constants (size == 1, size == 2, size - 3) are registered from the
# descriptor when it is taken (from the c payload, so they are valid in the CHUNK
# state of the first chunk).

def _size_consts(m, size, width, tag, ce):
    """Registers (size == 1, size == 2, size - 3): the e / p values of a level after
    a wrap, and the compare for p (cnt + 1 == size - 2 iff cnt == size - 3)."""
    regs = (_S(name=f"ld_{tag}_s1"), _S(name=f"ld_{tag}_s2"),
            _S(width, name=f"ld_{tag}_m3"))
    with m.If(ce):
        m.d.sync += [regs[0].eq(size == 1), regs[1].eq(size == 2),
                     regs[2].eq((size - 3)[:width])]
    return regs

def _level(m, cnt, tag, adv, consts, init, wrap=None, top=False):
    """A counter level advancing when ``adv``: counts up to ``size - 1``, then wraps
    to 0 (a ``top`` level ends the load instead); ``consts`` = size_consts of the
    size (the compare for p), ``wrap`` = (e, p) after a wrap (default: consts'
    size == 1, size == 2; others for a size that changes at the wrap); ``init`` =
    (condition, (e, p)): start at 0.  Returns e and its next value when ``adv``."""
    e, p = _S(name=f"ld_e{tag}"), _S(name=f"ld_p{tag}")
    s1, s2 = wrap if wrap is not None else consts[:2]
    with m.If(init[0]):
        m.d.sync += [cnt.eq(0), e.eq(init[1][0]), p.eq(init[1][1])]
    with m.If(adv):
        if top:
            m.d.sync += [cnt.eq(cnt + 1), e.eq(p), p.eq(cnt == consts[2])]
        else:
            with m.If(e):
                m.d.sync += [cnt.eq(0), e.eq(s1), p.eq(s2)]
            with m.Else():
                m.d.sync += [cnt.eq(cnt + 1), e.eq(p), p.eq(cnt == consts[2])]
    return e, (p if top else Mux(e, s1, p))

class Loaders(wiring.Component):
    """The weight and feature loaders of one chunk (WLOAD, then XLOAD).

    Weights arrive in C order ``(o, ic, ky, kx)`` of the chunk; each is written at row bank
    address ``blk * kq + kx * q * kh + ic * kh + ky`` into the banks of rows ``g * R + li``
    of the copies ``g < n`` of its pass.  Features arrive as ``(image, ic, y, x)``
    (unpadded); the loader walks the padded maps ``(image, ic, yp, xp)``, writing zeros at
    the borders without taking a word, into banks ``[ic][image][Hp][Wp]``.

    Parameters
    ----------
    cfg : :class:`gen.conv.ConvConfig`
    desc_layout : :class:`amaranth.lib.data.StructLayout`

    Members
    -------
    dsrc : In(desc_layout)
        The descriptor on the ``c`` stream (its constants load when it is taken).
    d : In(desc_layout)
        The descriptor register of the layer being loaded.
    take, take_pass : In(1)
        The descriptor is taken this clock (two fan-out replicas: the layer's and the
        passes' constants).
    chunk_go : In(1)
        The next clock is the CHUNK state (a chunk starts).
    chunk : In(4)
        Replicas of the CHUNK state flag (registered ``chunk_go``): bit 0 the weight
        counters, 1 the weight flags, 2 the pass constants, 3 the feature counters.
    last_chunk : In(1)
        The chunk is the layer's last (chooses ``icq_last``).
    wl_on, xl_on : In(1)
        The FSM is in WLOAD / XLOAD.
    kq : In(24)
        Beats per tile of the chunk (``icq * kh * kw``): the weight block stride.
    cqkh : In(24)
        ``icq * kh`` of the chunk: the kernel-column stride of the weight banks.
    w : In(stream.Signature(signed(weight_width)))
        The weight stream; it enters a skid buffer (``w.ready`` is a register).
    x : In(stream.Signature(signed(data_width)))
        The feature stream (``x.ready = xl_on & interior``, combinational from registers).
    x_start : Out(1)
        The chunk's last weight is taken this clock (WLOAD ends).
    x_done : Out(1)
        The chunk's last padded feature word is written this clock (XLOAD ends).
    w_addr : Out(unsigned(WW)), w_data : Out(signed(weight_width)), w_hit : Out(rows)
        The weight bank write (registered): address, word, per-row write enables.
    f_addr : Out(unsigned(FW)).array(cols), f_data : Out(signed(data_width)).array(cols),
    f_en : Out(1).array(cols)
        Per column the feature bank write (registered, one clock after the transfer; both
        banks of a column take the same write).

    Latency/throughput
    ------------------
    One weight per clock in WLOAD, one padded feature position per clock in XLOAD (while
    the streams have data); the writes land one (weights) or two (features) clocks later.
    """

    def __init__(self, cfg: ConvConfig, desc_layout: data.StructLayout):
        if not isinstance(cfg, ConvConfig):
            raise TypeError(f"cfg must be a ConvConfig, not {cfg!r}")
        self.cfg = cfg
        FW = _bits(cfg.feat_depth) + 1
        WW = _bits(cfg.weight_depth) + 1
        super().__init__({
            "dsrc": In(desc_layout), "d": In(desc_layout),
            "take": In(1), "take_pass": In(1), "chunk_go": In(1), "chunk": In(4),
            "last_chunk": In(1), "wl_on": In(1), "xl_on": In(1),
            "kq": In(24), "cqkh": In(24),
            "w": In(stream.Signature(weight_layout(cfg))),
            "x": In(stream.Signature(signed(cfg.data_width))),
            "x_start": Out(1), "x_done": Out(1),
            "w_addr": Out(unsigned(WW)),
            "w_data": (Out(signed(cfg.weight_width)) if cfg.w_lanes == 1 else
                       Out(signed(cfg.weight_width)).array(cfg.rows)),
            "w_hit": Out(cfg.rows),
            "f_addr": Out(unsigned(FW)).array(cfg.cols),
            "f_data": Out(signed(cfg.data_width)).array(cfg.cols),
            "f_en": Out(1).array(cfg.cols),
        })

    def elaborate(self, platform):
        m = Module()
        k = self._consts(m)
        if self.cfg.w_lanes == 1:
            w_take, twx = self._weights(m, k)
        else:
            w_take, twx = self._wide_weights(m)
        self._features(m, k, w_take & twx)
        return m

    def _wide_weights(self, m):
        """The weight loader at ``w_lanes`` weights per beat (:mod:`gen.conv.wstream`):
        counters (group, address, block, pass) over the chunk's beats; lane ``k`` of a beat
        goes to the rows ``g * R + j * L + k`` of the copies ``g < n``.  Per beat the rows'
        first lanes are one-hot (``U``: a 1 at ``g * R + j * L`` for each copy), and row
        ``r`` takes lane ``k`` where ``U[r - k]`` and the lane is in the pass
        (``j * L + k < R``): the copies' row ranges of one beat never overlap.  Two
        register stages (beat, then per-row enable and word) before the bank write.
        Returns the transfer enable and the chunk's-last-beat flag."""
        cfg, d = self.cfg, self.d
        MR, NG, NP, L = cfg.rows, cfg.max_groups, cfg.max_passes, cfg.w_lanes
        WW = _bits(cfg.weight_depth) + 1
        LB = L.bit_length() - 1
        ww = cfg.weight_width
        m.submodules.w_skid = w_skid = SkidBuffer(weight_layout(cfg))
        wiring.connect(m, wiring.flipped(self.w), w_skid.i)
        w_take = _S(name="ld_w_take")
        m.d.comb += [w_take.eq(self.wl_on & w_skid.o.valid), w_skid.o.ready.eq(self.wl_on)]
        lp = _S(range(max(NP, 2)), name="lw_pass")
        lb, lj = _S(16, name="lw_blk"), _S(16, name="lw_grp")
        la, lbase = _S(24, name="lw_addr"), _S(WW, name="lw_base")
        # the running pass's constants, selected from the layer's descriptor
        r = _sel([getattr(d, f"p{i}_r") for i in range(NP)], lp)
        cnt = _sel([getattr(d, f"p{i}_count") for i in range(NP)], lp)
        n = _sel([getattr(d, f"p{i}_n") for i in range(NP)], lp)
        groups = (r + (L - 1)) >> LB
        ej = lj == groups - 1
        ea = la == self.kq - 1
        eb = lb == cnt - 1
        ep = lp == d.npasses - 1
        with m.If(self.chunk[1]):
            m.d.sync += [lp.eq(0), lb.eq(0), lj.eq(0), la.eq(0), lbase.eq(0)]
        with m.Elif(w_take):
            with m.If(~ej):
                m.d.sync += lj.eq(lj + 1)
            with m.Else():
                m.d.sync += lj.eq(0)
                with m.If(~ea):
                    m.d.sync += la.eq(la + 1)
                with m.Else():
                    m.d.sync += [la.eq(0), lbase.eq(lbase + self.kq)]
                    with m.If(~eb):
                        m.d.sync += lb.eq(lb + 1)
                    with m.Else():
                        m.d.sync += [lb.eq(0), lp.eq(lp + 1)]
        # stage 1: the beat, its address, the copies' first rows (one-hot) and the lanes in
        # the pass
        s1_en, s1_addr = _S(name="lw1_en", reset_less=False), _S(WW, name="lw1_addr")
        s1_u, s1_valid = _S(MR, name="lw1_u"), _S(L, name="lw1_valid")
        s1_data = [_S(signed(ww), name=f"lw1_d{k}") for k in range(L)]
        jl = (lj << LB)[:16]
        m.d.sync += [s1_en.eq(w_take), s1_addr.eq(lbase + la),
                     s1_valid.eq(Cat((jl + k) < r for k in range(L))),
                     s1_u.eq(Cat(_any(((r * g + jl) == row) & (g < n) for g in range(NG))
                                 for row in range(MR)))]
        m.d.sync += [s1_data[k].eq(w_skid.o.payload[k]) for k in range(L)]
        # stage 2: per row its enable and word (the lane k with U[row - k])
        wl_addr = _S(WW, name="wl_addr")
        wl_hit = _S(MR, name="wl_hit")
        wl_data = [_S(signed(ww), name=f"wl_data{row}") for row in range(MR)]
        hits = [[s1_u[row - k] & s1_valid[k] for k in range(min(L, row + 1))]
                for row in range(MR)]
        m.d.sync += [wl_addr.eq(s1_addr),
                     wl_hit.eq(Cat(s1_en & _any(h) for h in hits))]
        for row, h in enumerate(hits):
            word = 0
            for k, hk in enumerate(h):
                word = word | Mux(hk, s1_data[k].as_unsigned(), 0)
            m.d.sync += wl_data[row].eq(word)
        m.d.comb += [self.w_addr.eq(wl_addr), self.w_hit.eq(wl_hit)]
        m.d.comb += [self.w_data[row].eq(wl_data[row]) for row in range(MR)]
        return w_take, ej & ea & eb & ep

    def _consts(self, m):
        """The sizes' constants of the descriptor being taken."""
        dsrc, ch_w, last_chunk = self.dsrc, self.chunk[0], self.last_chunk
        DIMW = (self.cfg.max_dim + 64).bit_length() + 1
        kw_c = _size_consts(m, dsrc.kw, 8, "kw", self.take)
        kh_c = _size_consts(m, dsrc.kh, 8, "kh", self.take)
        oc_c = _size_consts(m, dsrc.oc, 16, "oc", self.take)
        wp_c = _size_consts(m, dsrc.wp, DIMW + 1, "wp", self.take)
        hp_c = _size_consts(m, dsrc.hp, DIMW + 1, "hp", self.take)
        b_c = _size_consts(m, dsrc.batch, 16, "b", self.take)
        icq_f = _size_consts(m, dsrc.icq, 16, "icq", self.take)
        icq_l = _size_consts(m, dsrc.icq_last, 16, "icql", self.take)
        # the chunk's input channels (loaded in CHUNK)
        icq_c = (_S(name="ld_ic_s1"), _S(name="ld_ic_s2"), _S(16, name="ld_ic_m3"))
        icq_n = [Mux(last_chunk, a, b) for a, b in zip(icq_l, icq_f)]
        with m.If(ch_w):
            m.d.sync += [r.eq(v) for r, v in zip(icq_c, icq_n)]

        return SimpleNamespace(kw_c=kw_c, kh_c=kh_c, oc_c=oc_c, wp_c=wp_c, hp_c=hp_c, b_c=b_c,
                               icq_c=icq_c, icq_n=icq_n)

    def _weights(self, m, k):
        """The weight loader; returns the transfer enable and the chunk-end flag."""
        cfg, dsrc, d = self.cfg, self.dsrc, self.d
        MR, NG, NP = cfg.rows, cfg.max_groups, cfg.max_passes
        WW = _bits(cfg.weight_depth) + 1
        ch_w, ch_a, ch_p = self.chunk[0], self.chunk[1], self.chunk[2]
        chunk_go, last_chunk, wl_on, kq, cqkh = (self.chunk_go, self.last_chunk, self.wl_on,
                                                 self.kq, self.cqkh)
        kw_c, kh_c, oc_c, icq_c, icq_n = k.kw_c, k.kh_c, k.oc_c, k.icq_c, k.icq_n
        # weight loader: C order (o, ic, ky, kx); row bank address
        # blk * kq + kx * q * kh + ic * kh + ky, the word written into the banks of rows
        # g * R + li of the copies g < n of its pass.  Per pass, registered from the
        # descriptor like the above: gR[g] = g * R (shift-and-add; n * R <= rows, so LIW
        # bits hold every row of a copy in use), n and size_consts of R and count; the
        # loader keeps copies of the current pass's (p0) and the next pass's (p1), loaded in
        # CHUNK and at a pass change (p1 from the pass after it, index lnx, saturating at
        # the last pass: the passes after it are not used).
        LIW = _bits(MR)
        # the weight stream enters through a skid buffer: w_take (the enable of every
        # loader counter) is the AND of two local flip-flops, and w.ready is a register
        # (the buffer fills while the loader waits, so a stream that never idles loses no
        # clock)
        m.submodules.w_skid = w_skid = SkidBuffer(signed(cfg.weight_width))
        wiring.connect(m, wiring.flipped(self.w), w_skid.i)
        w_take = _S(name="ld_w_take")
        m.d.comb += [w_take.eq(wl_on & w_skid.o.valid), w_skid.o.ready.eq(wl_on)]

        def pass_consts(i):
            r = getattr(dsrc, f"p{i}_r")
            r6 = r[:LIW + 1]
            grs = []
            ce = self.take_pass
            for g in range(NG):
                reg = _S(LIW, name=f"ld_p{i}_gr{g}")
                with m.If(ce):
                    m.d.sync += reg.eq(sum(r6 << b for b in range(g.bit_length())
                                           if (g >> b) & 1) if g else 0)
                grs.append(reg)
            n = _S(4, name=f"ld_p{i}_n")
            with m.If(ce):
                m.d.sync += n.eq(getattr(dsrc, f"p{i}_n"))
            return (grs, n, _size_consts(m, r, LIW, f"p{i}_r", ce),
                    _size_consts(m, getattr(dsrc, f"p{i}_count"), 16, f"p{i}_c", ce))
        pk = [pass_consts(i) for i in range(NP)]
        pq = []
        for k in range(2):
            pq.append(([_S(LIW, name=f"ld_q{k}_gr{g}") for g in range(NG)],
                       _S(4, name=f"ld_q{k}_n"),
                       (_S(name=f"ld_q{k}_rs1"), _S(name=f"ld_q{k}_rs2"),
                        _S(LIW, name=f"ld_q{k}_rm3")),
                       (_S(name=f"ld_q{k}_cs1"), _S(name=f"ld_q{k}_cs2"),
                        _S(16, name=f"ld_q{k}_cm3"))))
        lnx = _S(range(max(NP, 2)), name="ld_lnx")

        def flat(entry):
            gr, n, rc, cc = entry
            return list(gr) + [n] + list(rc) + list(cc)

        lkx, lky, lic = _S(8, name="lkx"), _S(8, name="lky"), _S(16, name="lic")
        elb_hold, eoc_hold = _S(name="ld_elb_hold"), _S(name="ld_eoc_hold")
        li, lb, lo = _S(LIW, name="li"), _S(16, name="lb"), _S(16, name="lo")
        lbase, la_x, la_c = _S(WW, name="lbase"), _S(WW, name="la_x"), _S(WW, name="la_c")
        lrow = [_S(LIW, name=f"lrow{g}") for g in range(NG)]    # g * R + li
        # tw2 = ekx & eky, tw3 = tw2 & eic (an output channel's last word), tw4 = tw3 & eli
        # (a block's) as registers; a pass's last word tw4 & elb and the chunk's last weight
        # tw3 & eoc are ANDed into the enables (a LUT4: wl_on, w.valid and two flags)
        tw2, tw3, tw4 = (_S(name=f"ld_tw{k}") for k in ("2", "3", "4"))
        tw5, twx = tw4 & elb_hold, tw3 & eoc_hold
        # their values in CHUNK, registered with the descriptor (first / last chunk)
        ti2 = _S(name="ld_ti2")
        ti3, ti4 = ([_S(name=f"ld_ti{k}{c}") for c in "fl"] for k in (3, 4))
        with m.If(self.take):
            t2 = (dsrc.kw == 1) & (dsrc.kh == 1)
            m.d.sync += ti2.eq(t2)
            for j, icq in enumerate((dsrc.icq, dsrc.icq_last)):
                m.d.sync += [ti3[j].eq(t2 & (icq == 1)),
                             ti4[j].eq(t2 & (icq == 1) & (dsrc.p0_r == 1))]
        p0, p1 = pq
        ekx, ekx_w = _level(m, lkx, "kx", w_take, kw_c, (ch_w, kw_c))
        eky, eky_w = _level(m, lky, "ky", w_take & ekx, kh_c, (ch_w, kh_c))
        eic, eic_w = _level(m, lic, "ic", w_take & tw2, icq_c, (ch_w, icq_n))
        # a row wraps into the next block (same pass) or, if the block was the pass's last,
        # into the next pass (elb: the block level's e flag, defined below)
        eli, eli_w = _level(m, li, "li", w_take & tw3, p0[2], (ch_w, pk[0][2]),
                           tuple(Mux(elb_hold, a, b) for a, b in zip(p1[2][:2], p0[2][:2])))
        elb, elb_w = _level(m, lb, "lb", w_take & tw4, p0[3], (ch_w, pk[0][3]), p1[3][:2])
        m.d.comb += elb_hold.eq(elb)
        eoc, eoc_w = _level(m, lo, "oc", w_take & tw3, oc_c, (ch_w, oc_c), top=True)
        m.d.comb += eoc_hold.eq(eoc)
        with m.If(ch_p):
            m.d.sync += [a.eq(b) for a, b in zip(flat(p0), flat(pk[0]))]
            m.d.sync += [lrow[g].eq(pk[0][0][g]) for g in range(NG)]
        with m.If(ch_p | (w_take & tw5)):
            # p1 <= pass lnx (set to 1 when a chunk starts)
            m.d.sync += [a.eq(_sel([flat(pk[i])[j] for i in range(NP)], lnx))
                         for j, a in enumerate(flat(p1))]
            m.d.sync += lnx.eq(Mux(lnx == NP - 1, lnx, lnx + 1))
        with m.If(chunk_go):
            m.d.sync += lnx.eq(min(1, NP - 1))
        with m.If(ch_a):
            m.d.sync += [tw2.eq(ti2), tw3.eq(Mux(last_chunk, ti3[1], ti3[0])),
                         tw4.eq(Mux(last_chunk, ti4[1], ti4[0]))]
            m.d.sync += [lbase.eq(0), la_x.eq(0), la_c.eq(0)]
        with m.Elif(w_take):
            # the next e of each level: its value after an advance where the lower levels
            # all end, else unchanged
            nx_kx = ekx_w
            nx_ky = Mux(ekx, eky_w, eky)
            nx_ic = Mux(tw2, eic_w, eic)
            nx_li = Mux(tw3, eli_w, eli)
            t2 = nx_kx & nx_ky
            t3 = t2 & nx_ic
            m.d.sync += [tw2.eq(t2), tw3.eq(t3), tw4.eq(t3 & nx_li)]
        with m.If(w_take):
            m.d.sync += la_x.eq(Mux(ekx, 0, la_x + cqkh))
        with m.If(w_take & tw2):
            m.d.sync += la_c.eq(Mux(eic, 0, la_c + d.kh))
        with m.If(w_take & tw3):
            # next row of the block: + 1; next block: the pass's g * R; next pass: its g * R
            m.d.sync += [lrow[g].eq(Mux(tw4, Mux(elb, p1[0][g], p0[0][g]), lrow[g] + 1))
                         for g in range(NG)]
        with m.If(w_take & tw4):
            m.d.sync += lbase.eq(lbase + kq)
        with m.If(w_take & tw5):
            m.d.sync += [a.eq(b) for a, b in zip(flat(p0), flat(p1))]
        w_en = _S()
        wl_addr = _S(WW, name="wl_addr")
        wl_data = _S(signed(cfg.weight_width), name="wl_data")
        wl_hit = _S(MR, name="wl_hit")
        m.d.comb += w_en.eq(w_take)
        m.d.sync += [wl_addr.eq(lbase + la_x + la_c + lky), wl_data.eq(w_skid.o.payload),
                     wl_hit.eq(Cat(*[w_en & _any((lrow[g] == r) & (g < p0[1])
                                                 for g in range(NG)) for r in range(MR)]))]
        m.d.comb += [self.w_addr.eq(wl_addr), self.w_data.eq(wl_data), self.w_hit.eq(wl_hit)]
        return w_take, twx

    def _features(self, m, k, x_start_n):
        """The feature loader (starts after the chunk's last weight, ``x_start_n``)."""
        cfg, dsrc, d = self.cfg, self.dsrc, self.d
        MC = cfg.cols
        FW = _bits(cfg.feat_depth) + 1
        DIMW = (cfg.max_dim + 64).bit_length() + 1
        ch_x, xl_on = self.chunk[3], self.xl_on
        wp_c, hp_c, b_c, icq_c, icq_n = k.wp_c, k.hp_c, k.b_c, k.icq_c, k.icq_n
        # feature loader: a0 = xp, a1 = yp, a2 = ic, a3 = image over the padded maps,
        # borders written as zeros; stream order (image, ic, yp, xp), banks
        # [ic][image][Hp][Wp]; set to (0, 0, 0, 0) in CHUNK, runs after the chunk's last weight
        a0, a1 = _S(DIMW + 1, name="a0"), _S(DIMW + 1, name="a1")
        a2, a3 = _S(16, name="a2"), _S(16, name="a3")
        ximg = _S(FW, name="ximg")         # bank offset of the next image's first map
        xcst = _S(FW, name="xcst")         # next channel of the same image: (B-1)HpWp + 1
        addr = _S(FW, name="addr")
        padh, padw = _S(DIMW + 1, name="ld_padh"), _S(DIMW + 1, name="ld_padw")
        m.d.sync += [padh.eq(d.pad + d.h), padw.eq(d.pad + d.w)]
        # inx / iny: a0 / a1 inside the map; interior = inx & iny, its own register;
        # nx_in / ny_in: the same for a0 + 1 / a1 + 1 (the next position), so that the flags
        # load registers; in1x / in1y: position 1 inside (the value after a wrap)
        inx, iny = _S(name="ld_inx"), _S(name="ld_iny")
        nx_in, ny_in = _S(name="ld_nx_in"), _S(name="ld_ny_in")
        pad0, in1x, in1y = _S(name="ld_pad0"), _S(name="ld_in1x"), _S(name="ld_in1y")
        pad_d = dsrc.pad
        with m.If(self.take):
            m.d.sync += [pad0.eq(pad_d == 0), in1x.eq((pad_d <= 1) & (pad_d + dsrc.w > 1)),
                         in1y.eq((pad_d <= 1) & (pad_d + dsrc.h > 1))]
        interior = _S(name="ld_interior")
        step = ~interior | self.x.valid
        x_take = _S(name="ld_x_take")
        m.d.comb += x_take.eq(xl_on & step)
        x_start = _S(name="ld_x_start")      # the chunk's last weight is taken
        m.d.comb += [x_start.eq(x_start_n), self.x_start.eq(x_start)]
        # txy = ex0 & ey1 (a map row's last word), txc = txy & ec2 (an image's last),
        # txb = txc & eb3 (the chunk's last)
        txy, txc, txb = (_S(name=f"ld_t{k}") for k in ("xy", "xc", "xb"))
        ex0, ex0_w = _level(m, a0, "x", x_take, wp_c, (ch_x, wp_c))
        ey1, ey1_w = _level(m, a1, "y", x_take & ex0, hp_c, (ch_x, hp_c))
        ec2, ec2_w = _level(m, a2, "c", x_take & txy, icq_c, (ch_x, icq_n))
        eb3, eb3_w = _level(m, a3, "b", x_take & txc, b_c, (ch_x, b_c), top=True)
        with m.If(ch_x):
            t = wp_c[0] & hp_c[0]
            m.d.sync += [txy.eq(t), txc.eq(t & icq_n[0]), txb.eq(t & icq_n[0] & b_c[0]),
                         inx.eq(pad0), iny.eq(pad0), interior.eq(pad0),
                         nx_in.eq(in1x), ny_in.eq(in1y)]
            m.d.sync += [addr.eq(0), ximg.eq(d.imgw), xcst.eq(d.hwp - d.imgw + 1)]
        with m.Elif(x_take):
            nx_y = Mux(ex0, ey1_w, ey1)
            nx_c = Mux(txy, ec2_w, ec2)
            nx_b = Mux(txc, eb3_w, eb3)
            t = ex0_w & nx_y
            m.d.sync += [txy.eq(t), txc.eq(t & nx_c), txb.eq(t & nx_c & nx_b)]
            inx_n = Mux(ex0, pad0, nx_in)
            iny_n = Mux(ex0, Mux(ey1, pad0, ny_in), iny)
            m.d.sync += [inx.eq(inx_n), iny.eq(iny_n), interior.eq(inx_n & iny_n),
                         nx_in.eq(Mux(ex0, in1x, (a0 + 2 >= d.pad) & (a0 + 2 < padw)))]
            with m.If(ex0):
                m.d.sync += ny_in.eq(Mux(ey1, in1y, (a1 + 2 >= d.pad) & (a1 + 2 < padh)))
            m.d.sync += addr.eq(Mux(txc, ximg, Mux(txy, addr + xcst, addr + 1)))
        with m.If(x_take & txc):
            m.d.sync += ximg.eq(ximg + d.imgw)
        f_addr, f_en = _S(FW, name="f_addr"), _S(name="f_en")
        f_data = _S(signed(cfg.data_width), name="f_data")
        m.d.comb += [f_en.eq(x_take), f_addr.eq(addr),
                     f_data.eq(Mux(interior, self.x.payload, 0))]
        # feature bank writes registered per column (one clock later; the banks are read
        # only after the pass set-up, cols + 6 clocks after the last write)
        m.d.comb += [self.x_done.eq(x_take & txb), self.x.ready.eq(xl_on & interior)]
        # feature bank writes registered per column (one clock later; the banks are read
        # only after the pass set-up, cols + 6 clocks after the last write)
        for c in range(MC):
            fa_c = _S(FW, name=f"fw{c}_addr")
            fd_c = _S(signed(cfg.data_width), name=f"fw{c}_data")
            fe_c = _S(name=f"fw{c}_en")
            m.d.sync += [fa_c.eq(f_addr), fd_c.eq(f_data), fe_c.eq(f_en)]
            m.d.comb += [self.f_addr[c].eq(fa_c), self.f_data[c].eq(fd_c), self.f_en[c].eq(fe_c)]
