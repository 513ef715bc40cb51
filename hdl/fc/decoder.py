# SPDX-License-Identifier: Apache-2.0
"""FD-CSR decoder: (mask, offset) beats -> value addresses and columns of the non-zeros only."""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["FdcsrDecoder", "beat_layout", "group_layout", "popcount"]


def beat_layout(row_width, segs, addr_width, col_width):
    return data.StructLayout({
        "masks": data.ArrayLayout(unsigned(row_width), segs),
        "offsets": data.ArrayLayout(unsigned(addr_width), segs),
        "col_base": unsigned(col_width),
        "last": unsigned(1),
        "nnz": unsigned((row_width * segs).bit_length()),
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
    issue the next beat's non-zeros).  Exact model: :func:`gen.fc.decode_walk`.
    Selection: over the pending bits of both beats, slot ``s`` takes the lowest bit left
    after slots ``0..s-1``, isolated as ``x & (~x + 1)`` (one carry chain per slot, beat
    and segment, no scan over the zeros).  The held beat's count of bits left is a
    register (``cnt``, loaded from the beat's ``nnz``) with registered flags ``cnt <= j``
    beside it, so group sizes and the hand-shake never wait for the selection chains or a
    comparison; the output register holds the one-hot selections and ``cols`` is encoded
    from them after it.
    Addresses are the seed's running sum: a beat starts at its first offset (the address
    of its first non-zero) and every group advances the address by its count, which for a
    consistent file equals ``offsets[seg] + popcount(masks[seg] & ((1 << bit) - 1))`` for
    every element (``gen.fc.load`` validates the offsets).  The ``count`` non-zeros of one
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
        ``last`` (last beat of a matrix row), ``nnz`` (set bits of all masks,
        ``(row_width * segs).bit_length()`` bits; see :func:`popcount`).  Valid/ready
        stream.
    o : Out(stream.Signature(group_layout))
        ``count`` (1..nz_per_clock, or 0 for a bare end-of-row marker), ``addr`` (address
        of the first value), ``cols[nz_per_clock]`` (column of each non-zero; slots
        ``>= count`` are don't-care; ``cols`` is combinational from registers), ``last``
        (the row's final group).  A row with no
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
        cnt_shape = unsigned(nbits.bit_length())

        has = Signal()
        rem = Signal(nbits)          # mask bits not yet issued
        cnt = Signal(cnt_shape)      # popcount(rem)
        # le[j] = (cnt <= j), j = 0..k, registered beside cnt: the step / ready control
        # reads these flags and never waits for a comparison or a selection carry chain.
        le = Signal(k + 1, init=(1 << (k + 1)) - 1)
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
        merge = Signal()
        m.d.comb += merge.eq(has & ~last & self.i.valid)
        nxt = p.masks.as_value()
        nnz = p.nnz                 # the next beat's non-zeros, counted upstream

        # Counts from registers only, in narrow arithmetic: the held beat has `cnt` bits
        # left; when that is at most k (`finishing`), a merge tops the group up with
        # min(k - cnt, nnz) bits of the next beat.
        finishing = le[k]                               # the held beat empties this step
        cnt_lo = cnt[:count_shape.width]                # == cnt while finishing
        deficit = Signal(count_shape)
        m.d.comb += deficit.eq(k - cnt_lo)
        merging = Signal()                              # the step tops up from `i`
        m.d.comb += merging.eq(finishing & merge)
        short = Signal()                                # nnz < deficit
        surplus = Signal(unsigned(cnt_shape.width + 1))
        m.d.comb += [surplus.eq(nnz - deficit), short.eq(surplus[-1])]
        from_next = Signal(count_shape)                 # slots served by the next beat
        m.d.comb += from_next.eq(Mux(merging, Mux(short, nnz, deficit), 0))
        count = Signal(count_shape)                     # min(k, pending non-zeros)
        m.d.comb += count.eq(Mux(finishing, cnt_lo + from_next, k))
        nonempty = Signal()                             # count != 0
        m.d.comb += nonempty.eq(~le[0] | (merging & (nnz != 0)))

        # Slot s takes the lowest bit left after slots 0..s-1 (:func:`_lowest`: one short
        # carry chain per segment, no scan over the zeros).  The held and the next beat
        # have separate chains; which one serves slot s follows from `cnt` (flag le[s]).
        # The next beat's chains start from its register (`merge`, which depends on
        # i.valid, only gates their results).
        sel_a, sel_b = [], []
        left_a, left_b = rem, nxt
        for s in range(k):
            sa = Signal(nbits, name=f"sel{s}_a")
            sb = Signal(nbits, name=f"sel{s}_b")
            m.d.comb += [sa.eq(_lowest(left_a, w)),
                         sb.eq(Mux(le[s], _lowest(left_b, w), 0))]
            na = Signal(nbits, name=f"left{s + 1}_a")
            nb = Signal(nbits, name=f"left{s + 1}_b")
            m.d.comb += [na.eq(left_a & ~sa), nb.eq(left_b & ~sb)]
            sel_a.append(sa)
            sel_b.append(Mux(merge, sb, 0))
            left_a, left_b = na, nb
        taken_b = Signal(nbits)
        m.d.comb += taken_b.eq(_or(sel_b, nbits))

        # Address of slot 0: the seed's running sum.  A beat starts at its first offset
        # (the address of its first non-zero, whichever segment holds it); each group
        # advances the address by its count.  For a consistent file this equals
        # offsets[seg] + popcount(masks[seg] below the bit) for every element.
        held_empty = le[0]
        addr0 = Signal(self.addr_width)
        m.d.comb += addr0.eq(Mux(held_empty, p.offsets[0], run_addr))

        emit = nonempty | (last & finishing)
        can_step = Signal()
        m.d.comb += can_step.eq(~self.o.valid | self.o.ready)
        # A group that the next beat of the row could top up waits for that beat, so the
        # grouping (hence the memory requests) never depends on when `i` is offered.
        need_next = ~last & le[k - 1]                     # the held beat has < k left
        step = Signal()
        m.d.comb += step.eq(has & can_step & (~need_next | self.i.valid))
        m.d.comb += self.i.ready.eq(~has | (step & finishing))
        load = Signal()
        m.d.comb += load.eq(self.i.valid & self.i.ready)

        # The next values of cnt and le for a step and for a load are formed side by side
        # from registers; the hand-shake only picks one (it is the last multiplexer).
        cnt_step = Mux(finishing, 0, cnt - k)
        le_step = Cat(finishing | (cnt <= j + k) for j in range(k + 1))
        cnt_load = Mux(merging, Mux(short, 0, surplus[:-1]), nnz)
        le_load = Cat(Mux(merging, short | (surplus[:-1] <= j), nnz <= j)
                      for j in range(k + 1))

        # The output register holds the one-hot selections; the columns are encoded from
        # them after the register (inside a row the next beat starts nbits columns later,
        # so bit i of the next beat is column col_base + nbits + i).
        osel = [Signal(2 * nbits, name=f"osel{s}") for s in range(k)]
        ocol_base = Signal(self.col_width)
        for s in range(k):
            m.d.comb += self.o.payload.cols[s].eq(
                ocol_base + _or([Mux(osel[s][i], i, 0) for i in range(2 * nbits)],
                                (2 * nbits - 1).bit_length()))

        # The output payload loads whenever the register is free (it only matters with
        # o.valid), so `step` drives the valid bit alone, not the wide payload.
        with m.If(can_step):
            m.d.sync += [
                self.o.valid.eq(step & emit),
                self.o.payload.count.eq(count),
                self.o.payload.addr.eq(addr0),
                self.o.payload.last.eq(last & finishing),
                ocol_base.eq(col_base),
            ]
            for s in range(k):
                m.d.sync += osel[s].eq(Cat(sel_a[s], sel_b[s]))
        with m.If(step):
            m.d.sync += [rem.eq(left_a), cnt.eq(cnt_step), le.eq(le_step),
                         base.eq(addr0), prev_count.eq(count)]
            with m.If(finishing):
                m.d.sync += has.eq(0)
        with m.If(load):
            # from_next is non-zero only when this same clock's step merged into p;
            # otherwise the new beat starts at its own first offset.
            merged = from_next != 0
            m.d.sync += [has.eq(1), rem.eq(nxt & ~taken_b), cnt.eq(cnt_load), le.eq(le_load),
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


def popcount(value):
    """Number of set bits of ``value``: a look-up per 4-bit nibble (one LUT4 per count
    bit), then a balanced adder tree (depth log2 of the nibble count)."""
    n = len(value)
    if n == 0:
        return Const(0, 1)
    table = Array(Const(bin(v).count("1"), 3) for v in range(16))
    return _sum(table[value[i:min(i + 4, n)]] for i in range(0, n, 4))


def _lowest(value, chunk):
    """``value`` with only its lowest set bit kept.  ``x & (~x + 1)`` isolates the lowest
    set bit with one carry chain (fast carry logic on an FPGA); it runs per ``chunk`` bits
    in parallel with an OR per chunk, and a chunk's result is kept only when every chunk
    below it is empty, so the longest carry chain is ``chunk`` bits, not ``len(value)``."""
    n = len(value)
    parts = [value[i:min(i + chunk, n)] for i in range(0, n, chunk)]
    out, below = [], Const(0, 1)
    for part in parts:
        iso = part & (~part + 1)[:len(part)]
        out.append(Mux(below, 0, iso))
        below = below | part.any()
    return Cat(*out)


def _sum(terms):
    """Add a list of values with a balanced tree (depth log2(n))."""
    terms = list(terms)
    while len(terms) > 1:
        nxt = [terms[i] + terms[i + 1] for i in range(0, len(terms) - 1, 2)]
        if len(terms) % 2:
            nxt.append(terms[-1])
        terms = nxt
    return terms[0]


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
