# SPDX-License-Identifier: Apache-2.0
"""The conv array's issue control: passes, their set-up, the copies' staggered starts and
copy 0's tile entries (see :mod:`hdl.conv.array`)."""

from amaranth.hdl import Cat, Module, Mux, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from gen.conv import ConvConfig
from hdl.conv._util import _S, _any, _bits, _sel
from hdl.conv.layouts import ISSUE_CONSTS, PASS_FIELDS

__all__ = ["IssueControl", "COPY0"]

# the state of copy 0 the issue control reads (registers of hdl.conv.copy.Copy)
COPY0 = data.StructLayout({"act": 1, "last_k": 1, "glt": 1, "ttq": 1, "glb": 1, "blkq": 1,
                           "lkx": 1})


class IssueControl(wiring.Component):
    """The passes of a chunk's compute phase and the copies' starts.

    At ``x_done`` the issue stage starts the chunk's first pass.  A pass begins with a
    set-up of ``cols + 6`` clocks that never stalls: in its first clock (``sk_first``) the
    pass registers ``cp`` load from the descriptor's pass ``e``, in clock ``c + 1`` column
    ``c`` takes its first window group (``pinit_load``), in the last (``setup_last``)
    copy 0 starts.  Copy ``g`` starts ``dq`` issue clocks after copy ``g - 1`` (a countdown
    that moves only when the issue stage advances).  The pass ends when every copy has
    started and the last one (``n - 1``, which finishes last) does its very last beat; then
    the next pass's set-up follows, or after the chunk's last pass the issue stage stops.

    Parameters
    ----------
    cfg : :class:`gen.conv.ConvConfig`
    desc_layout, pass_layout : :class:`amaranth.lib.data.StructLayout`
        The descriptor and the pass registers (:func:`hdl.conv.layouts.pass_regs_layout`).

    Members
    -------
    d : In(desc_layout)
        The descriptor register.
    x_done : In(1)
        The chunk's feature load ends: the compute phase starts.
    iccl : In(16)
        Input channels of the chunk, less one.
    kq, dq : In(24)
        Beats per tile; the stagger between copies.
    adv_iss, adv_box : In(1)
        Replicas of the stall's ``adv``.
    adv_slot, adv_col : In(cols)
        Per column replicas of ``adv``.
    copy0 : In(:data:`COPY0`)
        Copy 0's state (tile and block flags, ``act``, ``last_k``, ``lkx``).
    wblk0, cb0 : In(unsigned(WW)), In(16)
        Copy 0's block offsets (the pass's first block).
    w0 : In(1)
        The stall's ``W[0]`` (copy 0's beat is its last of a tile).
    done : In(max_groups)
        Per copy: this beat is its very last of the pass.
    cp : Out(pass_layout)
        The pass registers.
    e : Out(range(max_passes + 1))
        The running pass.
    issuing, setup, setup_last, sk_first : Out(1)
        The issue stage runs; the pass is in set-up; its last / first set-up clock.
    pinit_load : Out(cols)
        Column ``c``'s first window group is on the walk.
    start : Out(max_groups)
        Copy ``g`` starts in this clock (bit 0: ``setup_last``).
    stp : Out(max_groups)
        Copy ``g >= 1`` starts if the issue stage advances (register; bit 0 is 0).
    k : Out(:data:`hdl.conv.layouts.ISSUE_CONSTS`)
        Chunk / pass constants and the next copy's start values (registers).
    fi_col, fi_box : Out(cols), Out(1)
        Copy 0's next tile is the block's first (per column / for the box), registered one
        clock ahead.
    go_box, go_slot, go_col : Out(1), Out(cols), Out(cols)
        Copy 0 enters a tile (or the pass's first), registered one clock ahead.

    Latency/throughput
    ------------------
    Set-up ``cols + 6`` clocks per pass; one issue clock per clock after it.
    """

    def __init__(self, cfg: ConvConfig, desc_layout: data.StructLayout,
                 pass_layout: data.StructLayout):
        if not isinstance(cfg, ConvConfig):
            raise TypeError(f"cfg must be a ConvConfig, not {cfg!r}")
        self.cfg = cfg
        MC, NG = cfg.cols, cfg.max_groups
        WW = _bits(cfg.weight_depth) + 1
        super().__init__({
            "d": In(desc_layout), "x_done": In(1), "iccl": In(16), "kq": In(24),
            "dq": In(24), "adv_iss": In(1), "adv_box": In(1), "adv_slot": In(MC),
            "adv_col": In(MC), "copy0": In(COPY0), "wblk0": In(WW), "cb0": In(16),
            "w0": In(1), "done": In(NG),
            "cp": Out(pass_layout), "e": Out(range(cfg.max_passes + 1)),
            "issuing": Out(1), "setup": Out(1), "setup_last": Out(1), "sk_first": Out(1),
            "pinit_load": Out(MC), "start": Out(NG), "stp": Out(NG), "k": Out(ISSUE_CONSTS),
            "fi_col": Out(MC), "fi_box": Out(1),
            "go_box": Out(1), "go_slot": Out(MC), "go_col": Out(MC),
        })

    def _registers(self):
        cfg, MC, NG = self.cfg, self.cfg.cols, self.cfg.max_groups
        r = {"e": _S(range(cfg.max_passes + 1), name="e"),
             "cp": {f: _S(len(getattr(self.cp, f)), name=f"cp_{f}") for f in PASS_FIELDS},
             "issuing": _S(name="issuing", reset_less=False),
             "setup": _S(name="setup", reset_less=False),
             "isu": _S(name="isu", reset_less=False),      # issuing & ~setup, as its own register
             "sk": _S(range(MC + 6), name="sk"),
             # sk one-hot beside it (sk_oh[i] == (sk == i)): set-up decodes from single flags
             "sk_oh": _S(MC + 6, init=1, name="sk_oh"),
             # issuing & setup & sk_oh[0] (the pass's first set-up clock) as its own register:
             # the pass registers load then (the set-up never stalls)
             "sk_first": _S(name="sk_first", reset_less=False),
             # registered: the last set-up clock (sk == cols + 5)
             "setup_last": _S(name="setup_last", reset_less=False),
             # the next copy (sg) starts when the pass's issue clock reaches its start clock:
             # st_dist = start clock - issue clock, at_st = (st_dist == 0) as a register
             "sg": _S(range(NG + 1), name="sg"),
             "st_dist": _S(signed(25), name="st_dist"), "at_st": _S(name="at_st"),
             "st1": _S(name="st_one"),     # st_dist == 1 as a register (at_st's next value)
             # per pass, registered: copy g is the last (g == n - 1); every copy has started
             "lastc": [_S(name=f"lastc{g}") for g in range(NG)],
             "sg_all": _S(name="sg_all"),
             "sg_oh": _S(NG + 1, name="sg_oh"),     # one-hot of sg
             # sgl == (sg + 1 == n) as a register (the started copy is the last)
             "sgl": _S(name="sg_last"),
             "dq1": _S(name="dq1"),        # dq == 1 (a start right after a start)
             "dqm1": _S(24, name="dqm1"),  # dq - 1
             "dq2": _S(name="dq2"),        # dq == 2
             # stp[g] == isu & start & sg_oh[g] (copy g >= 1 starts if the issue stage
             # advances), a register loaded with its value after an advance
             "stp": [None] + [_S(name=f"stp{g}", reset_less=False) for g in range(1, NG)],
             "iccm": _S(16, name="iccm")}
        r["k"] = {f: _S(len(getattr(self.k, f)), name=f) for f in ISSUE_CONSTS.members}
        r["fi_col"] = [_S(name=f"fi_col{c}") for c in range(MC)]
        r["go_slot"] = [_S(name=f"go_slot{c}") for c in range(MC)]
        r["go_col"] = [_S(name=f"go_col{c}") for c in range(MC)]
        r["fi_box"], r["go_box"] = _S(name="fi_box"), _S(name="go_box")
        return r

    def elaborate(self, platform):
        m = Module()
        r = self._registers()
        cp, k, d, MC, NG = r["cp"], r["k"], self.d, self.cfg.cols, self.cfg.max_groups
        m.d.comb += [getattr(self.cp, f).eq(cp[f]) for f in PASS_FIELDS]
        m.d.comb += [getattr(self.k, f).eq(k[f]) for f in k]
        m.d.comb += [self.e.eq(r["e"]), self.issuing.eq(r["issuing"]),
                     self.setup.eq(r["setup"]), self.setup_last.eq(r["setup_last"]),
                     self.sk_first.eq(r["sk_first"]),
                     self.stp.eq(Cat(0, *r["stp"][1:])),
                     self.fi_col.eq(Cat(*r["fi_col"])), self.fi_box.eq(r["fi_box"]),
                     self.go_box.eq(r["go_box"]), self.go_slot.eq(Cat(*r["go_slot"])),
                     self.go_col.eq(Cat(*r["go_col"]))]
        # chunk and pass constants
        m.d.sync += [r["lastc"][g].eq(cp["n"] == g + 1) for g in range(NG)]
        m.d.sync += [r["dq1"].eq(self.dq == 1), r["dqm1"].eq(self.dq - 1),
                     r["dq2"].eq(self.dq == 2)]
        iccl = self.iccl
        m.d.sync += [r["iccm"].eq(iccl - 1), k["iccz"].eq(iccl == 0), k["kq1"].eq(self.kq == 1)]
        m.d.sync += [k["iccm0"].eq(iccl == 1), k["iccm1"].eq(iccl - 2)]
        self._passes(m, r)
        self._tile_entries(m, r)
        m.d.sync += [k["tiles1"].eq(cp["tiles"] == 1), k["count1"].eq(cp["count"] == 1),
                     k["tiles_is2"].eq(cp["tiles"] == 2), k["tiles3"].eq(cp["tiles"] - 3),
                     k["count_is2"].eq(cp["count"] == 2), k["count3"].eq(cp["count"] - 3)]
        # copy 0 starts in the last set-up clock: the next copies' start values
        lastc = r["lastc"]
        with m.If(r["setup_last"]):
            m.d.sync += [k["wpass"].eq(self.wblk0), k["cbpass"].eq(self.cb0),
                         r["sg"].eq(1), r["sg_oh"].eq(2),
                         r["sgl"].eq(lastc[1] if NG > 1 else 0),
                         r["sg_all"].eq(lastc[0]),
                         r["st_dist"].eq(self.dq - 1), r["at_st"].eq(r["dq1"]),
                         r["st1"].eq(r["dq2"]), k["sgs"].eq(d.stride), k["sgoc"].eq(d.oc)]
        # the compute phase starts: the issue stage starts the chunk's first pass
        with m.If(self.x_done):
            m.d.sync += [r["issuing"].eq(1), r["setup"].eq(1), r["sk"].eq(0),
                         r["sk_oh"].eq(1), r["sk_first"].eq(1), r["e"].eq(0)]
        return m

    def _passes(self, m, r):
        """Pass set-up, the copies' starts and the pass end."""
        cp, k, d, MC, NG = r["cp"], r["k"], self.d, self.cfg.cols, self.cfg.max_groups
        issuing, setup, setup_last, sk_oh = r["issuing"], r["setup"], r["setup_last"], r["sk_oh"]
        sg_all, at_st, st1, sg_oh, lastc, stp = (r["sg_all"], r["at_st"], r["st1"], r["sg_oh"],
                                                r["lastc"], r["stp"])
        adv_iss = self.adv_iss
        # copy sg starts in this (issue) clock (unconditional assignments: continuous in
        # Verilog, evaluated by Icarus at time 0)
        # (sg < n iff not all started; sg == g from sg's one-hot twin)
        start = ~sg_all & at_st
        pass_end = sg_all & _any(lastc[g] & self.done[g] for g in range(NG))
        at_st_n = Mux(start, r["dq1"], st1)
        sg_all_n = Mux(start, r["sgl"], sg_all)
        for g in range(1, NG):
            sg_oh_n = Mux(start, sg_oh[g - 1], sg_oh[g])
            with m.If(adv_iss & issuing):
                m.d.sync += stp[g].eq(Mux(setup, setup_last & ~lastc[0] & r["dq1"] if g == 1 else 0,
                                          ~pass_end & at_st_n & ~sg_all_n & sg_oh_n))
        m.d.comb += self.start.eq(Cat(setup_last, *[
            issuing & ~setup & adv_iss & start & sg_oh[g] for g in range(1, NG)]))
        # column c's first window group of the pass, in set-up clock c + 1
        m.d.comb += self.pinit_load.eq(Cat(*[issuing & setup & sk_oh[c + 1] for c in range(MC)]))
        with m.If(r["sk_first"]):
            pvl = {f: [getattr(d, f"p{i}_{f}") for i in range(self.cfg.max_passes)]
                   for f in PASS_FIELDS}
            m.d.sync += [cp[f].eq(_sel(pvl[f], r["e"])) for f in PASS_FIELDS]
        # The set-up never stalls (no copy is active then, so nothing can be blocked: the
        # stall flags are 1), so its steps do not wait for them.
        sk = r["sk"]
        with m.If(issuing):
            with m.If(setup):
                m.d.sync += [sk.eq(sk + 1), sk_oh.eq(sk_oh << 1), r["sk_first"].eq(0)]
                m.d.sync += setup_last.eq(sk_oh[MC + 4])
                with m.If(setup_last):
                    m.d.sync += [setup.eq(0), sk.eq(0), sk_oh.eq(1), r["isu"].eq(1)]
            with m.Elif(adv_iss):
                st_dist = r["st_dist"]
                m.d.sync += [st_dist.eq(Mux(start, st_dist + r["dqm1"], st_dist - 1)),
                             at_st.eq(at_st_n), st1.eq(Mux(start, r["dq2"], st_dist == 2))]
                with m.If(start):
                    m.d.sync += [r["sg"].eq(r["sg"] + 1), sg_oh.eq(sg_oh << 1),
                                 r["sgl"].eq(_any(sg_oh[g] & lastc[g + 1]
                                                  for g in range(NG - 1))),
                                 sg_all.eq(sg_all_n),
                                 k["sgs"].eq(k["sgs"] + d.stride),
                                 k["sgoc"].eq(k["sgoc"] + d.oc)]
                # pass end: every copy has started and the last one (n - 1, which runs
                # (n - 1) D beats behind copy 0, so finishes last) finishes
                with m.If(pass_end):
                    m.d.sync += r["isu"].eq(0)
                    with m.If(r["e"] == d.npasses - 1):
                        m.d.sync += issuing.eq(0)
                    with m.Else():
                        m.d.sync += [r["e"].eq(r["e"] + 1), setup.eq(1), sk.eq(0),
                                     sk_oh.eq(1), r["sk_first"].eq(1)]

    def _tile_entries(self, m, r):
        """fi_* (copy 0's next tile is the block's first) and go_* (copy 0 enters a tile),
        registered one clock ahead from the next state, one replica per load group.

        Each is computed for both values of this clock's adv (a = 1, 0) and each replica
        selects with its own adv replica (equal to adv outside the reset, when both values
        agree), so adv enters only the last level and no two replicas have the same input.
        """
        k, c0, MC = r["k"], self.copy0, self.cfg.cols
        setup_last = r["setup_last"]
        pd_start0 = setup_last

        def glt0_n(a):
            return Mux(pd_start0, k["tiles1"],
                       Mux(a & c0.act & c0.last_k, Mux(c0.glt, k["tiles1"], c0.ttq), c0.glt))
        setup_last_n = Mux(r["issuing"] & r["setup"], r["sk_oh"][MC + 4], setup_last)

        def load_by_adv(regs, advs, value_n):
            # each register loads value_n(1) or value_n(0) as its own adv replica says
            v0, v1 = value_n(0), value_n(1)
            m.d.sync += [reg.eq(Mux(a, v1, v0)) for reg, a in zip(regs, advs)]
        adv_col = [self.adv_col[c] for c in range(MC)]
        adv_slot = [self.adv_slot[c] for c in range(MC)]
        load_by_adv(r["fi_col"] + [r["fi_box"]], adv_col + [self.adv_box],
                    lambda a: setup_last_n | glt0_n(a))

        # go: copy 0 enters a tile (or the pass's first), registered from the next state
        # (W[0] == act[0] & last_k[0]; not in the block's last tile)
        def tile_go_n(a):
            glb0_n = Mux(pd_start0, k["count1"], Mux(a & c0.act & c0.last_k & c0.glt,
                                                     c0.blkq, c0.glb))
            W0_n = Mux(pd_start0, k["kq1"], Mux(a & c0.act, c0.lkx, self.w0))
            return setup_last_n | (W0_n & ~(glt0_n(a) & glb0_n))
        load_by_adv([r["go_box"]] + r["go_slot"] + r["go_col"],
                    [self.adv_box] + adv_slot + adv_col, tile_go_n)
