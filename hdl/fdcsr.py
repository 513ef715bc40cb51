# SPDX-License-Identifier: Apache-2.0
"""FD-CSR decoder: (mask, offset) beats -> value addresses and columns of the non-zeros only."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["FdcsrDecoder", "beat_layout", "group_layout"]


def beat_layout(row_width, segs, addr_width, col_width):
    return data.StructLayout({
        "masks": data.ArrayLayout(unsigned(row_width), segs),
        "offsets": data.ArrayLayout(unsigned(addr_width), segs),
        "col_base": unsigned(col_width),
        "last": unsigned(1),
    })


def group_layout(nz_per_clock, addr_width, col_width):
    return data.StructLayout({
        "count": unsigned(nz_per_clock.bit_length()),
        "addr": unsigned(addr_width),
        "cols": data.ArrayLayout(unsigned(col_width), nz_per_clock),
        "last": unsigned(1),
    })


class FdcsrDecoder(wiring.Component):
    """Turn FD-CSR beats into groups of up to ``nz_per_clock`` non-zeros per clock.

    Zeros cost nothing: each clock issues the next ``min(k, left)`` non-zeros of the held
    beat (``segs`` segments of ``row_width`` elements), topped up from the next beat of
    the same row when the held one runs out (look-ahead: a beat boundary inside a row
    loses no slot; such a step waits for the next beat to be offered, so the grouping
    never depends on stream timing).  A beat with nothing left costs one clock (which may
    issue the next beat's non-zeros).  Exact model: :func:`gen.fdcsr.decode_walk`.
    Selection: over the pending bits of both beats, slot ``s`` takes the lowest bit left
    after slots ``0..s-1``, isolated as ``x & (~x + 1)`` (one carry chain per slot, no scan
    over the zeros).
    Addresses are the seed's running sum: a beat starts at its first offset (the address
    of its first non-zero) and every group advances the address by its count, which for a
    consistent file equals ``offsets[seg] + popcount(masks[seg] & ((1 << bit) - 1))`` for
    every element (``gen.fdcsr.load`` validates the offsets).  The ``count`` non-zeros of one
    group have consecutive addresses ``addr .. addr + count - 1``.

    Parameters
    ----------
    row_width : int
        Mask bits per segment (16 in the seed).
    segs : int
        Segments per input beat.
    nz_per_clock : int
        Non-zeros per output group (per clock), >= 1.
    addr_width, col_width : int
        Widths of value addresses and column positions.

    Members
    -------
    i : In(stream.Signature(beat_layout))
        ``masks[segs]`` (``row_width`` bits each, LSB = first element), ``offsets[segs]``
        (``addr_width``), ``col_base`` (column of the beat's first element, ``col_width``),
        ``last`` (last beat of a matrix row).  Valid/ready stream.
    o : Out(stream.Signature(group_layout))
        ``count`` (1..nz_per_clock, or 0 for a bare end-of-row marker), ``addr`` (address
        of the first value), ``cols[nz_per_clock]`` (column of each non-zero; slots
        ``>= count`` are don't-care), ``last`` (the row's final group).  A row with no
        non-zeros yields one group with ``count = 0, last = 1``; empty non-final beats
        yield nothing.  Registered valid/ready stream.

    Latency/throughput
    ------------------
    One group per clock while ``o`` is ready; first group 2 clocks after the beat's
    transfer (:attr:`latency`).  ``i.ready`` is high when no beat is held or the held
    beat finishes this clock (it depends on ``i.valid`` through the look-ahead).
    """

    latency = 2
    ii = 1

    def __init__(self, row_width=16, segs=1, nz_per_clock=1, addr_width=20, col_width=10):
        for name, value in (("row_width", row_width), ("segs", segs),
                            ("nz_per_clock", nz_per_clock), ("addr_width", addr_width),
                            ("col_width", col_width)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be an integer, not {value!r}")
            if value < 1:
                raise ValueError(f"{name} must be at least 1, not {value}")
        self.row_width, self.segs, self.k = row_width, segs, nz_per_clock
        self.addr_width, self.col_width = addr_width, col_width
        super().__init__({
            "i": In(stream.Signature(beat_layout(row_width, segs, addr_width, col_width))),
            "o": Out(stream.Signature(group_layout(nz_per_clock, addr_width, col_width))),
        })

    def elaborate(self, platform):
        m = Module()
        w, c, k = self.row_width, self.segs, self.k
        nbits = w * c
        count_shape = unsigned(k.bit_length())

        has = Signal()
        rem = Signal(nbits)          # mask bits not yet issued
        # Address of the held beat's next non-zero = base + prev_count; the sum is formed
        # from registers, so the new group's count only has to reach a register.
        base = Signal(self.addr_width)
        prev_count = Signal(unsigned(k.bit_length()))
        run_addr = Signal(self.addr_width)
        m.d.comb += run_addr.eq(base + prev_count)
        col_base = Signal(self.col_width)
        last = Signal()

        # Look-ahead: when the held beat is not a row's last, the next beat (if offered)
        # sits above it, so a group can be completed with the next beat's first non-zeros
        # (no clock is lost to a beat boundary inside a row).
        p = self.i.payload
        merge = has & ~last & self.i.valid
        nxt_masks = Mux(merge, p.masks.as_value(), 0)
        pend = Signal(2 * nbits)
        m.d.comb += pend.eq(Cat(rem, nxt_masks))

        # Slot s takes the lowest pending bit left after slots 0..s-1: x & (~x + 1) isolates
        # the lowest set bit with one carry chain (fast carry logic on an FPGA), with no
        # scan over the zeros.
        sel, left = [], pend
        for s in range(k):
            sel_s = Signal(2 * nbits, name=f"sel{s}")
            m.d.comb += sel_s.eq(left & (~left + 1)[:2 * nbits])
            nleft = Signal(2 * nbits, name=f"left{s + 1}")
            m.d.comb += nleft.eq(left & ~sel_s)
            sel.append(sel_s)
            left = nleft
        count = Signal(count_shape)                     # min(k, popcount(pend))
        m.d.comb += count.eq(sum(sel_s.any() for sel_s in sel))
        taken = Signal(2 * nbits)
        m.d.comb += taken.eq(pend & ~left)
        finishing = Signal()
        m.d.comb += finishing.eq((rem & ~taken[:nbits]) == 0)

        # Address of slot 0: the seed's running sum.  A beat starts at its first offset
        # (the address of its first non-zero, whichever segment holds it); each group
        # advances the address by its count.  For a consistent file this equals
        # offsets[seg] + popcount(masks[seg] below the bit) for every element.
        held_empty = rem == 0
        addr0 = Signal(self.addr_width)
        m.d.comb += addr0.eq(Mux(held_empty, p.offsets[0], run_addr))
        # Inside a row the next beat starts nbits columns later, so bit i of `pend` is
        # column col_base + i in both halves.
        cols = [col_base + _or([Mux(sel[s][i], i, 0) for i in range(2 * nbits)],
                               (2 * nbits - 1).bit_length()) for s in range(k)]

        emit = (count != 0) | (last & finishing)
        can_step = Signal()
        m.d.comb += can_step.eq(~self.o.valid | self.o.ready)
        # A group that the next beat of the row could top up waits for that beat, so the
        # grouping (hence the memory requests) never depends on when `i` is offered.
        need_next = ~last & ~sel[k - 1][:nbits].any()      # the held beat has < k left
        step = Signal()
        m.d.comb += step.eq(has & can_step & (~need_next | self.i.valid))
        m.d.comb += self.i.ready.eq(~has | (step & finishing))

        with m.If(can_step):
            m.d.sync += self.o.valid.eq(step & emit)
            with m.If(step):
                m.d.sync += [
                    self.o.payload.count.eq(count),
                    self.o.payload.addr.eq(addr0),
                    self.o.payload.last.eq(last & finishing),
                ]
                for s in range(k):
                    m.d.sync += self.o.payload.cols[s].eq(cols[s])
        with m.If(step):
            m.d.sync += [rem.eq(rem & ~taken[:nbits]), base.eq(addr0), prev_count.eq(count)]
            with m.If(finishing):
                m.d.sync += has.eq(0)
        with m.If(self.i.valid & self.i.ready):
            # taken[nbits:] is non-zero only when this same clock's step merged into p;
            # otherwise the new beat starts at its own first offset.
            merged = taken[nbits:].any()
            m.d.sync += [has.eq(1), rem.eq(p.masks.as_value() & ~taken[nbits:]),
                         col_base.eq(p.col_base), last.eq(p.last),
                         base.eq(Mux(merged, addr0, p.offsets[0])),
                         prev_count.eq(Mux(merged, count, 0))]
        return m

    def port_info(self) -> dict:
        return {
            "i": {"format": None, "protocol": "valid/ready stream of FD-CSR beats: masks, "
                  "offsets, col_base, last"},
            "o": {"format": None, "protocol": "valid/ready stream of non-zero groups: count, "
                  "first value address, columns, last-of-row"},
        }


def _or(terms, width):
    """OR-reduce a list of (one-hot-selected) values; a balanced tree keeps depth log2(n)."""
    terms = list(terms)
    if not terms:
        return Const(0, width)
    while len(terms) > 1:
        nxt = [terms[i] | terms[i + 1] for i in range(0, len(terms) - 1, 2)]
        if len(terms) % 2:
            nxt.append(terms[-1])
        terms = nxt
    return terms[0]
