# SPDX-License-Identifier: Apache-2.0
"""Batched FC engine on FD-CSR weights: Y = W @ X, skipping the zero weights."""

from amaranth.hdl import Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from gen.fc import FcConfig, fixed_overhead
from hdl.fc.decoder import FdcsrDecoder, _sum, beat_layout, group_layout, popcount
from hdl.lib.fifo import Queue
from hdl.lib.skid import SkidBuffer

__all__ = ["FcEngine"]


class FcEngine(wiring.Component):
    """``Y = W @ X`` for a sparse ``W`` (``rows x cols``, FD-CSR) and a batch ``X``
    (``cols x N``) held on chip, with ``lanes = N * nz_per_clock`` multipliers.

    A job: one ``cmd`` transfer (sizes), ``cols`` ``x`` transfers (row ``c`` of ``X``), then
    the FD-CSR stream of ``W`` row by row: ``meta`` beats (``segs_per_beat`` masks and
    offsets; ``ceil(cols / (row_width * segs_per_beat))`` beats per row, zero-padded) go
    through :class:`hdl.fdcsr.FdcsrDecoder`, which issues only the non-zeros: up to
    ``nz_per_clock`` per clock as one read request ``(addr, count)`` on ``vaddr`` (the
    weight memory port; the values come back in order on ``vdata``).  Each returned value
    is multiplied with the ``N`` activations of its column, and the row's sums leave on
    ``y``.  The engine returns to idle after ``rows`` results; a new ``cmd`` starts the next
    job.

    Parameters
    ----------
    cfg : :class:`gen.fc.FcConfig`

    Members
    -------
    cmd : In(stream.Signature(StructLayout rows: unsigned(16), cols: unsigned(17)))
        Job sizes, ``1 <= rows <= max_rows``, ``1 <= cols <= max_cols``.
    x : In(stream.Signature(ArrayLayout(signed(x_fmt.width), N)))
        Row ``c`` of ``X`` (element ``n`` in bits ``n*w..``), ``x_fmt``; ``cols`` transfers.
    meta : In(stream.Signature(StructLayout masks: ArrayLayout(unsigned(row_width), S),
    offsets: ArrayLayout(unsigned(addr_width), S)))
        FD-CSR masks (LSB = first element) and offsets (index of the segment's first value).
    vaddr : Out(stream.Signature(StructLayout addr: unsigned(addr_width), count: unsigned))
        Memory read requests: values ``addr .. addr + count - 1`` (``1 <= count <= k``).
    vdata : In(stream.Signature(ArrayLayout(signed(w_fmt.width), k)))
        Read responses in request order; slot ``s < count`` holds ``values[addr + s]``
        (``w_fmt``).  Accepted whenever the group FIFO's head is waiting for its values,
        which may be before that group's request has left the ``vaddr`` skid buffer (a
        memory must answer requests in order; see docs/fc.md, "Limitations").
    y : Out(stream.Signature(ArrayLayout(signed(acc_width), N)))
        One transfer per row of ``W``: the exact sums ``(W @ X)[r, n]`` in ``y_fmt``.
        Back-pressure stalls the pipeline only while the ``y`` register is full and a
        row's last group waits behind it.

    Latency/throughput
    ------------------
    The decoder issues ``k`` non-zeros per clock (fewer only at the end of a row or after
    a run of empty beats); row ``r``'s result transfers :attr:`latency` clocks after its
    last decode step.  Exact cycle models: :func:`gen.fc.fc_schedule` (every stream
    always valid / ready) and :func:`gen.fc.fc_cycle_model` (any per-port stimulus).
    Front end: ``meta``
    input register (per-segment popcounts), skid buffer (the beat's non-zero count), the
    decoder's look-ahead step.  Pipeline: decoder output register, skid buffer (columns
    encoded), FIFO (``fifo_depth`` groups waiting for values; requests leave through a
    skid buffer on ``vaddr``), pop + activation read, memory output registers, operand
    registers at the multipliers, multiply (registered), accumulate.  Every ``ready``
    towards the decoder is a register.
    """

    ii = 1

    def __init__(self, cfg: FcConfig):
        if not isinstance(cfg, FcConfig):
            raise TypeError(f"cfg must be an FcConfig, not {cfg!r}")
        self.cfg = cfg
        n, k = cfg.batch, cfg.nz_per_clock
        self._meta = data.StructLayout({
            "masks": data.ArrayLayout(unsigned(cfg.row_width), cfg.segs_per_beat),
            "offsets": data.ArrayLayout(unsigned(cfg.addr_width), cfg.segs_per_beat),
        })
        super().__init__({
            "cmd": In(stream.Signature(data.StructLayout({"rows": unsigned(16),
                                                          "cols": unsigned(17)}))),
            "x": In(stream.Signature(data.ArrayLayout(signed(cfg.x_fmt.width), n))),
            "meta": In(stream.Signature(self._meta)),
            "vaddr": Out(stream.Signature(data.StructLayout({
                "addr": unsigned(cfg.addr_width), "count": unsigned(k.bit_length())}))),
            "vdata": In(stream.Signature(data.ArrayLayout(signed(cfg.w_fmt.width), k))),
            "y": Out(stream.Signature(data.ArrayLayout(signed(cfg.acc_width), n))),
        })

    @property
    def latency(self) -> int:
        return self.cfg.latency

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        n, k = cfg.batch, cfg.nz_per_clock
        cw = cfg.col_width
        beat_shift = cfg.beat_cols.bit_length() - 1

        # ---------------------------------------------------------------- job control
        # Sizes minus one, formed at the `cmd` transfer: the end-of-loop tests below are
        # then equalities of registers, with no subtraction in front.
        rows_m1 = Signal(16)
        cols_m1 = Signal(17)
        bpr_m1 = Signal(17)         # meta beats per row - 1
        x_count = Signal(17)
        beat = Signal(17)           # beat index within the current row (meta side)
        meta_rows = Signal(16)      # rows whose meta has been accepted
        meta_open = Signal()        # more meta beats belong to this job (a register: off
                                    # the decoder's look-ahead path)
        y_rows = Signal(16)         # rows whose result has been transferred
        running = Signal()

        m.submodules.xmem = xmem = Memory(shape=unsigned(n * cfg.x_fmt.width),
                                          depth=cfg.max_cols, init=[])
        xw = xmem.write_port()
        m.d.comb += [xw.addr.eq(x_count), xw.data.eq(self.x.payload.as_value())]

        # Job state as plain registers (no FSM): every combinational output below is a
        # continuous assignment, which Icarus evaluates from time 0.
        idle, loading = Signal(init=1), Signal()
        m.d.comb += [
            running.eq(~idle & ~loading),
            self.cmd.ready.eq(idle),
            self.x.ready.eq(loading),
            xw.en.eq(loading & self.x.valid),
        ]
        with m.If(self.cmd.valid & self.cmd.ready):
            p = self.cmd.payload
            m.d.sync += [rows_m1.eq(p.rows - 1), cols_m1.eq(p.cols - 1), x_count.eq(0),
                         idle.eq(0), loading.eq(1), bpr_m1.eq((p.cols - 1) >> beat_shift)]
        with m.If(self.x.valid & self.x.ready):
            m.d.sync += x_count.eq(x_count + 1)
            with m.If(x_count == cols_m1):
                m.d.sync += [beat.eq(0), meta_rows.eq(0), y_rows.eq(0), loading.eq(0),
                             meta_open.eq(1)]
        with m.If(running & self.y.valid & self.y.ready & (y_rows == rows_m1)):
            m.d.sync += idle.eq(1)

        dec = self._decoder(m, beat, bpr_m1, meta_rows, rows_m1, meta_open)

        # The decoder's groups (columns encoded) pass a skid buffer, so the decoder's
        # `o.ready` is a register and the FIFO and `vaddr` hand-shakes do not reach its
        # one-clock step.  Groups then wait in a FIFO for their values; the request goes
        # to `vaddr` through another skid buffer in the same clock as the FIFO write (so a
        # response always finds its group).
        glayout = group_layout(k, cfg.addr_width, cw)
        m.submodules.gskid = gskid = SkidBuffer(glayout)
        wiring.connect(m, dec.o, gskid.i)
        m.submodules.fifo = fifo = Queue(glayout, cfg.fifo_depth)
        m.submodules.vskid = vskid = SkidBuffer(self.vaddr.payload.shape())
        g = gskid.o.payload
        needs_values = g.count != 0
        accept = fifo.i.valid & fifo.i.ready
        m.d.comb += [
            fifo.i.valid.eq(gskid.o.valid & (~needs_values | vskid.i.ready)),
            fifo.i.payload.eq(g),
            vskid.i.valid.eq(accept & needs_values),
            vskid.i.payload.addr.eq(g.addr),
            vskid.i.payload.count.eq(g.count),
            gskid.o.ready.eq(accept),
        ]
        wiring.connect(m, vskid.o, wiring.flipped(self.vaddr))

        self._datapath(m, xmem, fifo, y_rows)
        return m

    def _decoder(self, m, beat, bpr_m1, meta_rows, rows_m1, meta_open):
        """The ``meta`` input stage, its skid buffer and the FD-CSR decoder (returned);
        ``beat``, ``meta_rows`` and ``meta_open`` are the job's meta-side counters."""
        cfg = self.cfg
        k, cw = cfg.nz_per_clock, cfg.col_width
        beat_shift = cfg.beat_cols.bit_length() - 1
        m.submodules.dec = dec = FdcsrDecoder(cfg.row_width, cfg.segs_per_beat, k,
                                              cfg.addr_width, cw)
        # `meta` enters a register stage (s0: the beat, its column, end-of-row flag and
        # per-segment popcounts), then a two-entry skid buffer that adds the segment counts
        # into the beat's non-zero count.  Both ready signals are registers, so the
        # decoder's one-clock step (whose look-ahead reads the skid head) reaches neither
        # the input hand-shake, the row counters nor a popcount.
        s = cfg.segs_per_beat
        s0_layout = data.StructLayout({
            "masks": data.ArrayLayout(unsigned(cfg.row_width), s),
            "offsets": data.ArrayLayout(unsigned(cfg.addr_width), s),
            "col_base": unsigned(cw),
            "last": unsigned(1),
            "pcs": data.ArrayLayout(unsigned(cfg.row_width.bit_length()), s),
        })
        s0, s0_valid = Signal(s0_layout), Signal()
        m.submodules.skid = skid = SkidBuffer(beat_layout(cfg.row_width, s, cfg.addr_width,
                                                          cw))
        last_beat = beat == bpr_m1
        m.d.comb += self.meta.ready.eq(meta_open & (~s0_valid | skid.i.ready))
        push = s0_valid & skid.i.ready
        with m.If(self.meta.valid & self.meta.ready):
            m.d.sync += [
                s0.masks.eq(self.meta.payload.masks),
                s0.offsets.eq(self.meta.payload.offsets),
                s0.col_base.eq(beat << beat_shift),
                s0.last.eq(last_beat),
                s0_valid.eq(1),
                beat.eq(Mux(last_beat, 0, beat + 1)),
            ]
            for j in range(s):
                m.d.sync += s0.pcs[j].eq(popcount(self.meta.payload.masks[j]))
            with m.If(last_beat):
                m.d.sync += meta_rows.eq(meta_rows + 1)
                with m.If(meta_rows == rows_m1):
                    m.d.sync += meta_open.eq(0)
        with m.Elif(push):
            m.d.sync += s0_valid.eq(0)
        m.d.comb += [
            skid.i.valid.eq(s0_valid),
            skid.i.payload.masks.eq(s0.masks),
            skid.i.payload.offsets.eq(s0.offsets),
            skid.i.payload.col_base.eq(s0.col_base),
            skid.i.payload.last.eq(s0.last),
            skid.i.payload.nnz.eq(_sum([s0.pcs[j] for j in range(s)])),
        ]
        wiring.connect(m, skid.o, dec.i)
        return dec

    def _datapath(self, m, xmem, fifo, y_rows):
        """Pop a group from ``fifo`` with its values, read its activations from ``xmem``,
        multiply and accumulate (stages 1-5); a row's sums leave on ``y`` (``y_rows``
        counts them)."""
        cfg = self.cfg
        n, k = cfg.batch, cfg.nz_per_clock
        advance = Signal()
        head = fifo.o.payload
        head_needs = head.count != 0
        pop = Signal()
        m.d.comb += [
            fifo.o.ready.eq(advance & (~head_needs | self.vdata.valid)),
            pop.eq(fifo.o.valid & fifo.o.ready),
            self.vdata.ready.eq(advance & fifo.o.valid & head_needs),
        ]

        # Stage 1: the group's weights (zero in unused slots) and its activation reads.
        s1_valid, s1_last = Signal(), Signal()
        s1_w = [Signal(signed(cfg.w_fmt.width), name=f"s1_w{s}") for s in range(k)]
        reads = []
        for s in range(k):
            rp = xmem.read_port(domain="sync")
            m.d.comb += [rp.addr.eq(head.cols[s]), rp.en.eq(advance)]
            reads.append(rp)
        with m.If(advance):
            m.d.sync += [s1_valid.eq(pop), s1_last.eq(head.last)]
            for s in range(k):
                m.d.sync += s1_w[s].eq(Mux(head_needs & (s < head.count),
                                           self.vdata.payload[s], 0))

        # Stage 2: register the activation words (the memory output) and weights.
        x_valid, x_last = Signal(), Signal()
        x_words = [Signal(n * cfg.x_fmt.width, name=f"xw{s}") for s in range(k)]
        x_w = [Signal(signed(cfg.w_fmt.width), name=f"x_w{s}") for s in range(k)]
        with m.If(advance):
            m.d.sync += [x_valid.eq(s1_valid), x_last.eq(s1_last)]
            for s in range(k):
                m.d.sync += [x_words[s].eq(reads[s].data), x_w[s].eq(s1_w[s])]

        # Stage 3: operand registers at the multipliers.  The block RAMs and the DSPs sit
        # in fixed columns, possibly far apart; a register hop on each side of that route
        # keeps both the BRAM's slow clock-to-output and the DSP's delay off it.
        xwid = cfg.x_fmt.width
        o_valid, o_last = Signal(), Signal()
        o_x = [[Signal(signed(xwid), name=f"ox{s}_{j}") for j in range(n)] for s in range(k)]
        o_w = [Signal(signed(cfg.w_fmt.width), name=f"ow{s}") for s in range(k)]
        with m.If(advance):
            m.d.sync += [o_valid.eq(x_valid), o_last.eq(x_last)]
            for s in range(k):
                m.d.sync += o_w[s].eq(x_w[s])
                for j in range(n):
                    m.d.sync += o_x[s][j].eq(x_words[s][j * xwid:(j + 1) * xwid].as_signed())

        # Stage 4: registered products.
        pw = cfg.w_fmt.width + cfg.x_fmt.width
        p_valid, p_last = Signal(), Signal()
        prods = [[Signal(signed(pw), name=f"p{s}_{j}") for j in range(n)] for s in range(k)]
        with m.If(advance):
            m.d.sync += [p_valid.eq(o_valid), p_last.eq(o_last)]
            for s in range(k):
                for j in range(n):
                    m.d.sync += prods[s][j].eq(o_w[s] * o_x[s][j])

        # Stage 5: accumulate; the row's last group moves the sums to the y register.
        aw = cfg.acc_width
        acc = [Signal(signed(aw), name=f"acc{j}") for j in range(n)]
        m.d.comb += advance.eq(~(p_valid & p_last & self.y.valid & ~self.y.ready))
        with m.If(self.y.valid & self.y.ready):
            m.d.sync += [self.y.valid.eq(0), y_rows.eq(y_rows + 1)]
        with m.If(advance & p_valid):
            for j in range(n):
                total = acc[j] + sum(prods[s][j] for s in range(k))
                with m.If(p_last):
                    m.d.sync += [self.y.payload[j].eq(total), acc[j].eq(0)]
                with m.Else():
                    m.d.sync += acc[j].eq(total)
            with m.If(p_last):
                m.d.sync += self.y.valid.eq(1)

    def port_info(self) -> dict:
        cfg = self.cfg
        return {
            "cmd": {"format": None, "protocol": "valid/ready stream, job sizes (rows, cols)"},
            "x": {"format": str(cfg.x_fmt),
                  "protocol": f"valid/ready stream, one row of X ({cfg.batch} activations) "
                  "per transfer, cols transfers"},
            "meta": {"format": None, "protocol": f"valid/ready stream, {cfg.segs_per_beat} "
                     f"FD-CSR masks ({cfg.row_width} bits) and offsets ({cfg.addr_width} "
                     "bits) per transfer"},
            "vaddr": {"format": None, "protocol": "valid/ready stream, weight memory read "
                      "requests (addr, count)"},
            "vdata": {"format": str(cfg.w_fmt), "protocol": "valid/ready stream, read "
                      f"responses in order, {cfg.nz_per_clock} values per transfer"},
            "y": {"format": str(cfg.y_fmt), "protocol": f"valid/ready stream, one row of "
                  f"W @ X ({cfg.batch} sums) per transfer"},
        }

    def manifest_extra(self) -> dict:
        cfg = self.cfg
        return {"lanes": cfg.lanes, "fdcsr": {"row_width": cfg.row_width,
                                              "segs_per_beat": cfg.segs_per_beat},
                "cycle_model": f"cols + {fixed_overhead(0, cfg)} + decoder clocks "
                               "(gen.fc.fixed_overhead, gen.fc.decode_walk)"}
