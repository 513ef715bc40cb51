# SPDX-License-Identifier: Apache-2.0
"""Two-entry skid buffer (a register slice for valid/ready streams)."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["SkidBuffer"]


class SkidBuffer(wiring.Component):
    """Two-entry skid buffer: a registered stage whose ``i.ready`` is a register too.

    Parameters
    ----------
    shape : shape-like
        The payload of both streams.

    Members
    -------
    i : In(stream.Signature(shape))
        Input; ``i.ready`` is high while the spare entry is free (a register).
    o : Out(stream.Signature(shape))
        Output from the main entry (``o.valid`` and ``o.payload`` are registers).

    Latency/throughput
    ------------------
    One transfer per clock; a transfer on ``i`` is offered on ``o`` the next clock.
    """

    latency = 1
    ii = 1

    def __init__(self, shape):
        super().__init__({"i": In(stream.Signature(shape)), "o": Out(stream.Signature(shape))})

    def elaborate(self, platform):
        m = Module()
        shape = self.i.payload.shape()
        # The payloads have no reset (read only under o.valid / spare_valid, which have
        # one), so the reset net reaches the two valid bits only.  Their clock enables
        # are short (clock rate): the spare entry loads the input every clock while it is
        # free (it keeps the word only when spare_valid is set, i.e. when that word came
        # while the output stalled), the main one loads every clock in which it is free
        # or being taken: the spare entry if it holds a word, else the input.  So each
        # wide enable is one gate of registers and o.ready, and the payload on offer
        # while o.valid is low is whatever was loaded last.
        spare, spare_valid = Signal(shape, reset_less=True), Signal()
        main = Signal(shape, reset_less=True)
        push = self.i.valid & self.i.ready
        m.d.comb += [self.i.ready.eq(~spare_valid), self.o.payload.eq(main)]
        with m.If(~spare_valid):
            m.d.sync += spare.eq(self.i.payload)
        with m.If(~self.o.valid | self.o.ready):
            m.d.sync += main.eq(Mux(spare_valid, spare, self.i.payload))
        with m.If(self.o.valid & self.o.ready):
            with m.If(spare_valid):
                m.d.sync += spare_valid.eq(0)
            with m.Elif(~push):
                m.d.sync += self.o.valid.eq(0)
        with m.Elif(push):
            with m.If(self.o.valid):
                m.d.sync += spare_valid.eq(1)
            with m.Else():
                m.d.sync += self.o.valid.eq(1)
        return m
