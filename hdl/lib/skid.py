# SPDX-License-Identifier: Apache-2.0
"""Two-entry skid buffer (a register slice for valid/ready streams)."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["SkidBuffer"]


class SkidBuffer(wiring.Component):
    """Two-entry skid buffer: a registered stage whose ``i.ready`` depends on its registers only.

    Parameters
    ----------
    shape : shape-like
        The payload of both streams.

    Members
    -------
    i : In(stream.Signature(shape))
        Input; ``i.ready`` is high while an entry is free (from registers only).
    o : Out(stream.Signature(shape))
        Output from the older entry (``o.valid`` a register, ``o.payload`` one of two
        registers picked by a register).

    Latency/throughput
    ------------------
    One transfer per clock; a transfer on ``i`` is offered on ``o`` the next clock.

    The two entries form a ring (written at ``wp``, read at ``rp``): an entry's payload
    register loads on the input's transfer into it alone, never on ``o.ready``, so a
    consumer's deep ``ready`` logic drives only the pointers and flags (clock rate).
    """

    latency = 1
    ii = 1

    def __init__(self, shape):
        super().__init__({"i": In(stream.Signature(shape)), "o": Out(stream.Signature(shape))})

    def elaborate(self, platform):
        m = Module()
        shape = self.i.payload.shape()
        entries = [Signal(shape, name=f"entry{k}") for k in range(2)]
        full = [Signal(name=f"full{k}") for k in range(2)]
        wp, rp = Signal(), Signal()
        push = self.i.valid & self.i.ready
        pop = self.o.valid & self.o.ready
        m.d.comb += [self.i.ready.eq(~(full[0] & full[1])),
                     self.o.valid.eq(Mux(rp, full[1], full[0])),
                     self.o.payload.eq(Mux(rp, entries[1], entries[0]))]
        for k in range(2):
            with m.If(push & (wp == k)):
                m.d.sync += [entries[k].eq(self.i.payload), full[k].eq(1)]
            with m.If(pop & (rp == k)):
                m.d.sync += full[k].eq(0)
        with m.If(push):
            m.d.sync += wp.eq(~wp)
        with m.If(pop):
            m.d.sync += rp.eq(~rp)
        return m
