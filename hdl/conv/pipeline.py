# SPDX-License-Identifier: Apache-2.0
"""The conv array's MAC pipeline: the feature and weight banks, the rows' group selection,
the per-MAC multipliers and accumulators and the shadow registers that capture a finished
tile for the drain."""

from types import SimpleNamespace

from amaranth.hdl import Cat, Const, Module, Mux, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from gen.conv import ConvConfig, descriptor_fields
from hdl.conv._util import _S, _any, _bits, _depth, _index, _replicate, _sel
from hdl.lib.arith import radix4_product

__all__ = ["MacPipeline"]


class MacPipeline(wiring.Component):
    """The ``rows x cols`` MACs behind the issue stage, running free (bubbles while the
    issue stage stalls).

    Per clock the issue stage presents, per copy ``g``, whether it issues a beat
    (``act[g] & adv``), the beat's flags and its bank offsets.  Row ``r`` belongs to copy
    ``row_g[r]`` (``r // R``, registered per pass during the set-up) and takes that copy's
    beat: the weight bank of the row at the copy's weight offset, and per column the
    feature bank of the copy's tile parity at window base + feature offset.  A tile's first
    beat loads the product into the accumulator, its last beat (``last_k``) captures the
    sum into the shadow register (8 clocks after issue, ``gen.conv.cycles.ISSUE_TO_ACC``).

    Parameters
    ----------
    cfg : :class:`gen.conv.ConvConfig`

    Members
    -------
    act, last_k, fk, par : In(max_groups)
        Per copy: active; this beat is the tile's last / first; tile parity (feature bank).
    adv : In(1)
        The issue stage advances (a stalled stage issues nothing).
    foff : In(unsigned(FW)).array(max_groups)
        Per copy the beat's feature offset (kernel position + input channel, box included).
    waddr : In(unsigned(WW)).array(max_groups)
        Per copy the beat's weight bank address.
    gob : In(24).array(max_groups)
        Per copy the output address of its tile.
    lanev : In(cols).array(max_groups)
        Per copy and column: the lane holds a valid window.
    first : In(1)
        Copy 0 is in the first tile of the first block of its pass (with ``act[0]``).
    base : In(unsigned(FW)).array(cols, 2)
        Per column and tile parity the window base address.
    setup, r, n : In(1), In(desc p0_r), In(desc p0_n)
        Pass set-up clock; rows per copy and copies of the running pass.
    w_addr, w_data, w_hit : In(unsigned(WW)), In(signed(weight_width)), In(rows)
        Weight bank write (from the loaders); with ``w_lanes`` > 1 ``w_data`` is one word
        per row, ``In(signed(weight_width)).array(rows)``.
    f_addr, f_data, f_en : In(unsigned(FW)).array(cols), In(signed(data_width)).array(cols),
    In(1).array(cols)
        Per column feature bank write (both banks of the column).
    cap_next, cap : Out(max_groups)
        Copy ``g`` captures in the next clock / this clock.
    cap_gob_next : Out(24).array(max_groups)
        The output address of the next clock's capture.
    cap_n, cap_r, cap_rle : Out(4), Out(16), Out(1)
        ``n``, ``R`` and ``R <= drain_rows`` of the capturing pass.
    shadow : Out(signed(acc_width)).array(rows, cols)
        The captured sums.
    pc : Out(unsigned(bits(rows * cols)))
        MAC enables (the busy count's increment), registered three times.
    idle : Out(1)
        No beat in the pipeline before the s2 stage (combinational).

    Latency/throughput
    ------------------
    One beat per copy per clock; a beat reaches the accumulators 8 clocks after its issue.
    """

    def __init__(self, cfg: ConvConfig):
        if not isinstance(cfg, ConvConfig):
            raise TypeError(f"cfg must be a ConvConfig, not {cfg!r}")
        self.cfg = cfg
        MR, MC, NG, AW = cfg.rows, cfg.cols, cfg.max_groups, cfg.acc_width
        FW = _bits(cfg.feat_depth) + 1
        WW = _bits(cfg.weight_depth) + 1
        fw = dict(descriptor_fields(cfg))
        super().__init__({
            "act": In(NG), "last_k": In(NG), "fk": In(NG), "par": In(NG), "adv": In(1),
            "foff": In(unsigned(FW)).array(NG), "waddr": In(unsigned(WW)).array(NG),
            "gob": In(24).array(NG), "lanev": In(MC).array(NG), "first": In(1),
            "base": In(unsigned(FW)).array(MC, 2),
            "setup": In(1), "r": In(fw["p0_r"]), "n": In(fw["p0_n"]),
            "w_addr": In(unsigned(WW)),
            "w_data": (In(signed(cfg.weight_width)) if cfg.w_lanes == 1 else
                       In(signed(cfg.weight_width)).array(MR)),
            "w_hit": In(MR),
            "f_addr": In(unsigned(FW)).array(MC), "f_data": In(signed(cfg.data_width)).array(MC),
            "f_en": In(1).array(MC),
            "cap_next": Out(NG), "cap_gob_next": Out(24).array(NG), "cap": Out(NG),
            "cap_n": Out(4), "cap_r": Out(16), "cap_rle": Out(1),
            "shadow": Out(signed(AW)).array(MR, MC),
            "pc": Out(_bits(MR * MC)), "idle": Out(1),
        })

    def _gsig(self, name, width, reset_less=True):
        return [_S(width, name=f"g{g}_{name}", reset_less=reset_less)
                for g in range(self.cfg.max_groups)]

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        MR, MC = cfg.rows, cfg.cols
        fmem = [[Memory(shape=signed(cfg.data_width), depth=_depth(cfg.feat_depth), init=[])
                 for _ in range(2)] for _ in range(MC)]
        wmem = [Memory(shape=signed(cfg.weight_width), depth=_depth(cfg.weight_depth),
                       init=[]) for _ in range(MR)]
        for c in range(MC):
            for p in range(2):
                m.submodules[f"fmem{c}_{p}"] = fmem[c][p]
                wp = fmem[c][p].write_port()
                m.d.comb += [wp.addr.eq(self.f_addr[c]), wp.data.eq(self.f_data[c]),
                             wp.en.eq(self.f_en[c])]
        for r in range(MR):
            m.submodules[f"wmem{r}"] = wmem[r]
            wp = wmem[r].write_port()
            m.d.comb += [wp.addr.eq(self.w_addr),
                         wp.data.eq(self.w_data if cfg.w_lanes == 1 else self.w_data[r]),
                         wp.en.eq(self.w_hit[r])]
        row_g, row_act = self._rows(m)
        i = self._issue_regs(m)
        fread = [[fmem[c][p].read_port(domain="sync") for p in range(2)] for c in range(MC)]
        wread = [wmem[r].read_port(domain="sync") for r in range(MR)]
        x2, s2, prod, acc, shadow, pipe = self._stages(m, row_g, row_act, i, fread, wread)
        self._macs(m, x2, s2, prod, acc, shadow)
        NG = cfg.max_groups
        m.d.comb += [self.cap_next.eq(x2["gl"]), self.cap.eq(s2["gl"]), self.cap_n.eq(s2["N"]),
                     self.cap_r.eq(s2["R"]), self.cap_rle.eq(s2["Rle"])]
        m.d.comb += [self.cap_gob_next[g].eq(x2["gob"][g]) for g in range(NG)]
        m.d.comb += [self.shadow[r][c].eq(shadow[r][c]) for r in range(MR) for c in range(MC)]
        m.d.comb += self.idle.eq(~_any(i.i_act) & ~_any(st["v"] for st in pipe[:-1]))
        return m

    def _rows(self, m):
        """rows -> groups (registered per pass)."""
        MR, NG = self.cfg.rows, self.cfg.max_groups
        # rows -> groups (registered per pass)
        row_g = [_S(_index(NG), name=f"row{r}_g") for r in range(MR)]
        row_act = [_S(name=f"row{r}_act") for r in range(MR)]
        # (a register stage per step: cp from set-up clock 1, r_q / n_q 2, mulR 3, nR 4,
        # row_g / row_act loaded in every set-up clock, right from clock 5 on)
        mulR = [_S(20, name=f"mulR{j}") for j in range(NG + 1)]
        r_q, n_q, nR = _S(16, name="row_rq"), _S(4, name="row_nq"), _S(20, name="row_nR")
        m.d.sync += [r_q.eq(self.r), n_q.eq(self.n), nR.eq(_sel(mulR, n_q))]
        for j in range(NG + 1):      # r * j as shift-and-add (no multiplier)
            m.d.sync += mulR[j].eq(sum((r_q << b for b in range(j.bit_length()) if (j >> b) & 1),
                                       Const(0, 20)))
        with m.If(self.setup):
            for r in range(MR):
                m.d.sync += [row_g[r].eq(sum((Const(r) >= mulR[j]).as_unsigned()
                                             for j in range(1, NG))),
                             row_act[r].eq(Const(r) < nR)]
        return row_g, row_act

    def _issue_regs(self, m):
        """The issue stage's outputs registered (i2) and the feature read offsets."""
        cfg = self.cfg
        MC, NG = cfg.cols, cfg.max_groups
        FW = _bits(cfg.feat_depth) + 1
        WW = _bits(cfg.weight_depth) + 1
        gsig = self._gsig
        # feature read ports: port p serves the copies on tiles of parity p; all of them
        # read the same word, take the address of the lowest such copy
        # i2: the issue stage's per-copy outputs registered (offsets, lanes, flags)
        i_fk = gsig("i_fk", 1)
        i_act, i_lk, i_par = (gsig("i_act", 1, reset_less=False),
                              gsig("i_lk", 1, reset_less=False), gsig("i_par", 1))
        i_foff, i_waddr = gsig("i_foff", FW), gsig("i_waddr", WW)
        i_gob = gsig("i_gob", 24)
        i_lanev = [_S(MC, name=f"i_lanev{g}") for g in range(NG)]
        i_first, i_R, i_N = _S(name="i_first"), _S(16, name="i_R"), _S(4, name="i_N")
        i_base = [[_S(FW, name=f"i_base{c}_{p}") for p in range(2)] for c in range(MC)]
        # (free-running: a stalled issue stage sends bubbles)
        m.d.sync += [i_act[g].eq(self.act[g] & self.adv) for g in range(NG)]
        m.d.sync += [i_lk[g].eq(self.act[g] & self.last_k[g] & self.adv) for g in range(NG)]
        m.d.sync += [i_fk[g].eq(self.act[g] & self.fk[g] & self.adv) for g in range(NG)]
        m.d.sync += [i_par[g].eq(self.par[g]) for g in range(NG)]
        m.d.sync += [i_foff[g].eq(self.foff[g]) for g in range(NG)]
        m.d.sync += [i_waddr[g].eq(self.waddr[g]) for g in range(NG)]
        m.d.sync += [i_gob[g].eq(self.gob[g]) for g in range(NG)]
        m.d.sync += [i_lanev[g].eq(self.lanev[g]) for g in range(NG)]
        m.d.sync += [i_first.eq(self.act[0] & self.first & self.adv),
                     i_R.eq(self.r), i_N.eq(self.n)]
        m.d.sync += [i_base[c][p].eq(self.base[c][p]) for c in range(MC) for p in range(2)]
        fo = [_S(FW, name=f"fo{p}") for p in range(2)]
        for p in range(2):
            expr = Const(0, FW)
            for g in reversed(range(NG)):
                expr = Mux(i_act[g] & (i_par[g] == p), i_foff[g], expr)
            m.d.comb += fo[p].eq(expr)
        return SimpleNamespace(**{k: v for k, v in locals().items() if k != "self"})

    def _stages(self, m, row_g, row_act, i, fread, wread):
        """The pipeline stages from the registered issue outputs to the products."""
        cfg = self.cfg
        MR, MC, NG, DR = cfg.rows, cfg.cols, cfg.max_groups, cfg.drain_rows
        FW = _bits(cfg.feat_depth) + 1
        WW = _bits(cfg.weight_depth) + 1
        AW = cfg.acc_width
        gsig = self._gsig
        i_act, i_lk, i_par, i_fk, i_lanev, i_waddr = (i.i_act, i.i_lk, i.i_par, i.i_fk,
                                                      i.i_lanev, i.i_waddr)
        i_first, i_R, i_N, i_gob, i_base, fo = (i.i_first, i.i_R, i.i_N, i.i_gob, i.i_base,
                                                i.fo)
        # A beat issued at clock t (the edges at which each register loads):
        #   t+1 i_*    the copy's offsets, lanes and flags (above)
        #   t+2 sa     per-row valid / last / parity / first flags and per-MAC enables;
        #              fo_r the feature offset of each read port, a_wad0 the row's weight
        #              offset
        #   t+3 sb     a_base (window base + offset) and a_wad: the bank addresses
        #   t+4 s1     (the banks read their addresses)
        #   t+5 s1b    fd / wr1: the bank data, registered next to the banks
        #   t+6 xs     fsel (feature selected by tile parity and gated per MAC), wr / w3 / wn
        #              (the row's weight, 3 w and -w): the multiplier operands
        #   t+7 x2     the multiplier's partial-product pairs (radix 4, in LUTs)
        #   t+8 s2     prod
        #   t+9        acc (and the capture into the shadow registers)
        # so the accumulators see the beat ISSUE_TO_ACC = 8 clocks after its issue.
        def stage(name):
            return {"en": [_S(MC, name=f"{name}_en{r}") for r in range(MR)],
                    "rv": _S(MR, name=f"{name}_rv"), "rl": _S(MR, name=f"{name}_rl"),
                    "rp": _S(MR, name=f"{name}_rp"), "rf": _S(MR, name=f"{name}_rf"),
                    "gl": _S(NG, name=f"{name}_gl", reset_less=False),
                    "first": _S(name=f"{name}_first"), "v": _S(name=f"{name}_v", reset_less=False),
                    "gob": gsig(f"{name}_gob", 24),
                    "R": _S(16, name=f"{name}_R"), "N": _S(4, name=f"{name}_N"),
                    "Rle": _S(name=f"{name}_Rle")}      # R <= drain_rows

        def copy_stage(dst, src):
            out = [dst[k].eq(src[k]) for k in ("rv", "rl", "rp", "rf", "gl", "first", "v", "R", "N",
                                               "Rle")]
            out += [dst["gob"][g].eq(src["gob"][g]) for g in range(NG)]
            out += [dst["en"][r].eq(src["en"][r]) for r in range(MR)]
            return out
        sa, sb, s1, s1b, xs, x2, s2 = (stage(n) for n in ("a", "b", "s1", "s1b", "xs", "x2", "s2"))
        pipe = [sa, sb, s1, s1b, xs, x2, s2]      # x2: the stage before s2
        for dst, src in zip(pipe[1:], pipe[:-1]):
            m.d.sync += copy_stage(dst, src)
        fo_r = [_S(FW, name=f"fo_r{p}") for p in range(2)]
        b_base = [[_S(FW, name=f"b_base{c}_{p}") for p in range(2)] for c in range(MC)]
        a_base = [[_S(FW, name=f"a_base{c}_{p}") for p in range(2)] for c in range(MC)]
        a_wad0 = [_S(WW, name=f"a_wad0_{r}") for r in range(MR)]
        a_wad = [_S(WW, name=f"a_wad{r}") for r in range(MR)]
        fd = [[_S(signed(cfg.data_width), name=f"fd{c}_{p}") for p in range(2)]
              for c in range(MC)]
        wr1 = [_S(signed(cfg.weight_width), name=f"wr1_{r}") for r in range(MR)]
        wr = [_S(signed(cfg.weight_width), name=f"wr{r}") for r in range(MR)]
        w3 = [_S(signed(cfg.weight_width + 2), name=f"w3_{r}") for r in range(MR)]
        wn = [_S(signed(cfg.weight_width + 1), name=f"wn{r}") for r in range(MR)]
        fsel = [[_S(signed(cfg.data_width), name=f"fsel{r}_{c}") for c in range(MC)]
                for r in range(MR)]
        prod = [[_S(signed(cfg.data_width + cfg.weight_width), name=f"prod{r}_{c}")
                 for c in range(MC)] for r in range(MR)]
        acc = [[_S(signed(AW), name=f"acc{r}_{c}") for c in range(MC)] for r in range(MR)]
        shadow = [[_S(signed(AW), name=f"sh{r}_{c}") for c in range(MC)] for r in range(MR)]
        s2_gl, s2_v, s2_en, s2_R, s2_N = s2["gl"], s2["v"], s2["en"], s2["R"], s2["N"]
        for c in range(MC):
            for p in range(2):
                m.d.comb += [fread[c][p].addr.eq(a_base[c][p]),
                             fread[c][p].en.eq(1)]
        for r in range(MR):
            m.d.comb += [wread[r].addr.eq(a_wad[r]), wread[r].en.eq(1)]

        rv, rl, rp, rf = [], [], [], []
        for r in range(MR):
            g = row_g[r]
            v = row_act[r] & _sel(i_act, g)
            rv.append(v)
            rl.append(row_act[r] & _sel(i_lk, g))
            rp.append(_sel(i_par, g))
            rf.append(_sel(i_fk, g))
            m.d.sync += sa["en"][r].eq(
                Cat(*[v & _sel([i_lanev[gg][c] for gg in range(NG)], g) for c in range(MC)]))
            m.d.sync += [a_wad0[r].eq(_sel(i_waddr, g)), a_wad[r].eq(a_wad0[r])]
        m.d.sync += [sa["rv"].eq(Cat(*rv)), sa["rl"].eq(Cat(*rl)), sa["rp"].eq(Cat(*rp)),
                     sa["rf"].eq(Cat(*rf)),
                     sa["gl"].eq(Cat(*i_lk)), sa["first"].eq(i_first),
                     sa["v"].eq(_any(i_act)), sa["R"].eq(i_R), sa["N"].eq(i_N),
                     sa["Rle"].eq(i_R <= DR)]
        m.d.sync += [sa["gob"][g].eq(i_gob[g]) for g in range(NG)]
        m.d.sync += [fo_r[p].eq(fo[p]) for p in range(2)]
        for c in range(MC):
            # the bank address registered as the sum (window base + beat offset)
            m.d.sync += [b_base[c][p].eq(i_base[c][p]) for p in range(2)]
            m.d.sync += [a_base[c][p].eq(b_base[c][p] + fo_r[p]) for p in range(2)]
            m.d.sync += [fd[c][p].eq(fread[c][p].data) for p in range(2)]
        for r in range(MR):
            # the row's weight and its multiples 3 w, -w (the multiplier's operands)
            m.d.sync += [wr1[r].eq(wread[r].data), wr[r].eq(wr1[r]),
                         w3[r].eq((wr1[r] << 1) + wr1[r]), wn[r].eq(-wr1[r])]
            for c in range(MC):
                # bank data selected (tile parity) and gated per MAC as it is registered
                m.d.sync += fsel[r][c].eq(Mux(s1b["en"][r][c],
                                              Mux(s1b["rp"][r], fd[c][1], fd[c][0]), 0))
                # w * x in LUTs over two clocks (x2: partial-product pairs, s2: sum)
                m.d.sync += prod[r][c].eq(radix4_product(m, fsel[r][c], wr[r], w3[r], wn[r],
                                                         name=f"pp{r}_{c}_"))
        return x2, s2, prod, acc, shadow, pipe

    def _macs(self, m, x2, s2, prod, acc, shadow):
        """Accumulators, capture and the MAC-enable count."""
        cfg = self.cfg
        MR, MC, AW = cfg.rows, cfg.cols, cfg.acc_width
        s2_v, s2_en = s2["v"], s2["en"]
        # accumulate / capture
        # (no reset, no valid bit: the first beat of a tile loads the product, a row with no
        # valid beat adds zero products, the gated features; only a capture is qualified)
        # (the row's first-beat and capture flags replicated per MAC, each driving 32 bits;
        # ring-loaded during the reset, see _replicate)
        for r in range(MR):
            mac_rf = [_S(name=f"rf{r}_{c}") for c in range(MC)]
            mac_rl = [_S(name=f"rl{r}_{c}") for c in range(MC)]
            m.d.sync += _replicate(x2["rf"][r], mac_rf) + _replicate(x2["rl"][r], mac_rl)
            for c in range(MC):
                total = Mux(mac_rf[c], prod[r][c], acc[r][c] + prod[r][c])
                m.d.sync += acc[r][c].eq(total)
                with m.If(mac_rl[c]):
                    m.d.sync += shadow[r][c].eq(total)
        # busy MAC-cycles: popcount of the enables, one register stage
        pc = _S(_bits(MR * MC), reset_less=False)
        # (per row registered, then per four rows, then the sum: the compute phase ends at
        # least four clocks after the last accumulation, so busy is complete before the
        # stats)
        pc_rows = [_S(_bits(MC), name=f"pc{r}", reset_less=False) for r in range(MR)]
        for r in range(MR):
            m.d.sync += pc_rows[r].eq(Mux(s2_v, sum(s2_en[r][c] for c in range(MC)), 0))
        pc_q = [_S(_bits(4 * MC), name=f"pcq{i}", reset_less=False) for i in range((MR + 3) // 4)]
        for i in range(len(pc_q)):
            m.d.sync += pc_q[i].eq(sum(pc_rows[4 * i:4 * i + 4]))
        m.d.sync += pc.eq(sum(pc_q))
        m.d.comb += self.pc.eq(pc)
