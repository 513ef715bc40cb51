# SPDX-License-Identifier: Apache-2.0
"""One copy (a group of ``R`` rows) of the conv array's issue stage: its beat counters,
loop flags and bank offsets (see :mod:`hdl.conv.array`)."""

from types import SimpleNamespace

from amaranth.hdl import Module, Mux
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from gen.conv import ConvConfig
from hdl.conv._util import _S, _bits, _Only
from hdl.conv.box import box_fields
from hdl.conv.layouts import ISSUE_CONSTS

__all__ = ["Copy"]

# the beat's next-box fields a copy reads when it enters a tile
_NEXT_BOX = ("kyz", "kxz", "kym0", "kxm0")


class Copy(wiring.Component):
    """Copy ``index`` of the issue stage: one beat per clock while active and the issue
    stage advances, in <kernel column, input channel, kernel row> order over the tile's box,
    tiles of a block, then blocks of the pass.

    Copy 0 starts in the pass's last set-up clock (``start``); copy ``g >= 1`` starts
    ``g * dq`` beats later (``start``), and while idle keeps loading the start values of
    the next copy to start (``k.sgs``, ``k.sgoc``, ``k.wpass``, ``k.cbpass``), so that its
    start only sets ``act``.  "The next beat is the last of the tile" is predicted one and
    two beats ahead (``last_k``, ``lkn``) from registered loop flags, so that no compare
    sits behind the stall.

    Parameters
    ----------
    cfg : :class:`gen.conv.ConvConfig`
    index : int
        The copy ``g`` (0 .. ``max_groups - 1``).
    desc_layout : :class:`amaranth.lib.data.StructLayout`
    pass_layout : :class:`amaranth.lib.data.StructLayout`
        The pass registers (:func:`hdl.conv.layouts.pass_regs_layout`).

    Members
    -------
    adv : In(3)
        Three replicas of the stall's ``adv``: loop counters and feature offsets; weight and
        output offsets; tile and block state.
    start : In(1)
        The copy starts in this clock (copy 0: the last set-up clock).
    clear : In(1)
        Copy 0: the chunk's compute phase starts (the block offsets ``wblk``, ``cb`` clear).
    stp : In(1)
        Copy ``g >= 1``: it starts if the issue stage advances (``lkx`` of its first beat).
    d : In(desc_layout)
        The descriptor register (``hwp``, ``kh``, ``wp``).
    cp : In(pass_layout)
        The pass registers (``r``, ``noc``).
    k : In(:data:`hdl.conv.layouts.ISSUE_CONSTS`)
        Chunk / pass constants and the next copy's start values.
    kq, cqkh : In(24)
        Beats per tile and ``icq * kh`` of the chunk.
    sbox : In(StructLayout(box_fields(cfg))).array(2)
        The tile boxes of both tile parities.
    ibox, cbox, fi_box : In(box), In(box), In(1)
        Copy 0: the box of the block's first tile and of the next one, and which one the
        next tile takes.
    lv : In(cols).array(2)
        Per tile parity the columns' lane-valid bits of this copy.
    act, par, last_k, fk, lkx : Out(1)
        Active; tile parity; this beat is the tile's last / first; the beat after this one
        is the last of a tile and this one is not the copy's very last.
    glt, glb, blkq, ttq : Out(1)
        In the block's last tile; in the pass's last block; the next block is the last; the
        next tile is the block's last.
    done : Out(1)
        This beat is the copy's very last of the pass.
    first : Out(1)
        In the first tile of the first block (``t == 0``, ``blk == 0``).
    foff, waddr : Out(unsigned(FW)), Out(unsigned(WW))
        The beat's feature offset and weight bank address (box offsets included).
    gob : Out(24)
        The output address of the tile.
    lanev : Out(cols)
        Per column: the lane holds a valid window (with ``act``).
    wblk, cb : Out(unsigned(WW)), Out(16)
        The block's weight offset and first output channel.

    Latency/throughput
    ------------------
    All outputs but ``done``, ``first``, ``foff``, ``waddr`` and ``lanev`` are registers;
    one beat per clock.
    """

    def __init__(self, cfg: ConvConfig, index: int, desc_layout: data.StructLayout,
                 pass_layout: data.StructLayout):
        if not isinstance(cfg, ConvConfig):
            raise TypeError(f"cfg must be a ConvConfig, not {cfg!r}")
        if not 0 <= index < cfg.max_groups:
            raise ValueError(f"index must be in 0..{cfg.max_groups - 1}, not {index!r}")
        self.cfg, self.index = cfg, index
        FW, WW = _bits(cfg.feat_depth) + 1, _bits(cfg.weight_depth) + 1
        bx = data.StructLayout(box_fields(cfg))
        super().__init__({
            "adv": In(3), "start": In(1), "clear": In(1), "stp": In(1),
            "d": In(desc_layout), "cp": In(pass_layout), "k": In(ISSUE_CONSTS),
            "kq": In(24), "cqkh": In(24),
            "sbox": In(bx).array(2), "ibox": In(bx), "cbox": In(bx), "fi_box": In(1),
            "lv": In(cfg.cols).array(2),
            "act": Out(1), "par": Out(1), "last_k": Out(1), "fk": Out(1), "lkx": Out(1),
            "glt": Out(1), "glb": Out(1), "blkq": Out(1), "ttq": Out(1), "done": Out(1),
            "first": Out(1), "foff": Out(FW), "waddr": Out(WW), "gob": Out(24),
            "lanev": Out(cfg.cols), "wblk": Out(WW), "cb": Out(16),
        })

    def _registers(self):
        FW, WW = _bits(self.cfg.feat_depth) + 1, _bits(self.cfg.weight_depth) + 1
        widths = {"par": 1, "kx": 8, "ky": 8, "ic": 16, "fx": FW, "fxc": FW, "fo": FW,
                  "wbx": WW, "wbxc": WW, "wo": WW, "t": 24, "blk": 16,
                  "lt": 1, "lb": 1, "ltb": 1, "ttq": 1, "blkq": 1,
                  "wblk": WW, "cb": 16, "gob": 24, "gs": 16, "goc": 24,
                  "wblk_nb": WW, "cb_nb": 16, "gob_nb": 24, "lastk": 1, "fk": 1,
                  "kye": 1, "ice": 1, "kxe": 1, "kyq": 1, "icmq": 1, "kxq": 1,
                  "lkn": 1, "lkx": 1}
        s = {n: _S(w, name=n) for n, w in widths.items()}
        s["act"] = _S(name="act", reset_less=False)
        return SimpleNamespace(**s)

    def elaborate(self, platform):
        m = Module()
        g, k, BX = self.index, self.k, box_fields(self.cfg)
        s = self._registers()
        # the tile's box (by tile parity)
        bx = {f: Mux(s.par, getattr(self.sbox[1], f), getattr(self.sbox[0], f)) for f in BX}
        m.d.comb += [
            self.done.eq(s.act & s.lastk & s.ltb),
            self.foff.eq(s.fo + bx["fbox"]), self.waddr.eq(s.wo + bx["wbox"]),
            self.lanev.eq(s.act.replicate(self.cfg.cols) & Mux(s.par, self.lv[1], self.lv[0])),
            self.first.eq((s.t == 0) & (s.blk == 0)),
            self.act.eq(s.act), self.par.eq(s.par), self.last_k.eq(s.lastk),
            self.fk.eq(s.fk), self.lkx.eq(s.lkx), self.glt.eq(s.lt), self.glb.eq(s.lb),
            self.blkq.eq(s.blkq), self.ttq.eq(s.ttq), self.gob.eq(s.gob),
            self.wblk.eq(s.wblk), self.cb.eq(s.cb),
        ]
        if g == 0:
            self._start_first(m, s)
        else:
            with m.If(self.start):
                m.d.sync += s.act.eq(1)
            with m.If(~s.act):
                m.d.sync += [s.gs.eq(k.sgs), s.goc.eq(k.sgoc)]
        # the box of the copy's next tile: copy 0 writes it now, the others read it
        if g == 0:
            nb = {f: Mux(self.fi_box, getattr(self.ibox, f), getattr(self.cbox, f))
                  for f in _NEXT_BOX}
        else:
            nb = {f: Mux(s.par, getattr(self.sbox[0], f), getattr(self.sbox[1], f))
                  for f in _NEXT_BOX}
        # three enables, each from its own stall replica: offsets and loop counters /
        # flags, weight and output offsets, tile and block state
        parts = ([s.fk, s.lastk, s.lkn, s.lkx, s.kye, s.ice, s.kxe, s.kyq, s.icmq, s.kxq,
                  s.kx, s.ky, s.ic, s.fx, s.fxc, s.fo, s.par],
                 [s.wbx, s.wbxc, s.wo, s.wblk, s.cb, s.gob, s.wblk_nb, s.cb_nb, s.gob_nb],
                 [s.lt, s.lb, s.ltb, s.blkq, s.t, s.ttq, s.blk, s.act])
        # (a copy is active only while the pass issues)
        for j, part in enumerate(parts):
            sync = _Only(m, part)
            with m.If(s.act):
                with m.If(self.adv[j]):
                    self._counters(m, s, sync, bx, nb)
            if g:
                with m.Else():
                    self._idle_loads(s, sync)
        if g == 0:
            with m.If(self.clear):
                m.d.sync += [s.wblk.eq(0), s.cb.eq(0)]
        return m

    # "The next beat is the last" from the loop flags f (kye, ice, kxe, kyq, icmq, kxq;
    # kyz: the tile's kernel box has one row) in each case of the next step: a new kx (ky
    # and ic at their last), a new ic (ky at its last), a new ky.
    def _last_terms(self, f, kyz):
        return {"kx": f["kxq"] & self.k.iccz & kyz, "ic": f["icmq"] & f["kxe"] & kyz,
                "ky": f["kyq"] & f["ice"] & f["kxe"]}

    def _next_last(self, f, kyz):
        t = self._last_terms(f, kyz)
        return Mux(f["kye"], Mux(f["ice"], t["kx"], t["ic"]), t["ky"])

    def _box_flags(self, box):
        """The loop flags of a tile's first beat, from its box."""
        return {"kye": box["kyz"], "ice": self.k.iccz, "kxe": box["kxz"], "kyq": box["kym0"],
                "icmq": self.k.iccm0, "kxq": box["kxm0"]}

    def _lkn_after(self, lk, f, kyz):
        """lkn after a beat that loads last_k = lk and the loop flags f: a tile's first
        beat follows a last one (its last_k is kq1, one-beat tiles)."""
        return Mux(lk, self.k.kq1, self._next_last(f, kyz))

    def _lkn_first(self, box):
        """lkn at a tile's first beat: its flags loaded from box."""
        return self._lkn_after(self.k.kq1, self._box_flags(box), box["kyz"])

    def _lkx_first(self, box, starts=None):
        """lkx at a copy's first beat (that beat is its very last if the copy has one tile,
        block and beat in all); ``starts``: 0 unless the copy is about to start."""
        k = self.k
        lkn = self._lkn_first(box) if starts is None else starts & self._lkn_first(box)
        return lkn & ~(k.kq1 & k.tiles1 & k.count1)

    def _start_first(self, m, s):
        """Copy 0 starts in the pass's last set-up clock: its first tile's state and flags."""
        k, cp = self.k, self.cp
        ibox = {f: getattr(self.ibox, f) for f in _NEXT_BOX}
        with m.If(self.start):
            m.d.sync += [s.act.eq(1), s.par.eq(0), s.fk.eq(1), s.t.eq(0),
                         s.ttq.eq(k.tiles_is2), s.blk.eq(0), s.kx.eq(0), s.lastk.eq(k.kq1),
                         s.lt.eq(k.tiles1), s.lb.eq(k.count1), s.ltb.eq(k.tiles1 & k.count1),
                         s.blkq.eq(k.count_is2),
                         s.ky.eq(0), s.ic.eq(0), s.fx.eq(0), s.fxc.eq(0), s.fo.eq(0),
                         s.wbx.eq(s.wblk), s.wbxc.eq(s.wblk), s.wo.eq(s.wblk),
                         s.gob.eq(s.cb), s.wblk_nb.eq(s.wblk + self.kq),
                         s.cb_nb.eq(s.cb + cp.r), s.gob_nb.eq(s.cb + cp.r),
                         s.gs.eq(0), s.goc.eq(0)]
        with m.If(self.start):                # flags of its first tile
            m.d.sync += [s.kye.eq(ibox["kyz"]), s.ice.eq(k.iccz), s.kxe.eq(ibox["kxz"]),
                         s.kyq.eq(ibox["kym0"]), s.kxq.eq(ibox["kxm0"]),
                         s.icmq.eq(k.iccm0), s.lkn.eq(self._lkn_first(ibox)),
                         s.lkx.eq(self._lkx_first(ibox))]

    def _idle_loads(self, s, sync):
        """An idle copy (g >= 1) keeps loading the start values of the next copy to start,
        so that its start only sets act."""
        k, cp, kq = self.k, self.cp, self.kq
        box0 = {f: getattr(self.sbox[0], f) for f in _NEXT_BOX}
        sync += [s.par.eq(0), s.fk.eq(1), s.t.eq(0), s.ttq.eq(k.tiles_is2),
                 s.lastk.eq(k.kq1),
                 s.kye.eq(box0["kyz"]), s.ice.eq(k.iccz),
                 s.kxe.eq(box0["kxz"]), s.kyq.eq(box0["kym0"]),
                 s.kxq.eq(box0["kxm0"]), s.icmq.eq(k.iccm0),
                 s.lkn.eq(self._lkn_first(box0)),
                 s.lkx.eq(self._lkx_first(box0, self.stp)),
                 s.lt.eq(k.tiles1), s.lb.eq(k.count1), s.ltb.eq(k.tiles1 & k.count1),
                 s.blkq.eq(k.count_is2),
                 s.blk.eq(0), s.kx.eq(0), s.ky.eq(0), s.ic.eq(0),
                 s.fx.eq(k.sgs), s.fxc.eq(k.sgs), s.fo.eq(k.sgs),
                 s.wbx.eq(k.wpass), s.wbxc.eq(k.wpass), s.wo.eq(k.wpass),
                 s.wblk.eq(k.wpass), s.cb.eq(k.cbpass),
                 s.gob.eq(k.sgoc + k.cbpass),
                 s.wblk_nb.eq(k.wpass + kq), s.cb_nb.eq(k.cbpass + cp.r),
                 s.gob_nb.eq(k.sgoc + k.cbpass + cp.r)]

    def _counters(self, m, s, sync, bx, nb):
        """One beat of the copy (the statements of ``sync``'s registers only)."""
        k, d, cp = self.k, self.d, self.cp
        flags = {"kye": s.kye, "ice": s.ice, "kxe": s.kxe, "kyq": s.kyq, "icmq": s.icmq,
                 "kxq": s.kxq}
        f = dict(flags)
        lk = self._last_terms(f, bx["kyz"])        # the next last_k in each case
        # the loop flags after a beat of each case
        after = {"kx": {**f, "kye": bx["kyz"], "kyq": bx["kym0"], "ice": k.iccz,
                        "icmq": k.iccm0, "kxe": s.kxq, "kxq": s.kx == bx["kxm1"]},
                 "ic": {**f, "kye": bx["kyz"], "kyq": bx["kym0"], "ice": s.icmq,
                        "icmq": s.ic == k.iccm1},
                 "ky": {**f, "kye": s.kyq, "kyq": s.ky == bx["kym1"]}}

        def step(new_lk, new_f, kyz, new_ltb):
            # a beat: last_k, the loop flags that change, lkn (two beats ahead), lkx
            nonlocal sync
            new_lkn = self._lkn_after(new_lk, new_f, kyz)
            sync += [s.lastk.eq(new_lk), s.lkn.eq(new_lkn),
                     s.lkx.eq(new_lkn & ~(new_lk & new_ltb))]
            sync += [flags[n].eq(v) for n, v in new_f.items() if v is not f[n]]
        sync += s.fk.eq(s.lastk)
        with m.If(s.lastk):
            step(k.kq1, self._box_flags(nb), nb["kyz"],
                 Mux(s.lt, k.tiles1 & s.blkq, s.ttq & s.lb))
        with m.Elif(s.kye):
            with m.If(s.ice):
                step(lk["kx"], after["kx"], bx["kyz"], s.ltb)
            with m.Else():
                step(lk["ic"], after["ic"], bx["kyz"], s.ltb)
        with m.Else():
            step(lk["ky"], after["ky"], bx["kyz"], s.ltb)
        with m.If(s.lastk):
            sync += [s.kx.eq(0), s.ky.eq(0), s.ic.eq(0), s.fx.eq(s.gs),
                     s.fxc.eq(s.gs), s.fo.eq(s.gs), s.wbx.eq(s.wblk),
                     s.wbxc.eq(s.wblk), s.wo.eq(s.wblk), s.par.eq(~s.par)]
            with m.If(s.lt):
                sync += [s.lt.eq(k.tiles1), s.lb.eq(s.blkq), s.ltb.eq(k.tiles1 & s.blkq),
                         s.blkq.eq(s.blk == k.count3)]
                sync += [s.wbx.eq(s.wblk_nb), s.wbxc.eq(s.wblk_nb), s.wo.eq(s.wblk_nb)]
                sync += [s.t.eq(0), s.ttq.eq(k.tiles_is2), s.blk.eq(s.blk + 1),
                         s.wblk.eq(s.wblk_nb), s.cb.eq(s.cb_nb), s.gob.eq(s.gob_nb),
                         s.wblk_nb.eq(s.wblk_nb + self.kq), s.cb_nb.eq(s.cb_nb + cp.r),
                         s.gob_nb.eq(s.gob_nb + cp.r)]
                with m.If(s.lb):
                    sync += [s.act.eq(0), s.lkx.eq(0)]
            with m.Else():
                sync += [s.t.eq(s.t + 1), s.gob.eq(s.gob + cp.noc),
                         s.lt.eq(s.ttq), s.ltb.eq(s.ttq & s.lb), s.ttq.eq(s.t == k.tiles3)]
        with m.Elif(s.kye):
            sync += s.ky.eq(0)
            with m.If(s.ice):
                sync += [s.ic.eq(0), s.kx.eq(s.kx + 1), s.fx.eq(s.fx + 1),
                         s.fxc.eq(s.fx + 1), s.fo.eq(s.fx + 1),
                         s.wbx.eq(s.wbx + self.cqkh), s.wbxc.eq(s.wbx + self.cqkh),
                         s.wo.eq(s.wbx + self.cqkh)]
            with m.Else():
                sync += [s.ic.eq(s.ic + 1), s.fxc.eq(s.fxc + d.hwp),
                         s.fo.eq(s.fxc + d.hwp), s.wbxc.eq(s.wbxc + d.kh),
                         s.wo.eq(s.wbxc + d.kh)]
        with m.Else():
            sync += [s.ky.eq(s.ky + 1), s.fo.eq(s.fo + d.wp), s.wo.eq(s.wo + 1)]
