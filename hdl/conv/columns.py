# SPDX-License-Identifier: Apache-2.0
"""The columns' window groups of the conv array: the set-up walk, each column's state
(which window group its next tile computes), the tile slots and the tile boxes (see
:mod:`hdl.conv.array`)."""

from types import SimpleNamespace

from amaranth.hdl import Cat, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from gen.conv import ConvConfig
from hdl.conv._util import _S, _bits, _sel
from hdl.conv.box import TileBox, box_fields

__all__ = ["Columns"]

# The wrap decisions as sign bits: the states that advance (pinit, cur) also keep the
# distances to the thresholds, djn = jn - thr, doy<j> = oy - thi<j> (signed, 17 bits, exact),
# advanced by the same (signed) steps as jn and oy, so that no compare sits in the
# column-advance loop.  Lane validity likewise: dimg = img - B, dwo<g> = jn - (Wo - g), lane g
# valid iff both are negative.  The three wrap distances are kept twice (the twins sjn, soy0,
# soy1 advance exactly like djn, doy0, doy1): the offsets' wrap selects come from the first,
# the other fields' from the twins, so that each sign bit drives half a column state's muxes.
_TWIN = {"djn": "sjn", "doy0": "soy0", "doy1": "soy1"}
_BY_TWIN = ("img", "oy", "ty", "jn", "jns", "base", "sjn", "soy0", "soy1")


class Columns(wiring.Component):
    """Which window group each column's tiles compute, and the tile boxes.

    Column ``c`` of tile ``t`` takes window group ``t * cols + c`` of the pass layout.  In
    the pass's set-up a walk steps through the window groups one per clock (``n`` windows
    right, wrapping to the next output row and image); column ``c`` loads its first group
    ``pinit[c]`` in set-up clock ``c + 1``.  Each time copy 0 enters a tile (``go_*``) every
    column writes its state into the slot of the tile's parity (``tgt``) and advances its
    state ``cur[c]`` by one tile (``cols`` window groups: ``ai`` images, ``a`` rows and ``b``
    groups, with at most one row wrap and one image wrap, the four sums computed in
    parallel from per-pass constants and then selected).

    Parameters
    ----------
    cfg : :class:`gen.conv.ConvConfig`
    desc_layout, pass_layout : :class:`amaranth.lib.data.StructLayout`
        The descriptor and the pass registers (:func:`hdl.conv.layouts.pass_regs_layout`).

    Members
    -------
    d : In(desc_layout)
        The descriptor register.
    cp : In(pass_layout)
        The pass registers (loaded in the pass's first set-up clock).
    e : In(range(max_passes + 1))
        The running pass's index.
    sk_first : In(1)
        The pass's first set-up clock (the walk restarts).
    pinit_load : In(cols)
        Column ``c`` loads its first window group from the walk (set-up clock ``c + 1``).
    cqkh : In(24)
        ``icq * kh`` of the chunk (for the tile boxes).
    fi_col, fi_box : In(cols), In(1)
        The next tile is the block's first (take ``pinit``), per column / for the box.
    go_box, go_slot, go_col : In(1), In(cols), In(cols)
        Copy 0 enters a tile (box, per column slots, per column states).
    adv_box, adv_slot, adv_col : In(1), In(cols), In(cols)
        Replicas of the stall's ``adv`` for the same loads.
    tgt : In(1)
        The slot parity the entering tile takes.
    base : Out(unsigned(FW)).array(cols, 2)
        Per column and slot parity the window base address in the feature bank.
    lv : Out(cols).array(max_groups, 2)
        Per copy and slot parity the columns' lane-valid bits (image < B, window < Wo).
    sbox : Out(StructLayout(box_fields(cfg))).array(2)
        The tile box of each slot parity.
    ibox, cbox : Out(box)
        The box of the block's first tile and of the next tile (:class:`TileBox`).

    Latency/throughput
    ------------------
    The per-pass constants are stable from the fourth set-up clock; ``pinit`` and its
    advance by the last set-up clock (``cols + 5``); one tile advance per clock.
    """

    def __init__(self, cfg: ConvConfig, desc_layout: data.StructLayout,
                 pass_layout: data.StructLayout):
        if not isinstance(cfg, ConvConfig):
            raise TypeError(f"cfg must be a ConvConfig, not {cfg!r}")
        self.cfg, self.desc_layout = cfg, desc_layout
        MC, NG = cfg.cols, cfg.max_groups
        FW = _bits(cfg.feat_depth) + 1
        bx = data.StructLayout(box_fields(cfg))
        super().__init__({
            "d": In(desc_layout), "cp": In(pass_layout), "e": In(range(cfg.max_passes + 1)),
            "sk_first": In(1), "pinit_load": In(MC), "cqkh": In(24),
            "fi_col": In(MC), "fi_box": In(1),
            "go_box": In(1), "go_slot": In(MC), "go_col": In(MC),
            "adv_box": In(1), "adv_slot": In(MC), "adv_col": In(MC), "tgt": In(1),
            "base": Out(FW).array(MC, 2), "lv": Out(MC).array(NG, 2),
            "sbox": Out(bx).array(2), "ibox": Out(bx), "cbox": Out(bx),
        })

    def _offsets(self):
        return {"djn": "jn", "doy0": "oy", "doy1": "oy", "dimg": "img",
                **{f"dwo{g}": "jn" for g in range(self.cfg.max_groups)},
                "sjn": "jn", "soy0": "oy", "soy1": "oy"}

    def _cstate(self, name):
        FW = _bits(self.cfg.feat_depth) + 1
        return {"img": _S(16, name=f"{name}_img"),
                "oy": _S(16, name=f"{name}_oy"), "ty": _S(16, name=f"{name}_ty"),
                "jn": _S(16, name=f"{name}_jn"), "jns": _S(24, name=f"{name}_jns"),
                "base": _S(FW, name=f"{name}_base")}

    def _with_offsets(self, st, name):
        st.update({o: _S(signed(17), name=f"{name}_{o}") for o in self._offsets()})
        return st

    def elaborate(self, platform):
        m = Module()
        cfg, d = self.cfg, self.d
        MC, NG = cfg.cols, cfg.max_groups
        pinit = [self._cstate(f"pinit{c}") for c in range(MC)]
        ws = self._walk(m, pinit)
        k = self._constants(m)
        pinit_adv, pinit_lv = self._pinit(m, pinit, k)
        cur = [self._with_offsets(self._cstate(f"cur{c}"), f"cur{c}") for c in range(MC)]
        FW = _bits(cfg.feat_depth) + 1
        SL = {"base": FW, "img": 16, "jn": 16, "lv": NG}   # lv: lane g valid (img < B, jn + g < Wo)
        slot = [[{f: _S(wd, name=f"slot{p}_{c}_{f}") for f, wd in SL.items()}
                 for c in range(MC)] for p in range(2)]
        BX = box_fields(cfg)
        sbox = [{f: _S(wd, name=f"box{p}_{f}") for f, wd in BX.items()} for p in range(2)]
        fi_col = self.fi_col
        src = [{f: Mux(fi_col[c], pinit[c][f], cur[c][f]) for f in ws} for c in range(MC)]
        # lane-valid bits of a slot (image < B, window jn + g < Wo): for the block's first
        # tile (pinit, static during the pass) compares against Wo - g, registered; for the
        # next tile (cur) the sign bits of its offsets
        for c in range(MC):
            cur_lv = Cat(*[cur[c]["dimg"][-1] & cur[c][f"dwo{g}"][-1] for g in range(NG)])
            src[c]["lv"] = Mux(fi_col[c], pinit_lv[c], cur_lv)

        m.submodules.tile_box = tile_box = TileBox(cfg, self.desc_layout)
        m.d.comb += [tile_box.d.eq(d), tile_box.n.eq(self.cp.n), tile_box.cqkh.eq(self.cqkh)]
        for f in ("img", "jn", "ty", "jns"):
            m.d.comb += getattr(tile_box.walk, f).eq(ws[f])
            m.d.comb += [getattr(tile_box.cur[c], f).eq(cur[c][f]) for c in range(MC)]
        m.d.comb += tile_box.walk_load.eq(self.pinit_load)
        cbox = {f: getattr(tile_box.cbox, f) for f in BX}
        ibox = {f: getattr(tile_box.ibox, f) for f in BX}

        # copy 0 enters a tile: per column its own enable (own stall replica), so that no
        # single net reaches every column's slot and state registers
        tgt = self.tgt
        with m.If(self.adv_box & self.go_box):
            for p in range(2):
                with m.If(tgt == p):
                    m.d.sync += [sbox[p][f].eq(Mux(self.fi_box, ibox[f], cbox[f])) for f in BX]
        for c in range(MC):
            with m.If(self.adv_slot[c] & self.go_slot[c]):
                for p in range(2):
                    with m.If(tgt == p):
                        m.d.sync += [slot[p][c][f].eq(src[c][f]) for f in SL]
            with m.If(self.adv_col[c] & self.go_col[c]):
                nxt = self._advance(k, cur[c])
                m.d.sync += [cur[c][f].eq(Mux(fi_col[c], pinit_adv[c][f], nxt[f]))
                             for f in cur[c]]

        m.d.comb += [self.base[c][p].eq(slot[p][c]["base"]) for c in range(MC) for p in range(2)]
        m.d.comb += [self.lv[g][p].eq(Cat(*[slot[p][c]["lv"][g] for c in range(MC)]))
                     for g in range(NG) for p in range(2)]
        for p in range(2):
            m.d.comb += [getattr(self.sbox[p], f).eq(sbox[p][f]) for f in BX]
        m.d.comb += [self.ibox.eq(tile_box.ibox), self.cbox.eq(tile_box.cbox)]
        return m

    def _walk(self, m, pinit):
        """The set-up walk over the pass's window groups (each column's first group loads
        into ``pinit``); returns its state."""
        d, cp, NP = self.d, self.cp, self.cfg.max_passes
        ws = self._cstate("walk")
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
        # column c's first window group of the pass, in set-up clock c + 1
        for c in range(self.cfg.cols):
            with m.If(self.pinit_load[c]):
                m.d.sync += [pinit[c][f].eq(ws[f]) for f in ws if f != "base"]
                m.d.sync += pinit[c]["base"].eq(ws_rb + ws["jns"])
        with m.If(self.sk_first):
            m.d.sync += [v.eq(0) for v in ws.values()] + [ws_rb.eq(0)]
            m.d.sync += [walk_nthr.eq(_sel(pnthr, self.e)), walk_djn.eq(_sel(pnthr, self.e)),
                         walk_olast.eq(walk_ho1), walk_oyr.eq(walk_hom1)]
        # The walk steps in every clock after the pass's first set-up clock (sk_first, its
        # reset), running on past the set-up: only the set-up's pinit loads (clocks 1 .. cols)
        # read it, and those see the same steps as a walk enabled by the set-up alone.
        with m.Else():
            # one window group to the right, wrapping to the next output row
            jn1 = ws["jn"] + cp.n
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
                m.d.sync += [ws["jn"].eq(jn1), ws["jns"].eq(ws["jns"] + cp.ns),
                             walk_djn.eq(walk_djn + cp.n)]
        return ws

    def _constants(self, m):
        """The per-pass advance constants: thresholds thr (row wrap iff jn >= wvn - bn),
        thi (image wrap iff oy >= thi), the steps k0 / k1 (no image wrap, without / with a
        row wrap) and k0i / k1i (with an image wrap), and Wo - g per lane."""
        d, cp, NG = self.d, self.cp, self.cfg.max_groups
        FW = _bits(self.cfg.feat_depth) + 1
        DIMW = (self.cfg.max_dim + 64).bit_length() + 1
        offs = self._offsets()
        thr = _S(16, name="adv_thr")                       # wrap iff jn >= wvn - bn
        thi = [_S(16, name=f"adv_thi{j}") for j in range(2)]   # image wrap iff oy >= thi
        tmpl = self._cstate("t")
        k0 = {f: Signal.like(v, name=f"adv_k0_{f}") for f, v in tmpl.items()}
        k1 = {f: Signal.like(v, name=f"adv_k1_{f}") for f, v in tmpl.items()}
        k0i = {f: Signal.like(v, name=f"adv_k0i_{f}") for f, v in tmpl.items()}
        k1i = {f: Signal.like(v, name=f"adv_k1i_{f}") for f, v in tmpl.items()}
        for kk in (k0, k1, k0i, k1i):
            kk.update({o: _S(signed(17), name=f"{kk['jn'].name[:-3]}_{o}") for o in offs})
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
            for o in ("djn", _TWIN["djn"]):
                m.d.sync += kk[o].eq(jn_step)
            for o in ("doy0", "doy1", _TWIN["doy0"], _TWIN["doy1"]):
                m.d.sync += kk[o].eq(oy_step)
            m.d.sync += kk["dimg"].eq(img_step)
            m.d.sync += [kk[f"dwo{g}"].eq(jn_step) for g in range(NG)]
        return SimpleNamespace(thr=thr, thi=thi, k0=k0, k1=k1, k0i=k0i, k1i=k1i, lv_wo=lv_wo)

    @staticmethod
    def _wrap_flags(dist):
        """An advance's row wrap (jn >= thr) and its image wrap with (oy >= thi[1]) and
        without (oy >= thi[0]) a row wrap, from the wrap distances' sign bits."""
        return ~dist["djn"][-1], ~dist["doy0"][-1], ~dist["doy1"][-1]

    def _advance(self, k, cs, flags=None):
        """The column state after one tile; ``flags``: its wraps, if registered.  Each field
        is a select on the row wrap of two selects on the image wraps (no decode of the
        image wrap before the muxes)."""
        out = {}
        for f in cs:
            wrap, iw0, iw1 = flags if flags is not None else self._wrap_flags(
                {o: cs[_TWIN[o] if f in _BY_TWIN else o] for o in _TWIN})
            out[f] = Mux(wrap, Mux(iw1, cs[f] + k.k1i[f], cs[f] + k.k1[f]),
                         Mux(iw0, cs[f] + k.k0i[f], cs[f] + k.k0[f]))
        return out

    def _pinit(self, m, pinit, k):
        """Each column's first window group of the pass (loaded by the walk), its offsets,
        lane-valid bits and its advance by one tile."""
        d, MC, NG = self.d, self.cfg.cols, self.cfg.max_groups
        pinit_adv = [self._with_offsets(self._cstate(f"pinit_adv{c}"), f"pinit_adv{c}")
                     for c in range(MC)]
        # pinit's offsets, registered from pinit and the thresholds (pinit[c] loads at set-up
        # clock c + 1, thr / thi are valid from clock 2: the offsets from c + 3), its wraps
        # registered from them (from c + 4), and pinit_adv (from c + 5, by the last set-up
        # clock cols + 5 that uses it)
        for c in range(MC):
            pin = dict(pinit[c])
            self._with_offsets(pin, f"pinit{c}")
            dists = {"djn": pinit[c]["jn"] - k.thr, "doy0": pinit[c]["oy"] - k.thi[0],
                     "doy1": pinit[c]["oy"] - k.thi[1]}
            m.d.sync += [pin[o].eq(v) for o, v in dists.items()]
            m.d.sync += [pin[_TWIN[o]].eq(v) for o, v in dists.items()]
            m.d.sync += pin["dimg"].eq(pinit[c]["img"] - d.batch)
            m.d.sync += [pin[f"dwo{g}"].eq(pinit[c]["jn"] - k.lv_wo[g]) for g in range(NG)]
            pwr = tuple(_S(name=f"pinit{c}_{f}") for f in ("wrap", "iw0", "iw1"))
            m.d.sync += [r.eq(v) for r, v in zip(pwr, self._wrap_flags(pin))]
            nxt = self._advance(k, pin, pwr)
            m.d.sync += [pinit_adv[c][f].eq(nxt[f]) for f in nxt]

        def lane_valid(st):
            return Cat(*[(st["img"] < d.batch) & (st["jn"] < k.lv_wo[g]) for g in range(NG)])
        pinit_lv = [_S(NG, name=f"pinit{c}_lv") for c in range(MC)]
        m.d.sync += [pinit_lv[c].eq(lane_valid(pinit[c])) for c in range(MC)]
        return pinit_adv, pinit_lv
