# SPDX-License-Identifier: Apache-2.0
"""EIE-style sparse matrix-vector engine with load-balanced PEs (seed 000)."""

from types import SimpleNamespace

from amaranth.hdl import (Cat, ClockDomain, ClockSignal, Const, DomainRenamer, Module, Mux,
                          ResetInserter, ResetSignal, Signal, Value, signed, unsigned)
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from gen.spmv import KIND_END, KIND_ENTRY, KIND_LAST, KIND_NOP, KIND_ROW, KIND_SKIP, SpmvConfig
from gen.core.fixed import index_bits
from hdl.lib.arith import round_shift
from hdl.lib.fifo import Queue
from hdl.spmv.pe import SpmvPE

__all__ = ["SpmvEngine", "word_layout", "out_layout"]


def _broadcast(m, value, n, depth, name):
    """``n`` copies of ``value``, each ``depth`` clocks late, from a binary tree of
    registers (``2 ** depth >= n`` leaves).  The two children of a node hold the node's
    value and its complement, so no two tree registers compute the same function and
    Yosys keeps every one (identical registers would be merged back into one
    chip-wide net); each leaf undoes its polarity.  The registers have no reset (a
    reset net reaching all of them would cross the chip again): the PEs are reset
    through such a tree too, ``depth`` clocks late, exactly when the values that were
    in the trees at the reset arrive."""
    value = Value.cast(value).as_unsigned()
    ones = (1 << len(value)) - 1
    nodes = [(value, False)]
    for level in range(depth):
        nxt = []
        for sig, inv in nodes:
            for flip in (False, True):
                reg = Signal(len(value), name=f"{name}_t{level}_{len(nxt)}",
                             init=ones if inv ^ flip else 0, reset_less=True)
                m.d.sync += reg.eq(~sig if flip else sig)
                nxt.append((reg, inv ^ flip))
        nodes = nxt
    assert len(nodes) >= n
    return [(~sig if inv else sig) for sig, inv in nodes[:n]]


def _reduce(m, bits, op, name):
    """A registered 4-way OR/AND tree over ``bits``: ``ceil(log4 n)`` levels."""
    level, k = list(bits), 0
    while len(level) > 1:
        nxt = []
        for i in range(0, len(level), 4):
            group = Cat(*level[i:i + 4])
            reg = Signal(name=f"{name}_r{k}_{i // 4}", reset_less=True)
            m.d.sync += reg.eq(group.any() if op == "or" else group.all())
            nxt.append(reg)
        level, k = nxt, k + 1
    return level[0]


def _saturate(value, fmt):
    """:func:`hdl.fixed.saturate` with the range test as "the bits above the format
    all equal its sign bit" (a few LUTs instead of two wide comparisons)."""
    value = value.as_signed()
    w = fmt.width
    if len(value) <= w:
        return value
    top = value[w - 1:]
    ok = (top == 0) | (top == (1 << len(top)) - 1)
    hi = Const(fmt.max_code, signed(w))
    lo = Const(fmt.min_code, signed(w))
    return Mux(ok, value[:w].as_signed(), Mux(value[-1], lo, hi))

INIT, IDLE, COMPUTE, DRAIN = 0, 1, 2, 3


def word_layout(cfg: SpmvConfig) -> data.StructLayout:
    """The weight-stream word (``value`` in the LSBs, ``kind`` in the MSBs)."""
    return data.StructLayout({"value": signed(cfg.w_fmt.width),
                              "idx": unsigned(cfg.idx_bits),
                              "pe": unsigned(cfg.pe_bits),
                              "kind": unsigned(3)})


def out_layout(cfg: SpmvConfig):
    """The result-stream payload: one ``out_fmt`` word (``drain_lanes`` = 1), else
    ``{data: drain_lanes words (word k in bits k * width ..), n: words present}`` (the first
    ``n`` of the transfer: ``drain_lanes`` but on a block row's last transfer)."""
    word = signed(cfg.out_fmt.width)
    if cfg.drain_lanes == 1:
        return word
    return data.StructLayout({"data": data.ArrayLayout(word, cfg.drain_lanes),
                              "n": unsigned(cfg.drain_lanes.bit_length())})


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
    o : Out(stream.Signature(out_layout(cfg)))
        Results ``y``, ``out_fmt``, the block row's rows after its last block, in
        original row order, ``drain_lanes`` rows per transfer (:func:`out_layout`: with
        ``drain_lanes`` > 1 a ``{data, n}`` struct, rows ``k D + l`` in word ``l``, the
        block row's last transfer holding the remaining ``n``).  Valid/ready stream with
        back-pressure.

    Tile controller
    ---------------
    The loader fills weight bank ``lbank`` whenever it is free, independently of the
    compute side (so the next block loads while the current one computes).  Compute
    states: INIT (clear every accumulator, ``rows_per_pe`` clocks after reset) ->
    IDLE (wait for a loaded bank) -> COMPUTE (accept ``x``, one per clock, while the
    registered ``stall`` is low; the column address and ``(valid, x)`` reach every PE
    through broadcast trees, each PE reads its ``ptr[j]`` and pushes ``(x_j, start,
    count)`` into its FIFO when ``count > 0``) -> when every PE is seen idle: the bank
    is released and IDLE follows, or, after a block row's last block, DRAIN (read
    ``rowmap``, then that PE's accumulator, clear it, collect, round and saturate the
    result into the result FIFO; a pipeline that never stalls, rows issued against
    credits), then release and IDLE.

    Timing structure: every engine-to-PE signal passes a binary broadcast tree of
    ``cfg.tree_levels`` registers, every PE-to-engine signal a registered 4-way tree
    of ``cfg.reduce_levels`` levels, so no net has to cross the chip in one clock.

    Latency/throughput
    ------------------
    An activation is pushed into the FIFOs ``cfg.push_delay`` clocks after its
    transfer; a PE issues one non-zero per clock and its sum is final
    ``cfg.pe_latency`` clocks after the issue; a block is done ``cfg.done_delay``
    clocks after its PEs go idle; the drain starts one clock later and its first result
    leaves ``cfg.drain_latency`` clocks after that, then one transfer (``drain_lanes``
    rows) per clock.  Every memory
    output is registered before logic uses it.
    :func:`gen.spmv.cycle_model` predicts every transfer's cycle exactly.
    """

    def __init__(self, cfg: SpmvConfig):
        if not isinstance(cfg, SpmvConfig):
            raise TypeError(f"cfg must be an SpmvConfig, not {cfg!r}")
        self.cfg = cfg
        super().__init__({
            "w": In(stream.Signature(data.ArrayLayout(word_layout(cfg), cfg.w_lanes))),
            "x": In(stream.Signature(signed(cfg.x_fmt.width))),
            "o": Out(stream.Signature(out_layout(cfg))),
        })

    @property
    def latency(self) -> int:
        """Clocks from an activation's transfer to its first final sum (PE idle):
        broadcast tree, pointer read, pointer register and push, issue, the PE's
        stages."""
        return self.cfg.push_delay + 1 + SpmvConfig.pe_latency

    ii = 1

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        P, R = cfg.pes, cfg.rows_per_pe
        # The PEs run in the local domain `pe` (the same clock) whose reset is a leaf of
        # a broadcast tree of `rst`: PE p is reset tree_levels clocks after the engine,
        # like every other signal that reaches it, and no reset net crosses the chip.
        m.domains.pe = ClockDomain("pe", local=True, reset_less=True)
        m.d.comb += ClockSignal("pe").eq(ClockSignal("sync"))
        rst_leaves = _broadcast(m, ResetSignal("sync"), P, cfg.tree_levels, "rtree")
        pes = []
        for p in range(P):
            pe = SpmvPE(cfg, p)
            m.submodules[f"pe{p}"] = ResetInserter({"pe": rst_leaves[p]})(
                DomainRenamer({"sync": "pe"})(pe))
            m.d.comb += pe.rst_in.eq(rst_leaves[p])
            pes.append(pe)
        L = cfg.w_lanes
        rb = index_bits(cfg.lane_rows)
        maps = []
        for lane in range(L):
            # written (loader) and read (drain) in different banks: no collision logic
            mem = Memory(shape=unsigned(cfg.pe_bits + cfg.idx_bits), depth=2 << rb, init=[],
                         attrs={"no_rw_check": 1})
            m.submodules[f"rowmap{lane}"] = mem
            maps.append((mem.write_port(), mem.read_port(domain="sync")))

        ld = self._loader(m, pes, maps)
        full, full_clr, cbank, mbank = ld.full, ld.full_clr, ld.cbank, ld.mbank
        n_cols, cols_nz, last, n_rows, rows_nz = (
            ld.n_cols, ld.cols_nz, ld.last, ld.n_rows, ld.rows_nz)

        cur_cols = Mux(cbank, n_cols[1], n_cols[0])
        cur_last = Mux(cbank, last[1], last[0])
        release = Signal()
        m.d.comb += full_clr.eq(Mux(release, Mux(cbank, 0b10, 0b01), 0))
        with m.If(release):
            m.d.sync += cbank.eq(~cbank)

        state = Signal(2, init=INIT)
        in_compute, in_drain = state == COMPUTE, state == DRAIN

        cols_in, cols_left, more, be, done = self._compute(m, pes, in_compute, cbank)

        k_lane, k_div, rows_left, rows_more, dv_any, ofifo, clr = self._drain(
            m, pes, maps, in_drain, state == INIT, mbank)

        # ---- tile controller: initial clear / compute (next block loads) / drain
        with m.Switch(state):
            with m.Case(INIT):
                m.d.sync += clr.eq(clr + 1)
                with m.If(clr == R - 1):
                    m.d.sync += state.eq(IDLE)
            with m.Case(IDLE):
                with m.If(full.bit_select(cbank, 1)):
                    m.d.sync += [state.eq(COMPUTE), cols_in.eq(0),
                                 cols_left.eq(cur_cols),
                                 more.eq(Mux(cbank, cols_nz[1], cols_nz[0]))]
            with m.Case(COMPUTE):
                with m.If(done):
                    # the delayed flags must not carry this block's end into the next
                    m.d.sync += [v.eq(0) for v in be]
                    with m.If(cur_last):
                        m.d.sync += [state.eq(DRAIN), k_lane.eq(0), k_div.eq(0),
                                     rows_left.eq(Mux(mbank, n_rows[1], n_rows[0])),
                                     rows_more.eq(Mux(mbank, rows_nz[1], rows_nz[0]))]
                    with m.Else():
                        m.d.comb += release.eq(1)
                        m.d.sync += state.eq(IDLE)
            with m.Case(DRAIN):
                with m.If(~rows_more & ~dv_any & ~ofifo.o.valid):
                    m.d.comb += release.eq(1)
                    m.d.sync += [state.eq(IDLE), mbank.eq(~mbank)]
        return m

    def _loader(self, m, pes, maps):
        """The loader: fills weight bank ``lbank`` (and rowmap bank ``mb_load``) while the
        other one is computed on; returns the bank state the tile controller reads."""
        cfg = self.cfg
        L = cfg.w_lanes
        rb = index_bits(cfg.lane_rows)
        # ---- loader: fills weight bank `lbank` while the other one is computed on.
        # A word is registered here, then decoded and registered in its PE, so the PEs
        # process it 2 clocks after its transfer; an END beat marks its bank full
        # (computable) 2 clocks later too.  `busy` covers those clocks.
        full = Signal(2)                 # bank holds a loaded, not yet finished block
        busy = Signal(2)                 # bank being finished or full
        full_set, full_clr = Signal(2), Signal(2)
        lbank, cbank = Signal(), Signal()
        mb_load, mbank = Signal(), Signal()          # rowmap banks (one per block row)
        # (a bank's descriptors are loaded before its full flag is set, or with it, and
        # read only while it is set: no reset; nor has any register below that is loaded
        # before it is used or only read under a valid bit that has one: the reset net
        # reaches the control state only, not every data register of the engine)
        n_cols = [Signal(unsigned(cfg.col_bits), name=f"n_cols{b}", reset_less=True)
                  for b in range(2)]
        cols_nz = [Signal(name=f"cols_nz{b}", reset_less=True) for b in range(2)]
        last = [Signal(name=f"last{b}", reset_less=True) for b in range(2)]
        n_rows = [Signal(unsigned(cfg.row_bits), name=f"n_rows{b}", reset_less=True)
                  for b in range(2)]
        rows_nz = [Signal(name=f"rows_nz{b}", reset_less=True) for b in range(2)]
        row_cnt = [Signal(unsigned(cfg.row_bits), name=f"row_cnt{l}") for l in range(L)]
        words = [self.w.payload[l] for l in range(L)]
        w_take = self.w.valid & self.w.ready
        end_take = w_take & (words[0].kind == KIND_END)
        m.d.comb += self.w.ready.eq(~busy.bit_select(lbank, 1))
        # registered and decoded (kind as flags), then sent to the PEs of each lane
        # through a broadcast tree of `tree_levels` registers
        B = cfg.tree_levels
        lw_bank = Signal(name="lw_bank", reset_less=True)
        lw_end = Signal(name="lw_end", reset_less=True)
        lw_take = Signal(name="lw_take")
        lw = [Signal(word_layout(cfg), name=f"lw{l}", reset_less=True) for l in range(L)]
        lw_entry = [Signal(name=f"lw_entry{l}", reset_less=True) for l in range(L)]
        lw_close = [Signal(name=f"lw_close{l}", reset_less=True) for l in range(L)]
        m.d.sync += [lw_bank.eq(lbank), lw_end.eq(end_take), lw_take.eq(w_take)]
        m.d.sync += [r.eq(wd) for r, wd in zip(lw, words)]
        m.d.sync += [e.eq((wd.kind == KIND_ENTRY) | (wd.kind == KIND_LAST))
                     for e, wd in zip(lw_entry, words)]
        m.d.sync += [c.eq((wd.kind == KIND_LAST) | (wd.kind == KIND_SKIP))
                     for c, wd in zip(lw_close, words)]
        for lane in range(L):
            lane_pes = pes[lane::L]
            bundle = Cat(lw_take, lw_end, lw_bank, lw_entry[lane], lw_close[lane],
                         lw[lane].pe, lw[lane].value, lw[lane].idx)
            for pe, leaf in zip(lane_pes, _broadcast(m, bundle, len(lane_pes), B,
                                                      f"ldtree{lane}")):
                pos = 0
                for f in (pe.lw_take, pe.lw_end, pe.lw_bank, pe.lw_entry, pe.lw_close,
                          pe.lw_pe, pe.lw_value, pe.lw_idx):
                    m.d.comb += f.eq(leaf[pos:pos + len(f)])
                    pos += len(f)
        rows_seen = Signal()             # a ROW word since the last block row ended
        with m.If(w_take & Cat(wd.kind == KIND_ROW for wd in words).any()):
            m.d.sync += rows_seen.eq(1)
        for lane, word in enumerate(words):
            # the rowmap's write side is registers (the write lands one clock later;
            # the rowmap is read only in the drain, long after)
            map_w = maps[lane][0]
            mw_en = Signal(name=f"map_w_en{lane}")
            mw_addr = Signal(len(map_w.addr), name=f"map_w_addr{lane}", reset_less=True)
            mw_data = Signal(len(map_w.data), name=f"map_w_data{lane}", reset_less=True)
            is_row = w_take & (word.kind == KIND_ROW)
            m.d.sync += [mw_en.eq(is_row), mw_addr.eq(Cat(row_cnt[lane][:rb], mb_load)),
                         mw_data.eq(Cat(word.idx, word.pe))]
            m.d.comb += [map_w.addr.eq(mw_addr), map_w.data.eq(mw_data), map_w.en.eq(mw_en)]
            with m.If(is_row):
                m.d.sync += row_cnt[lane].eq(row_cnt[lane] + 1)
        # END: the PEs process it load_delay - 2 clocks after its transfer; PE 0 then
        # latches the block's column count, which reaches the engine one clock later
        E = cfg.load_delay
        end_v = [Signal(name=f"end_v{i}") for i in range(E)]
        end_bank = [Signal(name=f"end_bank{i}", reset_less=True) for i in range(E)]
        end_last = [Signal(name=f"end_last{i}", reset_less=True) for i in range(E)]
        m.d.sync += [end_v[0].eq(end_take), end_bank[0].eq(lbank),
                     end_last[0].eq(words[0].value[0])]
        for i in range(1, E):
            m.d.sync += [end_v[i].eq(end_v[i - 1]), end_bank[i].eq(end_bank[i - 1]),
                         end_last[i].eq(end_last[i - 1])]
        cols_q = Signal(unsigned(cfg.col_bits), name="cols_q", reset_less=True)
        cols_nz_q = Signal(name="cols_nz_q", reset_less=True)
        m.d.sync += [cols_q.eq(pes[0].blk_cols), cols_nz_q.eq(pes[0].blk_cols_nz)]
        busy_set = Signal(2)
        with m.If(end_take):
            is_last = words[0].value[0]
            m.d.comb += busy_set.eq(Mux(lbank, 0b10, 0b01))
            m.d.sync += lbank.eq(~lbank)
            with m.If(is_last):
                m.d.sync += [mb_load.eq(~mb_load), rows_seen.eq(0)] + [c.eq(0) for c in row_cnt]
                total = row_cnt[0]
                for c in row_cnt[1:]:
                    total = total + c
                for b in range(2):
                    with m.If(mb_load == b):
                        m.d.sync += [n_rows[b].eq(total), rows_nz[b].eq(rows_seen)]
        with m.If(end_v[E - 1]):
            # the PEs have processed every word of the block: PE 0's column count is
            # the block's (every PE closes every column once)
            m.d.comb += full_set.eq(Mux(end_bank[E - 1], 0b10, 0b01))
            for b in range(2):
                with m.If(end_bank[E - 1] == b):
                    m.d.sync += [n_cols[b].eq(cols_q), cols_nz[b].eq(cols_nz_q),
                                 last[b].eq(end_last[E - 1])]
        m.d.sync += [full.eq((full | full_set) & ~full_clr),
                     busy.eq((busy | busy_set) & ~full_clr)]
        return SimpleNamespace(full=full, full_clr=full_clr, cbank=cbank, mbank=mbank,
                               n_cols=n_cols, cols_nz=cols_nz, last=last, n_rows=n_rows,
                               rows_nz=rows_nz)

    def _compute(self, m, pes, in_compute, cbank):
        """The compute side: non-zero detector, broadcast, pointer read; returns the column
        counters and ``done`` (the broadcaster empty and every PE idle)."""
        cfg = self.cfg
        P, B = cfg.pes, cfg.tree_levels
        # ---- compute: non-zero detector, broadcast, pointer read.  Nothing after the
        # accept of x stalls.  The column address (at the accept) and (valid, x) two
        # clocks later reach the PEs through broadcast trees (B clocks); each PE reads
        # its ptr[j], registers it and pushes (x_j, start, count) when count > 0.  The
        # accept waits for `stall`, a register: some FIFO held >= fifo_depth items
        # stall_delay clocks earlier (PE flag -> OR tree); the FIFOs have slots for
        # what is in flight.
        # (the column counters are loaded on entering COMPUTE and the activations are
        # read under s1_valid / s2_valid: no reset)
        cols_in = Signal(unsigned(cfg.col_bits), reset_less=True)
        cols_left = Signal(unsigned(cfg.col_bits), reset_less=True)
        more = Signal(reset_less=True)    # cols_left != 0
        s1_valid, s2_valid = Signal(name="s1_valid"), Signal(name="s2_valid")
        s1_x = Signal(signed(cfg.x_fmt.width), name="s1_x", reset_less=True)
        s2_x = Signal(signed(cfg.x_fmt.width), name="s2_x", reset_less=True)
        stall = _reduce(m, [pe.high for pe in pes], "or", "stall")
        all_idle = _reduce(m, [pe.idle for pe in pes], "and", "idle")
        m.d.comb += self.x.ready.eq(in_compute & ~stall & more)
        x_take = self.x.valid & self.x.ready
        m.d.sync += [s1_valid.eq(x_take & (self.x.payload != 0)), s1_x.eq(self.x.payload),
                     s2_valid.eq(s1_valid), s2_x.eq(s1_x)]
        for pe, leaf in zip(pes, _broadcast(m, Cat(cols_in, cbank), P, B, "ptree")):
            m.d.comb += [pe.ptr_addr.eq(leaf[:cfg.col_bits]), pe.cp_bank.eq(leaf[-1])]
        for pe, leaf in zip(pes, _broadcast(m, Cat(s2_valid, s2_x), P, B, "xtree")):
            m.d.comb += [pe.push_v.eq(leaf[0]), pe.push_x.eq(leaf[1:])]
        # s2_valid of the last B + 1 clocks: in the trees, or in the PEs' push registers
        in_flight = Signal(B + 1, name="in_flight")
        if B >= 1:
            m.d.sync += in_flight.eq(Cat(s2_valid, in_flight[:-1]))
        else:
            m.d.sync += in_flight.eq(s2_valid)
        with m.If(x_take):
            m.d.sync += [cols_in.eq(cols_in + 1), cols_left.eq(cols_left - 1),
                         more.eq(cols_left != 1)]
        # done: the broadcaster empty and every PE idle, seen done_delay clocks late
        be = [Signal(name=f"bc_empty{i}") for i in range(cfg.done_delay)]
        m.d.sync += be[0].eq(in_compute & ~more & ~s1_valid & ~s2_valid
                             & ~in_flight.any())
        m.d.sync += [be[i].eq(be[i - 1]) for i in range(1, len(be))]
        done = be[-1] & all_idle
        return cols_in, cols_left, more, be, done

    def _drain(self, m, pes, maps, in_drain, in_init, mbank):
        """The drain pipeline and the result FIFO (``o``), the clear after reset; returns
        the row counters, "a drain valid bit is set" (a register), the result FIFO and the
        clear address."""
        cfg = self.cfg
        P, R, L, B, D = cfg.pes, cfg.rows_per_pe, cfg.w_lanes, cfg.tree_levels, cfg.drain_lanes
        rb = index_bits(cfg.lane_rows)
        # ---- drain: rowmap read -> register -> broadcast tree -> PE address register
        #      (and clear) -> accumulator read -> register (0 unless this PE's row) ->
        #      4-way OR tree (the last level also rounds) -> saturate -> result FIFO.
        #      It never stalls: a transfer is issued only while a result slot is free
        #      (credits), so back-pressure on o reaches no pipeline enable.  With D > 1
        #      lanes, each issue drains the rows k_div * D + l of every lane l at once:
        #      lane l's request reaches only the PEs p = l mod D (the rows' own), and each
        #      lane has its own OR tree.
        # (the row counters are loaded on entering DRAIN, the rest is data under the
        # drain valid bits: no reset)
        k_lane = Signal(range(max(L, 2)), reset_less=True)   # k mod L
        k_div = Signal(unsigned(rb), reset_less=True)        # k div L
        rows_left = Signal(unsigned(cfg.row_bits), reset_less=True)
        rows_more = Signal(reset_less=True)
        nd = cfg.drain_latency - 1
        dv = [Signal(name=f"drain_v{i}") for i in range(nd)]
        lane0 = Signal(range(max(L, 2)), reset_less=True)
        lane1 = Signal(range(max(L, 2)), reset_less=True)
        map_q = [Signal(unsigned(cfg.pe_bits + cfg.idx_bits), name=f"map_q{lane}",
                        reset_less=True) for lane in range(L)]
        # (out_slots RAM words behind a head register: `o` is driven by flip-flops)
        m.submodules.out_fifo = ofifo = Queue(out_layout(cfg), cfg.out_slots + 1,
                                              registered=True)
        wiring.connect(m, ofifo.o, wiring.flipped(self.o))
        cred = Signal(range(cfg.out_slots + 1), init=cfg.out_slots)
        pop = self.o.valid & self.o.ready
        issue = Signal()
        m.d.comb += issue.eq(in_drain & rows_more & (cred != 0))
        with m.If(issue & ~pop):
            m.d.sync += cred.eq(cred - 1)
        with m.Elif(~issue & pop):
            m.d.sync += cred.eq(cred + 1)
        for _, map_r in maps:
            m.d.comb += [map_r.addr.eq(Cat(k_div, mbank)), map_r.en.eq(1)]
        clr = Signal(range(R + 1))
        # drain requests (dv1) and the clear/drain modes reach the PEs through trees
        if D == 1:
            map_data = map_q[0]
            for lane in range(1, L):
                map_data = Mux(lane1 == lane, map_q[lane], map_data)
            reqs = [(pes, Cat(dv[1], map_data[cfg.idx_bits:], map_data[:cfg.idx_bits]), "")]
        else:
            # per transfer: the lanes holding a row (l < rows left) and their count,
            # carried down the pipeline beside dv
            dm = [Signal(D, name=f"drain_mask{i}", reset_less=True) for i in range(2)]
            dn = [Signal(range(D + 1), name=f"drain_n{i}", reset_less=True) for i in range(nd)]
            m.d.sync += [dm[0].eq(Cat(rows_left > lane for lane in range(D))), dm[1].eq(dm[0]),
                         dn[0].eq(Mux(rows_left >= D, D, rows_left)),
                         *[b.eq(a) for a, b in zip(dn, dn[1:])]]
            reqs = [(pes[lane::D], Cat(dv[1] & dm[1][lane], map_q[lane][cfg.idx_bits:],
                                       map_q[lane][:cfg.idx_bits]), str(lane))
                    for lane in range(D)]
        for lane_pes, req, tag in reqs:
            for pe, leaf in zip(lane_pes, _broadcast(m, req, len(lane_pes), B, f"dtree{tag}")):
                m.d.comb += [pe.dr_v.eq(leaf[0]), pe.dr_pe.eq(leaf[1:1 + cfg.pe_bits]),
                             pe.dr_idx.eq(leaf[1 + cfg.pe_bits:])]
        for pe, leaf in zip(pes, _broadcast(m, Cat(in_drain, in_init, clr), P, B,
                                            "ctree")):
            m.d.comb += [pe.drain.eq(leaf[0]), pe.clr_init.eq(leaf[1]),
                         pe.clr_addr.eq(leaf[2:])]
        # each PE outputs its drained accumulator or 0 (dv[4 + B]); registered 4-way OR
        # trees (one per lane, each as deep as one over all P PEs) collect them (the last
        # level also rounds); saturate; result FIFO
        sat = [self._collect(m, [pe.dr_data for pe in lane_pes], tag)
               for lane_pes, _, tag in reqs]
        if D == 1:
            m.d.comb += ofifo.i.payload.eq(sat[0])
        else:
            m.d.comb += [ofifo.i.payload.data.eq(Cat(*sat)), ofifo.i.payload.n.eq(dn[-1])]
        m.d.comb += ofifo.i.valid.eq(dv[-1])
        m.d.sync += [v.eq(u) for v, u in zip(dv[1:], dv)]
        m.d.sync += [dv[0].eq(issue), lane0.eq(k_lane), lane1.eq(lane0)]
        # "a drain valid bit is set", a register (= Cat(*dv).any() in every clock: the bits
        # of the next clock are issue and dv[:-1]), so the drain's end reaches `release`
        # and the bank flags from registers (clock rate)
        dv_any = Signal(name="drain_any")
        m.d.sync += dv_any.eq(issue | Cat(*dv[:-1]).any())
        m.d.sync += [q.eq(map_r.data) for q, (_, map_r) in zip(map_q, maps)]
        with m.If(issue):
            if D > 1:
                m.d.sync += [rows_left.eq(rows_left - D), rows_more.eq(rows_left > D),
                             k_div.eq(k_div + 1)]
            else:
                m.d.sync += [rows_left.eq(rows_left - 1), rows_more.eq(rows_left != 1)]
            if D == 1 and L > 1:
                with m.If(k_lane == L - 1):
                    m.d.sync += [k_lane.eq(0), k_div.eq(k_div + 1)]
                with m.Else():
                    m.d.sync += k_lane.eq(k_lane + 1)
            elif D == 1:
                m.d.sync += k_div.eq(k_div + 1)
        return k_lane, k_div, rows_left, rows_more, dv_any, ofifo, clr

    def _collect(self, m, vals, tag):
        """The registered 4-way OR tree over ``vals`` (``max(1, reduce_levels)`` levels
        whatever their number; the last level also rounds), then the saturating register;
        returns the saturated result."""
        cfg = self.cfg
        shift = cfg.acc_frac - cfg.out_fmt.frac_bits
        levels = max(1, cfg.reduce_levels)
        for level in range(levels):
            nvals = []
            for g, i in enumerate(range(0, len(vals), 4)):
                pick = vals[i]
                for v in vals[i + 1:i + 4]:
                    pick = pick | v
                pick = pick.as_signed()
                if level == levels - 1:
                    pick = round_shift(pick, shift)
                reg = Signal(signed(len(pick)), name=f"drain{tag}_m{level}_{g}",
                             reset_less=True)
                m.d.sync += reg.eq(pick)
                nvals.append(reg)
            vals = nvals
        assert len(vals) == 1
        sat_q = Signal(signed(cfg.out_fmt.width), name=f"drain{tag}_sat", reset_less=True)
        m.d.sync += sat_q.eq(_saturate(vals[0], cfg.out_fmt))
        return sat_q

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
