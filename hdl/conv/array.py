# SPDX-License-Identifier: Apache-2.0
"""Remainder-aware output-stationary MAC array for im2col convolution (seed 002).

The ``n`` copies (groups of ``R`` rows) of a pass run *staggered*, as in the seed: copy
``g`` of column ``c`` computes the window one stride right of copy ``g - 1`` and runs
``D = min(stride, kw) * q * kh`` beats behind it (beats in <kernel column, input channel,
kernel row> order), so all copies working on one tile read the same feature word each
beat.  Each column therefore has two feature banks (identical copies of the padded maps,
one synchronous read port each: the tile in flight and the next one); each row has its
own weight bank (one synchronous read port) filled by the weight mapping; the output
banks (one per column, ping-pong) are synchronous too.  See ``docs/conv.md`` for the derivation and :mod:`gen.conv` for the exact cycle model.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from gen.conv import ConvConfig, descriptor_fields
from hdl.conv._util import _S, _any, _bits, _Only, _sel
from hdl.conv.box import TileBox, box_fields
from hdl.conv.control import STAT_BUSY_BITS, Control
from hdl.conv.drain import Drain
from hdl.conv.loaders import Loaders
from hdl.conv.pipeline import MacPipeline
from hdl.conv.streamer import OutputFifo, Streamer

__all__ = ["ConvArray", "STAT_BUSY_BITS"]

# per-pass descriptor fields the array keeps in registers while the pass runs
_PASS_FIELDS = ("r", "n", "count", "tiles", "noc", "ns", "wvn", "wvns", "a", "as", "aswp",
                "bn", "bns", "ai", "aiis")


class ConvArray(wiring.Component):
    """An ``rows x cols`` MAC array running one convolution layer per descriptor.

    The host (:func:`gen.conv.plan`) maps each layer to *passes*: ``count`` blocks of
    ``R`` output channels, each run as ``n`` staggered copies (groups of ``R`` rows).
    Column ``c`` of tile ``t`` takes the window group ``t * cols + c`` of the pass layout
    (:func:`gen.conv.pass_layout`); copy ``g`` takes window ``j * n + g`` of that group's
    output row and starts ``g * D`` beats after copy 0, ``D`` = descriptor ``dq``.  Per
    input-channel chunk: weight load (the weight mapping writes each weight into the banks
    of the rows that use it), feature load (padding inserted, one copy per column and read
    port), compute (a pass set-up of ``cols + 6`` clocks, then the staggered tiles; with the
    descriptor bit ``skip`` the tiles of ``n = 1`` passes run only their box of kernel
    rows/columns that are not padding for every lane, see :func:`gen.conv.tile_boxes`),
    the partial sums of later chunks added into the output banks; finally a stats word and
    the outputs (ping-pong banks: the next layer computes while this one drains).  A layer
    may hold a batch of ``B`` images (descriptor ``batch``): the window groups run in
    raster order over ``(image, oy, ox)``, the feature banks hold ``[ic][image][Hp][Wp]``,
    the weights come once per chunk and the outputs leave image by image.

    Parameters
    ----------
    cfg : :class:`gen.conv.ConvConfig`

    Members
    -------
    c : In(stream.Signature(unsigned(D)))
        Layer descriptors (``D`` = sum of :func:`gen.conv.descriptor_fields` widths, first
        field in the LSBs), one transfer per layer.
    w : In(stream.Signature(signed(weight_width)))
        Weights, integers: per chunk ``Oc x icq x kh x kw`` in C order.  The stream
        enters a two-entry skid buffer (:class:`hdl.skid.SkidBuffer`): ``w.ready`` is a
        register, and up to two weights are taken before the loader wants them (also
        while the array waits for a descriptor).
    x : In(stream.Signature(signed(data_width)))
        Features, integers: per chunk ``B x icq x H x W`` in C order (unpadded; ``B`` =
        descriptor ``batch``, images run with the same weights).
    o : Out(stream.Signature(signed(acc_width)))
        Outputs, exact integer sums: ``B x Oc x Ho x Wo`` in C order per layer, from a
        5-word FIFO (``o.valid`` is a register; ``o.ready`` reaches only the FIFO).
    s : Out(stream.Signature(unsigned(48 + 32)))
        Per layer, after its compute phase: busy MAC-cycles (bits 0..47, the number of MAC
        enables counted in the array) and compute cycles (bits 48..79).

    Latency/throughput
    ------------------
    Exact timeline in :func:`gen.conv.layer_cycles` (streams never idle): per chunk one
    weight and one padded feature word per clock, then the compute phase of
    :func:`gen.conv.compute_cycles` (one beat per clock per copy; the issue stage stalls,
    sending bubbles, only when a copy finishes a tile before its last tile drained).  The
    output stream runs one value per clock in parallel with the next layer.
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
        AW = cfg.acc_width
        DIMW = (cfg.max_dim + 64).bit_length() + 1
        fw = dict(descriptor_fields(cfg))
        FW = _bits(cfg.feat_depth) + 1       # feature bank offsets (modulo 2**FW)
        WW = _bits(cfg.weight_depth) + 1     # weight bank offsets

        m.submodules.control = control = Control(cfg, self.desc_layout)
        wiring.connect(m, wiring.flipped(self.c), control.c)
        wiring.connect(m, control.s, wiring.flipped(self.s))
        d = control.d
        first_chunk, iccl, kq, dq, cqkh = (control.first_chunk, control.iccl, control.kq,
                                           control.dq, control.cqkh)
        # the FSM state at the top level, under its old name (waveform cases watch it)
        ctl_state = Signal(control.state.shape(), name="ctl_state")
        m.d.comb += ctl_state.eq(control.state)
        pvl = {f: [getattr(d, f"p{i}_{f}") for i in range(NP)] for f in _PASS_FIELDS}

        # ---------------------------------------------------------------- memories

        # ---------------------------------------------------------------- control state

        # pass registers (loaded in the first set-up clock of a pass)
        e = _S(range(NP + 1))
        cp = {f: _S(fw[f"p0_{f}"], name=f"cp_{f}") for f in _PASS_FIELDS}
        issuing = _S(reset_less=False)
        setup = _S(reset_less=False)
        isu = _S(name="isu", reset_less=False)       # issuing & ~setup, as its own register
        sk = _S(range(MC + 6))
        # sk one-hot beside it (sk_oh[i] == (sk == i)): set-up decodes from single flags
        sk_oh = _S(MC + 6, init=1, name="sk_oh")
        # issuing & setup & sk_oh[0] (the pass's first set-up clock) as its own register:
        # the pass registers load then (the set-up never stalls, see the issue control)
        sk_first = _S(name="sk_first", reset_less=False)
        adv_i, adv_pd = _S(init=1, name="adv_i"), _S(init=1, name="adv_pd")
        setup_last = _S(reset_less=False)        # registered: the last set-up clock (sk == cols + 5)

        # ------------------------------------------------ column states (window groups)
        def cstate(name):
            return {"img": _S(16, name=f"{name}_img"),
                    "oy": _S(16, name=f"{name}_oy"), "ty": _S(16, name=f"{name}_ty"),
                    "jn": _S(16, name=f"{name}_jn"), "jns": _S(24, name=f"{name}_jns"),
                    "base": _S(FW, name=f"{name}_base")}

        # Advance of a column state by one tile (``cols`` window groups: ``ai`` images,
        # ``a`` rows and ``b`` groups, with at most one row wrap and one image wrap): the
        # four sums computed in parallel from per-pass constants, then selected.
        thr = _S(16, name="adv_thr")                       # wrap iff jn >= wvn - bn
        thi = [_S(16, name=f"adv_thi{j}") for j in range(2)]   # image wrap iff oy >= thi
        k0 = {k: Signal.like(v, name=f"adv_k0_{k}") for k, v in cstate("t").items()}
        k1 = {k: Signal.like(v, name=f"adv_k1_{k}") for k, v in cstate("t").items()}
        k0i = {k: Signal.like(v, name=f"adv_k0i_{k}") for k, v in cstate("t").items()}
        k1i = {k: Signal.like(v, name=f"adv_k1i_{k}") for k, v in cstate("t").items()}
        # The wrap decisions as sign bits: the states that advance (pinit, cur) also keep
        # the distances to the thresholds, djn = jn - thr, doy<j> = oy - thi<j> (signed, 17
        # bits, exact), advanced by the same (signed) steps as jn and oy, so that no compare
        # sits in the column-advance loop.
        # Lane validity likewise: dimg = img - B, dwo<g> = jn - (Wo - g), lane g valid iff
        # both are negative.
        # The three wrap distances are kept twice (the twins sjn, soy0, soy1 advance exactly
        # like djn, doy0, doy1): the offsets' wrap selects come from the first, the other
        # fields' from the twins, so that each sign bit drives half a column state's muxes.
        OFFS = {"djn": "jn", "doy0": "oy", "doy1": "oy", "dimg": "img",
                **{f"dwo{g}": "jn" for g in range(NG)},
                "sjn": "jn", "soy0": "oy", "soy1": "oy"}
        TWIN = {"djn": "sjn", "doy0": "soy0", "doy1": "soy1"}
        BY_TWIN = ("img", "oy", "ty", "jn", "jns", "base", "sjn", "soy0", "soy1")
        for kk in (k0, k1, k0i, k1i):
            kk.update({o: _S(signed(17), name=f"{kk['jn'].name[:-3]}_{o}") for o in OFFS})

        def with_offsets(st, name):
            st.update({o: _S(signed(17), name=f"{name}_{o}") for o in OFFS})
            return st

        def wrap_flags(dist):
            """An advance's row wrap (jn >= thr) and its image wrap with (oy >= thi[1]) and
            without (oy >= thi[0]) a row wrap, from the wrap distances' sign bits."""
            return ~dist["djn"][-1], ~dist["doy0"][-1], ~dist["doy1"][-1]

        def advance(cs, flags=None):
            """The column state after one tile; ``flags``: its wraps, if registered.  Each
            field is a select on the row wrap of two selects on the image wraps (no decode
            of the image wrap before the muxes)."""
            out = {}
            for k in cs:
                wrap, iw0, iw1 = flags if flags is not None else wrap_flags(
                    {o: cs[TWIN[o] if k in BY_TWIN else o] for o in TWIN})
                out[k] = Mux(wrap, Mux(iw1, cs[k] + k1i[k], cs[k] + k1[k]),
                             Mux(iw0, cs[k] + k0i[k], cs[k] + k0[k]))
            return out

        ws = cstate("walk")
        ws_rb = _S(24, name="walk_rb")
        # walk wrap thresholds: jn + n >= wvn iff jn >= wvn - n; oy + 1 == ho iff oy == ho - 1
        # as sign bit / flag: walk_djn = jn - (wvn - n) (last group of the row iff >= 0),
        # walk_olast = (oy == ho - 1) from a count-down walk_oyr = ho - 1 - oy (oy + 1 is the
        # last row iff oyr == 1); per-pass n - wvn and ho - 1 registered from the
        # descriptor, so no subtraction and no compare of two registers sits in the walk
        walk_djn, walk_nthr = _S(signed(17), name="walk_djn"), _S(signed(17), name="walk_nthr")
        walk_olast, walk_ho1, walk_hom1 = (_S(name="walk_olast"), _S(name="walk_ho1"),
                                           _S(16, name="walk_hom1"))
        walk_oyr = _S(16, name="walk_oyr")
        pnthr = [_S(signed(17), name=f"walk_pnthr{i}") for i in range(NP)]
        m.d.sync += [walk_ho1.eq(d.ho == 1), walk_hom1.eq(d.ho - 1)]
        m.d.sync += [pnthr[i].eq(getattr(d, f"p{i}_n") - getattr(d, f"p{i}_wvn"))
                     for i in range(NP)]
        swpi = _S(24, name="walk_swpi")        # row step across an image boundary
        m.d.sync += swpi.eq(d.swp + d.iwrap)
        pinit = [cstate(f"pinit{c}") for c in range(MC)]
        pinit_adv = [with_offsets(cstate(f"pinit_adv{c}"), f"pinit_adv{c}") for c in range(MC)]
        cur = [with_offsets(cstate(f"cur{c}"), f"cur{c}") for c in range(MC)]
        SL = {"base": FW, "img": 16, "jn": 16, "lv": NG}   # lv: lane g valid (img < B, jn + g < Wo)
        slot = [[{k: _S(wd, name=f"slot{p}_{c}_{k}") for k, wd in SL.items()}
                 for c in range(MC)] for p in range(2)]
        BX = box_fields(cfg)
        sbox = [{k: _S(wd, name=f"box{p}_{k}") for k, wd in BX.items()} for p in range(2)]

        # ------------------------------------------------ groups (copies)
        def gsig(name, width, reset_less=True):
            return [_S(width, name=f"g{g}_{name}", reset_less=reset_less) for g in range(NG)]
        act, par = gsig("act", 1, reset_less=False), gsig("par", 1)
        kx, ky, ic = gsig("kx", 8), gsig("ky", 8), gsig("ic", 16)
        # beat offsets kept as running sums (one adder per update): feature fx = kernel
        # column + window offset, fxc = fx + ic * hwp, fo = fxc + ky * wp; weight
        # wbx = block + kx * q * kh, wbxc = wbx + ic * kh, wo = wbxc + ky
        fx, fxc, fo_g = gsig("fx", FW), gsig("fxc", FW), gsig("fo", FW)
        wbx, wbxc, wo_g = gsig("wbx", WW), gsig("wbxc", WW), gsig("wo", WW)
        tt, blk = gsig("t", 24), gsig("blk", 16)
        glt, glb = gsig("lt", 1), gsig("lb", 1)      # in the last tile / last block
        gltb = gsig("ltb", 1)                        # glt & glb, as its own register
        tiles1, count1 = _S(name="tiles1"), _S(name="count1")
        # per copy, registered: tt == tiles - 2 (the next tile is the block's last)
        ttq = gsig("ttq", 1)
        tiles_is2, tiles3 = _S(name="tiles_is2"), _S(24, name="tiles3")
        # per copy, registered: blk == count - 2 (the next block is the pass's last)
        blkq = gsig("blkq", 1)
        count_is2, count3 = _S(name="count_is2"), _S(16, name="count3")
        wblk, cb, gob = gsig("wblk", WW), gsig("cb", 16), gsig("gob", 24)
        gs, goc = gsig("gs", 16), gsig("goc", 24)
        # the next copy (sg) starts when the pass's issue clock reaches its start clock:
        # st_dist = start clock - issue clock, at_st = (st_dist == 0) as a register
        sg = _S(range(NG + 1), name="sg")
        st_dist, at_st = _S(signed(25), name="st_dist"), _S(name="at_st")
        st1 = _S(name="st_one")          # st_dist == 1 as a register (at_st's next value)
        # per pass, registered: copy g is the last (g == n - 1); every copy has started
        lastc = [_S(name=f"lastc{g}") for g in range(NG)]
        sg_all = _S(name="sg_all")
        sg_oh = _S(NG + 1, name="sg_oh")     # one-hot of sg
        m.d.sync += [lastc[g].eq(cp["n"] == g + 1) for g in range(NG)]
        dq1 = _S(name="dq1")                 # dq == 1 (a start right after a start)
        dqm1 = _S(24, name="dqm1")           # dq - 1
        dq2 = _S(name="dq2")                 # dq == 2
        m.d.sync += [dq1.eq(dq == 1), dqm1.eq(dq - 1), dq2.eq(dq == 2)]
        sgs, sgoc = _S(16, name="sgs"), _S(24, name="sgoc")
        wpass, cbpass = _S(24, name="wpass"), _S(16, name="cbpass")
        # per copy, registered: the block offsets' values in the next block (wblk + kq,
        # cb + r, goc + cb + r), so that a block's change copies registers (no adder and no
        # choice of operands behind the copy's enable)
        wblk_nb, cb_nb, gob_nb = gsig("wblk_nb", WW), gsig("cb_nb", 16), gsig("gob_nb", 24)

        # The stall: only the issue stage stalls (as a whole), when a copy is about to issue
        # the last beat of a tile whose capture, ISSUE_TO_ACC clocks later, would find the
        # copy's previous capture not yet drained (the first capture of a pass: anything not
        # drained).  The drain's timing is predicted at issue time (the countdowns of the
        # issue-side drain model below), so the MAC pipeline behind the issue stage never
        # stalls: it runs free, its beats qualified by valid bits (bubbles while stalled).
        # adv: the issue stage advances, a register computed one clock ahead (from the next
        # state); replicas for the slots of each column, each copy's counters, the box and
        # the issue control (ring-loaded during the reset, see _replicate; nothing issues
        # then).
        adv = _S(init=1, name="adv_r", reset_less=False)
        adv_iss, adv_box = _S(init=1, name="adv_iss"), _S(init=1, name="adv_box")
        adv_slot = [_S(init=1, name=f"adv_slot{c}") for c in range(MC)]
        adv_col = [_S(init=1, name=f"adv_col{c}") for c in range(MC)]
        adv_cp = [[_S(init=1, name=f"adv_cp{g}_{j}") for j in range(3)] for g in range(NG)]
        adv_reps = ([adv_iss, adv_box, adv_i, adv_pd] + adv_slot + adv_col
                    + [r for reps in adv_cp for r in reps])
        last_k = gsig("lastk", 1)
        # fk[g]: this beat is the first of the copy's tile (the accumulators start from the
        # product instead of clearing on capture, so they need no reset)
        fk = gsig("fk", 1)
        # last_k[g] is a register: "this beat is the last of the tile", predicted one beat
        # ahead from the counters and the tile's box (decremented bounds kxm/kym, chunk
        # constants iccm = icc - 2, iccz = icc == 1, kq1 = kq == 1)
        iccm, iccz, kq1 = _S(16, name="iccm"), _S(name="iccz"), _S(name="kq1")
        m.d.sync += [iccm.eq(iccl - 1), iccz.eq(iccl == 0), kq1.eq(kq == 1)]
        iccm0, iccm1 = _S(name="iccm0"), _S(16, name="iccm1")     # iccm == 0, iccm - 1
        m.d.sync += [iccm0.eq(iccl == 1), iccm1.eq(iccl - 2)]
        # per copy, registered: ky / ic / kx at their last value in the tile
        kye, ice, kxe = gsig("kye", 1), gsig("ice", 1), gsig("kxe", 1)
        # per copy, registered: ky / ic / kx at the value before their last (kym, iccm, kxm),
        # so that "the next beat is the last" needs no compare
        kyq, icmq, kxq = gsig("kyq", 1), gsig("icmq", 1), gsig("kxq", 1)
        # per copy, registered: the beat after this one is the last of its tile (last_k
        # after an advance), loaded with its value two beats ahead, so that the
        # stall sees a flip-flop instead of the counters' flags
        lkn = gsig("lkn", 1)
        # per copy, registered: lkn & ~(last_k & ltb), "the beat after this one is the last
        # of a tile, and this one is not the copy's very last" (the stall's W_n if it advances)
        lkx = gsig("lkx", 1)

        # "The next beat is the last" from a copy's loop flags f (kye, ice, kxe, kyq, icmq,
        # kxq; kyz: the tile's kernel box has one row) in each case of the next step: a
        # new kx (ky and ic at their last), a new ic (ky at its last), a new ky.
        def last_terms(f, kyz):
            return {"kx": f["kxq"] & iccz & kyz, "ic": f["icmq"] & f["kxe"] & kyz,
                    "ky": f["kyq"] & f["ice"] & f["kxe"]}

        def next_last(f, kyz):
            t = last_terms(f, kyz)
            return Mux(f["kye"], Mux(f["ice"], t["kx"], t["ic"]), t["ky"])

        def box_flags(box):      # the loop flags of a tile's first beat, from its box
            return {"kye": box["kyz"], "ice": iccz, "kxe": box["kxz"], "kyq": box["kym0"],
                    "icmq": iccm0, "kxq": box["kxm0"]}

        def lkn_after(lk, f, kyz):
            """lkn after a beat that loads last_k = lk and the loop flags f: a tile's
            first beat follows a last one (its last_k is kq1, one-beat tiles)."""
            return Mux(lk, kq1, next_last(f, kyz))

        def lkn_first(box):      # lkn at a tile's first beat: its flags loaded from box
            return lkn_after(kq1, box_flags(box), box["kyz"])

        def lkx_first(box, starts=None):
            # lkx at a copy's first beat (that beat is its very last if the copy has one
            # tile, block and beat in all); ``starts``: 0 unless the copy is about to start
            lkn = lkn_first(box) if starts is None else starts & lkn_first(box)
            return lkn & ~(kq1 & tiles1 & count1)
        gdone = gsig("done", 1)
        foff = gsig("foff", FW)
        waddr = gsig("waddr", WW)
        gbox = []
        for g in range(NG):
            bx = {k: Mux(par[g], sbox[1][k], sbox[0][k]) for k in BX}
            gbox.append(bx)
            m.d.comb += [
                gdone[g].eq(act[g] & last_k[g] & gltb[g]),
                foff[g].eq(fo_g[g] + bx["fbox"]),
                waddr[g].eq(wo_g[g] + bx["wbox"]),
            ]

        # lane validity per group and column: copy g of column c is window jn + g
        lanev = [[_S(name=f"lane{g}_{c}") for c in range(MC)] for g in range(NG)]
        for g in range(NG):
            for c in range(MC):
                m.d.comb += lanev[g][c].eq(act[g] & Mux(par[g], slot[1][c]["lv"][g],
                                                        slot[0][c]["lv"][g]))

        # the MAC pipeline (feature / weight banks, MACs, accumulators, shadow registers)
        m.submodules.macs = macs = MacPipeline(cfg)
        m.d.comb += [macs.adv.eq(adv_i), macs.setup.eq(setup), macs.r.eq(cp["r"]),
                     macs.n.eq(cp["n"]), macs.first.eq((tt[0] == 0) & (blk[0] == 0))]
        for g in range(NG):
            m.d.comb += [macs.act[g].eq(act[g]), macs.last_k[g].eq(last_k[g]),
                         macs.fk[g].eq(fk[g]), macs.par[g].eq(par[g]),
                         macs.foff[g].eq(foff[g]), macs.waddr[g].eq(waddr[g]),
                         macs.gob[g].eq(gob[g]),
                         macs.lanev[g].eq(Cat(*[lanev[g][c] for c in range(MC)]))]
        m.d.comb += [macs.base[c][p].eq(slot[p][c]["base"]) for c in range(MC) for p in range(2)]
        x2 = {"gl": macs.cap_next, "gob": macs.cap_gob_next}
        s2_gl, s2_N, s2_R, s2 = macs.cap, macs.cap_n, macs.cap_r, {"Rle": macs.cap_rle}
        shadow = macs.shadow
        m.d.comb += control.pc.eq(macs.pc)

        # ---------------------------------------------------------------- drain
        m.submodules.drain = drain = Drain(cfg)
        m.d.comb += [drain.cap_next.eq(x2["gl"]), drain.cap.eq(s2_gl), drain.cap_n.eq(s2_N),
                     drain.cap_r.eq(s2_R), drain.cap_rle.eq(s2["Rle"]),
                     drain.first_chunk.eq(first_chunk)]
        m.d.comb += [drain.cap_gob_next[g].eq(x2["gob"][g]) for g in range(NG)]
        m.d.comb += [drain.shadow[r][c].eq(shadow[r][c]) for r in range(MR) for c in range(MC)]


        # ------------------------------------------------ issue-side drain model (the stall)
        # Exact twin of gen.conv.cycles._chunk_compute_cycles in countdowns, at issue time t (the
        # capture of a beat issued now happens ISSUE_TO_ACC clocks later, at C):
        # pd_L = max(0, last drain clock of all captures issued so far - C), pd_F[g] the
        # same for copy g's latest capture; a capture at C starts its drain at
        # max(C + 1, last + 1) and takes dg = ceil(R / drain_rows) clocks, so k captures
        # issued together (in copy order) set pd_L to pd_L + k dg.  All count down by one
        # per clock; zL / zF[g] are the registered flags "> 0".
        pd_dg = _S(16, name="pd_dg")
        if DR & (DR - 1) == 0:
            m.d.sync += pd_dg.eq((cp["r"] + (DR - 1)) >> (DR.bit_length() - 1))
        else:
            m.d.sync += pd_dg.eq((cp["r"] + (DR - 1)) // DR)
        # k dg - 1 for k = 1..NG (shift-and-add, registered once per pass), and the flags
        # dg >= 2, dg >= 3 (registered with them)
        pd_m1 = [Const(0, 16)] + [_S(16, name=f"pd_m{k}") for k in range(1, NG + 1)]
        for k in range(1, NG + 1):
            kdg = sum(pd_dg << b for b in range(k.bit_length()) if (k >> b) & 1)
            m.d.sync += pd_m1[k].eq(kdg - 1)
        dg_ge2, dg_ge3 = _S(name="pd_dg2"), _S(name="pd_dg3")
        m.d.sync += [dg_ge2.eq(pd_dg >= 2), dg_ge3.eq(pd_dg >= 3)]
        pd_L, zL = _S(16, name="pd_L"), _S(name="pd_zL")
        pd_F, zF = gsig("pd_F", 16), gsig("pd_zF", 1)
        ft0 = _S(name="pd_ft0")            # copy 0 is in the first tile of its pass
        # W[g] = act[g] & last_k[g] (this beat is the copy's last of a tile), a register
        # with its own next state: a start (pd_start), an advance (the new last_k, lkn;
        # act drops after the last tile of the copy's last block) or hold
        W = gsig("pd_W", 1, reset_less=False)
        pd_start = [_S(name=f"pd_start{g}") for g in range(NG)]
        # stp[g] == isu & start & sg_oh[g] (copy g >= 1 starts if the issue stage advances,
        # see the issue control), a register loaded with its value after an advance
        stp = [None] + [_S(name=f"stp{g}", reset_less=False) for g in range(1, NG)]
        capg = [W[g] & adv for g in range(NG)]
        # (the countdowns' data paths on their own replica, the flags on adv)
        capd = [W[g] & adv_pd for g in range(NG)]
        kcnt = []
        for g in range(NG):
            kc = _S(range(NG + 1), name=f"pd_k{g}")
            m.d.comb += kc.eq(sum(capd[h] for h in range(g + 1)))
            kcnt.append(kc)
        ktot = kcnt[-1]
        zL_n, zF_n = _S(name="pd_zL_n"), [_S(name=f"pd_zF_n{g}") for g in range(NG)]
        W_n = [_S(name=f"pd_W_n{g}") for g in range(NG)]
        ft0_n = _S(name="pd_ft0_n")
        # k dg >= 2 is true for every k >= 2 (dg >= 1), so of the captures issued together
        # only "more than one" and dg >= 2 matter; gt1 flags: registered pd_L > 1, pd_F > 1
        # (no compare and no count on the stall path)
        L_gt1, F_gt1 = _S(name="pd_Lgt1", reset_less=False), gsig("pd_Fgt1", 1, reset_less=False)
        def two_of(bits):          # at least two of bits
            return _any([bits[h] & bits[j] for h in range(NG) for j in range(h + 1, NG)])
        two = two_of(capg)
        # zLb == zL | (dg >= 2) as its own register (both load every clock)
        zLb = _S(name="pd_zLb")
        m.d.sync += zLb.eq(zL_n | (pd_dg >= 2))
        m.d.comb += zL_n.eq(Mux(_any(capg), zLb | two, L_gt1))
        # pd_L + (k dg - 1) for every k, in parallel with the counts that select one
        pd_Lk = [pd_L + pd_m1[k] for k in range(NG + 1)]
        # pd_L + k dg - 1 > 1, i.e. pd_L + k dg >= 3, from flags (dg >= 1 in a pass): pd_L >= 2,
        # or pd_L == 1 and k dg >= 2, or k dg >= 3
        kdg_ge2 = [None, dg_ge2] + [Const(1)] * (NG - 1)
        kdg_ge3 = [None, dg_ge3, dg_ge2] + [Const(1)] * (NG - 2)
        Lk_gt1 = [L_gt1] + [L_gt1 | (zL & kdg_ge2[k]) | kdg_ge3[k] for k in range(1, NG + 1)]
        m.d.sync += [pd_L.eq(Mux(ktot == 0, Mux(zL, pd_L - 1, 0), _sel(pd_Lk, ktot))),
                     L_gt1.eq(Mux(ktot == 0, zL & (pd_L > 2), _sel(Lk_gt1, ktot))),
                     zL.eq(zL_n), ft0.eq(ft0_n)]
        for g in range(NG):
            before = _any(capg[:g])          # another copy captures with this one, ahead
            m.d.comb += [zF_n[g].eq(Mux(capg[g], zLb | before, F_gt1[g])),
                         W_n[g].eq(Mux(pd_start[g], kq1,
                                       Mux(adv & act[g], lkx[g], W[g])))]
            m.d.sync += [pd_F[g].eq(Mux(capd[g], _sel(pd_Lk, kcnt[g]),
                                        Mux(zF[g], pd_F[g] - 1, 0))),
                         F_gt1[g].eq(Mux(capd[g], _sel(Lk_gt1, kcnt[g]), zF[g] & (pd_F[g] > 2))),
                         zF[g].eq(zF_n[g]), W[g].eq(W_n[g])]
        m.d.comb += ft0_n.eq(Mux(pd_start[0], 1, Mux(W[0] & adv, 0, ft0)))
        # The stall's next value computed both ways of this clock's adv and then selected
        # by it, so that adv, the loop's own flag, enters only the last level: B1 (the
        # issue stage advances: every W[g] captures, a starting copy loads kq1, an active
        # one lkn unless this is its last beat) and B0 (it stalls: only the countdowns
        # move).  (adv's replicas are equal outside the reset, when no copy starts.)
        # (W[g] implies act[g], and lkx[g] is 0 while the copy is idle unless it is about
        # to start, when stp selects kq1: so lkx alone is Mux(act, lkx, W))
        w1 = [Mux(stp[g] if g else setup_last, kq1, lkx[g]) for g in range(NG)]
        z1 = [Mux(W[g], zLb | _any(W[:g]), F_gt1[g]) for g in range(NG)]
        zL1 = Mux(_any(W), zLb | two_of(W), L_gt1)
        ft01 = setup_last | (~W[0] & ft0)
        b1 = _any([w1[g] & z1[g] for g in range(NG)] + [w1[0] & ft01 & zL1])
        w0 = [Mux(setup_last, kq1, W[0])] + W[1:]
        b0 = _any([w0[g] & F_gt1[g] for g in range(NG)] + [w0[0] & (setup_last | ft0) & L_gt1])
        blocked_n = Mux(adv, b1, b0)
        m.d.sync += adv.eq(~blocked_n)
        # each replica selects with its own value (all equal: after a reset b1 = b0 = 0 loads
        # 1 into every one), so no two have the same input and none needs a reset term
        m.d.sync += [r.eq(~Mux(r, b1, b0)) for r in adv_reps]

        # ---------------------------------------------------------------- streamer
        m.submodules.streamer = streamer = Streamer(cfg, self.desc_layout)
        m.submodules.out_fifo = out_fifo = OutputFifo(cfg)
        m.d.comb += [streamer.d.eq(d), streamer.room.eq(out_fifo.room),
                     out_fifo.step.eq(streamer.step), out_fifo.col.eq(streamer.col),
                     out_fifo.bank.eq(streamer.bank)]
        wiring.connect(m, out_fifo.o, wiring.flipped(self.o))
        st_busy, own = streamer.busy, streamer.own

        m.d.comb += [drain.own.eq(own), drain.st_addr.eq(streamer.addr)]
        m.d.comb += [out_fifo.words[b][c].eq(drain.words[b][c]) for b in range(2) for c in range(MC)]

        # ---------------------------------------------------------------- issue control
        # copy sg starts in this (issue) clock (unconditional assignments: continuous in
        # Verilog, evaluated by Icarus at time 0)
        # (sg < n iff not all started; sg == g from sg's one-hot twin; isu = issuing & ~setup)
        start = ~sg_all & at_st
        pass_end = sg_all & _any(lastc[g] & gdone[g] for g in range(NG))
        at_st_n = Mux(start, dq1, st1)
        # sgl == (sg + 1 == n) as a register (the started copy is the last): loaded with sg
        sgl = _S(name="sg_last")
        sg_all_n = Mux(start, sgl, sg_all)
        for g in range(1, NG):
            sg_oh_n = Mux(start, sg_oh[g - 1], sg_oh[g])
            with m.If(adv_iss & issuing):
                m.d.sync += stp[g].eq(Mux(setup, setup_last & ~lastc[0] & dq1 if g == 1 else 0,
                                          ~pass_end & at_st_n & ~sg_all_n & sg_oh_n))
        m.d.comb += [pd_start[g].eq(adv_iss & stp[g]) for g in range(1, NG)]
        # column c's first window group of the pass, in set-up clock c + 1
        pinit_load = [issuing & setup & sk_oh[c + 1] for c in range(MC)]
        for c in range(MC):
            with m.If(pinit_load[c]):
                m.d.sync += [pinit[c][k].eq(ws[k]) for k in ws if k != "base"]
                m.d.sync += pinit[c]["base"].eq(ws_rb + ws["jns"])
        with m.If(sk_first):
            m.d.sync += [cp[f].eq(_sel(pvl[f], e)) for f in _PASS_FIELDS]
            m.d.sync += [v.eq(0) for v in ws.values()] + [ws_rb.eq(0)]
            m.d.sync += [walk_nthr.eq(_sel(pnthr, e)), walk_djn.eq(_sel(pnthr, e)),
                         walk_olast.eq(walk_ho1), walk_oyr.eq(walk_hom1)]
        # The walk steps in every clock after the pass's first set-up clock (sk_first, its
        # reset), running on past the set-up: only the set-up's pinit loads (clocks 1 .. cols)
        # read it, and those see the same steps as a walk enabled by the set-up alone.
        with m.Else():
            # one window group to the right, wrapping to the next output row
            jn1 = ws["jn"] + cp["n"]
            with m.If(~walk_djn[-1]):                   # jn >= wvn - n
                m.d.sync += [ws["jn"].eq(0), ws["jns"].eq(0), walk_djn.eq(walk_nthr)]
                with m.If(walk_olast):                  # oy == ho - 1: next image
                    m.d.sync += [ws["oy"].eq(0), ws["ty"].eq(0),
                                 ws["img"].eq(ws["img"] + 1), ws_rb.eq(ws_rb + swpi),
                                 walk_olast.eq(walk_ho1), walk_oyr.eq(walk_hom1)]
                with m.Else():
                    m.d.sync += [ws["oy"].eq(ws["oy"] + 1),
                                 ws["ty"].eq(ws["ty"] + d.stride),
                                 ws_rb.eq(ws_rb + d.swp),
                                 walk_olast.eq(walk_oyr == 1), walk_oyr.eq(walk_oyr - 1)]
            with m.Else():
                m.d.sync += [ws["jn"].eq(jn1), ws["jns"].eq(ws["jns"] + cp["ns"]),
                             walk_djn.eq(walk_djn + cp["n"])]
        # The set-up never stalls (no copy is active then, so nothing can be blocked: the
        # stall flags are 1), so its steps do not wait for them.
        with m.If(issuing):
            with m.If(setup):
                m.d.sync += [sk.eq(sk + 1), sk_oh.eq(sk_oh << 1), sk_first.eq(0)]
                m.d.sync += setup_last.eq(sk_oh[MC + 4])
                with m.If(setup_last):
                    m.d.sync += [setup.eq(0), sk.eq(0), sk_oh.eq(1), isu.eq(1)]
            with m.Elif(adv_iss):
                m.d.sync += [st_dist.eq(Mux(start, st_dist + dqm1, st_dist - 1)),
                             at_st.eq(at_st_n), st1.eq(Mux(start, dq2, st_dist == 2))]
                with m.If(start):
                    m.d.sync += [sg.eq(sg + 1), sg_oh.eq(sg_oh << 1),
                                 sgl.eq(_any(sg_oh[g] & lastc[g + 1] for g in range(NG - 1))),
                                 sg_all.eq(sg_all_n),
                                 sgs.eq(sgs + d.stride),
                                 sgoc.eq(sgoc + d.oc)]
                    for g in range(1, NG):
                        with m.If(sg_oh[g]):
                            m.d.sync += act[g].eq(1)
                # pass end: every copy has started and the last one (n - 1, which runs
                # (n - 1) D beats behind copy 0, so finishes last) finishes
                with m.If(pass_end):
                    m.d.sync += isu.eq(0)
                    with m.If(e == d.npasses - 1):
                        m.d.sync += issuing.eq(0)
                    with m.Else():
                        m.d.sync += [e.eq(e + 1), setup.eq(1), sk.eq(0), sk_oh.eq(1),
                                     sk_first.eq(1)]
        # an idle copy (g >= 1) keeps loading the start values of the next copy to start
        # (sgs, sgoc belong to copy sg), so that its start only sets act[g] (the loads of
        # the counters' registers sit in the counters' if-tree, see idle_loads below)
        def idle_loads(g, sync):
            sync += [par[g].eq(0), fk[g].eq(1), tt[g].eq(0), ttq[g].eq(tiles_is2),
                     last_k[g].eq(kq1),
                     kye[g].eq(sbox[0]["kyz"]), ice[g].eq(iccz),
                     kxe[g].eq(sbox[0]["kxz"]), kyq[g].eq(sbox[0]["kym0"]),
                     kxq[g].eq(sbox[0]["kxm0"]), icmq[g].eq(iccm0),
                     lkn[g].eq(lkn_first(sbox[0])),
                     lkx[g].eq(lkx_first(sbox[0], stp[g])),
                     glt[g].eq(tiles1), glb[g].eq(count1), gltb[g].eq(tiles1 & count1),
                     blkq[g].eq(count_is2),
                     blk[g].eq(0), kx[g].eq(0), ky[g].eq(0), ic[g].eq(0),
                     fx[g].eq(sgs), fxc[g].eq(sgs), fo_g[g].eq(sgs),
                     wbx[g].eq(wpass), wbxc[g].eq(wpass), wo_g[g].eq(wpass),
                     wblk[g].eq(wpass), cb[g].eq(cbpass),
                     gob[g].eq(sgoc + cbpass),
                     wblk_nb[g].eq(wpass + kq), cb_nb[g].eq(cbpass + cp["r"]),
                     gob_nb[g].eq(sgoc + cbpass + cp["r"])]
        for g in range(1, NG):
            with m.If(~act[g]):
                m.d.sync += [gs[g].eq(sgs), goc[g].eq(sgoc)]

        # group 0 start (last set-up clock) and column-state / slot updates
        from_init = _S()
        m.d.comb += from_init.eq(setup_last | glt[0])
        # from_init registered one clock ahead (next values of setup_last and glt[0]), one
        # replica per column (slots, column state) and one for the box / copy 0's flags.
        # It and go below are computed for each value of this clock's adv (a = 1, 0) and
        # each replica selects with its own adv replica (equal to adv outside the reset, when
        # both values agree), so adv enters only the last level and no two replicas have
        # the same input.
        def glt0_n(a):
            return Mux(pd_start[0], tiles1,
                       Mux(a & act[0] & last_k[0], Mux(glt[0], tiles1, ttq[0]), glt[0]))
        setup_last_n = Mux(issuing & setup, sk_oh[MC + 4], setup_last)
        fi_col = [_S(name=f"fi_col{c}") for c in range(MC)]
        fi_box = _S(name="fi_box")
        def load_by_adv(regs, advs, value_n):
            # each register loads value_n(1) or value_n(0) as its own adv replica says
            v0, v1 = value_n(0), value_n(1)
            m.d.sync += [r.eq(Mux(a, v1, v0)) for r, a in zip(regs, advs)]
        load_by_adv(fi_col + [fi_box], adv_col + [adv_box], lambda a: setup_last_n | glt0_n(a))
        # go: copy 0 enters a tile (or the pass's first), registered from the next state
        # (W[0] == act[0] & last_k[0]; not in the block's last tile), one replica each for
        # the box, every column's slots and every column's state
        def tile_go_n(a):
            glb0_n = Mux(pd_start[0], count1, Mux(a & act[0] & last_k[0] & glt[0],
                                                  blkq[0], glb[0]))
            W0_n = Mux(pd_start[0], kq1, Mux(a & act[0], lkx[0], W[0]))
            return setup_last_n | (W0_n & ~(glt0_n(a) & glb0_n))
        go_box = _S(name="go_box")
        go_slot = [_S(name=f"go_slot{c}") for c in range(MC)]
        go_col = [_S(name=f"go_col{c}") for c in range(MC)]
        load_by_adv([go_box] + go_slot + go_col, [adv_box] + adv_slot + adv_col, tile_go_n)
        m.d.sync += [tiles1.eq(cp["tiles"] == 1), count1.eq(cp["count"] == 1),
                     tiles_is2.eq(cp["tiles"] == 2), tiles3.eq(cp["tiles"] - 3),
                     count_is2.eq(cp["count"] == 2), count3.eq(cp["count"] - 3)]
        # per-pass advance constants (stable from the second set-up clock on)
        # (three register stages: partial sums (and a - ho, as - hos), kb, then the four
        # constant sets; stable from the fourth set-up clock on; pinit_adv, recomputed every
        # clock, is used only in the last set-up clock)
        kb0 = _S(FW, name="adv_kb0")
        kb1 = _S(FW, name="adv_kb1")
        kbp = [_S(FW, name=f"adv_kbp{i}") for i in range(3)]
        m.d.sync += [kbp[0].eq(cp["aswp"] + cp["bns"]), kbp[1].eq(cp["aswp"] + d.swp + cp["bns"]),
                     kbp[2].eq(cp["aiis"] - cp["wvns"])]
        # a - ho and as - hos registered (the image wraps' steps add one more term)
        a_ho = _S((cp["a"] - d.ho).shape(), name="adv_a_ho")
        as_hos = _S((cp["as"] - d.hos).shape(), name="adv_as_hos")
        m.d.sync += [a_ho.eq(cp["a"] - d.ho), as_hos.eq(cp["as"] - d.hos)]
        m.d.sync += [thr.eq(cp["wvn"] - cp["bn"]),
                     thi[0].eq(d.ho - cp["a"]), thi[1].eq(d.ho - cp["a"] - 1),
                     kb0.eq(kbp[0] + cp["aiis"]), kb1.eq(kbp[1] + kbp[2]),
                     k0["oy"].eq(cp["a"]), k1["oy"].eq(cp["a"] + 1),
                     k0["ty"].eq(cp["as"]), k1["ty"].eq(cp["as"] + d.stride),
                     k0["jn"].eq(cp["bn"]), k1["jn"].eq(cp["bn"] - cp["wvn"]),
                     k0["jns"].eq(cp["bns"]), k1["jns"].eq(cp["bns"] - cp["wvns"]),
                     k0["img"].eq(cp["ai"]), k1["img"].eq(cp["ai"]),
                     k0["base"].eq(kb0), k1["base"].eq(kb1),
                     k0i["oy"].eq(a_ho), k1i["oy"].eq(a_ho + 1),
                     k0i["ty"].eq(as_hos), k1i["ty"].eq(as_hos + d.stride),
                     k0i["jn"].eq(cp["bn"]), k1i["jn"].eq(cp["bn"] - cp["wvn"]),
                     k0i["jns"].eq(cp["bns"]), k1i["jns"].eq(cp["bns"] - cp["wvns"]),
                     k0i["img"].eq(cp["ai"] + 1), k1i["img"].eq(cp["ai"] + 1),
                     k0i["base"].eq(kb0 + d.iwrap), k1i["base"].eq(kb1 + d.iwrap)]
        lv_wo = [_S(signed(DIMW + 1), name=f"lv_wo{g}") for g in range(NG)]
        m.d.sync += [lv_wo[g].eq(d.wo - g) for g in range(NG)]
        # signed steps of the offsets (true values, no modulo: they fit 17 bits)
        for kk, wraps, img in ((k0, False, False), (k1, True, False), (k0i, False, True),
                               (k1i, True, True)):
            oy_step = (a_ho if img else cp["a"]) + int(wraps)
            jn_step = cp["bn"] - (cp["wvn"] if wraps else 0)
            img_step = cp["ai"] + int(img)
            for o in ("djn", TWIN["djn"]):
                m.d.sync += kk[o].eq(jn_step)
            for o in ("doy0", "doy1", TWIN["doy0"], TWIN["doy1"]):
                m.d.sync += kk[o].eq(oy_step)
            m.d.sync += kk["dimg"].eq(img_step)
            m.d.sync += [kk[f"dwo{g}"].eq(jn_step) for g in range(NG)]
        # pinit's offsets, registered from pinit and the thresholds (pinit[c] loads at set-up
        # clock c + 1, thr / thi are valid from clock 2: the offsets from c + 3), its wraps
        # registered from them (from c + 4), and pinit_adv (from c + 5, by the last set-up
        # clock cols + 5 that uses it)
        for c in range(MC):
            pin = dict(pinit[c])
            with_offsets(pin, f"pinit{c}")
            dists = {"djn": pinit[c]["jn"] - thr, "doy0": pinit[c]["oy"] - thi[0],
                     "doy1": pinit[c]["oy"] - thi[1]}
            m.d.sync += [pin[o].eq(v) for o, v in dists.items()]
            m.d.sync += [pin[TWIN[o]].eq(v) for o, v in dists.items()]
            m.d.sync += pin["dimg"].eq(pinit[c]["img"] - d.batch)
            m.d.sync += [pin[f"dwo{g}"].eq(pinit[c]["jn"] - lv_wo[g]) for g in range(NG)]
            pwr = tuple(_S(name=f"pinit{c}_{k}") for k in ("wrap", "iw0", "iw1"))
            m.d.sync += [r.eq(v) for r, v in zip(pwr, wrap_flags(pin))]
            nxt = advance(pin, pwr)
            m.d.sync += [pinit_adv[c][k].eq(nxt[k]) for k in nxt]
        src = [{k: Mux(fi_col[c], pinit[c][k], cur[c][k]) for k in ws} for c in range(MC)]
        # lane-valid bits of a slot (image < B, window jn + g < Wo): for the block's first
        # tile (pinit, static during the pass) compares against Wo - g, registered; for the
        # next tile (cur) the sign bits of its offsets

        def lane_valid(st):
            return Cat(*[(st["img"] < d.batch) & (st["jn"] < lv_wo[g]) for g in range(NG)])
        pinit_lv = [_S(NG, name=f"pinit{c}_lv") for c in range(MC)]
        for c in range(MC):
            m.d.sync += pinit_lv[c].eq(lane_valid(pinit[c]))
            cur_lv = Cat(*[cur[c]["dimg"][-1] & cur[c][f"dwo{g}"][-1] for g in range(NG)])
            src[c]["lv"] = Mux(fi_col[c], pinit_lv[c], cur_lv)
        m.d.comb += pd_start[0].eq(setup_last)
        with m.If(setup_last):
            m.d.sync += [act[0].eq(1), par[0].eq(0), fk[0].eq(1), tt[0].eq(0), ttq[0].eq(tiles_is2),
                         blk[0].eq(0), kx[0].eq(0),
                         last_k[0].eq(kq1),
                         glt[0].eq(tiles1), glb[0].eq(count1), gltb[0].eq(tiles1 & count1),
                         blkq[0].eq(count_is2),
                         ky[0].eq(0), ic[0].eq(0), fx[0].eq(0), fxc[0].eq(0), fo_g[0].eq(0),
                         wbx[0].eq(wblk[0]), wbxc[0].eq(wblk[0]), wo_g[0].eq(wblk[0]),
                         gob[0].eq(cb[0]), wblk_nb[0].eq(wblk[0] + kq),
                         cb_nb[0].eq(cb[0] + cp["r"]), gob_nb[0].eq(cb[0] + cp["r"]),
                         gs[0].eq(0), goc[0].eq(0),
                         wpass.eq(wblk[0]), cbpass.eq(cb[0]), sg.eq(1), sg_oh.eq(2),
                         sgl.eq(lastc[1] if NG > 1 else 0),
                         sg_all.eq(lastc[0]),
                         st_dist.eq(dq - 1), at_st.eq(dq1), st1.eq(dq2), sgs.eq(d.stride),
                         sgoc.eq(d.oc)]
        m.submodules.tile_box = tile_box = TileBox(cfg, self.desc_layout)
        m.d.comb += [tile_box.d.eq(d), tile_box.n.eq(cp["n"]), tile_box.cqkh.eq(cqkh)]
        for f in ("img", "jn", "ty", "jns"):
            m.d.comb += getattr(tile_box.walk, f).eq(ws[f])
            m.d.comb += [getattr(tile_box.cur[c], f).eq(cur[c][f]) for c in range(MC)]
        m.d.comb += tile_box.walk_load.eq(Cat(*pinit_load))
        cbox = {f: getattr(tile_box.cbox, f) for f in BX}
        ibox = {f: getattr(tile_box.ibox, f) for f in BX}

        # copy 0 enters a tile: per column its own enable (own stall replica), so that no
        # single net reaches every column's slot and state registers
        tgt = Mux(setup_last, 0, ~par[0])
        with m.If(adv_box & go_box):
            for p in range(2):
                with m.If(tgt == p):
                    m.d.sync += [sbox[p][k].eq(Mux(fi_box, ibox[k], cbox[k])) for k in BX]
        for c in range(MC):
            with m.If(adv_slot[c] & go_slot[c]):
                for p in range(2):
                    with m.If(tgt == p):
                        m.d.sync += [slot[p][c][k].eq(src[c][k]) for k in SL]
            with m.If(adv_col[c] & go_col[c]):
                nxt = advance(cur[c])
                m.d.sync += [cur[c][k].eq(Mux(fi_col[c], pinit_adv[c][k], nxt[k]))
                             for k in cur[c]]

        with m.If(setup_last):                # copy 0 starts: flags of its first tile
            m.d.sync += [kye[0].eq(ibox["kyz"]), ice[0].eq(iccz), kxe[0].eq(ibox["kxz"]),
                         kyq[0].eq(ibox["kym0"]), kxq[0].eq(ibox["kxm0"]), icmq[0].eq(iccm0),
                         lkn[0].eq(lkn_first(ibox)), lkx[0].eq(lkx_first(ibox))]
        # per-group beat counters (selects are registered flags)
        for g in range(NG):
            bx = gbox[g]
            # the box of the copy's next tile: copy 0 writes it now, the others read it
            nbk = ("kyz", "kxz", "kym0", "kxm0")
            nb = ({k: Mux(fi_box, ibox[k], cbox[k]) for k in nbk} if g == 0
                  else {k: Mux(par[g], sbox[0][k], sbox[1][k]) for k in nbk})
            flags = {"kye": kye, "ice": ice, "kxe": kxe, "kyq": kyq, "icmq": icmq, "kxq": kxq}
            f = {k: v[g] for k, v in flags.items()}
            lk = last_terms(f, bx["kyz"])        # the next last_k in each case
            # the loop flags after a beat of each case
            after = {"kx": {**f, "kye": bx["kyz"], "kyq": bx["kym0"], "ice": iccz,
                            "icmq": iccm0, "kxe": kxq[g], "kxq": kx[g] == bx["kxm1"]},
                     "ic": {**f, "kye": bx["kyz"], "kyq": bx["kym0"], "ice": icmq[g],
                            "icmq": ic[g] == iccm1},
                     "ky": {**f, "kye": kyq[g], "kyq": ky[g] == bx["kym1"]}}

            def counters(g, sync, bx=bx, nb=nb, f=f, lk=lk, after=after):
                def step(new_lk, new_f, kyz, new_ltb):
                    # a beat: last_k, the loop flags that change, lkn (two beats ahead), lkx
                    nonlocal sync
                    new_lkn = lkn_after(new_lk, new_f, kyz)
                    sync += [last_k[g].eq(new_lk), lkn[g].eq(new_lkn),
                             lkx[g].eq(new_lkn & ~(new_lk & new_ltb))]
                    sync += [flags[k][g].eq(v) for k, v in new_f.items() if v is not f[k]]
                # one beat of copy g
                sync += fk[g].eq(last_k[g])
                with m.If(last_k[g]):
                    step(kq1, box_flags(nb), nb["kyz"],
                         Mux(glt[g], tiles1 & blkq[g], ttq[g] & glb[g]))
                with m.Elif(kye[g]):
                    with m.If(ice[g]):
                        step(lk["kx"], after["kx"], bx["kyz"], gltb[g])
                    with m.Else():
                        step(lk["ic"], after["ic"], bx["kyz"], gltb[g])
                with m.Else():
                    step(lk["ky"], after["ky"], bx["kyz"], gltb[g])
                with m.If(last_k[g]):
                    sync += [kx[g].eq(0), ky[g].eq(0), ic[g].eq(0), fx[g].eq(gs[g]),
                             fxc[g].eq(gs[g]), fo_g[g].eq(gs[g]), wbx[g].eq(wblk[g]),
                             wbxc[g].eq(wblk[g]), wo_g[g].eq(wblk[g]),
                             par[g].eq(~par[g])]
                    with m.If(glt[g]):
                        sync += [glt[g].eq(tiles1), glb[g].eq(blkq[g]),
                                 gltb[g].eq(tiles1 & blkq[g]),
                                 blkq[g].eq(blk[g] == count3)]
                        sync += [wbx[g].eq(wblk_nb[g]), wbxc[g].eq(wblk_nb[g]),
                                 wo_g[g].eq(wblk_nb[g])]
                        sync += [tt[g].eq(0), ttq[g].eq(tiles_is2), blk[g].eq(blk[g] + 1),
                                 wblk[g].eq(wblk_nb[g]), cb[g].eq(cb_nb[g]),
                                 gob[g].eq(gob_nb[g]), wblk_nb[g].eq(wblk_nb[g] + kq),
                                 cb_nb[g].eq(cb_nb[g] + cp["r"]),
                                 gob_nb[g].eq(gob_nb[g] + cp["r"])]
                        with m.If(glb[g]):
                            sync += [act[g].eq(0), lkx[g].eq(0)]
                    with m.Else():
                        sync += [tt[g].eq(tt[g] + 1), gob[g].eq(gob[g] + cp["noc"]),
                                 glt[g].eq(ttq[g]), gltb[g].eq(ttq[g] & glb[g]),
                                 ttq[g].eq(tt[g] == tiles3)]
                with m.Elif(kye[g]):
                    sync += ky[g].eq(0)
                    with m.If(ice[g]):
                        sync += [ic[g].eq(0), kx[g].eq(kx[g] + 1), fx[g].eq(fx[g] + 1),
                                 fxc[g].eq(fx[g] + 1), fo_g[g].eq(fx[g] + 1),
                                 wbx[g].eq(wbx[g] + cqkh), wbxc[g].eq(wbx[g] + cqkh),
                                 wo_g[g].eq(wbx[g] + cqkh)]
                    with m.Else():
                        sync += [ic[g].eq(ic[g] + 1), fxc[g].eq(fxc[g] + d.hwp),
                                 fo_g[g].eq(fxc[g] + d.hwp), wbxc[g].eq(wbxc[g] + d.kh),
                                 wo_g[g].eq(wbxc[g] + d.kh)]
                with m.Else():
                    sync += [ky[g].eq(ky[g] + 1), fo_g[g].eq(fo_g[g] + d.wp),
                             wo_g[g].eq(wo_g[g] + 1)]

            # three enables per copy, each from its own stall replica: offsets and loop
            # counters / flags, weight and output offsets, tile and block state
            parts = ([fk, last_k, lkn, lkx, kye, ice, kxe, kyq, icmq, kxq, kx, ky, ic, fx, fxc,
                      fo_g, par],
                     [wbx, wbxc, wo_g, wblk, cb, gob, wblk_nb, cb_nb, gob_nb],
                     [glt, glb, gltb, blkq, tt, ttq, blk, act])
            # (a copy is active only while the pass issues: act[g] implies isu)
            for part, rep in zip(parts, adv_cp[g]):
                sync = _Only(m, [v[g] for v in part])
                with m.If(act[g]):
                    with m.If(rep):
                        counters(g, sync)
                if g:
                    with m.Else():
                        idle_loads(g, sync)

        # ---------------------------------------------------------------- loaders
        dsrc = self.c.payload
        m.submodules.loaders = loaders = Loaders(cfg, self.desc_layout)
        wiring.connect(m, wiring.flipped(self.w), loaders.w)
        wiring.connect(m, wiring.flipped(self.x), loaders.x)
        m.d.comb += [loaders.dsrc.eq(dsrc), loaders.d.eq(d), loaders.take.eq(control.take),
                     loaders.take_pass.eq(control.take_pass),
                     loaders.chunk_go.eq(control.chunk_go), loaders.chunk.eq(control.chunk),
                     loaders.last_chunk.eq(control.last_chunk),
                     loaders.wl_on.eq(control.wl_on), loaders.xl_on.eq(control.xl_on),
                     loaders.kq.eq(kq), loaders.cqkh.eq(cqkh)]
        x_start, x_done = loaders.x_start, loaders.x_done
        m.d.comb += [macs.w_addr.eq(loaders.w_addr), macs.w_data.eq(loaders.w_data),
                     macs.w_hit.eq(loaders.w_hit)]
        m.d.comb += [x for c in range(MC) for x in (macs.f_addr[c].eq(loaders.f_addr[c]),
                                                     macs.f_data[c].eq(loaders.f_data[c]),
                                                     macs.f_en[c].eq(loaders.f_en[c]))]

        # ---------------------------------------------------------------- main FSM
        m.d.comb += [control.x_start.eq(x_start), control.x_done.eq(x_done),
                     control.issuing.eq(issuing), control.stream_busy.eq(st_busy)]
        # the FSM's transition into COMPUTE: the issue stage starts the chunk's first pass
        with m.If(x_done):
            m.d.sync += [issuing.eq(1), setup.eq(1), sk.eq(0), sk_oh.eq(1),
                         sk_first.eq(1),
                         e.eq(0), wblk[0].eq(0), cb[0].eq(0), pd_L.eq(0), zL.eq(0), L_gt1.eq(0)]
            m.d.sync += [x.eq(0) for x in pd_F + zF + F_gt1]
        # The compute phase ends when nothing issues and the MAC pipeline, the captures and
        # the drain are empty.  Their valid bits and flags are chains of registers, each
        # loaded unconditionally, so "empty" is registered one clock ahead from their inputs
        # (keep these in step with the assignments of i_act, the pipeline stages' v, pending,
        # wa_v, wb_v and wc_v above): pipe_idle = none of i_act and the stages' v;
        # drain_idle = none of pending, wa_v, wb_v, wc_v (reset: all of them are 0).
        m.d.comb += [
            control.pipe_idle_n.eq(~_any(act[g] & adv for g in range(NG)) & macs.idle),
            control.drain_idle_n.eq(drain.idle_n)]
        m.d.comb += [streamer.stat_take.eq(control.stat_take),
                     streamer.in_handoff.eq(control.in_handoff)]
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
                  "protocol": "valid/ready stream, per chunk B x icq x H x W features, "
                              "C order"},
            "o": {"format": f"int{cfg.acc_width}",
                  "protocol": "valid/ready stream, B x Oc x Ho x Wo exact sums per layer, "
                              "C order"},
            "s": {"format": None, "protocol": "valid/ready stream, per layer: busy MAC-cycles "
                  "(bits 0..47), compute cycles (bits 48..79)"},
        }

    def manifest_extra(self) -> dict:
        return {"descriptor": [{"name": n, "width": w} for n, w in descriptor_fields(self.cfg)],
                "array": {"rows": self.cfg.rows, "cols": self.cfg.cols,
                          "max_groups": self.cfg.max_groups}}
