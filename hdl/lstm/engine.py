# SPDX-License-Identifier: Apache-2.0
"""LSTM layer engine: sparse gate SpMV, bias, PWL activations, cell/hidden update, feedback."""

from types import SimpleNamespace

from amaranth.hdl import Array, Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from gen.lstm import KIND_BIAS, KIND_COL, KIND_END, KIND_ENTRY, KIND_ROW, XK_X, LstmConfig
from hdl.lstm.pe import LstmPE

__all__ = ["LstmEngine", "word_layout", "x_layout"]

LOAD, INIT, IDLE, SEQ, SEQW, XFEED, HFEED, EW, EWW = range(9)


def word_layout(cfg: LstmConfig) -> data.StructLayout:
    """The weight-stream word (``value`` in the LSBs, ``kind`` in the MSBs)."""
    return data.StructLayout({"value": signed(cfg.wv_width), "idx": unsigned(cfg.idx_bits),
                              "pe": unsigned(cfg.pe_bits), "kind": unsigned(3)})


def x_layout(cfg: LstmConfig) -> data.StructLayout:
    """The sequence-stream word: ``value`` (``x_fmt``/``c_fmt`` code), ``kind`` X/H0/C0."""
    return data.StructLayout({"value": signed(cfg.xv_width), "kind": unsigned(2)})


class LstmEngine(wiring.Component):
    """One LSTM layer over whole sequences on ``P`` sparse PEs with resident weights.

    The arithmetic is exactly :func:`gen.lstm.ref_lstm`; the compiler, memory layout
    and stream words are documented in :mod:`gen.lstm`.

    Parameters
    ----------
    cfg : :class:`gen.lstm.LstmConfig`

    Members
    -------
    w : In(stream.Signature(word_layout(cfg)))
        Weight words ``{value: wv_width, idx, pe, kind}`` (ROW*, BIAS*, (ENTRY* COL)*,
        END), accepted once after reset.  Valid/ready stream.  With ``w_lanes`` ``L > 1``:
        ``data.ArrayLayout(word_layout(cfg), L)`` beats (:func:`gen.lstm.weight_beats`),
        lane ``l`` feeding the PEs ``p mod L = l``, one beat per clock.
    x : In(stream.Signature(x_layout(cfg)))
        Sequence words ``{value, kind}``: ``H`` H0 words (``h_0``, ``x_fmt``, original
        order), ``H`` C0 words (``c_0``, ``c_fmt``), then ``T * X`` X words (``x_fmt``).
        Valid/ready stream; several sequences may follow each other.
    o : Out(stream.Signature(signed(x_fmt.width)))
        ``h_t`` codes (``x_fmt``), ``H`` per step in original unit order.  Valid/ready
        stream with back-pressure.

    Phases
    ------
    load (weights; each word registered, decoded a clock later) -> init (every
    accumulator := 0, ``rows_per_pe`` clocks) ->
    per sequence: ``h_0``/``c_0`` written through the rowmap -> per step: X feed (one
    input per clock) and h feed (``R * P`` slots from the ``h`` banks, one per clock),
    both through the non-zero detector and pointer read into the PE FIFOs -> when every
    PE is idle, the element-wise sweep: all PEs in parallel, one unit per clock, fixed
    latency ``ew_latency`` (the bias is added in the rounding adder); the accumulator
    is cleared behind the read.  ``h_t`` goes into the other half of the double-buffered ``h`` banks and is
    drained to ``o`` in original order while the next step computes.

    Latency/throughput
    ------------------
    A PE spends one clock per non-zero of its units for non-zero inputs; a step costs
    about ``max PE load + R + ew_latency + ~8`` clocks.  :func:`gen.lstm.cycle_model`
    predicts every transfer's cycle exactly.
    """

    def __init__(self, cfg: LstmConfig):
        if not isinstance(cfg, LstmConfig):
            raise TypeError(f"cfg must be an LstmConfig, not {cfg!r}")
        self.cfg = cfg
        self.tables = cfg.tables()
        super().__init__({
            "w": In(stream.Signature(word_layout(cfg) if cfg.w_lanes == 1 else
                                     data.ArrayLayout(word_layout(cfg), cfg.w_lanes))),
            "x": In(stream.Signature(x_layout(cfg))),
            "o": Out(stream.Signature(signed(cfg.x_fmt.width))),
        })

    @property
    def latency(self) -> int:
        return self.cfg.ew_latency

    ii = 1

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        P, lb = cfg.pes, cfg.lbits
        pes = []
        for p in range(P):
            pe = LstmPE(cfg, self.tables)
            m.submodules[f"pe{p}"] = pe
            pes.append(pe)
        # (two words at least: a one-word memory, H = 1, would have a 0-bit address)
        m.submodules.rowmap = rowmap = Memory(shape=unsigned(cfg.pe_bits + lb),
                                              depth=max(2, cfg.max_hidden), init=[])
        map_w = rowmap.write_port()
        map_a, map_b = rowmap.read_port(domain="sync"), rowmap.read_port(domain="sync")

        state = Signal(4, init=LOAD)
        hb = cfg.hid_bits
        n_hid = Signal(unsigned(hb))                    # H of the loaded layer
        n_hid_m1 = Signal(unsigned(hb))                 # H - 1
        # PE indices are pe_bits wide (at least 1 bit: range(1) would be a 0-bit signal)
        rmod = Signal(unsigned(cfg.pe_bits))
        r_run = Signal(unsigned(lb + 1))                # ceil(H / P)
        r_run_m1 = Signal(unsigned(lb + 1))             # ceil(H / P) - 1
        n_slots = Signal(unsigned(cfg.col_bits))        # r_run * P
        n_slots_m1 = Signal(unsigned(cfg.col_bits))     # r_run * P - 1
        ccnt = Signal(unsigned(cfg.col_bits))           # columns loaded
        xcols_m1 = Signal(unsigned(cfg.col_bits))       # X - 1
        cnt = Signal(unsigned(max(lb, hb) + 1))
        nw, nd = Signal(2), Signal(2)                   # h halves written / drained (mod 4)
        out_flag = Signal(2)
        pending = Signal(2)
        m.d.comb += pending.eq(nw - nd)
        ew_ok = pending < 2

        # ---- loader: the accepted beat is registered and decoded in the next clock
        # (only the END word of lane 0 acts at once: it ends the load phase).  Lane l feeds
        # the PEs p = l mod L and keeps its own column counter (each lane closes every
        # column with a COL word); ROW words come in lane 0.
        L = cfg.w_lanes
        m.d.comb += self.w.ready.eq(state == LOAD)
        w_accept = self.w.valid & self.w.ready
        words = [self.w.payload] if L == 1 else [self.w.payload[k] for k in range(L)]
        wd = [Signal(word_layout(cfg), name="wd" if L == 1 else f"wd{k}", reset_less=True)
              for k in range(L)]
        w_take = Signal()
        m.d.sync += [r.eq(v) for r, v in zip(wd, words)] + [w_take.eq(w_accept)]
        ccnts = [ccnt] + [Signal(unsigned(cfg.col_bits), name=f"ccnt{k}") for k in range(1, L)]
        for p, pe in enumerate(pes):
            lw = wd[p % L]
            here = lw.pe == p
            m.d.comb += [pe.ld_value.eq(lw.value), pe.ld_idx.eq(lw.idx),
                         pe.ld_col_addr.eq(ccnts[p % L]),
                         pe.ld_entry.eq(w_take & (lw.kind == KIND_ENTRY) & here),
                         pe.ld_bias.eq(w_take & (lw.kind == KIND_BIAS) & here),
                         pe.ld_col.eq(w_take & (lw.kind == KIND_COL))]
        with m.If(w_take):
            with m.Switch(wd[0].kind):
                with m.Case(KIND_ROW):
                    m.d.comb += [map_w.addr.eq(n_hid),
                                 map_w.data.eq(Cat(wd[0].idx[:lb], wd[0].pe)), map_w.en.eq(1)]
                    m.d.sync += [n_hid.eq(n_hid + 1), n_hid_m1.eq(n_hid),
                                 rmod.eq(Mux(rmod == P - 1, 0, rmod + 1))]
                    with m.If(rmod == 0):
                        m.d.sync += [r_run.eq(r_run + 1), r_run_m1.eq(r_run),
                                     n_slots.eq(n_slots + P),
                                     n_slots_m1.eq(n_slots + (P - 1))]
            for lw, cc in zip(wd, ccnts):
                with m.If(lw.kind == KIND_COL):
                    m.d.sync += cc.eq(cc + 1)
        with m.If(w_accept & (words[0].kind == KIND_END)):
            m.d.sync += [state.eq(INIT), cnt.eq(0)]

        # ---- sequence load: h_0 / c_0 through the rowmap (read, then write)
        sc = Signal()                                   # second half: c_0
        sl_v, sl_c = Signal(), Signal()
        sl_val = Signal(signed(cfg.xv_width))
        seq_take = self.x.valid & (state == SEQ)
        m.d.comb += [map_a.addr.eq(cnt), map_a.en.eq(1)]
        m.d.sync += [sl_v.eq(seq_take), sl_c.eq(sc), sl_val.eq(self.x.payload.value)]
        sl_pe = map_a.data[lb:]
        sl_l = map_a.data[:lb]
        for p, pe in enumerate(pes):
            m.d.comb += [pe.sl_addr.eq(sl_l), pe.sl_value.eq(sl_val), pe.sl_half.eq(nw[0]),
                         pe.sl_h.eq(sl_v & ~sl_c & (sl_pe == p)),
                         pe.sl_c.eq(sl_v & sl_c & (sl_pe == p))]

        # ---- feeders, non-zero detector, pointer read, broadcast
        col = Signal(unsigned(cfg.col_bits))
        q = Signal(unsigned(cfg.col_bits))
        qd = Signal(unsigned(lb + 1))
        qm = Signal(unsigned(cfg.pe_bits))
        s1_valid, s1_src = Signal(), Signal()
        s1_x = Signal(signed(cfg.x_fmt.width))
        s1_xnz = Signal()                               # s1_x != 0, decided at issue
        s1_psel = Signal(unsigned(cfg.pe_bits))
        hf = Array(pe.hf_data for pe in pes)[s1_psel] if P > 1 else pes[0].hf_data
        hf_nz = Array(pe.hf_nz for pe in pes)[s1_psel] if P > 1 else pes[0].hf_nz
        value = Signal(signed(cfg.x_fmt.width))
        m.d.comb += value.eq(s1_x)
        with m.If(s1_src):
            m.d.comb += value.eq(hf)
        # Only flip-flops feed the stall: the non-zero flags come with the data (h bank
        # bit, registered x comparison) and with the pointer word (count != 0).
        nz = Signal()
        m.d.comb += nz.eq(s1_valid & Mux(s1_src, hf_nz, s1_xnz))
        stall = Signal()
        m.d.comb += stall.eq(nz & Cat(pe.full & pe.ptr_nz for pe in pes).any())
        advance = ~stall
        in_x, in_h = state == XFEED, state == HFEED
        h_more = Signal()                               # q != n_slots, as a register
        m.d.comb += self.x.ready.eq((in_x & advance) | (state == SEQ))
        x_issue = advance & in_x & self.x.valid
        h_issue = advance & in_h & h_more
        for pe in pes:
            m.d.comb += [pe.ptr_addr.eq(col), pe.ptr_en.eq(advance),
                         pe.push.eq(advance & nz & pe.ptr_nz), pe.push_x.eq(value),
                         pe.hf_addr.eq(Cat(qd[:lb], ~nw[0])), pe.hf_en.eq(advance)]
        with m.If(advance):
            m.d.sync += [s1_valid.eq(x_issue | h_issue), s1_src.eq(in_h),
                         s1_x.eq(self.x.payload.value[:cfg.x_fmt.width]),
                         s1_xnz.eq(self.x.payload.value[:cfg.x_fmt.width] != 0),
                         s1_psel.eq(qm)]
        with m.If(x_issue | h_issue):
            m.d.sync += col.eq(col + 1)
        with m.If(h_issue):
            m.d.sync += [q.eq(q + 1), h_more.eq(q != n_slots_m1)]
            with m.If(qm == P - 1):
                m.d.sync += [qm.eq(0), qd.eq(qd + 1)]
            with m.Else():
                m.d.sync += qm.eq(qm + 1)
        all_idle = Cat(pe.idle for pe in pes).all()

        # ---- element-wise sweep and bias initialisation
        ewc = Signal(range(cfg.ew_latency + 1))
        for pe in pes:
            m.d.comb += [pe.ew_valid.eq(state == EW), pe.ew_addr.eq(cnt[:lb]),
                         pe.binit.eq((state == EW) | (state == INIT)), pe.baddr.eq(cnt[:lb]),
                         pe.h_half.eq(nw[0])]

        # ---- controller
        self._control(m, SimpleNamespace(
            state=state, cnt=cnt, ccnt=ccnt, n_slots=n_slots, xcols_m1=xcols_m1, col=col,
            ew_ok=ew_ok, sc=sc, seq_take=seq_take, n_hid_m1=n_hid_m1, nw=nw,
            out_flag=out_flag, x_issue=x_issue, q=q, qd=qd, qm=qm, h_more=h_more,
            s1_valid=s1_valid, all_idle=all_idle, r_run_m1=r_run_m1, ewc=ewc))

        self._drain(m, pes, map_b, n_hid, nd, pending, out_flag)
        return m

    def _drain(self, m, pes, map_b, n_hid, nd, pending, out_flag):
        """Drain: rowmap read -> h bank read -> ``o``, in original unit order, one h per
        clock (``o`` back-pressure stalls the three registers)."""
        cfg = self.cfg
        P, lb, hb = cfg.pes, cfg.lbits, cfg.hid_bits
        dr_active = Signal()
        dk = Signal(unsigned(hb))
        v0, v1 = Signal(), Signal()
        dsel = Signal(unsigned(cfg.pe_bits))
        adv_d = ~self.o.valid | self.o.ready
        issue = adv_d & (dk != n_hid)
        m.d.comb += [map_b.addr.eq(dk), map_b.en.eq(adv_d)]
        d_pe = map_b.data[lb:]
        d_l = map_b.data[:lb]
        for pe in pes:
            m.d.comb += [pe.hd_addr.eq(Cat(d_l, nd[0])), pe.hd_en.eq(adv_d)]
        hd = Array(pe.hd_data for pe in pes)[dsel] if P > 1 else pes[0].hd_data
        with m.If(dr_active):
            with m.If(adv_d):
                m.d.sync += [v0.eq(issue), v1.eq(v0), self.o.valid.eq(v1), dk.eq(dk + issue),
                             dsel.eq(d_pe), self.o.payload.eq(hd)]
            with m.If((dk == n_hid) & ~v0 & ~v1 & ~self.o.valid):
                m.d.sync += [dr_active.eq(0), nd.eq(nd + 1)]
        with m.Elif(pending != 0):
            with m.If(out_flag.bit_select(nd[0], 1)):
                m.d.sync += [dr_active.eq(1), dk.eq(0), v0.eq(0), v1.eq(0)]
            with m.Else():
                m.d.sync += nd.eq(nd + 1)

    def _control(self, m, s):
        """The controller: LOAD -> INIT (bias and accumulator clears) -> IDLE; per
        sequence SEQ (h_0, c_0) -> SEQW; per step XFEED (x) -> HFEED (h_(t-1)) -> EW
        (element-wise sweep) -> EWW (its pipeline drains) -> IDLE.  ``s`` holds the
        engine's registers and flags named as in :meth:`elaborate`."""
        cfg = self.cfg
        R = cfg.rows_per_pe
        with m.Switch(s.state):
            with m.Case(INIT):
                m.d.sync += [s.cnt.eq(s.cnt + 1), s.xcols_m1.eq(s.ccnt - s.n_slots - 1)]
                with m.If(s.cnt == R - 1):
                    m.d.sync += s.state.eq(IDLE)
            with m.Case(IDLE):
                with m.If(self.x.valid):
                    with m.If(self.x.payload.kind == XK_X):
                        m.d.sync += [s.state.eq(XFEED), s.col.eq(0)]
                    with m.Elif(s.ew_ok):
                        m.d.sync += [s.state.eq(SEQ), s.cnt.eq(0), s.sc.eq(0)]
            with m.Case(SEQ):
                with m.If(s.seq_take):
                    m.d.sync += s.cnt.eq(s.cnt + 1)
                    with m.If(s.cnt == s.n_hid_m1):
                        m.d.sync += [s.cnt.eq(0), s.sc.eq(1)]
                        with m.If(s.sc):
                            m.d.sync += s.state.eq(SEQW)
            with m.Case(SEQW):
                m.d.sync += [s.nw.eq(s.nw + 1), s.state.eq(IDLE), s.sc.eq(0)]
                with m.Switch(s.nw[0]):
                    for b in range(2):
                        with m.Case(b):
                            m.d.sync += s.out_flag[b].eq(0)
            with m.Case(XFEED):
                with m.If(s.x_issue & (s.col == s.xcols_m1)):
                    m.d.sync += [s.state.eq(HFEED), s.q.eq(0), s.qd.eq(0), s.qm.eq(0),
                                 s.h_more.eq(1)]
            with m.Case(HFEED):
                with m.If(~s.h_more & ~s.s1_valid & s.all_idle & s.ew_ok):
                    m.d.sync += [s.state.eq(EW), s.cnt.eq(0)]
            with m.Case(EW):
                m.d.sync += s.cnt.eq(s.cnt + 1)
                with m.If(s.cnt == s.r_run_m1):
                    m.d.sync += [s.state.eq(EWW), s.ewc.eq(cfg.ew_latency - 1)]
            with m.Case(EWW):
                m.d.sync += s.ewc.eq(s.ewc - 1)
                with m.If(s.ewc == 0):
                    m.d.sync += [s.nw.eq(s.nw + 1), s.state.eq(IDLE)]
                    with m.Switch(s.nw[0]):
                        for b in range(2):
                            with m.Case(b):
                                m.d.sync += s.out_flag[b].eq(1)

    def port_info(self) -> dict:
        cfg = self.cfg
        return {
            "w": {"format": f"{{value: s{cfg.wv_width} ({cfg.w_fmt} weight / {cfg.b_fmt} "
                            f"bias), idx: u{cfg.idx_bits}, pe: u{cfg.pe_bits}, kind: u3}}",
                  "protocol": "valid/ready stream, ROW*, BIAS*, (ENTRY* COL)*, END; once "
                              "after reset"},
            "x": {"format": f"{{value: s{cfg.xv_width} ({cfg.x_fmt} x/h0, {cfg.c_fmt} c0), "
                            f"kind: u2 (0 X, 1 H0, 2 C0)}}",
                  "protocol": "valid/ready stream, per sequence H x H0, H x C0, T*X x X"},
            "o": {"format": str(cfg.x_fmt),
                  "protocol": "valid/ready stream, h_t in original unit order, H per step"},
        }

    def manifest_extra(self) -> dict:
        cfg = self.cfg
        return {"formats": {k: v["name"] for k, v in cfg.formats().items()},
                "ew_latency": cfg.ew_latency, "rows_per_pe": cfg.rows_per_pe,
                "memory_layout": {
                    "entries": {"per_pe": True, "depth": cfg.mem_depth,
                                "word": f"{{weight: {cfg.w_fmt}, row: u{cfg.idx_bits} "
                                        f"(gate << {cfg.lbits} | local)}}"},
                    "ptr": {"per_pe": True, "depth": cfg.max_cols,
                            "word": f"{{start: u{cfg.addr_bits}, count: u{cfg.count_bits}, "
                                    f"count != 0: u1}}"},
                    "acc": {"per_pe": True, "memories": 4, "depth": 1 << cfg.lbits,
                            "format": str(cfg.acc_fmt)},
                    "bias": {"per_pe": True, "memories": 4, "depth": 1 << cfg.lbits,
                             "word": f"(b << {cfg.bias_shift}) + pre-activation rounding "
                                     f"constant, s{cfg.acc_width + 1}"},
                    "h_bank": {"per_pe": True, "depth": 2 << cfg.lbits,
                               "word": f"{{h: {cfg.x_fmt}, h != 0: u1}}",
                               "address": "{local, half}"},
                    "c": {"per_pe": True, "depth": 1 << cfg.lbits, "format": str(cfg.c_fmt)},
                    "rowmap": {"per_pe": False, "depth": cfg.max_hidden,
                               "word": f"{{local: u{cfg.lbits}, pe: u{cfg.pe_bits}}}"},
                }}

