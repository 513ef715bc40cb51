# SPDX-License-Identifier: Apache-2.0
"""The conv array's stall: the issue-side twin of the drain, which decides in each clock
whether the issue stage advances (see :mod:`hdl.conv.array`)."""

from amaranth.hdl import Cat, Const, Module, Mux
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from gen.conv import ConvConfig
from hdl.conv._util import _S, _any, _sel

__all__ = ["IssueStall"]


class IssueStall(wiring.Component):
    """Whether the issue stage advances, from a model of the drain kept at issue time.

    Only the issue stage stalls (as a whole), when a copy is about to issue the last beat
    of a tile whose capture, ``ISSUE_TO_ACC`` clocks later, would find the copy's previous
    capture not yet drained (the first capture of a pass: anything not drained).  The
    drain's timing is predicted with countdowns, an exact twin of
    :func:`gen.conv.cycles._chunk_compute_cycles`: ``pd_L`` = clocks until every capture
    issued so far has drained, ``pd_F[g]`` the same for copy ``g``'s latest capture; ``k``
    captures issued together set ``pd_L`` to ``pd_L + k dg``, ``dg = ceil(R / drain_rows)``.
    The MAC pipeline behind the issue stage never stalls.

    ``adv`` is a register computed one clock ahead; its replicas (``adv_*``, one per group
    of loads, for fan-out) hold the same value outside the reset.

    Parameters
    ----------
    cfg : :class:`gen.conv.ConvConfig`
    r_width : int
        Width of the pass's rows per copy (descriptor field ``p0_r``).

    Members
    -------
    r : In(r_width)
        Rows per copy ``R`` of the running pass (pass register).
    act, lkx : In(max_groups)
        Per copy: active; the beat after this one is the last of a tile and this one is not
        the copy's very last (registers of :class:`hdl.conv.copy.Copy`).
    stp : In(max_groups)
        Per copy ``g >= 1``: the copy starts if the issue stage advances (register of
        :class:`hdl.conv.issue.IssueControl`; bit 0 unused).
    setup_last, kq1 : In(1)
        The pass's last set-up clock (copy 0 starts); tiles of one beat (``kq == 1``).
    clear : In(1)
        The chunk's compute phase starts (the countdowns clear).
    adv : Out(1)
        The issue stage advances in this clock (register).
    adv_iss, adv_box, adv_i, adv_pd : Out(1)
        Replicas of ``adv`` for the issue control, the tile box, the MAC pipeline and the
        countdowns.
    adv_slot, adv_col : Out(cols)
        Replicas per column (slot and column-state loads).
    adv_cp : Out(3).array(max_groups)
        Three replicas per copy (its three groups of counter registers).
    w : Out(max_groups)
        Per copy: this beat is the copy's last of a tile (``act & last_k``, register).

    Latency/throughput
    ------------------
    ``adv`` of the next clock is registered from this clock's state, computed for both
    values of this clock's ``adv`` and selected by it.
    """

    def __init__(self, cfg: ConvConfig, r_width: int):
        if not isinstance(cfg, ConvConfig):
            raise TypeError(f"cfg must be a ConvConfig, not {cfg!r}")
        self.cfg = cfg
        NG, MC = cfg.max_groups, cfg.cols
        super().__init__({
            "r": In(r_width), "act": In(NG), "lkx": In(NG), "stp": In(NG),
            "setup_last": In(1), "kq1": In(1), "clear": In(1),
            "adv": Out(1), "adv_iss": Out(1), "adv_box": Out(1), "adv_i": Out(1),
            "adv_pd": Out(1), "adv_slot": Out(MC), "adv_col": Out(MC),
            "adv_cp": Out(3).array(NG), "w": Out(NG),
        })

    def elaborate(self, platform):
        m = Module()
        NG, MC = self.cfg.max_groups, self.cfg.cols
        adv = _S(init=1, name="adv_r", reset_less=False)
        adv_iss, adv_box = _S(init=1, name="adv_iss"), _S(init=1, name="adv_box")
        adv_i, adv_pd = _S(init=1, name="adv_i"), _S(init=1, name="adv_pd")
        adv_slot = [_S(init=1, name=f"adv_slot{c}") for c in range(MC)]
        adv_col = [_S(init=1, name=f"adv_col{c}") for c in range(MC)]
        adv_cp = [[_S(init=1, name=f"adv_cp{g}_{j}") for j in range(3)] for g in range(NG)]
        adv_reps = ([adv_iss, adv_box, adv_i, adv_pd] + adv_slot + adv_col
                    + [r for reps in adv_cp for r in reps])
        W = [_S(name=f"pd_W{g}", reset_less=False) for g in range(NG)]
        m.d.comb += [self.adv.eq(adv), self.adv_iss.eq(adv_iss), self.adv_box.eq(adv_box),
                     self.adv_i.eq(adv_i), self.adv_pd.eq(adv_pd),
                     self.adv_slot.eq(Cat(*adv_slot)), self.adv_col.eq(Cat(*adv_col)),
                     self.w.eq(Cat(*W))]
        m.d.comb += [self.adv_cp[g].eq(Cat(*adv_cp[g])) for g in range(NG)]
        # pd_start[g]: copy g starts (copy 0 in the last set-up clock, the others when the
        # issue stage advances with stp)
        pd_start = [self.setup_last] + [adv_iss & self.stp[g] for g in range(1, NG)]
        b1, b0 = self._countdowns(m, adv, adv_pd, W, pd_start)
        blocked_n = Mux(adv, b1, b0)
        m.d.sync += adv.eq(~blocked_n)
        # each replica selects with its own value (all equal: after a reset b1 = b0 = 0 loads
        # 1 into every one), so no two have the same input and none needs a reset term
        m.d.sync += [r.eq(~Mux(r, b1, b0)) for r in adv_reps]
        return m

    def _countdowns(self, m, adv, adv_pd, W, pd_start):
        """The drain model's countdowns and W; returns the stall's next value for an
        advancing (b1) and a stalled (b0) issue stage."""
        NG, DR = self.cfg.max_groups, self.cfg.drain_rows
        act, lkx, kq1, setup_last = self.act, self.lkx, self.kq1, self.setup_last
        pd_dg = _S(16, name="pd_dg")
        if DR & (DR - 1) == 0:
            m.d.sync += pd_dg.eq((self.r + (DR - 1)) >> (DR.bit_length() - 1))
        else:
            m.d.sync += pd_dg.eq((self.r + (DR - 1)) // DR)
        # k dg - 1 for k = 1..NG (shift-and-add, registered once per pass), and the flags
        # dg >= 2, dg >= 3 (registered with them)
        pd_m1 = [Const(0, 16)] + [_S(16, name=f"pd_m{k}") for k in range(1, NG + 1)]
        for k in range(1, NG + 1):
            kdg = sum(pd_dg << b for b in range(k.bit_length()) if (k >> b) & 1)
            m.d.sync += pd_m1[k].eq(kdg - 1)
        dg_ge2, dg_ge3 = _S(name="pd_dg2"), _S(name="pd_dg3")
        m.d.sync += [dg_ge2.eq(pd_dg >= 2), dg_ge3.eq(pd_dg >= 3)]
        pd_L, zL = _S(16, name="pd_L"), _S(name="pd_zL")
        pd_F = [_S(16, name=f"pd_F{g}") for g in range(NG)]
        zF = [_S(name=f"pd_zF{g}") for g in range(NG)]
        ft0 = _S(name="pd_ft0")            # copy 0 is in the first tile of its pass
        # W[g] = act[g] & last_k[g] (this beat is the copy's last of a tile), a register
        # with its own next state: a start (pd_start), an advance (the new last_k, lkn;
        # act drops after the last tile of the copy's last block) or hold
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
        L_gt1 = _S(name="pd_Lgt1", reset_less=False)
        F_gt1 = [_S(name=f"pd_Fgt1{g}", reset_less=False) for g in range(NG)]

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
        # the chunk's compute phase starts: the countdowns clear
        with m.If(self.clear):
            m.d.sync += [pd_L.eq(0), zL.eq(0), L_gt1.eq(0)]
            m.d.sync += [x.eq(0) for x in pd_F + zF + F_gt1]
        # The stall's next value computed both ways of this clock's adv and then selected
        # by it, so that adv, the loop's own flag, enters only the last level: B1 (the
        # issue stage advances: every W[g] captures, a starting copy loads kq1, an active
        # one lkn unless this is its last beat) and B0 (it stalls: only the countdowns
        # move).  (adv's replicas are equal outside the reset, when no copy starts.)
        # (W[g] implies act[g], and lkx[g] is 0 while the copy is idle unless it is about
        # to start, when stp selects kq1: so lkx alone is Mux(act, lkx, W))
        stp = self.stp
        w1 = [Mux(stp[g] if g else setup_last, kq1, lkx[g]) for g in range(NG)]
        z1 = [Mux(W[g], zLb | _any(W[:g]), F_gt1[g]) for g in range(NG)]
        zL1 = Mux(_any(W), zLb | two_of(W), L_gt1)
        ft01 = setup_last | (~W[0] & ft0)
        b1 = _any([w1[g] & z1[g] for g in range(NG)] + [w1[0] & ft01 & zL1])
        w0 = [Mux(setup_last, kq1, W[0])] + W[1:]
        b0 = _any([w0[g] & F_gt1[g] for g in range(NG)] + [w0[0] & (setup_last | ft0) & L_gt1])
        return b1, b0
