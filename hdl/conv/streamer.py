# SPDX-License-Identifier: Apache-2.0
"""The output side of the conv array: the streamer that walks a finished layer's output bank
in stream order, and the small output FIFO in front of the ``o`` port."""

from types import SimpleNamespace

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from gen.conv import ConvConfig
from hdl.conv._util import _S, _bits, _replicate, _sel
from hdl.lib.fifo import Queue

__all__ = ["Streamer", "OutputFifo", "OUT_FIFO_DEPTH"]

OUT_FIFO_DEPTH = 5


def _step_flags(f, flat):
    """What a step does (the F flags) from the position's flags ``f``."""
    chend = f["rowend"] & f["lastrow"]
    grp_ = ~chend & (f["glast"] | f["rowend"])
    iend = chend & f["olast"]
    return {"chend": chend, "grp": grp_, "cop": ~chend & ~grp_,
            "wrap": grp_ & (f["clast"] | (~flat & f["rowend"])),
            "newe": chend & f["olastc"], "iend": iend,
            "imgnx": iend & ~f["imglast"], "lend": iend & f["imglast"]}


class Streamer(wiring.Component):
    """Walks the output bank of the last finished layer in stream order, one word per step.

    The position is (image, channel, oy, ox) of the layer held in ``d``, mapped to a slot
    column and a slot address of the output banks (:func:`gen.conv.pass_layout`).  A step
    only enables registers: what it does is decided by registered flags.  The streamer
    also owns the bank swap: at the *handoff* (the FSM in HANDOFF with the streamer idle,
    registered from the next state) the compute side's bank (``own``) flips and the
    streamer loads the layer just computed.

    Parameters
    ----------
    cfg : :class:`gen.conv.ConvConfig`
    desc_layout : :class:`amaranth.lib.data.StructLayout`
        The descriptor layout (:func:`gen.conv.descriptor_fields`).

    Members
    -------
    d : In(desc_layout)
        The layer descriptor register (stable from IDLE to the next descriptor).
    stat_take : In(1)
        The FSM is in STAT and the stats word is taken this clock.
    in_handoff : In(1)
        The FSM is in HANDOFF.
    room : In(1)
        The output FIFO has room for the word of one more step (:class:`OutputFifo`).
    busy : Out(1)
        A layer is being streamed (register, reset 0).
    step : Out(1)
        This clock steps (a register computed a clock ahead from ``busy`` and ``room``).
    col : Out(range(cols))
        Slot column of the current position.
    bank : Out(1)
        The output bank being streamed (never the one computed into).
    addr : Out(24)
        Slot address of the current position (the banks' read address of port 0).
    own : Out(2)
        Bit ``b`` set while bank ``b`` is the one computed into (reset: bank 0).

    Latency/throughput
    ------------------
    One step per clock while ``room`` holds; the word of a step is on the banks' read
    ports one clock after it.  The handoff takes one clock once ``busy`` is low.
    """

    def __init__(self, cfg: ConvConfig, desc_layout: data.StructLayout):
        if not isinstance(cfg, ConvConfig):
            raise TypeError(f"cfg must be a ConvConfig, not {cfg!r}")
        self.cfg = cfg
        super().__init__({
            "d": In(desc_layout),
            "stat_take": In(1), "in_handoff": In(1), "room": In(1),
            "busy": Out(1), "step": Out(1),
            "col": Out(range(cfg.cols) if cfg.cols > 1 else 1),
            "bank": Out(1), "addr": Out(24), "own": Out(2),
        })

    def elaborate(self, platform):
        m = Module()
        s = self._registers()
        self._step(m, s)
        self._control(m, s)
        self._pass_table(m, s)
        return m

    def _registers(self):
        MC, NP = self.cfg.cols, self.cfg.max_passes
        DIMW = (self.cfg.max_dim + 64).bit_length() + 1
        # The streamer walks the output positions of the bank filled by the last layer in
        # stream order (image, channel, oy, ox), one per step.  A step only enables its
        # registers (st_step is a clock enable): what a step does is decided by registered
        # flags, and every next value and flag is computed from registers, assuming a step.
        st_busy, st_sel = _S(reset_less=False, name="st_busy"), _S(name="st_sel")
        st_flat = _S(name="st_flat")
        sel = _S(reset_less=False)               # output buffer written by the compute side
        # the handoff (the FSM's HANDOFF state with the streamer idle: the banks swap, the
        # streamer loads the layer) and the step, each a register in copies for fan-out
        # (computed from the next state at the end, see _replicate): [0] the streamer's
        # position and flags, [1] (handoff) its per-pass values, the last one the rest
        handoff = [_S(name=f"handoff{k}", reset_less=False) for k in range(3)]
        st_go = [_S(name=f"st_go{k}", reset_less=False) for k in range(2)]
        st_step = st_go[1]
        go_n = Signal(name="st_go_n")          # the next clock steps
        nx_busy = Signal(name="nx_busy")
        # kinds of step as registered enables (go & F[...], from the next state): a new
        # image, a new pass (or image), a new channel; they enable the registers that change
        # only then (many, with the per-pass values)
        K = {k: _S(name=f"st_go_{k}", reset_less=False) for k in ("img", "pass", "ch")}
        # per pass, loaded at the handoff: n - 1, n * Oc, channels - 1, and the flags
        # n == 1, n == 2, channels == 1, channels == 2
        st_pn = [_S(4, name=f"st_pn{i}") for i in range(NP)]
        st_pnoc = [_S(24, name=f"st_pnoc{i}") for i in range(NP)]
        st_pcr = [_S(17, name=f"st_pcr{i}") for i in range(NP)]
        st_pnz, st_pn2 = ([_S(name=f"st_pn{k}_{i}") for i in range(NP)] for k in ("z", "2"))
        st_pc1, st_pc2 = ([_S(name=f"st_pc{k}_{i}") for i in range(NP)] for k in ("1", "2"))
        # layer constants: wo - 1, ho - 1, oc - 1, oc and the flags wo == 1, wo == 2, ...
        st_wo1, st_ho1 = _S(DIMW, name="st_wo1"), _S(DIMW, name="st_ho1")
        st_oc1, st_oc = _S(16, name="st_oc1"), _S(16, name="st_oc")
        lc = {k: _S(name=f"st_{k}") for k in ("wo_1", "wo_2", "ho_1", "ho_2", "oc_1", "oc_2")}
        # batch: per pass, the slot position where the current image starts (column sI_c,
        # address sI_a = tile * n * Oc) and where the next one starts (sN_c, sN_a); the
        # flags "column == cols - 1" of both (sIl, sNl)
        CW = max(1, (MC - 1).bit_length())
        sI_c = [_S(CW, name=f"st_ic{i}") for i in range(NP)]
        sI_a = [_S(24, name=f"st_ia{i}") for i in range(NP)]
        sN_c = [_S(CW, name=f"st_nc{i}") for i in range(NP)]
        sN_a = [_S(24, name=f"st_na{i}") for i in range(NP)]
        sIl = [_S(name=f"st_il{i}") for i in range(NP)]
        sIl_e, sIl_e1 = _S(name="st_il_e"), _S(name="st_il_e1")     # sIl[e], sIl[e + 1]
        sNl = [_S(name=f"st_nl{i}") for i in range(NP)]
        st_pib = [_S(CW, name=f"st_pib{i}") for i in range(NP)]
        st_pia = [_S(24, name=f"st_pia{i}") for i in range(NP)]
        # the next image start's column carry (sN_c + sib >= cols) registered, and the
        # address step with a carry (sia + n * Oc)
        sNcy = [_S(name=f"st_ncy{i}") for i in range(NP)]
        st_pic = [_S(24, name=f"st_pic{i}") for i in range(NP)]
        # stX[i] = sI_a[i] + o + 1: the address of the next output channel in pass i, with
        # the sums stXo = stX + Oc and stXw = stX + n * Oc; sNo0 / sNw0 the same sums of
        # sN_a[0] (the address sums below then add only registers)
        stX = [_S(24, name=f"st_x{i}") for i in range(NP)]
        stXo = [_S(24, name=f"st_xo{i}") for i in range(NP)]
        stXw = [_S(24, name=f"st_xw{i}") for i in range(NP)]
        sNo0, sNw0 = _S(24, name="st_no0"), _S(24, name="st_nw0")
        # The position: slot column c, pass e (and e + 1), the pass's n - 1 (and n == 1,
        # n == 2) and n * Oc, the slot address (st_addr) and its window group's base
        # (st_base), with the sums st_basew = st_base + n * Oc and st_addroc = st_addr + Oc
        # kept in registers; the other coordinates as down-counters, what is left of the row
        # (oxr = wo - 1 - ox), of the map (oyr), of the group's copies (gr = n - 1 - g), of
        # the pass's channels (cr), of the image's channels (or) and of the batch (ir), each
        # with a registered flag "== 1" (predicted with a compare against 2), so that every
        # end flag is predicted from flags.
        st = {"c": _S(range(MC) if MC > 1 else 1, name="st_c"),
              "e": _S(range(NP + 1), name="st_e"), "e1": _S(range(NP + 2), name="st_e1"),
              "n": _S(4, name="st_n"), "nz": _S(name="st_nz"), "n1": _S(name="st_n1"),
              "noc": _S(24, name="st_noc"),
              "base": _S(24, name="st_base"), "addr": _S(24, name="st_addr"),
              "basew": _S(24, name="st_basew"), "addroc": _S(24, name="st_addroc"),
              "oxr": _S(DIMW, name="st_oxr"), "oyr": _S(DIMW, name="st_oyr"),
              "gr": _S(4, name="st_gr"), "cr": _S(17, name="st_cr"),
              "or": _S(16, name="st_or"), "ir": _S(16, name="st_ir"),
              "ox1": _S(name="st_ox1"), "oy1": _S(name="st_oy1"), "g1": _S(name="st_g1"),
              "cr1": _S(name="st_cr1"), "or1": _S(name="st_or1"), "ir1": _S(name="st_ir1")}
        st_c, st_e, st_e1 = st["c"], st["e"], st["e1"]
        # registered flags of the position: ox == wo - 1, oy == ho - 1, g == n - 1,
        # c == cols - 1, the pass's last channel, the image's last channel, the last image
        fl = {k: _S(name=f"st_f{k}") for k in ("rowend", "lastrow", "glast", "clast",
                                                   "olastc", "olast", "imglast")}
        # what the next step does, as registered flags (from the flags above): F["chend"] a
        # new output channel, F["grp"] the next window group, F["cop"] the next copy,
        # F["wrap"] back to column 0, F["newe"] the next pass, F["iend"] the image's end,
        # F["imgnx"] the next image, F["lend"] the layer's end
        F = {k: _S(name=f"st_F{k}") for k in ("chend", "grp", "cop", "wrap", "newe",
                                                  "iend", "imgnx", "lend")}

        return SimpleNamespace(**{k: v for k, v in locals().items() if k != "self"})

    def _step(self, m, s):
        """The position after a handoff or a step, and the step flags."""
        d, MC, NP = self.d, self.cfg.cols, self.cfg.max_passes
        st, fl, F, K, lc, handoff, st_go = s.st, s.fl, s.F, s.K, s.lc, s.handoff, s.st_go
        st_c, st_e, st_e1, go_n, st_flat = s.st_c, s.st_e, s.st_e1, s.go_n, s.st_flat
        st_pn, st_pnz, st_pn2, st_pnoc = s.st_pn, s.st_pnz, s.st_pn2, s.st_pnoc
        st_pcr, st_pc1, st_pc2 = s.st_pcr, s.st_pc1, s.st_pc2
        stX, stXo, stXw, sNo0, sNw0 = s.stX, s.stXo, s.stXw, s.sNo0, s.sNw0
        sI_c, sN_c, sN_a, sIl, sNl, sIl_e, sIl_e1 = (s.sI_c, s.sN_c, s.sN_a, s.sIl, s.sNl,
                                                     s.sIl_e, s.sIl_e1)
        st_wo1, st_ho1, st_oc1, st_oc = s.st_wo1, s.st_ho1, s.st_oc1, s.st_oc
        step_flags = _step_flags
        # the state a handoff loads (the first position of the layer) ...
        hv = {"c": 0, "e": 0, "e1": 1, "n": d.p0_n - 1, "nz": d.p0_n == 1, "n1": d.p0_n == 2,
              "noc": d.p0_noc, "base": 0, "addr": 0, "basew": d.p0_noc, "addroc": d.oc,
              "oxr": d.wo - 1, "oyr": d.ho - 1, "gr": d.p0_n - 1, "cr": d.p0_cend - 1,
              "or": d.oc - 1, "ir": d.batch - 1,
              "ox1": d.wo == 2, "oy1": d.ho == 2, "g1": d.p0_n == 2, "cr1": d.p0_cend == 2,
              "or1": d.oc == 2, "ir1": d.batch == 2}
        hfl = {"rowend": d.wo == 1, "lastrow": d.ho == 1, "glast": d.p0_n == 1,
               "clast": Const(MC == 1), "olastc": d.p0_cend == 1, "olast": d.oc == 1,
               "imglast": d.batch == 1}
        # ... and the state after a step
        chend, grp, wrap, newe, imgnx = (F[k] for k in ("chend", "grp", "wrap", "newe",
                                                         "imgnx"))
        rowend = fl["rowend"]

        # the next pass's (e + 1) per-pass values, in registers (nxp)
        EB = _bits(NP - 1)           # (pass indices beyond the last pass are never used)
        pvals = {"n": st_pn, "nz": st_pnz, "n2": st_pn2, "noc": st_pnoc, "pcr": st_pcr,
                 "pc1": st_pc1, "pc2": st_pc2}
        nxp = {k: Signal.like(v[0], name=f"st_nx{k}") for k, v in pvals.items()}

        def by_pass(k, cur):         # a per-pass value after a step: pass 0 / e + 1 / same
            return Mux(imgnx, pvals[k][0], Mux(newe, nxp[k], cur))

        def new_ch(vals):            # at a new channel: pass e + 1's value or pass e's
            return Mux(newe, _sel(vals, st_e1[:EB]), _sel(vals, st_e[:EB]))
        ch_at = new_ch(stX)
        av = {
            "c": Mux(imgnx, sN_c[0], Mux(chend, new_ch(sI_c), Mux(wrap, 0, Mux(grp, st_c + 1,
                                                                                st_c)))),
            "e": Mux(imgnx, 0, Mux(newe, st_e1, st_e)),
            "e1": Mux(imgnx, 1, Mux(newe, st_e1 + 1, st_e1)),
            "n": by_pass("n", st["n"]), "nz": by_pass("nz", st["nz"]),
            "n1": by_pass("n2", st["n1"]), "noc": by_pass("noc", st["noc"]),
            "base": Mux(imgnx, sN_a[0], Mux(chend, ch_at, Mux(wrap, st["basew"],
                                                                st["base"]))),
            "addr": Mux(imgnx, sN_a[0], Mux(chend, ch_at, Mux(
                wrap, st["basew"], Mux(grp, st["base"], st["addroc"])))),
            "basew": Mux(imgnx, sNw0, Mux(chend, new_ch(stXw), Mux(
                wrap, st["basew"] + st["noc"], st["basew"]))),
            "addroc": Mux(imgnx, sNo0, Mux(chend, new_ch(stXo), Mux(
                wrap, st["basew"] + st_oc, Mux(grp, st["base"] + st_oc,
                                               st["addroc"] + st_oc)))),
            "oxr": Mux(chend | rowend, st_wo1, st["oxr"] - 1),
            "ox1": Mux(chend | rowend, lc["wo_2"], st["oxr"] == 2),
            "oyr": Mux(chend, st_ho1, Mux(rowend, st["oyr"] - 1, st["oyr"])),
            "oy1": Mux(chend, lc["ho_2"], Mux(rowend, st["oyr"] == 2, st["oy1"])),
            "g1": Mux(chend | grp, by_pass("n2", st["n1"]), st["gr"] == 2),
        }
        # (changed by a new channel / image only: enabled by K below)
        ch_v = {"cr": by_pass("pcr", st["cr"] - 1), "cr1": by_pass("pc2", st["cr"] == 2),
                "or": Mux(imgnx, st_oc1, st["or"] - 1),
                "or1": Mux(imgnx, lc["oc_2"], st["or"] == 2)}
        img_v = {"ir": st["ir"] - 1, "ir1": st["ir"] == 2}
        av["gr"] = Mux(chend | grp, av["n"], st["gr"] - 1)
        afl = {
            "rowend": Mux(chend | rowend, lc["wo_1"], st["ox1"]),
            "lastrow": Mux(chend, lc["ho_1"], Mux(rowend, st["oy1"], fl["lastrow"])),
            "glast": Mux(chend | grp, av["nz"], st["g1"]),
            "clast": Mux(imgnx, sNl[0], Mux(chend, Mux(newe, sIl_e1, sIl_e), Mux(
                wrap, Const(MC == 1), Mux(grp, st_c == MC - 2, fl["clast"])))),
            "olastc": Mux(chend, by_pass("pc1", st["cr1"]), fl["olastc"]),
            "olast": Mux(imgnx, lc["oc_1"], Mux(chend, st["or1"], fl["olast"])),
            "imglast": Mux(imgnx, st["ir1"], fl["imglast"]),
        }
        # pass 1's values from the descriptor (a handoff), from the registers (a new
        # image), pass e + 2's (a new pass)
        d_p1 = {"n": d.p1_n - 1, "nz": d.p1_n == 1, "n2": d.p1_n == 2, "noc": d.p1_noc,
                "pcr": d.p1_cend - d.p0_cend - 1, "pc1": d.p1_cend - d.p0_cend == 1,
                "pc2": d.p1_cend - d.p0_cend == 2}
        with m.If(handoff[0]):
            m.d.sync += [nxp[k].eq(v) for k, v in d_p1.items()]
            m.d.sync += [sIl_e.eq(MC == 1), sIl_e1.eq(MC == 1)]
        with m.Elif(K["img"]):
            m.d.sync += [nxp[k].eq(pvals[k][1]) for k in pvals]
            m.d.sync += [sIl_e.eq(sNl[0]), sIl_e1.eq(sNl[1])]
        with m.Elif(K["pass"]):
            m.d.sync += [nxp[k].eq(_sel(pvals[k], st_e1 + 1)) for k in pvals]
            m.d.sync += [sIl_e.eq(sIl_e1), sIl_e1.eq(_sel(sIl, st_e1 + 1))]
        with m.If(handoff[0]):
            m.d.sync += [st[k].eq(hv[k]) for k in list(ch_v) + list(img_v)]
        with m.Elif(K["ch"]):
            m.d.sync += [st[k].eq(v) for k, v in ch_v.items()]
            with m.If(imgnx):
                m.d.sync += [st[k].eq(v) for k, v in img_v.items()]
        F_n = {k: Signal(name=f"st_F{k}_n") for k in F}
        # the handoff's flags from the descriptor's compares, registered every clock (the
        # descriptor is loaded in IDLE, clocks before the layer's handoff)
        sf_h = {k: _S(name=f"st_hF{k}") for k in F}
        m.d.sync += [sf_h[k].eq(v) for k, v in step_flags(hfl, d.flat).items()]
        sf_a = step_flags(afl, st_flat)
        m.d.comb += [F_n[k].eq(Mux(handoff[0], sf_h[k], Mux(st_go[0], sf_a[k], F[k])))
                     for k in F]
        m.d.sync += [F[k].eq(F_n[k]) for k in F]
        m.d.sync += [K["img"].eq(go_n & F_n["imgnx"]),
                     K["pass"].eq(go_n & (F_n["imgnx"] | F_n["newe"])),
                     K["ch"].eq(go_n & F_n["chend"])]
        with m.If(handoff[0]):
            m.d.sync += [st[k].eq(v) for k, v in hv.items() if k in av]
            m.d.sync += [fl[k].eq(v) for k, v in hfl.items()]
        with m.Elif(st_go[0]):
            m.d.sync += [st[k].eq(v) for k, v in av.items()]
            m.d.sync += [fl[k].eq(v) for k, v in afl.items()]
    def _control(self, m, s):
        """Handoff, step, busy flag and the bank swap."""
        d = self.d
        handoff, st_go, st_step, go_n, nx_busy = s.handoff, s.st_go, s.st_step, s.go_n, s.nx_busy
        st_busy, st_sel, sel, st_flat, F, lc = s.st_busy, s.st_sel, s.sel, s.st_flat, s.F, s.lc
        st_wo1, st_ho1, st_oc1, st_oc = s.st_wo1, s.st_ho1, s.st_oc1, s.st_oc
        m.d.comb += nx_busy.eq(Mux(handoff[2], 1, Mux(st_step & F["lend"], 0, st_busy)))
        m.d.sync += st_busy.eq(nx_busy)
        # the bank being computed into, per bank (sel == b, flipped at a handoff)
        own = [_S(name=f"own{b}", init=int(b == 0), reset_less=False) for b in range(2)]
        with m.If(handoff[2]):
            m.d.sync += [st_sel.eq(sel), sel.eq(~sel), st_flat.eq(d.flat),
                         st_wo1.eq(d.wo - 1), st_ho1.eq(d.ho - 1), st_oc1.eq(d.oc - 1),
                         st_oc.eq(d.oc)]
            m.d.sync += [o.eq(~o) for o in own]
            m.d.sync += [lc[f"{k}_{v}"].eq(getattr(d, k) == v) for k in ("wo", "ho", "oc")
                         for v in (1, 2)]
        m.d.comb += go_n.eq(nx_busy & self.room)
        m.d.sync += _replicate(go_n, st_go)
        # handoff (HANDOFF state and the streamer idle) as a register, from the next state:
        # the FSM enters HANDOFF from STAT when s is taken and stays while the streamer is
        # busy; the streamer is busy in the clock after a handoff
        m.d.sync += _replicate((self.stat_take | (self.in_handoff & st_busy)) & ~nx_busy,
                               handoff)
        m.d.comb += [self.busy.eq(st_busy), self.step.eq(st_step), self.col.eq(s.st_c),
                     self.bank.eq(st_sel), self.addr.eq(s.st["addr"]),
                     self.own.eq(Cat(*own))]

    def _pass_table(self, m, s):
        """The per-pass values: loaded at a handoff, moved at a new image / channel."""
        d, MC, NP, CW, K = self.d, self.cfg.cols, self.cfg.max_passes, s.CW, s.K
        handoff, st_oc = s.handoff, s.st_oc
        st_pn, st_pnz, st_pn2, st_pnoc = s.st_pn, s.st_pnz, s.st_pn2, s.st_pnoc
        st_pcr, st_pc1, st_pc2, st_pib, st_pia, st_pic = (s.st_pcr, s.st_pc1, s.st_pc2,
                                                          s.st_pib, s.st_pia, s.st_pic)
        stX, stXo, stXw, sNo0, sNw0 = s.stX, s.stXo, s.stXw, s.sNo0, s.sNw0
        sI_c, sI_a, sN_c, sN_a, sIl, sNl, sNcy = (s.sI_c, s.sI_a, s.sN_c, s.sN_a, s.sIl,
                                                  s.sNl, s.sNcy)
        # per-pass values: loaded at a handoff, the image starts moved at a new image, the
        # next channel's addresses at a new channel
        with m.If(handoff[1]):
            for i in range(NP):
                pn = getattr(d, f"p{i}_n")
                pc = getattr(d, f"p{i}_cend") - (getattr(d, f"p{i - 1}_cend") if i else 0)
                pnoc, sib, sia = (getattr(d, f"p{i}_{k}") for k in ("noc", "sib", "sia"))
                m.d.sync += [st_pn[i].eq(pn - 1), st_pnz[i].eq(pn == 1), st_pn2[i].eq(pn == 2),
                             st_pnoc[i].eq(pnoc),
                             st_pcr[i].eq(pc - 1), st_pc1[i].eq(pc == 1), st_pc2[i].eq(pc == 2),
                             sI_c[i].eq(0), sI_a[i].eq(0), sIl[i].eq(MC == 1),
                             sN_c[i].eq(sib), sN_a[i].eq(sia), sNl[i].eq(sib == MC - 1),
                             st_pib[i].eq(sib), st_pia[i].eq(sia), st_pic[i].eq(sia + pnoc),
                             sNcy[i].eq(sib + sib >= MC),
                             stX[i].eq(1), stXo[i].eq(d.oc + 1), stXw[i].eq(pnoc + 1)]
            m.d.sync += [sNo0.eq(d.p0_sia + d.oc), sNw0.eq(d.p0_sia + d.p0_noc)]
        with m.Elif(K["img"]):
            for i in range(NP):
                csum = sN_c[i] + st_pib[i]
                nc = Mux(sNcy[i], csum - MC, csum)[:CW]
                inc = Mux(sNcy[i], st_pic[i], st_pia[i])
                m.d.sync += [sI_c[i].eq(sN_c[i]), sI_a[i].eq(sN_a[i]), sIl[i].eq(sNl[i]),
                             sN_c[i].eq(nc), sNl[i].eq(nc == MC - 1),
                             sNcy[i].eq(nc + st_pib[i] >= MC),
                             sN_a[i].eq(sN_a[i] + inc),
                             stX[i].eq(sN_a[i] + 1), stXo[i].eq(sN_a[i] + 1 + st_oc),
                             stXw[i].eq(sN_a[i] + 1 + st_pnoc[i])]
                if i == 0:
                    m.d.sync += [sNo0.eq(sNo0 + inc), sNw0.eq(sNw0 + inc)]
        with m.Elif(K["ch"]):
            m.d.sync += [x.eq(x + 1) for x in stX + stXo + stXw]

class OutputFifo(wiring.Component):
    """The 5-word output FIFO between the output banks and the ``o`` stream: a
    :class:`hdl.lib.fifo.Queue` with a registered head, fed from the banks' read data.

    A streamer step's word is on the banks' read port one clock after the step and in the
    port's data register (``words``) the clock after that, when it is pushed: three clocks
    from a step to the word at ``o``.  ``room`` counts the words in the FIFO and on their
    way without this clock's pop (registers only: ``o.ready`` reaches only the FIFO); with
    five words the streamer still steps every clock while ``o`` is never back-pressured.

    Parameters
    ----------
    cfg : :class:`gen.conv.ConvConfig`

    Members
    -------
    step : In(1)
        The streamer steps this clock (its word is pushed two clocks later).
    col : In(range(cols))
        The step's slot column.
    bank : In(1)
        The step's output bank.
    words : In(signed(acc_width)).array(2, cols)
        Per bank and column, the registered read data of the banks' port 0.
    room : Out(1)
        Another step's word fits (combinational from registers).
    o : Out(stream.Signature(signed(acc_width)))
        The output stream; ``o.valid`` is a register.

    Latency/throughput
    ------------------
    A word pushed at clock ``t`` is on ``o`` from ``t + 1``; one push and one pop per clock.
    """

    depth = OUT_FIFO_DEPTH

    def __init__(self, cfg: ConvConfig):
        if not isinstance(cfg, ConvConfig):
            raise TypeError(f"cfg must be a ConvConfig, not {cfg!r}")
        self.cfg = cfg
        super().__init__({
            "step": In(1), "col": In(range(cfg.cols) if cfg.cols > 1 else 1), "bank": In(1),
            "words": In(signed(cfg.acc_width)).array(2, cfg.cols),
            "room": Out(1),
            "o": Out(stream.Signature(signed(cfg.acc_width))),
        })

    def elaborate(self, platform):
        m = Module()
        AW, OFD = self.cfg.acc_width, OUT_FIFO_DEPTH
        st_step, st_c, st_sel = self.step, self.col, self.bank
        of_p1 = _S(name="of_p1", reset_less=False)
        of_push = _S(name="of_push", reset_less=False)
        of_c1, of_c = _S(st_c.shape(), name="of_c1"), _S(st_c.shape(), name="of_c")
        of_sel1, of_sel = _S(name="of_sel1"), _S(name="of_sel")
        m.d.sync += [of_p1.eq(st_step), of_push.eq(of_p1), of_c1.eq(st_c), of_c.eq(of_c1),
                     of_sel1.eq(st_sel), of_sel.eq(of_sel1)]
        # the queue's head, o.valid and level are registers (o.ready reaches only the queue)
        m.submodules.queue = queue = Queue(signed(AW), OFD, registered=True)
        m.d.comb += [queue.i.valid.eq(of_push),
                     queue.i.payload.eq(_sel([_sel(self.words[b], of_c) for b in range(2)],
                                             of_sel))]
        wiring.connect(m, queue.o, wiring.flipped(self.o))
        # the next clock steps if the streamer is busy and the words in the queue and on
        # their way (this clock's pop not counted) leave room: a push never meets a full
        # queue (i.ready is not needed).  room = level + push + p1 + step < depth; its
        # part without `step` is known a clock ahead (next level = level + push - pop,
        # next push = p1, next p1 = step), so both outcomes are registered and `step`
        # only selects between them: no adder sits between the step register and the
        # streamer's next step.
        held_n = _S(range(OFD + 4), name="of_held_n")
        pop = queue.o.valid & queue.o.ready
        m.d.comb += held_n.eq(queue.level + of_push - pop + of_p1 + st_step)
        room_s = _S(name="of_room_s", init=1, reset_less=False)   # if the clock steps
        room_i = _S(name="of_room_i", init=1, reset_less=False)   # if it does not
        m.d.sync += [room_s.eq(held_n + 1 < OFD), room_i.eq(held_n < OFD)]
        m.d.comb += self.room.eq(Mux(st_step, room_s, room_i))
        return m
