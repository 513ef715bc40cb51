# SPDX-License-Identifier: Apache-2.0
"""One processing element of the sparse matrix-vector engine (see :mod:`hdl.spmv`)."""

from amaranth.hdl import Cat, Const, Elaboratable, Module, Mux, Signal, signed, unsigned
from amaranth.lib.memory import Memory

from gen.core.fixed import index_bits
from gen.spmv import SpmvConfig
from hdl.lib.arith import radix4_product
from hdl.lib.pe_front import PeFront

__all__ = ["SpmvPE"]


def _clamp(value, width):
    """``value`` (``width + 1`` bits, signed) saturated to ``width`` bits: in range iff
    its two top bits are equal (a LUT per bit, no comparison)."""
    value = value.as_signed()
    hi = Const((1 << (width - 1)) - 1, signed(width))
    lo = Const(-(1 << (width - 1)), signed(width))
    overflow = value[width] != value[width - 1]
    return Mux(overflow, Mux(value[width], lo, hi), value[:width].as_signed())


class SpmvPE(Elaboratable):
    """A PE: column pointer table, column-packed entries, activation FIFO, accumulators.

    Parameters
    ----------
    cfg : :class:`gen.spmv.SpmvConfig`
    index : int
        This PE's number ``p`` (weight words and drained rows name their PE).

    Members (plain signals driven/read by :class:`hdl.spmv.SpmvEngine`; every input is
    a leaf register of one of the engine's broadcast trees, every output a register)
    ---------------------------------------------------------------------------------
    lw_take, lw_entry, lw_close, lw_end, lw_bank : in, 1.  lw_pe : in, pe_bits
        A weight word of this PE's lane, decoded by the engine: ``lw_take`` it was
        accepted; ``lw_pe`` the PE it names; ``lw_entry`` ENTRY or LAST (append
        ``(value, idx)`` to the entry memory); ``lw_close`` LAST or SKIP (then close
        the PE's column: ``ptr[col] = (start, count)``, ``col += 1``); ``lw_end`` an END
        beat (reset the load counters); the bank it loads.  Processed one clock after
        these inputs.
    lw_value : in, w_fmt.  lw_idx : in, unsigned(idx_bits)
    ld_cols : out, unsigned(col_bits)
        Columns closed since the last END (the block's column count).
    ld_cols_nz : out, 1
        ``ld_cols != 0`` (register).
    blk_cols, blk_cols_nz : out
        ``ld_cols`` and ``ld_cols_nz`` latched when an END is processed: the column
        count of the block just loaded, stable until the next END.
    cp_bank : in, 1
        Bank being computed on.
    ptr_addr : in, unsigned(col_bits)
        Column whose pointer is read (every clock; the data is registered, so
        ``(start, count, count != 0)`` of ``ptr_addr`` is available 2 clocks later).
    push_v, push_x : in
        Broadcaster stage 2: an activation (``x_fmt``) whose column's pointer is in the
        pointer register; pushed into the FIFO when the column has entries here.
    high : out, 1
        Registered: the FIFO held at least ``fifo_depth`` items in the previous clock.
    clr_init, clr_addr : in
        Clear accumulator ``clr_addr`` (after reset); done one clock later.
    drain : in, 1
        Tile controller in DRAIN (the accumulator read port belongs to the drain).
    dr_v, dr_pe, dr_idx : in
        Drain stage: read accumulator ``dr_idx`` of PE ``dr_pe`` and clear it behind
        the read (one clock later, in this PE's registers).
    acc_data : out, signed(acc_width), accumulator format.
        The accumulator read (with forwarding), registered.
    dr_data : out, signed(acc_width), accumulator format.
        The accumulator drained by this PE, 0 otherwise (registered): 3 clocks after
        ``dr_v``.
    idle : out, 1
        Registered: in the previous clock the FIFO was empty and nothing in flight.
    rst_in : in, 1
        The PE's reset (the engine's reset-tree leaf that also resets the PE's domain),
        for the PE's local reset copy.

    Pipeline (``cfg.pe_latency`` = 7 clocks from issue to the final sum): A issue (one
    per clock, back to back across FIFO items) into the entry address register -> entry
    read -> B entry register -> B2 operand registers (w, x, 3x, -x) -> C radix-4 partial
    products added in pairs -> C2 product register (LUTs and carry chains, no DSP),
    accumulator read -> D product registers, ``min + p``, ``max + p`` and the
    accumulator register -> E add (lazy saturation: the memory holds the unsaturated
    ``s + p``, ``acc_width + 1`` bits), written to the memory one clock later from write
    registers.  Every RAM input is a register whose only load is that pin, and every
    RAM output is registered first.  The sums of the three entries ahead
    of an entry are forwarded from registers, so back-to-back updates of one accumulator
    neither stall nor lose an update.
    """

    def __init__(self, cfg: SpmvConfig, index: int = 0):
        self.cfg = cfg
        self.index = index
        ww, xw = cfg.w_fmt.width, cfg.x_fmt.width
        self.lw_take = Signal()
        self.lw_pe = Signal(unsigned(cfg.pe_bits))
        self.blk_cols = Signal(unsigned(cfg.col_bits), reset_less=True)
        self.blk_cols_nz = Signal(reset_less=True)
        self.lw_entry = Signal()
        self.lw_close = Signal()
        self.lw_end = Signal()
        self.lw_bank = Signal()
        self.ld_cols_nz = Signal()
        self.lw_value = Signal(signed(ww))
        self.lw_idx = Signal(unsigned(cfg.idx_bits))
        self.ld_cols = Signal(unsigned(cfg.col_bits))
        self.cp_bank = Signal()
        self.ptr_addr = Signal(unsigned(cfg.col_bits))
        self.push_v = Signal()
        self.push_x = Signal(signed(xw))
        self.high = Signal(reset_less=True)
        self.clr_init = Signal()
        self.clr_addr = Signal(unsigned(cfg.idx_bits))
        self.drain = Signal()
        self.dr_v = Signal()
        self.dr_pe = Signal(unsigned(cfg.pe_bits))
        self.dr_idx = Signal(unsigned(cfg.idx_bits))
        self.acc_data = Signal(signed(cfg.acc_width), reset_less=True)
        self.dr_data = Signal(signed(cfg.acc_width), reset_less=True)
        self.idle = Signal(reset_less=True)
        self.rst_in = Signal(name="rst_in")

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        ww, xw, ib, ab, cb = (cfg.w_fmt.width, cfg.x_fmt.width, cfg.idx_bits, cfg.addr_bits,
                              cfg.count_bits)

        (ent_w, ent_r), (ptr_w, ptr_r), (acc_w, acc_r), pb = self._memories(m)

        self._load(m, ent_w, ptr_w, pb)

        ptr_start, ptr_count, ptr_nz = self._pointer_read(m, ptr_r, pb)

        # ---- activation FIFO and issue (hdl.lib.pe_front): items (x, start, count,
        # count > 1); the broadcaster never overfills the FIFO (it stops at fifo_depth
        # items with a delayed flag; the slots beyond fifo_depth absorb what is already
        # in flight): fifo_slots RAM words behind a head register.
        m.submodules.front = front = PeFront(xw, ab, cb, cfg.fifo_slots + 1, multi=True)
        # (the push is registered: the FIFO's inputs are flip-flops)
        f_en = Signal(name="f_en")
        f_data = Signal(len(front.push.payload.as_value()), name="f_data", reset_less=True)
        m.d.sync += [f_en.eq(self.push_v & ptr_nz),
                     f_data.eq(Cat(self.push_x, ptr_start, ptr_count, ptr_count != 1))]
        m.d.comb += [front.push.valid.eq(f_en), front.push.payload.eq(f_data)]
        m.d.sync += self.high.eq(front.level >= cfg.fifo_depth)

        # ---- stage A: one entry issued per clock (front.v, front.x); the entry address
        # goes into a register, `rd_ent`, that drives the block RAM alone: the read is
        # one clock after the issue
        v_a = front.v
        rd_ent = Signal(unsigned(ab + 1), name="rd_ent", reset_less=True)
        v_b = Signal(reset_less=True)
        x_b = Signal(signed(xw), reset_less=True)
        # (unconditional assignments: continuous in the Verilog, so simulators see
        # them from time 0 although their inputs are registers that start constant)
        m.d.comb += [ent_r.en.eq(1), ent_r.addr.eq(rd_ent)]
        m.d.sync += [rd_ent.eq(Cat(front.addr, self.cp_bank)), v_b.eq(v_a), x_b.eq(front.x)]

        # Every memory output is registered before any logic uses it (ECP5/Xilinx block
        # RAM clock-to-out is slow): B registers the entry, C multiplies and reads the
        # accumulator, D registers the accumulator, E adds and writes.
        w_c, row_c, x_c, v_c, x3_c, xn_c, v_q = self._operands(m, ent_r, v_b, x_b)

        # ---- drain and clear requests.  The accumulator memory's read address is a
        # register (`acc_ra`: the drained row while draining, else the row entering C)
        hit = self.dr_v & (self.dr_pe == self.index)
        mine1 = Signal(reset_less=True)       # this PE's drain read, in C and in D
        mine2 = Signal(reset_less=True)
        m.d.sync += [mine1.eq(hit), mine2.eq(mine1)]
        acc_ra = Signal(unsigned(ib), name="acc_ra", reset_less=True)
        m.d.sync += acc_ra.eq(Mux(self.drain, self.dr_idx, row_c))

        # ---- stages C and C2: multiply in LUTs and carry chains, not in a DSP (on the
        # ECP5 a DSP adds 3.1 ns and sits on its own row, often away from the PE; the
        # product is exact either way).  The weight's radix-4 digits select partial
        # products from registers (0, x, 2x, 3x; the signed top digit 0, x, -2x, -x),
        # C adds them in pairs into registers, C2 adds the pairs.
        pw = ww + xw
        prod = radix4_product(m, w_c, x_c, x3_c, xn_c)
        row_d = Signal(unsigned(ib), reset_less=True)
        v_d = Signal(reset_less=True)
        m.d.sync += [row_d.eq(row_c), v_d.eq(v_c)]
        prod_x = Signal(signed(pw), name="prod_x", reset_less=True)
        row_x = Signal(unsigned(ib), name="row_x", reset_less=True)
        v_x = Signal(name="v_x", reset_less=True)
        m.d.sync += [prod_x.eq(prod[:pw]), row_x.eq(row_d), v_x.eq(v_d)]
        m.d.comb += [acc_r.addr.eq(acc_ra), acc_r.en.eq(1)]

        # The sum of stage E is written to the accumulator memory one clock later, from
        # its register (wr_*), so the adder ends at a flip-flop.  An entry's accumulator
        # is read in C, three clocks before the memory holds the writes of the three
        # entries ahead of it (in E, and one and two clocks past E): those are forwarded.
        # The newest (the entry just ahead, in E) is selected in E; the two older ones
        # are merged with the memory value in D, into `base`.  Every row comparison is
        # made one stage early and registered.
        wr_v = Signal(reset_less=True)                      # E's sum, one clock later
        wr_row = Signal(unsigned(ib), reset_less=True)
        aw = cfg.acc_width
        wr_val = Signal(signed(aw + 1), reset_less=True)          # unsaturated
        old_val = Signal(signed(aw), reset_less=True)  # two clocks later, saturated
        # max + product and min + product: their top bits are constants (0 and 1), kept
        # out of the registers (a flip-flop that always loads 1 but starts at 0 is the
        # same cell in every PE, and Yosys merged the 32 into one whose net crossed the
        # chip into every PE's accumulator loop)
        c_hi_q = Signal(unsigned(aw), name="c_hi", reset_less=True)
        c_lo_q = Signal(unsigned(aw), name="c_lo", reset_less=True)
        c_hi = Cat(c_hi_q, Const(0, 1)).as_signed()
        c_lo = Cat(c_lo_q, Const(1, 1)).as_signed()
        prod_e = Signal(signed(ww + xw), reset_less=True)
        # a second product register (complemented, so Yosys keeps it apart) for the
        # second adder: each adder has its own register beside it
        prod_n = Signal(signed(ww + xw), name="prod_n", reset_less=True)
        # min + p and max + p need no adder over acc_width bits: the product fits in
        # acc_width bits, so min + p keeps p's low acc_width - 1 bits under the top bits
        # (~sign, 1), and max + p = 2^(aw-1) + (p - 1) keeps (p - 1)'s under (~sign, 0)
        pw = ww + xw
        p_ext = Cat(prod_x, prod_x[-1].replicate(aw + 1 - pw))
        p_dec = Signal(signed(pw + 1), name="p_dec")
        m.d.comb += p_dec.eq(prod_x - 1)
        q_ext = Cat(p_dec, p_dec[-1].replicate(aw - pw))
        row_e = Signal(unsigned(ib), reset_less=True)
        v_e = Signal(reset_less=True)
        hit_e, hit_wr = Signal(reset_less=True), Signal(reset_less=True)
        hit_d = Signal(reset_less=True)
        # in C: the entry in E and the one in wr_* against this one (row_c)
        m.d.sync += [hit_e.eq(v_e & (row_e == row_d)), hit_wr.eq(wr_v & (wr_row == row_d))]
        # ---- stage D: multiply (registered); base = the accumulator read, or a
        # forwarded newer value (also the drain's output register: no forwarding hits
        # while draining)
        m.d.sync += [prod_e.eq(prod_x), prod_n.eq(~prod_x), row_e.eq(row_x), v_e.eq(v_x),
                     c_hi_q.eq(Cat(q_ext[:aw - 1], ~q_ext[aw - 1])),
                     c_lo_q.eq(Cat(p_ext[:aw - 1], ~p_ext[aw - 1])),
                     hit_d.eq(v_e & (row_e == row_x)),
                     self.acc_data.eq(Mux(hit_e, _clamp(wr_val, aw),
                                          Mux(hit_wr, old_val, _clamp(acc_r.data, aw)))),
                     # the drained value, or 0: the engine ORs the PEs' outputs, so no
                     # select signal has to travel to the PEs
                     self.dr_data.eq(Mux(mine2, _clamp(acc_r.data, aw), 0))]

        # ---- stage E: saturating add (newest value forwarded: back-to-back updates of
        # one row neither stall nor get lost)
        # (two adders, so no select sits before a carry chain: each sum saturates on
        # its own and the forwarding select is the last step)
        # Lazy saturation: the loop keeps u_k with saturate(u_k) = s_k, the saturated
        # accumulator, and u_(k+1) = s_k + p_k exactly (acc_width + 1 bits), so
        # saturate(u_(k+1)) = saturate(s_k + p_k) = s_(k+1).  For back-to-back updates
        # of one row, s_k + p_k = max + p or min + p (precomputed in D) when u_k is out
        # of range, else u_k + p: the selects come from registers, and no carry-out
        # has to fan out to every bit inside the one-clock loop.
        w_ovf = wr_val[aw] != wr_val[aw - 1]
        fwd = Mux(w_ovf, Mux(wr_val[aw], c_lo, c_hi), (wr_val + prod_e)[:aw + 1])
        new = Mux(hit_d, fwd, (self.acc_data + ~prod_n)[:aw + 1])
        m.d.sync += [wr_v.eq(v_e), wr_row.eq(row_e), wr_val.eq(new),
                     old_val.eq(_clamp(wr_val, aw))]
        aw_en = self._acc_write(m, acc_w, v_e, row_e, new, hit)

        self._idle(m, front.idle, v_a)

        self._mac_reset(m, (v_b, v_q, v_c, v_d, v_x, v_e), aw_en)
        return m

    def _pointer_read(self, m, ptr_r, pb):
        """The pointer read (every clock) and its registers: (start, count, nonzero)."""
        ab, cb = self.cfg.addr_bits, self.cfg.count_bits
        ptr_start = Signal(unsigned(ab), reset_less=True)
        ptr_count = Signal(unsigned(cb), reset_less=True)
        ptr_nz = Signal(reset_less=True)
        m.d.comb += [ptr_r.addr.eq(Cat(self.ptr_addr[:pb], self.cp_bank)), ptr_r.en.eq(1)]
        m.d.sync += [ptr_start.eq(ptr_r.data[:ab]), ptr_count.eq(ptr_r.data[ab:ab + cb]),
                     ptr_nz.eq(ptr_r.data[ab + cb])]
        return ptr_start, ptr_count, ptr_nz

    def _mac_reset(self, m, valids, aw_en):
        """Clear the valid bits from B on and set the accumulator write enable from a
        local copy of the PE reset.

        The copy is one clock late (`rst_mac`, beside them), so the PE reset net does not
        stretch from the loader to the adders.  What flushes out in that clock is
        harmless: the engine is in INIT, whose clears win and come after; flags and data
        registers without reset are recomputed every clock and used only under a valid
        bit.  The INIT clears reach the PE through the same broadcast tree as its reset,
        so the first (row 0) arrives in the clock `rst_mac` is still high: the write
        enable keeps it (a reset in the middle of a job once left row 0's old sum in
        place).
        """
        rst_mac = Signal(name="rst_mac", reset_less=True)
        m.d.sync += rst_mac.eq(self.rst_in)
        with m.If(rst_mac):
            m.d.sync += [v.eq(0) for v in valids]
            m.d.sync += aw_en.eq(self.clr_init)

    def _memories(self, m):
        """The entry, pointer and accumulator memories; returns their (write, read) ports
        and the pointer address width per bank."""
        cfg = self.cfg
        ww, ib, ab, cb = cfg.w_fmt.width, cfg.idx_bits, cfg.addr_bits, cfg.count_bits
        # ---- memories; entries and pointers are double-buffered (bank = address MSB)
        pb = index_bits(cfg.max_cols)
        # The loader writes one bank while the PEs read the other, so a read never meets
        # a write that matters: `no_rw_check` tells Yosys not to build collision logic
        # (it would sit on the block RAMs' address paths).
        no_rw = {"no_rw_check": 1}
        m.submodules.entries = entries = Memory(shape=unsigned(ww + ib), depth=2 << ab,
                                                init=[], attrs=no_rw)
        # ptr word: {start, count, count != 0} (the flag saves a comparison after the read)
        m.submodules.ptr = ptr = Memory(shape=unsigned(ab + cb + 1), depth=2 << pb, init=[],
                                        attrs=no_rw)
        # accumulators hold the unsaturated sum u = s + p of a saturated value s and a
        # product (acc_width + 1 bits); readers saturate it (see stage E)
        m.submodules.acc = acc = Memory(shape=signed(cfg.acc_width + 1), depth=cfg.rows_per_pe,
                                        init=[])
        ent_w, ent_r = entries.write_port(), entries.read_port(domain="sync")
        ptr_w, ptr_r = ptr.write_port(), ptr.read_port(domain="sync")
        acc_w, acc_r = acc.write_port(), acc.read_port(domain="sync")
        return (ent_w, ent_r), (ptr_w, ptr_r), (acc_w, acc_r), pb

    def _load(self, m, ent_w, ptr_w, pb):
        """Load side: the engine's word, decoded and registered here, is packed into the
        entry memory column by column, with one pointer word ``(start, count, count != 0)``
        per column (write ports ``ent_w``, ``ptr_w``, registered)."""
        cfg = self.cfg
        ww, ib, ab, cb = cfg.w_fmt.width, cfg.idx_bits, cfg.addr_bits, cfg.count_bits
        # ---- load: the engine's registered word is decoded and registered here
        ld_entry, ld_close = Signal(name="ld_entry"), Signal(name="ld_close")
        ld_start = Signal(name="ld_start")
        ld_value = Signal(signed(ww), reset_less=True)
        ld_idx = Signal(unsigned(ib), reset_less=True)
        ld_bank = Signal(reset_less=True)
        m.d.sync += [
            ld_entry.eq(self.lw_take & (self.lw_pe == self.index) & self.lw_entry),
            ld_close.eq(self.lw_take & (self.lw_pe == self.index) & self.lw_close),
            ld_start.eq(self.lw_take & self.lw_end),
            ld_value.eq(self.lw_value), ld_idx.eq(self.lw_idx), ld_bank.eq(self.lw_bank)]
        # entries packed column by column, one (start, count) per column
        wptr = Signal(unsigned(ab + 1))
        start = Signal(unsigned(ab))
        count = Signal(unsigned(cb))
        col = self.ld_cols
        new_count = (count + ld_entry)[:cb]
        new_wptr = (wptr + ld_entry)[:ab + 1]
        count_nz = Signal()                   # count != 0, kept as a register
        # The block RAM write sides are registers (address, data, enable), written one
        # clock after the word is processed: nothing but a route between a flip-flop and
        # a RAM pin, so the placer can put them beside the RAM.
        ew_en, pw_en = Signal(), Signal()
        ew_addr = Signal(unsigned(ab + 1), reset_less=True)
        ew_data = Signal(unsigned(ww + ib), reset_less=True)
        pw_addr = Signal(unsigned(pb + 1), reset_less=True)
        pw_data = Signal(unsigned(ab + cb + 1), reset_less=True)
        m.d.sync += [ew_en.eq(ld_entry & ~ld_start), ew_addr.eq(Cat(wptr[:ab], ld_bank)),
                     ew_data.eq(Cat(ld_value, ld_idx)),
                     pw_en.eq(ld_close & ~ld_start), pw_addr.eq(Cat(col[:pb], ld_bank)),
                     pw_data.eq(Cat(start, new_count, count_nz | ld_entry))]
        m.d.comb += [ent_w.addr.eq(ew_addr), ent_w.data.eq(ew_data), ent_w.en.eq(ew_en),
                     ptr_w.addr.eq(pw_addr), ptr_w.data.eq(pw_data), ptr_w.en.eq(pw_en)]
        with m.If(ld_start):
            m.d.sync += [wptr.eq(0), start.eq(0), count.eq(0), count_nz.eq(0), col.eq(0),
                         self.ld_cols_nz.eq(0), self.blk_cols.eq(col),
                         self.blk_cols_nz.eq(self.ld_cols_nz)]
        with m.Else():
            with m.If(ld_entry):
                m.d.sync += wptr.eq(new_wptr)
            with m.If(ld_close):
                m.d.sync += [start.eq(new_wptr), count.eq(0), count_nz.eq(0),
                             col.eq(col + 1), self.ld_cols_nz.eq(1)]
            with m.Else():
                m.d.sync += [count.eq(new_count), count_nz.eq(count_nz | ld_entry)]

    def _operands(self, m, ent_r, v_b, x_b):
        """Stages B and B2: the entry read's register, then the multiplier's operand
        registers (weight, row, ``x``, ``3x``, ``-x``); returns them, the valid bit and
        stage B's valid bit."""
        cfg = self.cfg
        ww, xw, ib = cfg.w_fmt.width, cfg.x_fmt.width, cfg.idx_bits
        # ---- stage B: register the entry (the block RAM's output register), then again
        # (B2: the multiplier's operand registers and the accumulator row)
        e_q = Signal(unsigned(ww + ib), name="e_q", reset_less=True)
        x_q = Signal(signed(xw), name="x_q", reset_less=True)
        v_q = Signal(name="v_q", reset_less=True)
        m.d.sync += [e_q.eq(ent_r.data), x_q.eq(x_b), v_q.eq(v_b)]
        w_c = Signal(signed(ww), reset_less=True)
        row_c = Signal(unsigned(ib), reset_less=True)
        x_c = Signal(signed(xw), reset_less=True)
        v_c = Signal(reset_less=True)
        m.d.sync += [w_c.eq(e_q[:ww]), row_c.eq(e_q[ww:]), x_c.eq(x_q), v_c.eq(v_q)]
        # the multiples of x the radix-4 partial products select from: 3x and -x
        x3_c = Signal(signed(xw + 2), name="x3_c", reset_less=True)
        xn_c = Signal(signed(xw + 1), name="xn_c", reset_less=True)
        m.d.sync += [x3_c.eq(x_q + (x_q << 1)), xn_c.eq(-x_q)]
        return w_c, row_c, x_c, v_c, x3_c, xn_c, v_q

    def _acc_write(self, m, acc_w, v_e, row_e, new, hit):
        """The accumulator memory's write side (port ``acc_w``): stage E's sum ``new`` of
        row ``row_e`` when ``v_e``, else a clear after reset or behind a drain read
        (``hit``); returns the write enable register."""
        cfg = self.cfg
        ib, aw = cfg.idx_bits, cfg.acc_width
        # the memory's write side has registers of its own (a copy of wr_*, or a clear
        # after reset / behind a drain read), so wr_val stays beside the adders
        # (the clear after reset has priority: a stale valid bit flushing out of the
        # pipeline just after a reset cannot displace it)
        aw_en = Signal(name="aw_en", reset_less=True)
        aw_addr = Signal(unsigned(ib), name="aw_addr", reset_less=True)
        aw_data = Signal(signed(aw + 1), name="aw_data", reset_less=True)
        m.d.sync += [aw_en.eq(v_e | self.clr_init | hit),
                     aw_addr.eq(Mux(self.clr_init, self.clr_addr,
                                    Mux(v_e, row_e, self.dr_idx)))]
        with m.If(v_e & ~self.clr_init):
            m.d.sync += aw_data.eq(new)
        with m.Else():
            m.d.sync += aw_data.eq(0)
        m.d.comb += [acc_w.addr.eq(aw_addr), acc_w.data.eq(aw_data), acc_w.en.eq(aw_en)]
        return aw_en

    def _idle(self, m, front_idle, v_a):
        """The registered ``idle`` output: nothing to issue (``front_idle``), nothing issued
        (``v_a``) in the last ``pe_latency - 1`` clocks."""
        cfg = self.cfg
        # (the memory write one clock after E needs no idle term: `done` follows idle by
        # done_delay >= 1 clocks and nothing reads the accumulators before)
        # (a push in f_en is covered by the engine's broadcaster-empty flag)
        # The stages after A only delay v_a, so "something in B..E" is "v_a was set in
        # the last pe_latency - 1 clocks": a countdown beside the issue logic tells it,
        # and the idle flag needs no signal from the far end of the PE.
        tail = cfg.pe_latency - 1
        tail_cnt = Signal(range(tail + 1), name="tail_cnt")
        tail_busy = Signal(name="tail_busy")          # any of v_b .. v_e (register)
        with m.If(v_a):
            m.d.sync += tail_cnt.eq(tail)
        with m.Elif(tail_cnt != 0):
            m.d.sync += tail_cnt.eq(tail_cnt - 1)
        m.d.sync += tail_busy.eq(v_a | (tail_cnt > 1))
        m.d.sync += self.idle.eq(front_idle & ~v_a & ~tail_busy)
