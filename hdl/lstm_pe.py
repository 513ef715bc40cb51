# SPDX-License-Identifier: Apache-2.0
"""One LSTM processing element: sparse MACs for its units' four gates + its element-wise unit.

The MAC half follows the idea of :class:`hdl.spmv_pe.SpmvPE` (column pointer table,
column-packed entries, activation FIFO, one non-zero per clock, forwarding of the
previous clock's accumulator write) but keeps its weights resident for a whole
sequence, holds each gate's accumulators in its own memory (so the element-wise
stage reads all four gates of a unit in one clock) and re-initialises an
accumulator with its bias right behind the element-wise read.
"""

from amaranth.hdl import Cat, Elaboratable, Module, Mux, Signal, signed, unsigned
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.memory import Memory

from gen.fixed import QFormat
from gen.lstm import LstmConfig
from .fixed import round_shift, saturate
from .pwl import PwlUnit

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
        (``ptr[col] = (start, count)``), or write bias ``ld_value`` of local row ``ld_idx``.
    ld_value : in, signed(wv_width).  ld_idx : in, unsigned(idx_bits) = gate << lbits | local.
    ptr_en, ptr_addr : in; ptr_start, ptr_count : out
        Pointer read (one clock latency, holds while ``ptr_en`` is low).
    push, push_x : in (``x_fmt``); full, idle : out
        Activation FIFO push of ``(push_x, ptr_start, ptr_count)``; FIFO full; FIFO empty
        and no MAC in flight.
    binit, baddr : in
        Read bias ``baddr`` now and write it into the four accumulators of ``baddr`` next clock.
    ew_valid, ew_addr, h_half : in
        Element-wise issue of local unit ``ew_addr``; ``h`` is written into half ``h_half``
        of the ``h`` bank ``cfg.ew_latency`` clocks later.
    hf_en, hf_addr, hf_data : feed read port of the ``h`` bank (``{local, half}``), ``x_fmt``.
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
        m.submodules.ptr = ptr = Memory(shape=unsigned(ab + cb), depth=cfg.max_cols, init=[])
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
            m.d.comb += [ptr_w.addr.eq(self.ld_col_addr), ptr_w.data.eq(Cat(start, count)),
                         ptr_w.en.eq(1)]
            m.d.sync += [start.eq(wptr), count.eq(0)]
        m.d.comb += [ptr_r.addr.eq(self.ptr_addr), ptr_r.en.eq(self.ptr_en),
                     self.ptr_start.eq(ptr_r.data[:ab]), self.ptr_count.eq(ptr_r.data[ab:])]

        # ---- per-gate accumulators and biases
        accs, biases = [], []
        for g in range(4):
            acc = Memory(shape=signed(cfg.acc_width), depth=depth_l, init=[])
            bias = Memory(shape=signed(cfg.b_fmt.width), depth=depth_l, init=[])
            m.submodules[f"acc{g}"] = acc
            m.submodules[f"bias{g}"] = bias
            accs.append((acc.write_port(), acc.read_port(domain="sync")))
            bw, br = bias.write_port(), bias.read_port(domain="sync")
            biases.append((bw, br))
            m.d.comb += [bw.addr.eq(self.ld_idx[:lb]), bw.data.eq(self.ld_value[:cfg.b_fmt.width]),
                         bw.en.eq(self.ld_bias & (self.ld_idx[lb:] == g)),
                         br.addr.eq(self.baddr), br.en.eq(1)]

        # ---- activation FIFO: (x, start, count)
        width = xw + ab + cb
        m.submodules.fifo = fifo = SyncFIFO(width=width, depth=cfg.fifo_depth)
        m.d.comb += [fifo.w_en.eq(self.push),
                     fifo.w_data.eq(Cat(self.push_x, self.ptr_start, self.ptr_count)),
                     self.full.eq(~fifo.w_rdy)]
        head_x = fifo.r_data[:xw].as_signed()
        head_start = fifo.r_data[xw:xw + ab]
        head_count = fifo.r_data[xw + ab:]

        # ---- MAC stage A: issue one entry read per clock
        rem = Signal(unsigned(cb))
        addr = Signal(unsigned(ab))
        cur_x = Signal(signed(xw))
        v_b = Signal()
        x_b = Signal(signed(xw))
        m.d.comb += ent_r.en.eq(1)
        with m.If(rem != 0):
            m.d.comb += ent_r.addr.eq(addr)
            m.d.sync += [addr.eq(addr + 1), rem.eq(rem - 1), v_b.eq(1), x_b.eq(cur_x)]
        with m.Elif(fifo.r_rdy):
            m.d.comb += [fifo.r_en.eq(1), ent_r.addr.eq(head_start)]
            m.d.sync += [addr.eq(head_start + 1), rem.eq(head_count - 1), cur_x.eq(head_x),
                         v_b.eq(1), x_b.eq(head_x)]
        with m.Else():
            m.d.sync += v_b.eq(0)

        # ---- MAC stage B: registered product, accumulator read (all four gates)
        w_b = ent_r.data[:ww].as_signed()
        row_b = ent_r.data[ww:]
        prod = Signal(signed(ww + xw))
        row_c = Signal(unsigned(cfg.idx_bits))
        v_c = Signal()
        m.d.sync += [prod.eq(w_b * x_b), row_c.eq(row_b), v_c.eq(v_b)]
        for _, acc_r in accs:
            m.d.comb += [acc_r.addr.eq(Mux(self.ew_valid, self.ew_addr, row_b[:lb])),
                         acc_r.en.eq(1)]

        # ---- MAC stage C: add (exact: the accumulator cannot overflow) with forwarding
        fwd_v = Signal()
        fwd_row = Signal(unsigned(cfg.idx_bits))
        fwd_val = Signal(signed(cfg.acc_width))
        gate_c = row_c[lb:]
        acc_c = Signal(signed(cfg.acc_width))
        with m.Switch(gate_c):
            for g in range(4):
                with m.Case(g):
                    m.d.comb += acc_c.eq(accs[g][1].data)
        old = Mux(fwd_v & (fwd_row == row_c), fwd_val, acc_c)
        new = Signal(signed(cfg.acc_width))
        m.d.comb += new.eq(old + prod)
        m.d.sync += [fwd_v.eq(v_c), fwd_row.eq(row_c), fwd_val.eq(new)]
        bi_v = Signal()
        bi_a = Signal(unsigned(lb))
        m.d.sync += [bi_v.eq(self.binit), bi_a.eq(self.baddr)]
        for g, (acc_w, _) in enumerate(accs):
            with m.If(v_c):
                m.d.comb += [acc_w.addr.eq(row_c[:lb]), acc_w.data.eq(new),
                             acc_w.en.eq(gate_c == g)]
            with m.Elif(bi_v):   # bias behind the element-wise read (and after load)
                m.d.comb += [acc_w.addr.eq(bi_a),
                             acc_w.data.eq(biases[g][1].data << cfg.bias_shift),
                             acc_w.en.eq(1)]
        m.d.comb += self.idle.eq(~fifo.r_rdy & (rem == 0) & ~v_b & ~v_c)

        self._elementwise(m, accs)
        return m

    def _delay(self, m, sig, n, name):
        for k in range(n):
            nxt = Signal.like(sig, name=f"{name}_d{k}")
            m.d.sync += nxt.eq(sig)
            sig = nxt
        return sig

    def _elementwise(self, m, accs):
        """acc read -> pre-activations -> 4 PWL -> f*c, i*g -> c_t -> tanh PWL -> o*tanh -> h."""
        cfg = self.cfg
        lb = cfg.lbits
        a = cfg.act_fmt.frac_bits
        F = cfg.prod_frac
        L = cfg.pwl_latency
        m.submodules.cmem = cmem = Memory(shape=signed(cfg.c_fmt.width), depth=1 << lb, init=[])
        m.submodules.hmem = hmem = Memory(shape=signed(cfg.x_fmt.width), depth=2 << lb, init=[])
        c_w, c_r = cmem.write_port(), cmem.read_port(domain="sync")
        h_w = hmem.write_port()
        hf_r, hd_r = hmem.read_port(domain="sync"), hmem.read_port(domain="sync")
        m.d.comb += [hf_r.addr.eq(self.hf_addr), hf_r.en.eq(self.hf_en),
                     self.hf_data.eq(hf_r.data),
                     hd_r.addr.eq(self.hd_addr), hd_r.en.eq(self.hd_en),
                     self.hd_data.eq(hd_r.data),
                     c_r.addr.eq(self.ew_addr), c_r.en.eq(1)]

        # e1: pre-activations
        v1 = Signal(name="ew_v1")
        l1 = Signal(unsigned(lb), name="ew_l1")
        m.d.sync += [v1.eq(self.ew_valid), l1.eq(self.ew_addr)]
        pres = [Signal(signed(cfg.pre_fmt.width), name=f"pre_{n}") for n in "ifgo"]
        c_prev = Signal(signed(cfg.c_fmt.width), name="c_prev")
        for g in range(4):
            m.d.sync += pres[g].eq(_requantise(accs[g][1].data, cfg.acc_frac, cfg.pre_fmt))
        m.d.sync += c_prev.eq(c_r.data)
        v2 = self._delay(m, v1, 1, "ew_v")
        l2 = self._delay(m, l1, 1, "ew_l")

        # e2 .. e2+L: gate PWL units (never stalled)
        acts = []
        for g, name in enumerate("ifgo"):
            unit = PwlUnit(self.tables["tanh" if name == "g" else "sigmoid"])
            m.submodules[f"pwl_{name}"] = unit
            m.d.comb += [unit.i.payload.eq(pres[g]), unit.i.valid.eq(v2), unit.o.ready.eq(1)]
            acts.append(unit.o.payload)
        gi, gf, gg, go = acts
        v3 = self._delay(m, v2, L, "ew_va")
        l3 = self._delay(m, l2, L, "ew_la")
        c3 = self._delay(m, c_prev, L, "c_prev")

        # e3: products
        fc = Signal(signed(cfg.act_fmt.width + cfg.c_fmt.width), name="fc")
        ig = Signal(signed(2 * cfg.act_fmt.width), name="ig")
        m.d.sync += [fc.eq(gf * c3), ig.eq(gi * gg)]
        o4 = self._delay(m, go, 1, "o")
        v4 = self._delay(m, v3, 1, "ew_vp")
        l4 = self._delay(m, l3, 1, "ew_lp")

        # e4: c_t
        s1, s2 = F - a - cfg.c_fmt.frac_bits, F - 2 * a
        c_new = Signal(signed(cfg.c_fmt.width), name="c_new")
        m.d.sync += c_new.eq(_requantise((fc << s1) + (ig << s2), F, cfg.c_fmt))
        v5 = self._delay(m, v4, 1, "ew_vc")
        l5 = self._delay(m, l4, 1, "ew_lc")
        o5 = self._delay(m, o4, 1, "o_c")
        with m.If(v5):
            m.d.comb += [c_w.addr.eq(l5), c_w.data.eq(c_new), c_w.en.eq(1)]
        with m.Elif(self.sl_c):
            m.d.comb += [c_w.addr.eq(self.sl_addr),
                         c_w.data.eq(self.sl_value[:cfg.c_fmt.width]), c_w.en.eq(1)]

        # e5 .. e5+L: tanh(c_t)
        m.submodules.pwl_c = unit = PwlUnit(self.tables["tanh_c"])
        m.d.comb += [unit.i.payload.eq(c_new), unit.i.valid.eq(v5), unit.o.ready.eq(1)]
        v6 = self._delay(m, v5, L, "ew_vt")
        l6 = self._delay(m, l5, L, "ew_lt")
        o6 = self._delay(m, o5, L, "o_t")

        # e6: o * tanh(c_t); e7: round to h and write the h bank
        ph = Signal(signed(2 * cfg.act_fmt.width), name="ph")
        m.d.sync += ph.eq(o6 * unit.o.payload)
        v7 = self._delay(m, v6, 1, "ew_vh")
        l7 = self._delay(m, l6, 1, "ew_lh")
        with m.If(v7):
            m.d.comb += [h_w.addr.eq(Cat(l7, self.h_half)),
                         h_w.data.eq(_requantise(ph, 2 * a, cfg.x_fmt)), h_w.en.eq(1)]
        with m.Elif(self.sl_h):
            m.d.comb += [h_w.addr.eq(Cat(self.sl_addr, self.sl_half)),
                         h_w.data.eq(self.sl_value[:cfg.x_fmt.width]), h_w.en.eq(1)]
