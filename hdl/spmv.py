# SPDX-License-Identifier: Apache-2.0
"""EIE-style sparse matrix-vector engine with load-balanced PEs (seed 000)."""

from amaranth.hdl import Array, Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from gen.spmv import (KIND_END, KIND_ENTRY, KIND_LAST, KIND_NOP, KIND_ROW, KIND_SKIP,
                      SpmvConfig)
from gen.fixed import index_bits
from .fixed import round_shift, saturate
from .spmv_pe import SpmvPE

__all__ = ["SpmvEngine", "word_layout"]

INIT, IDLE, COMPUTE, DRAIN = 0, 1, 2, 3


def word_layout(cfg: SpmvConfig) -> data.StructLayout:
    """The weight-stream word (``value`` in the LSBs, ``kind`` in the MSBs)."""
    return data.StructLayout({"value": signed(cfg.w_fmt.width),
                              "idx": unsigned(cfg.idx_bits),
                              "pe": unsigned(cfg.pe_bits),
                              "kind": unsigned(3)})


class SpmvEngine(wiring.Component):
    """``y = W @ x`` on ``P`` PEs with run-time loaded, column-packed sparse weights.

    The arithmetic is exactly :func:`gen.spmv.ref_spmv`; the memory layout and the
    weight-stream words are documented in :mod:`gen.spmv` (built by
    :func:`gen.spmv.compile_tiled` / :func:`gen.spmv.weight_beats`).

    Parameters
    ----------
    cfg : :class:`gen.spmv.SpmvConfig`

    Members
    -------
    w : In(stream.Signature(data.ArrayLayout(word_layout(cfg), w_lanes)))
        Weight beats: ``w_lanes`` words ``{value: w_fmt, idx: u(idx_bits), pe:
        u(pe_bits), kind: u3}`` (:mod:`gen.spmv` documents the kinds).  A block ends
        with an END beat; ready while the bank being loaded is free.  Valid/ready.
    x : In(stream.Signature(signed(x_fmt.width)))
        Activations, ``x_fmt``, one per clock, exactly the block's columns per block
        (column order).  Valid/ready; zero activations are dropped by the non-zero
        detector.
    o : Out(stream.Signature(signed(out_fmt.width)))
        Results ``y``, ``out_fmt``, the block row's rows after its last block, in
        original row order.  Valid/ready stream with back-pressure.

    Tile controller
    ---------------
    The loader fills weight bank ``lbank`` whenever it is free, independently of the
    compute side (so the next block loads while the current one computes).  Compute
    states: INIT (clear every accumulator, ``rows_per_pe`` clocks after reset) ->
    IDLE (wait for a loaded bank) -> COMPUTE (accept ``x``, one per clock; stage 1
    reads every PE's ``ptr[j]``; stage 2 pushes ``(x_j, start, count)`` into the FIFOs
    of the PEs with ``count > 0`` and stalls ``x`` only while such a FIFO is full) ->
    when every PE is idle: the bank is released and IDLE follows, or, after a block
    row's last block, DRAIN (read ``rowmap`` and that PE's accumulator, clear it, send
    the rounded, saturated result; a 3-stage pipeline that stalls as a whole), then
    release and IDLE.

    Latency/throughput
    ------------------
    An activation is pushed into the FIFOs 2 clocks after its transfer (pointer read,
    pointer register); a PE issues one non-zero per clock and writes its accumulator
    4 clocks after the issue; the first result leaves 7 clocks after the last
    accumulator write, then one per clock.  Every memory output is registered
    before logic uses it.
    :func:`gen.spmv.cycle_model` predicts every transfer's cycle exactly.
    """

    def __init__(self, cfg: SpmvConfig):
        if not isinstance(cfg, SpmvConfig):
            raise TypeError(f"cfg must be an SpmvConfig, not {cfg!r}")
        self.cfg = cfg
        super().__init__({
            "w": In(stream.Signature(data.ArrayLayout(word_layout(cfg), cfg.w_lanes))),
            "x": In(stream.Signature(signed(cfg.x_fmt.width))),
            "o": Out(stream.Signature(signed(cfg.out_fmt.width))),
        })

    @property
    def latency(self) -> int:
        """Clocks from an activation's transfer to its first accumulator write (PE idle):
        pointer read, pointer register and push, issue, then the PE's 4 stages."""
        return 3 + SpmvConfig.pe_latency

    ii = 1

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        P, R = cfg.pes, cfg.rows_per_pe
        pes = []
        for p in range(P):
            pe = SpmvPE(cfg)
            m.submodules[f"pe{p}"] = pe
            pes.append(pe)
        L = cfg.w_lanes
        rb = index_bits(cfg.lane_rows)
        maps = []
        for lane in range(L):
            mem = Memory(shape=unsigned(cfg.pe_bits + cfg.idx_bits), depth=2 << rb, init=[])
            m.submodules[f"rowmap{lane}"] = mem
            maps.append((mem.write_port(), mem.read_port(domain="sync")))

        # ---- loader: fills weight bank `lbank` while the other one is computed on
        full = Signal(2)                 # bank holds a loaded, not yet finished block
        full_set, full_clr = Signal(2), Signal(2)
        lbank, cbank = Signal(), Signal()
        mb_load, mbank = Signal(), Signal()          # rowmap banks (one per block row)
        n_cols = [Signal(unsigned(cfg.col_bits), name=f"n_cols{b}") for b in range(2)]
        last = [Signal(name=f"last{b}") for b in range(2)]
        n_rows = [Signal(unsigned(cfg.row_bits), name=f"n_rows{b}") for b in range(2)]
        row_cnt = [Signal(unsigned(cfg.row_bits), name=f"row_cnt{l}") for l in range(L)]
        words = [self.w.payload[l] for l in range(L)]
        w_take = self.w.valid & self.w.ready
        end_take = w_take & (words[0].kind == KIND_END)
        m.d.comb += self.w.ready.eq(~full.bit_select(lbank, 1))
        for p, pe in enumerate(pes):
            word = words[p % L]
            m.d.comb += [
                pe.ld_bank.eq(lbank), pe.cp_bank.eq(cbank), pe.ld_start.eq(end_take),
                pe.ld_entry.eq(w_take & ((word.kind == KIND_ENTRY) | (word.kind == KIND_LAST))
                               & (word.pe == p)),
                pe.ld_close.eq(w_take & ((word.kind == KIND_LAST) | (word.kind == KIND_SKIP))
                               & (word.pe == p)),
                pe.ld_value.eq(word.value), pe.ld_idx.eq(word.idx),
            ]
        for lane, word in enumerate(words):
            map_w = maps[lane][0]
            with m.If(w_take & (word.kind == KIND_ROW)):
                m.d.comb += [map_w.addr.eq(Cat(row_cnt[lane][:rb], mb_load)),
                             map_w.data.eq(Cat(word.idx, word.pe)), map_w.en.eq(1)]
                m.d.sync += row_cnt[lane].eq(row_cnt[lane] + 1)
        with m.If(end_take):
            is_last = words[0].value[0]
            m.d.comb += full_set.eq(Mux(lbank, 0b10, 0b01))
            m.d.sync += lbank.eq(~lbank)
            for b in range(2):
                with m.If(lbank == b):
                    # every PE closes every column once: PE 0's count is the block's
                    m.d.sync += [n_cols[b].eq(pes[0].ld_cols), last[b].eq(is_last)]
            with m.If(is_last):
                m.d.sync += [mb_load.eq(~mb_load)] + [c.eq(0) for c in row_cnt]
                total = row_cnt[0]
                for c in row_cnt[1:]:
                    total = total + c
                for b in range(2):
                    with m.If(mb_load == b):
                        m.d.sync += n_rows[b].eq(total)
        m.d.sync += full.eq((full | full_set) & ~full_clr)

        cur_cols = Mux(cbank, n_cols[1], n_cols[0])
        cur_last = Mux(cbank, last[1], last[0])
        cur_rows = Mux(mbank, n_rows[1], n_rows[0])
        release = Signal()
        m.d.comb += full_clr.eq(Mux(release, Mux(cbank, 0b10, 0b01), 0))
        with m.If(release):
            m.d.sync += cbank.eq(~cbank)

        state = Signal(2, init=INIT)
        in_compute, in_drain = state == COMPUTE, state == DRAIN

        # ---- compute: non-zero detector, pointer read, broadcast
        cols_in = Signal(unsigned(cfg.col_bits))
        s1_valid, s2_valid = Signal(), Signal()
        s1_x, s2_x = Signal(signed(cfg.x_fmt.width)), Signal(signed(cfg.x_fmt.width))
        stall = Signal()
        m.d.comb += stall.eq(s2_valid & Cat(pe.full & pe.ptr_nz for pe in pes).any())
        advance = ~stall
        m.d.comb += self.x.ready.eq(in_compute & advance & (cols_in != cur_cols))
        x_take = self.x.valid & self.x.ready
        for pe in pes:
            m.d.comb += [pe.ptr_addr.eq(cols_in), pe.ptr_en.eq(advance),
                         pe.push.eq(in_compute & advance & s2_valid & pe.ptr_nz),
                         pe.push_x.eq(s2_x)]
        with m.If(in_compute & advance):
            m.d.sync += [s1_valid.eq(x_take & (self.x.payload != 0)), s1_x.eq(self.x.payload),
                         s2_valid.eq(s1_valid), s2_x.eq(s1_x)]
        with m.If(x_take):
            m.d.sync += cols_in.eq(cols_in + 1)
        all_idle = Cat(pe.idle for pe in pes).all()

        # ---- drain: rowmap read -> register -> accumulator read (and clear) -> register
        #      -> round/saturate -> o.  Stalls as a whole while o is back-pressured.
        k = Signal(unsigned(cfg.row_bits))
        k_lane = Signal(range(max(L, 2)))   # k mod L
        k_div = Signal(unsigned(rb))        # k div L
        dv = [Signal(name=f"drain_v{i}") for i in range(4)]
        lane0, lane1 = Signal(range(max(L, 2))), Signal(range(max(L, 2)))
        sel1, sel2 = Signal(unsigned(cfg.pe_bits)), Signal(unsigned(cfg.pe_bits))
        map_q = [Signal(unsigned(cfg.pe_bits + cfg.idx_bits), name=f"map_q{lane}")
                 for lane in range(L)]
        adv_d = ~self.o.valid | self.o.ready
        issue = adv_d & (k != cur_rows)
        for _, map_r in maps:
            m.d.comb += [map_r.addr.eq(Cat(k_div, mbank)), map_r.en.eq(adv_d)]
        map_data = Array(map_q)[lane1] if L > 1 else map_q[0]
        map_idx = map_data[:cfg.idx_bits]
        map_pe = map_data[cfg.idx_bits:]
        clr = Signal(range(R + 1))
        for p, pe in enumerate(pes):
            m.d.comb += [pe.drain.eq(in_drain), pe.acc_en.eq(adv_d), pe.acc_addr.eq(map_idx)]
            with m.If(state == INIT):
                m.d.comb += [pe.clr_en.eq(1), pe.clr_addr.eq(clr)]
            with m.Elif(in_drain & adv_d & dv[1] & (map_pe == p)):
                # clear behind the read (the read port is not transparent)
                m.d.comb += [pe.clr_en.eq(1), pe.clr_addr.eq(map_idx)]
        acc_sel = Array(pe.acc_data for pe in pes)[sel2] if P > 1 else pes[0].acc_data
        result = saturate(round_shift(acc_sel, cfg.acc_frac - cfg.out_fmt.frac_bits),
                          cfg.out_fmt)
        with m.If(in_drain & adv_d):
            m.d.sync += [dv[0].eq(issue), dv[1].eq(dv[0]), dv[2].eq(dv[1]), dv[3].eq(dv[2]),
                         self.o.valid.eq(dv[3]), k.eq(k + issue),
                         lane0.eq(k_lane), lane1.eq(lane0), sel1.eq(map_pe), sel2.eq(sel1),
                         self.o.payload.eq(result)]
            m.d.sync += [q.eq(map_r.data) for q, (_, map_r) in zip(map_q, maps)]
            with m.If(issue):
                if L > 1:
                    with m.If(k_lane == L - 1):
                        m.d.sync += [k_lane.eq(0), k_div.eq(k_div + 1)]
                    with m.Else():
                        m.d.sync += k_lane.eq(k_lane + 1)
                else:
                    m.d.sync += k_div.eq(k_div + 1)

        # ---- tile controller: initial clear / compute (next block loads) / drain
        with m.Switch(state):
            with m.Case(INIT):
                m.d.sync += clr.eq(clr + 1)
                with m.If(clr == R - 1):
                    m.d.sync += state.eq(IDLE)
            with m.Case(IDLE):
                with m.If(full.bit_select(cbank, 1)):
                    m.d.sync += [state.eq(COMPUTE), cols_in.eq(0), s1_valid.eq(0),
                                 s2_valid.eq(0)]
            with m.Case(COMPUTE):
                with m.If((cols_in == cur_cols) & ~s1_valid & ~s2_valid & all_idle):
                    with m.If(cur_last):
                        m.d.sync += [state.eq(DRAIN), k.eq(0), k_lane.eq(0), k_div.eq(0)]
                        m.d.sync += [v.eq(0) for v in dv]
                    with m.Else():
                        m.d.comb += release.eq(1)
                        m.d.sync += state.eq(IDLE)
            with m.Case(DRAIN):
                with m.If((k == cur_rows) & ~Cat(*dv).any() & ~self.o.valid):
                    m.d.comb += release.eq(1)
                    m.d.sync += [state.eq(IDLE), mbank.eq(~mbank)]
        return m

    def port_info(self) -> dict:
        cfg = self.cfg
        word = (f"{{value: {cfg.w_fmt}, idx: u{cfg.idx_bits}, pe: u{cfg.pe_bits}, kind: u3}}"
                f" x {cfg.w_lanes} lanes")
        return {
            "w": {"format": word,
                  "protocol": "valid/ready stream of weight beats (kinds ENTRY, LAST, SKIP, ROW, "
                              "NOP; one END beat per block); ready while the loading bank "
                              "is free"},
            "x": {"format": str(cfg.x_fmt),
                  "protocol": "valid/ready stream, activations in column order, the block's "
                              "columns per block"},
            "o": {"format": str(cfg.out_fmt),
                  "protocol": "valid/ready stream, y in original row order, a block row's "
                              "rows after its last block"},
        }

    def manifest_extra(self) -> dict:
        cfg = self.cfg
        return {"memory_layout": {
            "banks": 2,
            "entries": {"per_pe": True, "depth_per_bank": cfg.mem_depth,
                        "word": f"{{weight: {cfg.w_fmt}, local_row: u{cfg.idx_bits}}}",
                        "order": "column-packed, column 0 first, rows ascending, "
                                 "no terminators"},
            "ptr": {"per_pe": True, "depth_per_bank": cfg.max_cols,
                    "word": f"{{start: u{cfg.addr_bits}, count: u{cfg.count_bits}, "
                            f"nonzero: u1}}",
                    "meaning": "column j's entries are entries[start .. start+count-1]"},
            "rowmap": {"per_lane": True, "depth_per_bank": cfg.lane_rows,
                       "word": f"{{local_row: u{cfg.idx_bits}, pe: u{cfg.pe_bits}}}",
                       "meaning": "row r of the block row (lane r mod w_lanes, address "
                                  "r div w_lanes) -> its PE and accumulator"},
            "accumulators": {"per_pe": True, "depth": cfg.rows_per_pe,
                             "format": str(cfg.acc_fmt), "saturating": True},
            "weight_word_kinds": {"ENTRY": KIND_ENTRY, "LAST": KIND_LAST, "SKIP": KIND_SKIP,
                                  "ROW": KIND_ROW, "END": KIND_END, "NOP": KIND_NOP},
            "weight_lanes": cfg.w_lanes,
        }}
