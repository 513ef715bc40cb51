# SPDX-License-Identifier: Apache-2.0
"""One processing element of the sparse matrix-vector engine (see :mod:`hdl.spmv`)."""

from amaranth.hdl import Cat, Const, Elaboratable, Module, Mux, Signal, signed, unsigned
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.memory import Memory

from gen.fixed import index_bits
from gen.spmv import SpmvConfig

__all__ = ["SpmvPE"]


def _saturating_add(acc, addend, width):
    """``saturate(acc + addend)`` to ``width`` bits (``acc`` is ``width`` bits wide,
    ``addend`` at most): the result of :func:`hdl.fixed.saturate` on the full sum, with
    the overflow found from the two top bits of the ``width + 1``-bit sum instead of
    two comparisons after the adder (a shorter path)."""
    total = (acc.as_signed() + addend.as_signed())[:width + 1].as_signed()
    overflow = total[width] != total[width - 1]
    hi = Const((1 << (width - 1)) - 1, signed(width))
    lo = Const(-(1 << (width - 1)), signed(width))
    return Mux(overflow, Mux(total[width], lo, hi), total[:width].as_signed())


class _OneFifo(Elaboratable):
    """A depth-1 FIFO with :class:`SyncFIFO`'s interface and timing (Amaranth's own
    SyncFIFO of depth 1 emits zero-width pointers that Verilator rejects)."""

    def __init__(self, width):
        self.w_data, self.w_en, self.w_rdy = Signal(width), Signal(), Signal()
        self.r_data, self.r_en, self.r_rdy = Signal(width), Signal(), Signal()

    def elaborate(self, platform):
        m = Module()
        full = Signal()
        m.d.comb += [self.w_rdy.eq(~full), self.r_rdy.eq(full)]
        with m.If(self.w_en & ~full):
            m.d.sync += [self.r_data.eq(self.w_data), full.eq(1)]
        with m.Elif(self.r_en & full):
            m.d.sync += full.eq(0)
        return m


class SpmvPE(Elaboratable):
    """A PE: column pointer table, column-packed entries, activation FIFO, accumulators.

    Parameters
    ----------
    cfg : :class:`gen.spmv.SpmvConfig`

    Members (plain signals driven/read by :class:`hdl.spmv.SpmvEngine`)
    -------------------------------------------------------------------
    ld_bank : in, 1
        Bank (of the double-buffered entry and pointer memories) being loaded.
    cp_bank : in, 1
        Bank being computed on.
    ld_start : in, 1
        Reset the load counters (a block's END word).
    ld_entry : in, 1
        Append ``(ld_value, ld_idx)`` to the entry memory (ENTRY word for this PE).
    ld_close : in, 1
        Close this PE's current column (after the entry of this clock, if any): write
        ``ptr[col] = (start, count)`` and advance the PE's column counter ``col``.
    ld_value : in, signed(w_fmt.width), w_fmt.  ld_idx : in, unsigned(idx_bits).
    ld_cols : out, unsigned(col_bits)
        Columns closed since the last ``ld_start`` (the block's column count).
    clr_en, clr_addr : in
        Write 0 into accumulator ``clr_addr`` (after reset, and behind the drain).
    ptr_en, ptr_addr : in
        Read ``ptr[ptr_addr]``; the memory output is registered once more (both only
        while ``ptr_en``), so ``ptr_count``/``ptr_start``/``ptr_nz`` belong to the
        address given two enabled clocks earlier and no memory output reaches the
        broadcaster's stall logic.
    ptr_count : out, unsigned(count_bits).  ptr_start : out, unsigned(addr_bits).
    ptr_nz : out, 1
        ``ptr_count != 0`` (registered).
    push, push_x : in
        Push ``(push_x, ptr_start, ptr_count)`` into the activation FIFO (only when not
        ``full``).
    full : out, 1
        The FIFO holds ``fifo_depth`` items.
    drain, acc_en, acc_addr : in
        While ``drain``, the accumulator read port is the drain's (address
        ``acc_addr``, enable ``acc_en``); ``acc_data`` follows two enabled clocks later.
    acc_data : out, signed(acc_width), accumulator format.
    idle : out, 1
        FIFO empty and nothing in flight.

    Pipeline: A issue (entry read; one per clock, back to back across FIFO items) ->
    B entry register -> C multiply and accumulator read -> D accumulator register ->
    E saturating add and write (4 clocks from issue to write).  The writes of the two
    clocks before E are forwarded from registers, so back-to-back updates of one
    accumulator neither stall nor lose an update.
    """

    def __init__(self, cfg: SpmvConfig):
        self.cfg = cfg
        ww, xw = cfg.w_fmt.width, cfg.x_fmt.width
        self.ld_bank = Signal()
        self.cp_bank = Signal()
        self.ld_start = Signal()
        self.ld_entry = Signal()
        self.ld_close = Signal()
        self.ld_value = Signal(signed(ww))
        self.ld_idx = Signal(unsigned(cfg.idx_bits))
        self.ld_cols = Signal(unsigned(cfg.col_bits))
        self.clr_en = Signal()
        self.clr_addr = Signal(unsigned(cfg.idx_bits))
        self.ptr_en = Signal()
        self.ptr_addr = Signal(unsigned(cfg.col_bits))
        self.ptr_count = Signal(unsigned(cfg.count_bits))
        self.ptr_start = Signal(unsigned(cfg.addr_bits))
        self.ptr_nz = Signal()
        self.push = Signal()
        self.push_x = Signal(signed(xw))
        self.full = Signal()
        self.drain = Signal()
        self.acc_en = Signal()
        self.acc_addr = Signal(unsigned(cfg.idx_bits))
        self.acc_data = Signal(signed(cfg.acc_width))
        self.idle = Signal()

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        ww, xw, ib, ab, cb = (cfg.w_fmt.width, cfg.x_fmt.width, cfg.idx_bits, cfg.addr_bits,
                              cfg.count_bits)

        # ---- memories; entries and pointers are double-buffered (bank = address MSB)
        pb = index_bits(cfg.max_cols)
        m.submodules.entries = entries = Memory(shape=unsigned(ww + ib), depth=2 << ab,
                                                init=[])
        # ptr word: {start, count, count != 0} (the flag saves a comparison after the read)
        m.submodules.ptr = ptr = Memory(shape=unsigned(ab + cb + 1), depth=2 << pb, init=[])
        m.submodules.acc = acc = Memory(shape=signed(cfg.acc_width), depth=cfg.rows_per_pe,
                                        init=[])
        ent_w, ent_r = entries.write_port(), entries.read_port(domain="sync")
        ptr_w, ptr_r = ptr.write_port(), ptr.read_port(domain="sync")
        acc_w, acc_r = acc.write_port(), acc.read_port(domain="sync")

        # ---- load: entries packed column by column, one (start, count) per column
        wptr = Signal(unsigned(ab + 1))
        start = Signal(unsigned(ab))
        count = Signal(unsigned(cb))
        col = self.ld_cols
        new_count = (count + self.ld_entry)[:cb]
        new_wptr = (wptr + self.ld_entry)[:ab + 1]
        with m.If(self.ld_start):
            m.d.sync += [wptr.eq(0), start.eq(0), count.eq(0), col.eq(0)]
        with m.Else():
            with m.If(self.ld_entry):
                m.d.comb += [ent_w.addr.eq(Cat(wptr[:ab], self.ld_bank)),
                             ent_w.data.eq(Cat(self.ld_value, self.ld_idx)), ent_w.en.eq(1)]
                m.d.sync += wptr.eq(new_wptr)
            with m.If(self.ld_close):
                m.d.comb += [ptr_w.addr.eq(Cat(col[:pb], self.ld_bank)),
                             ptr_w.data.eq(Cat(start, new_count, new_count != 0)),
                             ptr_w.en.eq(1)]
                m.d.sync += [start.eq(new_wptr), count.eq(0), col.eq(col + 1)]
            with m.Else():
                m.d.sync += count.eq(new_count)

        m.d.comb += [ptr_r.addr.eq(Cat(self.ptr_addr[:pb], self.cp_bank)),
                     ptr_r.en.eq(self.ptr_en)]
        with m.If(self.ptr_en):
            m.d.sync += [self.ptr_start.eq(ptr_r.data[:ab]),
                         self.ptr_count.eq(ptr_r.data[ab:ab + cb]),
                         self.ptr_nz.eq(ptr_r.data[ab + cb])]

        # ---- activation FIFO: (x, start, count)
        width = xw + ab + cb
        m.submodules.fifo = fifo = (SyncFIFO(width=width, depth=cfg.fifo_depth)
                                    if cfg.fifo_depth > 1 else _OneFifo(width))
        m.d.comb += [fifo.w_en.eq(self.push),
                     fifo.w_data.eq(Cat(self.push_x, self.ptr_start, self.ptr_count)),
                     self.full.eq(~fifo.w_rdy)]
        head_x = fifo.r_data[:xw].as_signed()
        head_start = fifo.r_data[xw:xw + ab]
        head_count = fifo.r_data[xw + ab:]

        # ---- stage A: issue one entry read per clock
        rem = Signal(unsigned(cb))
        addr = Signal(unsigned(ab))
        cur_x = Signal(signed(xw))
        v_b = Signal()
        x_b = Signal(signed(xw))
        m.d.comb += ent_r.en.eq(1)
        with m.If(rem != 0):
            m.d.comb += ent_r.addr.eq(Cat(addr, self.cp_bank))
            m.d.sync += [addr.eq(addr + 1), rem.eq(rem - 1), v_b.eq(1), x_b.eq(cur_x)]
        with m.Elif(fifo.r_rdy):
            m.d.comb += [fifo.r_en.eq(1), ent_r.addr.eq(Cat(head_start, self.cp_bank))]
            m.d.sync += [addr.eq(head_start + 1), rem.eq(head_count - 1), cur_x.eq(head_x),
                         v_b.eq(1), x_b.eq(head_x)]
        with m.Else():
            m.d.sync += v_b.eq(0)

        # Every memory output is registered before any logic uses it (ECP5/Xilinx block
        # RAM clock-to-out is slow): B registers the entry, C multiplies and reads the
        # accumulator, D registers the accumulator, E adds and writes.
        # ---- stage B: register the entry
        w_c = Signal(signed(ww))
        row_c = Signal(unsigned(ib))
        x_c = Signal(signed(xw))
        v_c = Signal()
        m.d.sync += [w_c.eq(ent_r.data[:ww]), row_c.eq(ent_r.data[ww:]), x_c.eq(x_b),
                     v_c.eq(v_b)]

        # ---- stage C: multiply (registered), accumulator read
        prod_d = Signal(signed(ww + xw))
        row_d = Signal(unsigned(ib))
        v_d = Signal()
        m.d.sync += [prod_d.eq(w_c * x_c), row_d.eq(row_c), v_d.eq(v_c)]
        m.d.comb += [acc_r.addr.eq(Mux(self.drain, self.acc_addr, row_c)),
                     acc_r.en.eq(Mux(self.drain, self.acc_en, 1))]

        # ---- stage D: register the accumulator (also the drain's output register)
        prod_e = Signal(signed(ww + xw))
        row_e = Signal(unsigned(ib))
        v_e = Signal()
        m.d.sync += [prod_e.eq(prod_d), row_e.eq(row_d), v_e.eq(v_d)]
        with m.If(Mux(self.drain, self.acc_en, 1)):
            m.d.sync += self.acc_data.eq(acc_r.data)

        # ---- stage E: saturating add and write.  The accumulator was read two clocks
        # before this one, so the writes of the previous two clocks are forwarded (the
        # newer one first): back-to-back updates of one row neither stall nor get lost.
        # The row comparisons are made one stage early (in D) and registered.
        fwd1_v, fwd1_row = Signal(), Signal(unsigned(ib))
        fwd1_val, fwd2_val = Signal(signed(cfg.acc_width)), Signal(signed(cfg.acc_width))
        hit1, hit2 = Signal(), Signal()
        m.d.sync += [hit1.eq(v_e & (row_e == row_d)), hit2.eq(fwd1_v & (fwd1_row == row_d))]
        old = Mux(hit1, fwd1_val, Mux(hit2, fwd2_val, self.acc_data))
        new = _saturating_add(old, prod_e, cfg.acc_width)
        m.d.sync += [fwd1_v.eq(v_e), fwd1_row.eq(row_e), fwd1_val.eq(new),
                     fwd2_val.eq(fwd1_val)]
        with m.If(v_e):
            m.d.comb += [acc_w.addr.eq(row_e), acc_w.data.eq(new), acc_w.en.eq(1)]
        with m.Elif(self.clr_en):
            m.d.comb += [acc_w.addr.eq(self.clr_addr), acc_w.data.eq(0), acc_w.en.eq(1)]

        m.d.comb += self.idle.eq(~fifo.r_rdy & (rem == 0) & ~v_b & ~v_c & ~v_d & ~v_e)
        return m
