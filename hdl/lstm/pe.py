# SPDX-License-Identifier: Apache-2.0
"""One LSTM processing element: sparse MACs for its units' four gates + its element-wise unit.

The MAC half follows the idea of :class:`hdl.spmv.pe.SpmvPE` (column pointer table,
column-packed entries, one non-zero per clock, forwarding of recent accumulator writes)
and shares its activation FIFO and issue (:class:`hdl.lib.pe_front.PeFront`), but keeps
its weights resident for a whole sequence, holds each gate's accumulators in its own
memory (so the element-wise stage reads all four gates of a unit in one clock) and clears
an accumulator right behind the element-wise read; the bias is added by the element-wise
stage's rounding adder.

Timing (ECP5 target 150 MHz): every block RAM output and both sides of every
multiplier are registered, every carry chain has a stage of its own, the broadcaster's
stall sees flip-flops only (non-zero flags stored with ``h`` and the pointer words),
and datapath registers have no reset (a smaller reset fan-out).

MAC pipeline (one non-zero per clock): A issue (entry read) -> B entry register ->
B2 operand registers -> C product (DSP) and accumulator read -> D gate select,
forwarding of the write two clocks back, product register -> E add (forwarding the
previous clock's write) and write.  Five clocks from issue to write.
"""

from amaranth.hdl import Cat, Elaboratable, Module, Mux, Signal, signed, unsigned
from amaranth.lib.memory import Memory

from gen.core.fixed import QFormat
from gen.lstm import LstmConfig
from hdl.lib.arith import round_shift, saturate
from hdl.lib.pe_front import PeFront
from hdl.lstm.pwl import LstmPwlUnit

__all__ = ["LstmPE"]


def _requantise(value, frac_bits: int, fmt: QFormat):
    return saturate(round_shift(value, frac_bits - fmt.frac_bits), fmt)


class LstmPE(Elaboratable):
    """A PE owning up to ``rows_per_pe`` hidden units (all four gate rows of each).

    Parameters
    ----------
    cfg : :class:`gen.lstm.LstmConfig`
    tables : dict
        ``cfg.tables()``: the sigmoid, tanh and tanh(c) PWL tables.

    Members (plain signals driven/read by :class:`hdl.lstm.LstmEngine`)
    -------------------------------------------------------------------
    ld_entry, ld_col, ld_bias : in, 1
        Load one ENTRY (append ``(ld_value[:w], ld_idx)``), close column ``ld_col_addr``
        (``ptr[col] = (start, count, count != 0)``), or write bias ``ld_value`` of local
        row ``ld_idx`` (stored as ``(b << bias_shift) + rounding constant``).
    ld_value : in, signed(wv_width).  ld_idx : in, unsigned(idx_bits) = gate << lbits | local.
    ptr_en, ptr_addr : in; ptr_start, ptr_count, ptr_nz : out
        Pointer read (one clock latency, holds while ``ptr_en`` is low); ``ptr_nz`` =
        ``ptr_count != 0`` (stored, not compared).
    push, push_x : in (``x_fmt``); full, idle : out
        Activation FIFO push of ``(push_x, ptr_start, ptr_count)``; FIFO full; FIFO empty
        and no MAC in flight.
    binit, baddr : in
        Registered on entry; one clock later the bias of ``baddr`` is read (for the
        element-wise issue of the same clock) and, with ``binit``, the four
        accumulators of ``baddr`` are cleared (written two clocks after that).
    ew_valid, ew_addr, h_half : in
        Element-wise issue of local unit ``ew_addr`` (registered on entry, accumulators
        read one clock later); ``h`` is written into half ``h_half`` of the ``h`` bank
        ``cfg.ew_latency`` clocks after the issue.
    hf_en, hf_addr, hf_data, hf_nz : feed read port of the ``h`` bank (``{local, half}``),
        ``x_fmt``, and the stored ``h != 0`` flag.
    hd_en, hd_addr, hd_data : drain read port of the ``h`` bank.
    sl_h, sl_c, sl_addr, sl_half, sl_value : in
        Sequence load: write ``h_0`` (bank half ``sl_half``) or ``c_0`` of local unit
        ``sl_addr``.
    """

    def __init__(self, cfg: LstmConfig, tables: dict):
        self.cfg, self.tables = cfg, tables
        lb, ib = cfg.lbits, cfg.idx_bits
        self.ld_entry, self.ld_col, self.ld_bias = Signal(), Signal(), Signal()
        self.ld_value = Signal(signed(cfg.wv_width))
        self.ld_idx = Signal(unsigned(ib))
        self.ld_col_addr = Signal(unsigned(cfg.col_bits))
        self.ptr_en = Signal()
        self.ptr_addr = Signal(unsigned(cfg.col_bits))
        self.ptr_start = Signal(unsigned(cfg.addr_bits))
        self.ptr_count = Signal(unsigned(cfg.count_bits))
        self.ptr_nz = Signal()
        self.push = Signal()
        self.push_x = Signal(signed(cfg.x_fmt.width))
        self.full = Signal()
        self.idle = Signal()
        self.binit = Signal()
        self.baddr = Signal(unsigned(lb))
        self.ew_valid = Signal()
        self.ew_addr = Signal(unsigned(lb))
        self.h_half = Signal()
        self.hf_en = Signal()
        self.hf_addr = Signal(unsigned(lb + 1))
        self.hf_data = Signal(signed(cfg.x_fmt.width))
        self.hf_nz = Signal()
        self.hd_en = Signal()
        self.hd_addr = Signal(unsigned(lb + 1))
        self.hd_data = Signal(signed(cfg.x_fmt.width))
        self.sl_h, self.sl_c, self.sl_half = Signal(), Signal(), Signal()
        self.sl_addr = Signal(unsigned(lb))
        self.sl_value = Signal(signed(cfg.xv_width))

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        ww, xw, lb, ab, cb = (cfg.w_fmt.width, cfg.x_fmt.width, cfg.lbits, cfg.addr_bits,
                              cfg.count_bits)
        depth_l = 1 << lb

        # ---- weights: column-packed entries and per-column pointers (resident)
        m.submodules.entries = entries = Memory(shape=unsigned(ww + cfg.idx_bits),
                                                depth=cfg.mem_depth, init=[])
        # ptr word: {start, count, count != 0} (the flag saves a comparison after the read)
        m.submodules.ptr = ptr = Memory(shape=unsigned(ab + cb + 1), depth=cfg.max_cols,
                                        init=[])
        ent_w, ent_r = entries.write_port(), entries.read_port(domain="sync")
        ptr_w, ptr_r = ptr.write_port(), ptr.read_port(domain="sync")
        wptr = Signal(unsigned(ab + 1))
        start = Signal(unsigned(ab))
        count = Signal(unsigned(cb))
        with m.If(self.ld_entry):
            m.d.comb += [ent_w.addr.eq(wptr[:ab]),
                         ent_w.data.eq(Cat(self.ld_value[:ww], self.ld_idx)), ent_w.en.eq(1)]
            m.d.sync += [wptr.eq(wptr + 1), count.eq(count + 1)]
        with m.Elif(self.ld_col):
            m.d.comb += [ptr_w.addr.eq(self.ld_col_addr),
                         ptr_w.data.eq(Cat(start, count, count != 0)),
                         ptr_w.en.eq(1)]
            m.d.sync += [start.eq(wptr), count.eq(0)]
        m.d.comb += [ptr_r.addr.eq(self.ptr_addr), ptr_r.en.eq(self.ptr_en),
                     self.ptr_start.eq(ptr_r.data[:ab]), self.ptr_count.eq(ptr_r.data[ab:ab + cb]),
                     self.ptr_nz.eq(ptr_r.data[ab + cb])]

        # ---- the element-wise and clear commands are registered on entry (the engine's
        # controller is far away); everything below works one clock behind them
        self._ew_v = ew_v = Signal()
        self._ew_a = ew_a = Signal(unsigned(lb), reset_less=True)
        clr = Signal()
        clr_addr = Signal(unsigned(lb), reset_less=True)
        m.d.sync += [ew_v.eq(self.ew_valid), ew_a.eq(self.ew_addr),
                     clr.eq(self.binit), clr_addr.eq(self.baddr)]

        # ---- per-gate accumulators and biases.  The bias memory holds the bias already
        # aligned to the accumulator and plus the pre-activation rounding constant, so the
        # element-wise stage adds it in the rounding adder (no separate bias add) and the
        # accumulators restart from zero.
        sh = cfg.acc_frac - cfg.pre_fmt.frac_bits
        b_ext = (self.ld_value[:cfg.b_fmt.width].as_signed() << cfg.bias_shift) \
            + ((1 << (sh - 1)) if sh > 0 else 0)
        accs, biases = [], []
        for g in range(4):
            acc = Memory(shape=signed(cfg.acc_width), depth=depth_l, init=[])
            bias = Memory(shape=signed(cfg.acc_width + 1), depth=depth_l, init=[])
            m.submodules[f"acc{g}"] = acc
            m.submodules[f"bias{g}"] = bias
            accs.append((acc.write_port(), acc.read_port(domain="sync")))
            bw, br = bias.write_port(), bias.read_port(domain="sync")
            biases.append(br)
            m.d.comb += [bw.addr.eq(self.ld_idx[:lb]), bw.data.eq(b_ext),
                         bw.en.eq(self.ld_bias & (self.ld_idx[lb:] == g)),
                         br.addr.eq(clr_addr), br.en.eq(1)]

        # ---- activation FIFO and MAC stage A, the issue of one entry read per clock
        # (hdl.lib.pe_front); `push.ready` is a register, which the broadcaster's stall
        # sees as `full`
        m.submodules.front = front = PeFront(xw, ab, cb, cfg.fifo_depth, multi=False)
        m.d.comb += [front.push.valid.eq(self.push),
                     front.push.payload.eq(Cat(self.push_x, self.ptr_start, self.ptr_count)),
                     self.full.eq(~front.push.ready),
                     ent_r.en.eq(1), ent_r.addr.eq(front.addr)]
        v_b, x_b = front.v, front.x

        # ---- MAC stage B: register the entry (block RAM clock-to-out is slow)
        w_c = Signal(signed(ww), reset_less=True)
        row_c = Signal(unsigned(cfg.idx_bits), reset_less=True)
        x_c = Signal(signed(xw), reset_less=True)
        v_c = Signal()
        m.d.sync += [w_c.eq(ent_r.data[:ww]), row_c.eq(ent_r.data[ww:]), x_c.eq(x_b),
                     v_c.eq(v_b)]

        # ---- MAC stage B2: the multiplier's operand registers (their only load is the
        # DSP, so they can sit next to it however far the block RAM is)
        w_o = Signal(signed(ww), reset_less=True)
        x_o = Signal(signed(xw), reset_less=True)
        row_o = Signal(unsigned(cfg.idx_bits), reset_less=True)
        v_o = Signal()
        m.d.sync += [w_o.eq(w_c), x_o.eq(x_c), row_o.eq(row_c), v_o.eq(v_c)]

        # ---- MAC stage C: the product (DSP, registered) and the accumulator read (all
        # four gates).  The comparisons for the forwarding in D and E and the gate select
        # are made here and registered.
        prod_d = Signal(signed(ww + xw), reset_less=True)
        row_d = Signal(unsigned(cfg.idx_bits), reset_less=True)
        v_d = Signal()
        m.d.sync += [prod_d.eq(w_o * x_o), row_d.eq(row_o), v_d.eq(v_o)]
        for _, acc_r in accs:
            m.d.comb += [acc_r.addr.eq(Mux(ew_v, ew_a, row_o[:lb])),
                         acc_r.en.eq(1)]
        row_e = Signal(unsigned(cfg.idx_bits), reset_less=True)
        v_e = Signal()
        hit1, hit2 = Signal(), Signal()
        gsel = Signal(4, reset_less=True)
        m.d.sync += [hit2.eq(v_e & (row_e == row_o)),
                     gsel.eq(Cat(row_o[lb:] == g for g in range(4)))]

        # ---- MAC stage D: select the gate's accumulator, or the value written two
        # clocks ago (the read did not see it); a clear enters here with zeros
        fwd_val = Signal(signed(cfg.acc_width), reset_less=True)   # E's write last clock
        base = Signal(signed(cfg.acc_width), reset_less=True)
        prod = Signal(signed(ww + xw), reset_less=True)
        clr_e = Signal()
        clr_a = Signal(unsigned(lb), reset_less=True)
        acc_sel = Mux(gsel[0], accs[0][1].data, Mux(gsel[1], accs[1][1].data,
                                                     Mux(gsel[2], accs[2][1].data,
                                                         accs[3][1].data)))
        gsel_e = Signal(4, reset_less=True)
        m.d.sync += [row_e.eq(row_d), v_e.eq(v_d), hit1.eq(v_e & (row_e == row_d)),
                     gsel_e.eq(gsel),
                     base.eq(Mux(clr, 0, Mux(hit2, fwd_val, acc_sel))),
                     prod.eq(Mux(clr, 0, prod_d)),
                     clr_e.eq(clr), clr_a.eq(clr_addr)]

        # ---- MAC stage E: add (exact: the accumulator cannot overflow) and write; the
        # previous clock's write is forwarded, so back-to-back updates of one row
        # neither stall nor get lost.  A clear writes 0 + 0 into all four gates.
        new = Signal(signed(cfg.acc_width))
        m.d.comb += new.eq(Mux(hit1, fwd_val, base) + prod)
        m.d.sync += fwd_val.eq(new)
        for g, (acc_w, _) in enumerate(accs):
            m.d.comb += [acc_w.addr.eq(Mux(clr_e, clr_a, row_e[:lb])), acc_w.data.eq(new),
                         acc_w.en.eq((v_e & gsel_e[g]) | clr_e)]
        m.d.comb += self.idle.eq(front.idle & ~v_b & ~v_c & ~v_o & ~v_d & ~v_e)

        self._elementwise(m, accs, biases)
        return m

    def _mul(self, m, a, b, name):
        """``a * b`` (both signed) without a DSP: a pipelined shift-and-add multiplier.

        Only the element-wise products use it (ECP5 places DSP blocks far from their
        operand registers often enough to make them the critical path).  Clock 1
        registers ``a``, ``-a`` and ``b``; then every clock adds pairs of the partial
        products ``b[i] ? a << i : 0`` (the sign bit's with ``-a``): ``1 +
        ceil(log2(len(b)))`` clocks (:attr:`gen.lstm.LstmConfig.ew_mul_latency`).
        """
        wb = len(b)
        a_r = Signal(a.shape(), name=f"{name}_a", reset_less=True)
        na_r = Signal(signed(len(a) + 1), name=f"{name}_na", reset_less=True)
        b_r = Signal(b.shape(), name=f"{name}_b", reset_less=True)
        m.d.sync += [a_r.eq(a), na_r.eq(-a), b_r.eq(b)]
        level = [Mux(b_r[i], a_r.as_signed() << i, 0) for i in range(wb - 1)]
        level.append(Mux(b_r[wb - 1], na_r << (wb - 1), 0))
        depth = 0
        while len(level) > 1:
            nxt = []
            for k in range(0, len(level), 2):
                total = level[k] + level[k + 1] if k + 1 < len(level) else level[k]
                r = Signal(total.shape(), name=f"{name}_s{depth}_{k // 2}", reset_less=True)
                m.d.sync += r.eq(total)
                nxt.append(r)
            level, depth = nxt, depth + 1
        if depth == 0:
            r = Signal(level[0].shape(), name=f"{name}_s0_0", reset_less=True)
            m.d.sync += r.eq(level[0])
            level = [r]
        return level[0][:len(a) + wb].as_signed()

    def _delay(self, m, sig, n, name):
        """``sig`` delayed by ``n`` registers (reset only if ``sig`` is a 1-bit valid)."""
        for k in range(n):
            nxt = Signal(sig.shape(), name=f"{name}_d{k}", reset_less=len(sig) > 1)
            m.d.sync += nxt.eq(sig)
            sig = nxt
        return sig

    def _elementwise(self, m, accs, biases):
        """acc read -> pre-activations -> 4 PWL -> f*c, i*g -> c_t -> tanh PWL -> o*tanh -> h.

        Every rounding adder and every saturation has a stage of its own (see
        :attr:`gen.lstm.LstmConfig.ew_latency` for the clock-by-clock list).
        """
        cfg = self.cfg
        lb = cfg.lbits
        a = cfg.act_fmt.frac_bits
        F = cfg.prod_frac
        L = cfg.pwl_latency
        xw = cfg.x_fmt.width
        m.submodules.cmem = cmem = Memory(shape=signed(cfg.c_fmt.width), depth=1 << lb, init=[])
        # h bank word: {h (x_fmt), h != 0} (the flag spares the broadcaster a comparison)
        m.submodules.hmem = hmem = Memory(shape=unsigned(xw + 1), depth=2 << lb, init=[])
        c_w, c_r = cmem.write_port(), cmem.read_port(domain="sync")
        h_w = hmem.write_port()
        hf_r, hd_r = hmem.read_port(domain="sync"), hmem.read_port(domain="sync")
        m.d.comb += [hf_r.addr.eq(self.hf_addr), hf_r.en.eq(self.hf_en),
                     self.hf_data.eq(hf_r.data[:xw]), self.hf_nz.eq(hf_r.data[xw]),
                     hd_r.addr.eq(self.hd_addr), hd_r.en.eq(self.hd_en),
                     self.hd_data.eq(hd_r.data[:xw]),
                     c_r.addr.eq(self._ew_a), c_r.en.eq(1)]

        def stage(sig, name, n=1):
            return self._delay(m, sig, n, name)

        # e1: add bias and rounding constant (one adder: the bias memory holds both) and
        # drop the fraction bits (== round_shift(acc + bias, sh)); e2: saturate
        v1 = stage(self._ew_v, "ew_v1")
        l1 = stage(self._ew_a, "ew_l1")
        sh = cfg.acc_frac - cfg.pre_fmt.frac_bits
        rounded = []
        for g, n in enumerate("ifgo"):
            total = accs[g][1].data + biases[g].data
            r = (total >> sh) if sh > 0 else (total << -sh)
            reg = Signal(r.shape(), name=f"pre_r_{n}", reset_less=True)
            m.d.sync += reg.eq(r)
            rounded.append(reg)
        pres = [Signal(signed(cfg.pre_fmt.width), name=f"pre_{n}", reset_less=True)
                for n in "ifgo"]
        for g in range(4):
            m.d.sync += pres[g].eq(saturate(rounded[g], cfg.pre_fmt))
        c_prev = Signal(signed(cfg.c_fmt.width), name="c_prev", reset_less=True)
        m.d.sync += c_prev.eq(c_r.data)
        v2 = stage(v1, "ew_v2", 2)
        l2 = stage(l1, "ew_l2", 2)
        c2 = stage(c_prev, "c_prev", 1)

        # e3 .. e3+L: gate PWL units (never stalled)
        acts = []
        for g, name in enumerate("ifgo"):
            unit = LstmPwlUnit(self.tables["tanh" if name == "g" else "sigmoid"])
            m.submodules[f"pwl_{name}"] = unit
            m.d.comb += [unit.i.payload.eq(pres[g]), unit.i.valid.eq(v2), unit.o.ready.eq(1)]
            acts.append(unit.o.payload)
        gi, gf, gg, go = acts
        v3 = stage(v2, "ew_va", L)
        l3 = stage(l2, "ew_la", L)
        c3 = stage(c2, "c_prev_a", L)

        # products (operand and product registers around the DSP)
        ML = cfg.ew_mul_latency
        fc = self._mul(m, c3, gf, "fc")
        ig = self._mul(m, gg, gi, "ig")
        o4 = stage(go, "o", ML)

        # cell sum, then round, then saturate to c_t (one carry chain per stage)
        s1, s2 = F - a - cfg.c_fmt.frac_bits, F - 2 * a
        c_sum = Signal(signed(max(len(fc) + s1, len(ig) + s2) + 1), name="c_sum",
                       reset_less=True)
        m.d.sync += c_sum.eq((fc << s1) + (ig << s2))
        c_rnd_v = round_shift(c_sum, F - cfg.c_fmt.frac_bits)
        c_rnd = Signal(c_rnd_v.shape(), name="c_rnd", reset_less=True)
        m.d.sync += c_rnd.eq(c_rnd_v)
        c_new = Signal(signed(cfg.c_fmt.width), name="c_new", reset_less=True)
        m.d.sync += c_new.eq(saturate(c_rnd, cfg.c_fmt))
        v5 = stage(v3, "ew_vc", ML + 3)
        l5 = stage(l3, "ew_lc", ML + 3)
        o5 = stage(o4, "o_c", 3)
        with m.If(v5):
            m.d.comb += [c_w.addr.eq(l5), c_w.data.eq(c_new), c_w.en.eq(1)]
        with m.Elif(self.sl_c):
            m.d.comb += [c_w.addr.eq(self.sl_addr),
                         c_w.data.eq(self.sl_value[:cfg.c_fmt.width]), c_w.en.eq(1)]

        # tanh(c_t)
        m.submodules.pwl_c = unit = LstmPwlUnit(self.tables["tanh_c"])
        m.d.comb += [unit.i.payload.eq(c_new), unit.i.valid.eq(v5), unit.o.ready.eq(1)]
        o6 = stage(o5, "o_t", L)

        # o * tanh(c_t), round, saturate to h (and its non-zero flag), write the h bank
        ph = self._mul(m, unit.o.payload, o6, "ph")
        h_rnd_v = round_shift(ph, 2 * a - cfg.x_fmt.frac_bits)
        h_rnd = Signal(h_rnd_v.shape(), name="h_rnd", reset_less=True)
        m.d.sync += h_rnd.eq(h_rnd_v)
        h_new = Signal(signed(xw), name="h_new", reset_less=True)
        m.d.sync += h_new.eq(saturate(h_rnd, cfg.x_fmt))
        v7 = stage(v5, "ew_vh", L + ML + 2)
        l7 = stage(l5, "ew_lh", L + ML + 2)
        with m.If(v7):
            m.d.comb += [h_w.addr.eq(Cat(l7, self.h_half)),
                         h_w.data.eq(Cat(h_new, h_new != 0)), h_w.en.eq(1)]
        with m.Elif(self.sl_h):
            h0 = self.sl_value[:xw]
            m.d.comb += [h_w.addr.eq(Cat(self.sl_addr, self.sl_half)),
                         h_w.data.eq(Cat(h0, h0 != 0)), h_w.en.eq(1)]
