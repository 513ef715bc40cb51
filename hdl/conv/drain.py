# SPDX-License-Identifier: Apache-2.0
"""The conv array's drain and output banks: each captured tile (the MACs' shadow registers,
per copy) is drained ``drain_rows`` rows per clock into the ping-pong output banks, the
partial sums of earlier chunks added; the banks' other half serves the streamer."""

from amaranth.hdl import Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from gen.conv import ConvConfig
from hdl.conv._util import _S, _any, _bits, _depth, _index, _sel

__all__ = ["Drain"]


class Drain(wiring.Component):
    """Drains the copies' captures into the output banks, copy by copy in capture order.

    A capture of copy ``g`` (its last beat of a tile reached the accumulators) is pending
    until drained: ``R`` shadow rows (``R`` = the pass's rows per copy), ``drain_rows`` per
    clock, at output address ``gob + di`` (``gob``: the copy's tile address), through
    three stages (A: the shadow rows selected, A2: the bank read, B/C: added to the old
    partial sum, or not in the chunk's first chunk, and written).  The output banks are
    ping-pong: bank ``b`` is written while ``own[b]``; read port 0 of the other bank
    serves the streamer at ``st_addr`` (its registered data on ``words``).

    Parameters
    ----------
    cfg : :class:`gen.conv.ConvConfig`

    Members
    -------
    cap_next : In(max_groups)
        Copy ``g`` captures in the next clock (the x2 stage's tile-last flags).
    cap_gob_next : In(24).array(max_groups)
        The output address of that capture.
    cap : In(max_groups)
        Copy ``g`` captures this clock (the shadow registers load).
    cap_n, cap_r : In(4), In(16)
        ``n`` and ``R`` of the capturing pass.
    cap_rle : In(1)
        ``R <= drain_rows``.
    shadow : In(signed(acc_width)).array(rows, cols)
        The MACs' shadow registers (the latest capture of each row).
    first_chunk : In(1)
        The layer's first chunk: write the sums, do not add the banks' old values.
    own : In(2)
        Bit ``b``: bank ``b`` is the one computed into (from :class:`hdl.conv.streamer.Streamer`).
    st_addr : In(24)
        The streamer's read address (port 0 of the bank not owned).
    idle_n : Out(1)
        Next value of "nothing pending and no drain step in flight" (for the FSM).
    words : Out(signed(acc_width)).array(2, cols)
        Per bank and column the registered data of read port 0 (the streamer's words one
        clock after their address).

    Latency/throughput
    ------------------
    ``ceil(R / drain_rows)`` clocks per capture, back to back; a bank write lands four
    clocks after its drain step.
    """

    def __init__(self, cfg: ConvConfig):
        if not isinstance(cfg, ConvConfig):
            raise TypeError(f"cfg must be a ConvConfig, not {cfg!r}")
        self.cfg = cfg
        NG, AW = cfg.max_groups, cfg.acc_width
        super().__init__({
            "cap_next": In(NG), "cap_gob_next": In(24).array(NG), "cap": In(NG),
            "cap_n": In(4), "cap_r": In(16), "cap_rle": In(1),
            "shadow": In(signed(AW)).array(cfg.rows, cfg.cols),
            "first_chunk": In(1), "own": In(2), "st_addr": In(24),
            "idle_n": Out(1),
            "words": Out(signed(AW)).array(2, cfg.cols),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        MR, MC, NG, DR, AW = cfg.rows, cfg.cols, cfg.max_groups, cfg.drain_rows, cfg.acc_width
        pending = _S(NG, reset_less=False)
        dg = _S(_index(NG), reset_less=False)
        di = _S(16, reset_less=False)
        # cap_gob: output address of each copy's latest capture,
        # including a capture of this clock: loaded from the x2 stage one clock before the
        # capture (s2 is a plain copy of x2), so the drain's next step reads registers only
        cap_gob = [_S(24, name=f"g{g}_cap_gob") for g in range(NG)]
        working = _S(reset_less=False)
        fin = _S(reset_less=False)
        d_R = _S(16, name="d_R")          # rows of the copy being drained (one pass)
        d_Rle = _S(name="d_Rle")          # d_R <= drain_rows
        drem = _S(16, name="drem")        # rows left of the copy being drained
        d_le2 = _S(name="d_le2")          # drem <= 2 * drain_rows
        cap_last = [_S(1, name=f"g{g}_cap_last") for g in range(NG)]        # copy g is its pass's last copy (g + 1 == n)
        daddr = _S(24, name="daddr")      # output address of the drain step (gob + di)
        dlast = _S(name="dlast")          # this drain step is the copy's last one
        # working, fin and fin_g are registers holding exactly pending[dg], working & dlast
        # and fin & (dg == g): they are computed from the next state below (for the stall)
        fin_g = [_S(name=f"fin{g}", reset_less=False) for g in range(NG)]
        newpend = _S(NG)
        for g in range(NG):
            cap = self.cap[g]
            with m.If(self.cap_next[g]):
                m.d.sync += cap_gob[g].eq(self.cap_gob_next[g])
            with m.If(cap):
                m.d.sync += cap_last[g].eq(self.cap_n == g + 1)
            m.d.comb += newpend[g].eq(cap | (pending[g] & ~fin_g[g]))
        m.d.sync += pending.eq(newpend)
        any_cap = self.cap.any()
        # The next copy to drain, dg_n, is dg, 0 (after the pass's last copy) or dg + 1;
        # pick(v) = v[dg_n] selects among the three candidates (v[dg + 1] as the list
        # shifted by one, selected by dg) instead of selecting by dg_n.
        dcl = _S(name="d_cl")       # the copy being drained is its pass's last (cap_last[dg])

        # (dg and di need no load at the start of a compute phase: they are 0 after a reset
        # and after every phase, whose last drain step is its last pass's last copy's)
        def pick(v):
            v = list(v)
            return Mux(fin, Mux(dcl, v[0], _sel(v[1:] + v[-1:], dg)), _sel(v, dg))
        dg_n, di_n = Signal.like(dg, name="dg_n"), Signal.like(di, name="di_n")
        dR_n, dlast_n = Signal.like(d_R, name="d_R_n"), _S(name="dlast_n")
        r_fin = _S(16, name="d_R_fin")
        m.d.comb += r_fin.eq(Mux(any_cap, self.cap_r, d_R))
        rle_fin = Mux(any_cap, self.cap_rle, d_Rle)
        m.d.comb += [
            dg_n.eq(Mux(fin, Mux(dcl, 0, dg + 1), dg)),
            di_n.eq(Mux(fin, 0, Mux(working, di + DR, di))),
            dR_n.eq(Mux(~working, self.cap_r, Mux(fin, r_fin, d_R))),
            dlast_n.eq(Mux(~working, self.cap_rle, Mux(fin, rle_fin, d_le2))),
        ]
        # registered from the next state: cap_last[dg] and drem <= 2 drain_rows
        m.d.sync += [dcl.eq(pick([Mux(self.cap[g], self.cap_n == g + 1, cap_last[g])
                                  for g in range(NG)])),
                     d_le2.eq(Mux(~working, self.cap_r <= 2 * DR,
                                  Mux(fin, r_fin <= 2 * DR, drem <= 3 * DR)))]
        m.d.sync += [dg.eq(dg_n), di.eq(di_n), d_R.eq(dR_n), dlast.eq(dlast_n),
                     d_Rle.eq(Mux(~working, self.cap_rle, Mux(fin, rle_fin, d_Rle))),
                     drem.eq(Mux(~working, self.cap_r, Mux(fin, r_fin, drem - DR)))]
        # the next drain step's output address and shadow row (the captures of this clock
        # included); the shadow row also in one register per column (its low bits: the
        # row selects of the columns are wide), each counting from its own value so that
        # Yosys keeps the copies apart
        new_copy = fin | ~working
        RB = _bits(MR - 1)
        # (per column two copies, one per half of the rows)
        drow_c = [[_S(RB, name=f"drow{c}_{k}") for k in range(2)] for c in range(MC)]
        m.d.sync += daddr.eq(Mux(new_copy, pick(cap_gob), daddr + DR))
        # The shadow row base of copy g is g R (the drain never mixes passes: a pass's first
        # capture waits for the drain), so the copies' next row base is counted, not
        # selected among the captures: d_base = dg R, 0 after the pass's last copy
        d_base = _S(RB, name="d_base", reset_less=False)
        base_nx = Mux(dcl, 0, d_base + d_R[:RB])
        with m.If(fin):
            m.d.sync += d_base.eq(base_nx)
        row_new_c = Mux(fin, base_nx, d_base)
        m.d.sync += [r.eq(Mux(new_copy, row_new_c, r + DR)) for rc in drow_c for r in rc]

        # working next: copy dg_n pending; finishing: and its last step (per copy: no
        # select of the pending flags by dg_n)
        dg_is = [_S(name=f"d_is{g}") for g in range(NG)]            # dg_n == g
        m.d.comb += [dg_is[g].eq(pick([Const(h == g) for h in range(NG)])) for g in range(NG)]
        work_gn = [dg_is[g] & newpend[g] for g in range(NG)]
        work_n = _any(work_gn)
        fin_gn = [work_gn[g] & dlast_n for g in range(NG)]
        m.d.sync += [working.eq(work_n), fin.eq(work_n & dlast_n)]
        m.d.sync += [fin_g[g].eq(fin_gn[g]) for g in range(NG)]
        # drain read (stage A: the shadow rows read, selected in two steps) -> bank read
        # (stage A2) -> add and write (stages B, C)
        wa_v = [_S(name=f"wa{j}_v", reset_less=False) for j in range(DR)]
        wa_addr = [_S(24, name=f"wa{j}_addr") for j in range(DR)]
        wb_v = [_S(name=f"wb{j}_v", reset_less=False) for j in range(DR)]
        wb_addr = [_S(24, name=f"wb{j}_addr") for j in range(DR)]
        wb_new = [[_S(signed(AW), name=f"wb{j}_{c}") for c in range(MC)] for j in range(DR)]
        # the rows' two halves (by the row's top bit): each half's row registered, then one
        HB = RB - 1
        halves = [list(range(MR))[:1 << HB], list(range(MR))[1 << HB:]]
        halves = [h for h in halves if h]
        oaddr = wa_addr        # the bank read address of a step (stage A2)
        for j in range(DR):
            m.d.sync += [wa_v[j].eq(working & (drem > j)), wa_addr[j].eq(daddr + j),
                         wb_v[j].eq(wa_v[j]), wb_addr[j].eq(wa_addr[j])]
            for c in range(MC):
                # (a valid step's row drow + j is below rows: the low bits select it)
                rr = [_S(RB, name=f"dr{j}_row{c}_{k}") for k in range(2)]
                m.d.comb += [x.eq(y + j) for x, y in zip(rr, drow_c[c])]
                part = [_S(signed(AW), name=f"wa{j}_{c}_{h}") for h in range(len(halves))]
                top = _S(name=f"wa{j}_{c}_top")
                m.d.sync += [p.eq(_sel([self.shadow[r][c] for r in rows], rr[h][:HB]))
                             for h, (p, rows) in enumerate(zip(part, halves))]
                m.d.sync += [top.eq(rr[0][HB]), wb_new[j][c].eq(_sel(part, top))]
        m.d.comb += self.idle_n.eq(~newpend.any() & ~_any(working & (drem > j) for j in range(DR))
                                   & ~_any(wa_v) & ~_any(wb_v))
        self._banks(m, wa_v, wa_addr, wb_v, wb_addr, wb_new)
        return m

    def _banks(self, m, wa_v, wa_addr, wb_v, wb_addr, wb_new):
        """The output banks and stage C (read, add, write back)."""
        cfg = self.cfg
        MC, DR, AW = cfg.cols, cfg.drain_rows, cfg.acc_width
        first_chunk, own, oaddr = self.first_chunk, self.own, wa_addr
        omem = [[Memory(shape=signed(AW), depth=_depth(cfg.out_depth), init=[])
                 for _ in range(MC)] for _ in range(2)]
        for b in range(2):
            for c in range(MC):
                m.submodules[f"omem{b}_{c}"] = omem[b][c]
        # output banks: read port 0 is the drain's in the bank being computed into (sel), the
        # streamer's in the other one (st_sel: it never streams bank sel), at st_addr; the
        # data are the current stream position's one clock later
        rdata = [[[None] * MC for _ in range(DR)] for _ in range(2)]
        wports = [[[None] * MC for _ in range(DR)] for _ in range(2)]
        for b in range(2):
            for c in range(MC):
                for j in range(DR):
                    rp = omem[b][c].read_port(domain="sync")
                    wports[b][j][c] = omem[b][c].write_port()
                    m.d.comb += rp.addr.eq(Mux(own[b], oaddr[j], self.st_addr) if j == 0
                                           else oaddr[j])
                    rdata[b][j][c] = rp.data
        # stage C: the banks' read data registered as they are (per bank: no logic between
        # a block RAM and its register), then the old partial sum added and written back.
        # Port 0's registers (wco<b>_0_<c>) also hold the streamer's words.
        wc_v = [_S(name=f"wc{j}_v", reset_less=False) for j in range(DR)]
        wc_addr = [_S(24, name=f"wc{j}_addr") for j in range(DR)]
        wc_new = [[_S(signed(AW), name=f"wc{j}_{c}") for c in range(MC)] for j in range(DR)]
        wc_old = [[[_S(signed(AW), name=f"wco{b}_{j}_{c}") for c in range(MC)]
                   for j in range(DR)] for b in range(2)]
        for j in range(DR):
            m.d.sync += [wc_v[j].eq(wb_v[j]), wc_addr[j].eq(wb_addr[j])]
            for c in range(MC):
                m.d.sync += wc_new[j][c].eq(wb_new[j][c])
                for b in range(2):
                    m.d.sync += wc_old[b][j][c].eq(rdata[b][j][c])
                    wp = wports[b][j][c]
                    m.d.comb += [wp.addr.eq(wc_addr[j]),
                                 wp.data.eq(Mux(first_chunk, wc_new[j][c],
                                                wc_old[b][j][c] + wc_new[j][c])),
                                 wp.en.eq(wc_v[j] & own[b])]
        m.d.comb += [self.words[b][c].eq(wc_old[b][0][c]) for b in range(2) for c in range(MC)]
