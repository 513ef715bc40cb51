# SPDX-License-Identifier: Apache-2.0
"""Remainder-aware output-stationary MAC array for im2col convolution (seed 002)."""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from gen.conv import ConvConfig, descriptor_fields

__all__ = ["ConvArray", "STAT_BUSY_BITS"]

STAT_BUSY_BITS = 48


def _bits(n):
    return max(1, int(n).bit_length())


class ConvArray(wiring.Component):
    """An ``rows x cols`` MAC array running one convolution layer per descriptor.

    The host (:func:`gen.conv.plan`) maps each layer to *passes*: ``count`` blocks of
    ``R`` output channels, each run as ``n`` copies (groups of ``R`` rows) on ``n``
    different sets of output positions.  The groups run in lockstep and every
    (group, column) lane has its own read port on the feature buffer (the seed instead
    staggers the groups by ``stride * Ic * kh`` beats so that they share one stream; see
    ``docs/conv.md``).  The array executes the descriptor: position
    table, then per input-channel chunk weight load, feature load (padding inserted),
    compute (tiles of ``K`` beats; with the descriptor bit ``skip`` only the tile's box of
    kernel rows/columns that are not padding for every lane, see
    :func:`gen.conv.tile_boxes`), with the partial sums of later chunks added into the
    output buffer; finally a stats word and the outputs (ping-pong buffers: the next
    layer computes while this one drains).

    Parameters
    ----------
    cfg : :class:`gen.conv.ConvConfig`

    Members
    -------
    c : In(stream.Signature(unsigned(D)))
        Layer descriptors (``D`` = sum of :func:`gen.conv.descriptor_fields` widths, first
        field in the LSBs), one transfer per layer.
    w : In(stream.Signature(signed(weight_width)))
        Weights, integers: per chunk ``Oc x icq x kh x kw`` in C order.
    x : In(stream.Signature(signed(data_width)))
        Features, integers: per chunk ``icq x H x W`` in C order (unpadded).
    o : Out(stream.Signature(signed(acc_width)))
        Outputs, exact integer sums: ``Oc x Ho x Wo`` in C order per layer.
    s : Out(stream.Signature(unsigned(48 + 32)))
        Per layer, after its compute phase: busy MAC-cycles (bits 0..47, the number of MAC
        enables counted in the array) and compute cycles (bits 48..79).

    Latency/throughput
    ------------------
    Exact timeline in :func:`gen.conv.layer_cycles` (streams never idle): position table
    (1 + slots), per chunk: one weight and one padded feature word per clock, then the
    compute phase of :func:`gen.conv.compute_cycles` (one beat per clock; the pipeline
    stalls only when a tile ends before the previous tile has drained).  The output
    stream runs one slot per clock in parallel with the next layer.
    """

    def __init__(self, cfg: ConvConfig):
        if not isinstance(cfg, ConvConfig):
            raise TypeError(f"cfg must be a ConvConfig, not {cfg!r}")
        self.cfg = cfg
        self.desc_layout = data.StructLayout({n: unsigned(w) for n, w in descriptor_fields(cfg)})
        super().__init__({
            "c": In(stream.Signature(self.desc_layout)),
            "w": In(stream.Signature(signed(cfg.weight_width))),
            "x": In(stream.Signature(signed(cfg.data_width))),
            "o": Out(stream.Signature(signed(cfg.acc_width))),
            "s": Out(stream.Signature(unsigned(STAT_BUSY_BITS + 32))),
        })

    latency = 0   # the array is job-oriented: see gen.conv.layer_cycles
    ii = 1

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        MR, MC, NG, NP, DR = cfg.rows, cfg.cols, cfg.max_groups, cfg.max_passes, cfg.drain_rows
        LOGMC = MC.bit_length() - 1
        FA = _bits(cfg.feat_depth)
        WA = _bits(cfg.weight_depth)
        OA = _bits(cfg.out_depth)
        TA = _bits(cfg.max_slots + MC)
        TW = _bits(cfg.max_dim + 2 * 64) + 1      # oy * stride, ox * stride of a window
        PW = cfg.data_width + cfg.weight_width
        AW = cfg.acc_width

        d = Signal(self.desc_layout)
        pr = Array(getattr(d, f"p{i}_r") for i in range(NP))
        pn = Array(getattr(d, f"p{i}_n") for i in range(NP))
        pcount = Array(getattr(d, f"p{i}_count") for i in range(NP))
        ptiles = Array(getattr(d, f"p{i}_tiles") for i in range(NP))

        # ---------------------------------------------------------------- memories
        m.submodules.fmem = fmem = Memory(shape=signed(cfg.data_width), depth=cfg.feat_depth,
                                          init=[])
        m.submodules.wmem = wmem = Memory(shape=signed(cfg.weight_width),
                                          depth=cfg.weight_depth, init=[])
        # Position table: feature base address of each slot's window, valid bit, and the
        # window's top-left corner in the padded map (oy * stride, ox * stride).
        m.submodules.tmem = tmem = Memory(shape=unsigned(FA + 1 + 2 * TW), depth=cfg.max_slots,
                                          init=[])
        omem = [[Memory(shape=signed(AW), depth=cfg.out_depth, init=[]) for _ in range(MC)]
                for _ in range(2)]
        for b in range(2):
            for c in range(MC):
                m.submodules[f"omem{b}_{c}"] = omem[b][c]
        f_w = fmem.write_port()
        w_w = wmem.write_port()
        t_w = tmem.write_port()

        # ---------------------------------------------------------------- control state
        sel = Signal()                 # output buffer written by the compute side
        q = Signal(16)                 # chunk index
        first_chunk = Signal()
        icc = Signal(16)               # channels in this chunk
        kq = Signal(24)                # beats per tile in this chunk
        busy = Signal(STAT_BUSY_BITS)
        ccyc = Signal(32)
        # counters shared by table/load phases
        a0, a1, a2 = Signal(24), Signal(24), Signal(24)
        addr = Signal(24)
        base_row = Signal(24)
        bx = Signal(24)
        by = Signal(24)

        # -------- issue stage (compute)
        issuing = Signal()
        e = Signal(range(NP + 1))
        blk = Signal(16)
        t = Signal(16)
        kc = Signal(16)                # input channel in the chunk
        kx = Signal(8)                 # kernel column / row relative to the tile's box
        ky = Signal(8)
        off_ic = Signal(FA + 1)
        off_ky = Signal(FA + 1)
        kO = Signal(WA + 1)
        w_ic, w_ky, w_kx = Signal(WA + 1), Signal(WA + 1), Signal(WA + 1)
        cb = Signal(16)
        u0 = Signal(TA)
        u0oc = Signal(OA + 16)

        R = pr[e]
        N = pn[e]
        mulR = [Signal(16 + 4, name=f"mulR{j}") for j in range(NG + 1)]   # j * R
        mulOC = [Signal(16 + 4, name=f"mulOC{j}") for j in range(NG + 1)]  # j * Oc
        for j in range(NG + 1):
            m.d.comb += [mulR[j].eq(R * j), mulOC[j].eq(d.oc * j)]
        nR = Array(mulR)[N]
        nOC = Array(mulOC)[N]

        adv = Signal()
        last_k = Signal()
        # kernel box of the current tile (skip_pad): rows ky0 .. ky0 + nky - 1, cols likewise
        ky0, nky, kx0, nkx = Signal(8), Signal(8), Signal(8), Signal(8)
        f_box = Signal(FA + 1)
        w_box = Signal(WA + 1)
        m.d.comb += [last_k.eq((kc == icc - 1) & (ky == nky - 1) & (kx == nkx - 1)),
                     f_box.eq(ky0 * d.wp + kx0),
                     w_box.eq((ky0 * d.kw + kx0) * d.oc),
                     kO.eq(w_ic + w_ky + w_kx + w_box)]

        # Row -> group and channel offset (groups are consecutive R-row ranges).
        row_g = []
        row_w_addr = []
        row_en = []
        for r in range(MR):
            g = sum((Const(r) >= mulR[j]).as_unsigned() for j in range(1, NG))
            gs = Signal(range(NG), name=f"row{r}_g")
            m.d.comb += gs.eq(g)
            row_g.append(gs)
            en = Signal(name=f"row{r}_en")
            m.d.comb += en.eq(issuing & (r < nR))
            row_en.append(en)
            row_w_addr.append((kO + cb + r - Array(mulR)[gs])[:WA])

        # Lanes: group g, column c -> slot (u0 + g) * MC + c.
        lane_valid = [[Signal(name=f"lane{g}_{c}_v") for c in range(MC)] for g in range(NG)]
        f_r = [[None] * MC for _ in range(NG)]
        box_ylo, box_yhi, box_xlo, box_xhi = d.kh, Const(0, 8), d.kw, Const(0, 8)
        for g in range(NG):
            for c in range(MC):
                slot = Signal(TA + LOGMC, name=f"lane{g}_{c}_slot")
                m.d.comb += slot.eq(Cat(Const(c, LOGMC), u0 + g) if LOGMC else u0 + g)
                tr = tmem.read_port(domain="comb")
                m.d.comb += tr.addr.eq(slot)
                ok = Signal(name=f"lane{g}_{c}_ok")
                m.d.comb += ok.eq((g < N) & (slot < d.slots) & tr.data[FA])
                m.d.comb += lane_valid[g][c].eq(issuing & ok)
                # kernel offsets of this window inside the unpadded map: [lo, hi)
                ty = tr.data[FA + 1:FA + 1 + TW]
                tx = tr.data[FA + 1 + TW:FA + 1 + 2 * TW]
                bounds = []
                for tt, dim, kk in ((ty, d.h, d.kh), (tx, d.w, d.kw)):
                    lo, hi = Signal(8, name=f"lane{g}_{c}_lo{len(bounds)}"), \
                        Signal(8, name=f"lane{g}_{c}_hi{len(bounds)}")
                    end = d.pad + dim - tt
                    m.d.comb += [lo.eq(Mux(d.pad > tt, d.pad - tt, 0)),
                                 hi.eq(Mux(end < kk, end, kk))]
                    bounds += [lo, hi]
                nyl, nyh, nxl, nxh = (Signal(8, name=f"box{g}_{c}_{i}") for i in range(4))
                m.d.comb += [nyl.eq(Mux(ok & (bounds[0] < box_ylo), bounds[0], box_ylo)),
                             nyh.eq(Mux(ok & (bounds[1] > box_yhi), bounds[1], box_yhi)),
                             nxl.eq(Mux(ok & (bounds[2] < box_xlo), bounds[2], box_xlo)),
                             nxh.eq(Mux(ok & (bounds[3] > box_xhi), bounds[3], box_xhi))]
                box_ylo, box_yhi, box_xlo, box_xhi = nyl, nyh, nxl, nxh
                fr = fmem.read_port(domain="sync")
                m.d.comb += [fr.addr.eq(tr.data[:FA] + off_ic + off_ky + kx + f_box),
                             fr.en.eq(adv)]
                f_r[g][c] = fr
        with m.If(d.skip):
            m.d.comb += [ky0.eq(box_ylo), nky.eq(box_yhi - box_ylo),
                         kx0.eq(box_xlo), nkx.eq(box_xhi - box_xlo)]
        with m.Else():
            m.d.comb += [ky0.eq(0), nky.eq(d.kh), kx0.eq(0), nkx.eq(d.kw)]
        w_r = []
        for r in range(MR):
            wr = wmem.read_port(domain="sync")
            m.d.comb += [wr.addr.eq(row_w_addr[r]), wr.en.eq(adv)]
            w_r.append(wr)

        # -------- stage 1 (memory data), stage 2 (product)
        s1_valid, s1_last = Signal(name="s1_valid"), Signal(name="s1_last")
        s1_rowen = Signal(MR)
        s1_g = [Signal(range(NG), name=f"s1_g{r}") for r in range(MR)]
        s1_lanev = Signal(NG * MC)
        info_fields = {"u0": TA, "u0oc": OA + 16, "nr": 20, "r": 16, "cb": 16}
        s1_info = {n: Signal(wd, name=f"s1_{n}") for n, wd in info_fields.items()}
        s2_info = {n: Signal(wd, name=f"s2_{n}") for n, wd in info_fields.items()}
        s2_valid, s2_last = Signal(name="s2_valid"), Signal(name="s2_last")
        s2_en = Signal(MR * MC)
        prod = [[Signal(signed(PW), name=f"prod{r}_{c}") for c in range(MC)] for r in range(MR)]
        acc = [[Signal(signed(AW), name=f"acc{r}_{c}") for c in range(MC)] for r in range(MR)]
        shadow = [[Signal(signed(AW), name=f"sh{r}_{c}") for c in range(MC)] for r in range(MR)]

        lanev = Array(Array(s1_lanev[g * MC + c] for c in range(MC)) for g in range(NG))
        fdata = Array(Array(f_r[g][c].data for c in range(MC)) for g in range(NG))
        ens = []
        for r in range(MR):
            for c in range(MC):
                en = Signal(name=f"en{r}_{c}")
                m.d.comb += en.eq(s1_valid & s1_rowen[r] & lanev[s1_g[r]][c])
                ens.append(en)
        with m.If(adv):
            m.d.sync += [
                s1_valid.eq(issuing), s1_last.eq(last_k),
                s1_rowen.eq(Cat(*row_en)),
                s1_lanev.eq(Cat(*[lane_valid[g][c] for g in range(NG) for c in range(MC)])),
                s1_info["u0"].eq(u0), s1_info["u0oc"].eq(u0oc), s1_info["nr"].eq(nR),
                s1_info["r"].eq(R), s1_info["cb"].eq(cb),
                s2_valid.eq(s1_valid), s2_last.eq(s1_last), s2_en.eq(Cat(*ens)),
            ]
            m.d.sync += [s1_g[r].eq(row_g[r]) for r in range(MR)]
            m.d.sync += [s2_info[n].eq(s1_info[n]) for n in info_fields]
            for r in range(MR):
                for c in range(MC):
                    m.d.sync += prod[r][c].eq(Mux(ens[r * MC + c],
                                                  w_r[r].data * fdata[s1_g[r]][c], 0))

        # -------- drain of captured tiles into the output buffer
        d_r = Signal(20)
        d_info = {n: Signal(wd, name=f"d_{n}") for n, wd in info_fields.items()}
        drain_busy = Signal()
        drain_last = Signal()
        m.d.comb += [drain_busy.eq(d_r < d_info["nr"]),
                     drain_last.eq(d_r + DR >= d_info["nr"])]
        m.d.comb += adv.eq(~(s2_valid & s2_last & drain_busy & ~drain_last))

        capture = Signal()
        m.d.comb += capture.eq(adv & s2_valid & s2_last)
        with m.If(adv & s2_valid):
            for r in range(MR):
                for c in range(MC):
                    total = acc[r][c] + prod[r][c]
                    with m.If(s2_last):
                        m.d.sync += [shadow[r][c].eq(total), acc[r][c].eq(0)]
                    with m.Else():
                        m.d.sync += acc[r][c].eq(total)
            m.d.sync += busy.eq(busy + sum(s2_en[i] for i in range(MR * MC)))
        with m.If(capture):
            m.d.sync += d_r.eq(0)
            m.d.sync += [d_info[n].eq(s2_info[n]) for n in info_fields]
        with m.Elif(drain_busy):
            m.d.sync += d_r.eq(d_r + DR)

        dmulR = [d_info["r"] * j for j in range(NG)]
        shadow_rows = Array(Array(shadow[r][c] for c in range(MC)) for r in range(MR))
        for j in range(DR):
            rr = Signal(20, name=f"dr{j}")
            m.d.comb += rr.eq(d_r + j)
            g = Signal(range(NG), name=f"dr{j}_g")
            m.d.comb += g.eq(sum((rr >= dmulR[i]).as_unsigned() for i in range(1, NG)))
            i_off = Signal(20, name=f"dr{j}_i")
            m.d.comb += i_off.eq(rr - Array(dmulR)[g])
            oaddr = Signal(OA + 16, name=f"dr{j}_addr")
            m.d.comb += oaddr.eq(d_info["u0oc"] + Array(mulOC[:NG])[g] + d_info["cb"] + i_off)
            for c in range(MC):
                slot = Signal(TA + LOGMC, name=f"dr{j}_{c}_slot")
                m.d.comb += slot.eq(Cat(Const(c, LOGMC), d_info["u0"] + g) if LOGMC
                                    else d_info["u0"] + g)
                tr = tmem.read_port(domain="comb")
                m.d.comb += tr.addr.eq(slot)
                ok = drain_busy & (rr < d_info["nr"]) & (slot < d.slots) & tr.data[FA]
                new = shadow_rows[rr[:_bits(MR)]][c] if MR > 1 else shadow_rows[0][c]
                for b in range(2):
                    rp = omem[b][c].read_port(domain="comb")
                    wp = omem[b][c].write_port()
                    m.d.comb += [rp.addr.eq(oaddr), wp.addr.eq(oaddr),
                                 wp.data.eq(Mux(first_chunk, new, rp.data + new)),
                                 wp.en.eq(ok & (sel == b))]

        # ---------------------------------------------------------------- streamer
        st_busy, st_sel = Signal(), Signal()
        st_oc, st_slots, st_wv, st_wo = Signal(16), Signal(TA), Signal(16), Signal(16)
        st_o, st_slot, st_ox, st_addr = Signal(16), Signal(TA + LOGMC), Signal(16), Signal(OA + 16)
        st_c = Signal(range(MC)) if MC > 1 else Const(0, 1)
        st_valid = Signal()
        m.d.comb += st_valid.eq(st_busy & (st_slot < st_slots) & (st_ox < st_wo))
        st_data = []
        for c in range(MC):
            for b in range(2):
                rp = omem[b][c].read_port(domain="comb")
                m.d.comb += rp.addr.eq(st_addr)
                st_data.append((b, c, rp.data))
        sel_data = Array(Array(dd for bb, cc, dd in st_data if bb == b) for b in range(2))
        m.d.comb += [self.o.valid.eq(st_valid), self.o.payload.eq(sel_data[st_sel][st_c])]
        with m.If(st_busy & (~st_valid | self.o.ready)):
            m.d.sync += [st_slot.eq(st_slot + 1),
                         st_ox.eq(Mux(st_ox + 1 == st_wv, 0, st_ox + 1))]
            if MC > 1:
                m.d.sync += st_c.eq(st_c + 1)
            with m.If(st_c == MC - 1):
                m.d.sync += st_addr.eq(st_addr + st_oc)
                with m.If(st_slot + 1 >= st_slots):
                    m.d.sync += [st_slot.eq(0), st_ox.eq(0), st_addr.eq(st_o + 1),
                                 st_o.eq(st_o + 1)]
                    with m.If(st_o == st_oc - 1):
                        m.d.sync += st_busy.eq(0)

        # ---------------------------------------------------------------- issue counters
        kwoc, kkoc = Signal(WA + 1), Signal(WA + 1)
        m.d.comb += [kwoc.eq(d.kw * d.oc), kkoc.eq(d.kh * d.kw * d.oc)]
        with m.If(issuing & adv):
            with m.If(last_k):
                m.d.sync += [kc.eq(0), kx.eq(0), ky.eq(0), off_ic.eq(0), off_ky.eq(0),
                             w_ic.eq(0), w_ky.eq(0), w_kx.eq(0)]
                with m.If(t == ptiles[e] - 1):
                    m.d.sync += [t.eq(0), u0.eq(0), u0oc.eq(0), cb.eq(cb + R)]
                    with m.If(blk == pcount[e] - 1):
                        m.d.sync += [blk.eq(0), e.eq(e + 1)]
                        with m.If(e == d.npasses - 1):
                            m.d.sync += issuing.eq(0)
                    with m.Else():
                        m.d.sync += blk.eq(blk + 1)
                with m.Else():
                    m.d.sync += [t.eq(t + 1), u0.eq(u0 + N), u0oc.eq(u0oc + nOC)]
            with m.Else():
                with m.If(kx == nkx - 1):
                    m.d.sync += [kx.eq(0), w_kx.eq(0)]
                    with m.If(ky == nky - 1):
                        m.d.sync += [ky.eq(0), off_ky.eq(0), w_ky.eq(0), kc.eq(kc + 1),
                                     off_ic.eq(off_ic + d.hwp), w_ic.eq(w_ic + kkoc)]
                    with m.Else():
                        m.d.sync += [ky.eq(ky + 1), off_ky.eq(off_ky + d.wp),
                                     w_ky.eq(w_ky + kwoc)]
                with m.Else():
                    m.d.sync += [kx.eq(kx + 1), w_kx.eq(w_kx + d.oc)]

        # ---------------------------------------------------------------- main FSM
        m.d.comb += self.s.payload.eq(Cat(busy, ccyc))
        last_chunk = Signal()
        x_ready = Signal()
        m.d.comb += last_chunk.eq(q == d.chunks - 1)
        with m.FSM(name="ctl") as fsm:
            with m.State("IDLE"):
                with m.If(self.c.valid):
                    m.d.sync += [d.eq(self.c.payload), busy.eq(0), ccyc.eq(0), q.eq(0),
                                 first_chunk.eq(1), a0.eq(0), a1.eq(0), addr.eq(0),
                                 base_row.eq(0), bx.eq(0), by.eq(0)]
                    m.next = "TABLE"
            with m.State("TABLE"):
                # slot = oy * wv + ox (a1 = oy, a0 = ox); base = oy*s*Wp + ox*s
                m.d.comb += [t_w.addr.eq(addr), t_w.en.eq(1),
                             t_w.data.eq(Cat((base_row + bx)[:FA], a0 < d.wo, by[:TW], bx[:TW]))]
                m.d.sync += [addr.eq(addr + 1), a0.eq(a0 + 1), bx.eq(bx + d.stride)]
                with m.If(a0 + 1 == d.wv):
                    m.d.sync += [a0.eq(0), bx.eq(0), a1.eq(a1 + 1), by.eq(by + d.stride),
                                 base_row.eq(base_row + d.swp)]
                with m.If(addr + 1 == d.slots):
                    m.next = "CHUNK"
            with m.State("CHUNK"):
                m.d.sync += [icc.eq(Mux(last_chunk, d.icq_last, d.icq)),
                             kq.eq(Mux(last_chunk, d.kq_last, d.kq)),
                             a0.eq(0), a1.eq(0), a2.eq(0), addr.eq(0)]
                m.next = "WLOAD"
            with m.State("WLOAD"):
                # a0 = o, a1 = k; weights stored k-major: addr = k * Oc + o
                m.d.comb += [w_w.addr.eq(addr), w_w.data.eq(self.w.payload),
                             w_w.en.eq(self.w.valid)]
                with m.If(self.w.valid):
                    with m.If(a1 == kq - 1):
                        m.d.sync += [a1.eq(0), a0.eq(a0 + 1), addr.eq(a0 + 1)]
                        with m.If(a0 == d.oc - 1):
                            m.d.sync += [a0.eq(0), a1.eq(0), a2.eq(0), addr.eq(0)]
                            m.next = "XLOAD"
                    with m.Else():
                        m.d.sync += [a1.eq(a1 + 1), addr.eq(addr + d.oc)]
            with m.State("XLOAD"):
                # a0 = xp, a1 = yp, a2 = ic over the padded maps; borders written as zeros
                interior = ((a1 >= d.pad) & (a1 < d.pad + d.h)
                            & (a0 >= d.pad) & (a0 < d.pad + d.w))
                step = ~interior | self.x.valid
                m.d.comb += [x_ready.eq(interior), f_w.addr.eq(addr),
                             f_w.data.eq(Mux(interior, self.x.payload, 0)), f_w.en.eq(step)]
                with m.If(step):
                    m.d.sync += [addr.eq(addr + 1), a0.eq(a0 + 1)]
                    with m.If(a0 == d.wp - 1):
                        m.d.sync += [a0.eq(0), a1.eq(a1 + 1)]
                        with m.If(a1 == d.hp - 1):
                            m.d.sync += [a1.eq(0), a2.eq(a2 + 1)]
                            with m.If(a2 == icc - 1):
                                m.d.sync += [issuing.eq(1), e.eq(0), blk.eq(0), t.eq(0),
                                             kc.eq(0), kx.eq(0), ky.eq(0), off_ic.eq(0),
                                             off_ky.eq(0), w_ic.eq(0), w_ky.eq(0),
                                             w_kx.eq(0), cb.eq(0), u0.eq(0), u0oc.eq(0)]
                                m.next = "COMPUTE"
            with m.State("COMPUTE"):
                m.d.sync += ccyc.eq(ccyc + 1)
                with m.If(~issuing & ~s1_valid & ~s2_valid & ~drain_busy):
                    with m.If(last_chunk):
                        m.next = "STAT"
                    with m.Else():
                        m.d.sync += [q.eq(q + 1), first_chunk.eq(0)]
                        m.next = "CHUNK"
            with m.State("STAT"):
                with m.If(self.s.ready):
                    m.next = "HANDOFF"
            with m.State("HANDOFF"):
                with m.If(~st_busy):
                    m.d.sync += [st_busy.eq(1), st_sel.eq(sel), sel.eq(~sel),
                                 st_oc.eq(d.oc), st_slots.eq(d.slots), st_wv.eq(d.wv),
                                 st_wo.eq(d.wo), st_o.eq(0), st_slot.eq(0), st_ox.eq(0),
                                 st_addr.eq(0)]
                    if MC > 1:
                        m.d.sync += st_c.eq(0)
                    m.next = "IDLE"
        # Port handshakes as plain assignments (Icarus does not evaluate an always @*
        # block at time 0 if none of its inputs ever changes).
        m.d.comb += [self.c.ready.eq(fsm.ongoing("IDLE")), self.w.ready.eq(fsm.ongoing("WLOAD")),
                     self.x.ready.eq(fsm.ongoing("XLOAD") & x_ready),
                     self.s.valid.eq(fsm.ongoing("STAT"))]
        return m

    def port_info(self) -> dict:
        """Per top-level member: format and protocol (for the manifest)."""
        cfg = self.cfg
        return {
            "c": {"format": None, "protocol": "valid/ready stream, one layer descriptor per "
                  "layer (fields: gen.conv.descriptor_fields, first field in the LSBs)"},
            "w": {"format": f"int{cfg.weight_width}",
                  "protocol": "valid/ready stream, per chunk Oc x icq x kh x kw weights, C order"},
            "x": {"format": f"int{cfg.data_width}",
                  "protocol": "valid/ready stream, per chunk icq x H x W features, C order"},
            "o": {"format": f"int{cfg.acc_width}",
                  "protocol": "valid/ready stream, Oc x Ho x Wo exact sums per layer, C order"},
            "s": {"format": None, "protocol": "valid/ready stream, per layer: busy MAC-cycles "
                  "(bits 0..47), compute cycles (bits 48..79)"},
        }

    def manifest_extra(self) -> dict:
        return {"descriptor": [{"name": n, "width": w} for n, w in descriptor_fields(self.cfg)],
                "array": {"rows": self.cfg.rows, "cols": self.cfg.cols,
                          "max_groups": self.cfg.max_groups}}
