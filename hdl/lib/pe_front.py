# SPDX-License-Identifier: Apache-2.0
"""The front end shared by the SpMV and LSTM PEs: activation FIFO and entry issue."""

from amaranth.hdl import Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.lib.fifo import Queue

__all__ = ["PeFront", "push_layout"]


def push_layout(x_width: int, addr_bits: int, count_bits: int,
                multi: bool) -> data.StructLayout:
    """A FIFO item: the activation, its column's first entry and entry count, and (with
    ``multi``) the flag ``count > 1``."""
    fields = {"x": signed(x_width), "start": unsigned(addr_bits), "count": unsigned(count_bits)}
    if multi:
        fields["multi"] = 1
    return data.StructLayout(fields)


class PeFront(wiring.Component):
    """Activation FIFO and issue of a column-packed sparse PE: each pushed activation
    ``x_j`` with its column's entries ``entries[start .. start + count - 1]`` (``count >= 1``)
    becomes ``count`` entry reads, one per clock, back to back across items.

    The entry memory stays in the PE (its banks and write side differ between the
    blocks); this unit says which address to read in each clock.

    Parameters
    ----------
    x_width : int
        Activation width (the PE's ``x_fmt``).
    addr_bits, count_bits : int
        Entry address and per-column count widths.
    depth : int
        FIFO items (>= 2), the head register included.
    multi : bool
        The pusher supplies ``count > 1`` with each item (computed before its own push
        register), so no comparison follows the FIFO head; otherwise it is made here.

    Members
    -------
    push : In(stream.Signature(push_layout(x_width, addr_bits, count_bits, multi)))
        Activations ``(x, start, count[, multi])``; ``x`` in the PE's ``x_fmt``.
        ``push.ready`` is "not full", a register (:class:`hdl.lib.fifo.Queue`, registered
        head).  A push at clock ``t`` can issue at ``t + 1``.
    level : Out(range(depth + 1))
        Items in the FIFO (register), the head included.
    addr : Out(unsigned(addr_bits))
        The entry to read this clock: the next entry of the current column, else the
        first entry of the FIFO head (combinational, from registers; meaningful when an
        entry is issued, i.e. when ``v`` is set the next clock).
    v : Out(1)
        An entry was issued in the previous clock (register).
    x : Out(signed(x_width))
        That entry's activation (register, ``x_fmt``).
    idle : Out(1)
        Nothing left to issue: the FIFO is empty and no column is in progress
        (combinational, from registers).

    Latency/throughput
    ------------------
    One entry per clock while items are waiting; an item's first entry is issued the
    clock after the previous item's last.
    """

    def __init__(self, x_width: int, addr_bits: int, count_bits: int, depth: int,
                 *, multi: bool):
        self.x_width, self.addr_bits, self.count_bits = x_width, addr_bits, count_bits
        self.depth, self.multi = depth, multi
        super().__init__({
            "push": In(stream.Signature(push_layout(x_width, addr_bits, count_bits, multi))),
            "level": Out(range(depth + 1)),
            "addr": Out(unsigned(addr_bits)),
            "v": Out(1),
            "x": Out(signed(x_width)),
            "idle": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        ab, cb, xw = self.addr_bits, self.count_bits, self.x_width
        # The head is a register (the FIFO RAM's read path ends at a flip-flop instead of
        # running into the entry address), so is `push.ready`.
        m.submodules.fifo = fifo = Queue(self.push.payload.shape(), self.depth,
                                         registered=True)
        wiring.connect(m, wiring.flipped(self.push), fifo.i)
        m.d.comb += self.level.eq(fifo.level)
        head = fifo.o.payload
        multi = head.multi if self.multi else head.count != 1

        rem = Signal(unsigned(cb), reset_less=True)      # entries left in the column
        rem_nz = Signal()                                # rem != 0, kept as a register
        addr = Signal(unsigned(ab), reset_less=True)
        cur_x = Signal(signed(xw), reset_less=True)
        x = Signal(signed(xw), reset_less=True)
        m.d.comb += [fifo.o.ready.eq(~rem_nz), self.addr.eq(Mux(rem_nz, addr, head.start)),
                     self.x.eq(x), self.idle.eq(~fifo.o.valid & ~rem_nz)]
        with m.If(rem_nz):
            m.d.sync += [addr.eq(addr + 1), rem.eq(rem - 1), rem_nz.eq(rem != 1),
                         self.v.eq(1), x.eq(cur_x)]
        with m.Elif(fifo.o.valid):
            m.d.sync += [addr.eq(head.start + 1), rem.eq(head.count - 1), rem_nz.eq(multi),
                         cur_x.eq(head.x), self.v.eq(1), x.eq(head.x)]
        with m.Else():
            m.d.sync += self.v.eq(0)
        return m
