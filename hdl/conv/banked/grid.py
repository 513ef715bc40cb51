# SPDX-License-Identifier: Apache-2.0
"""The MAC grid of the banked array: products, accumulators and the shadow rows."""

from amaranth.hdl import Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from gen.conv.banked import BankedConfig

__all__ = ["MacGrid"]


class MacGrid(wiring.Component):
    """``rows x cols`` multiply-accumulate cells.  Row ``r`` belongs to copy ``g = r mod
    n`` (``n = 2^nl``) and multiplies its weight with window columns ``g cols .. g cols +
    cols - 1``; the product is registered, then accumulated (``first`` restarts the sum);
    after a round's last beat the sums move into the shadow rows, which shift up by ``n``
    rows per ``shift`` while the drain reads rows ``0 .. n - 1`` (one channel's copies).

    Members
    -------
    v, first, last : In(1)
        The beat at the inputs (cycle ``t``): valid, first and last beat of its round.
    feat : In(ArrayLayout(signed(data_width), copies x cols))
        The round's window of features.
    wt : In(ArrayLayout(signed(weight_width), rows))
    nl : In(unsigned(2))
        ``log2 n`` (static during a job).
    shift : In(1)
        Shift the shadow rows up by ``n`` (rows ``0 .. n - 1`` read this clock).
    cap : Out(1)
        The shadow rows load the sums at the end of this clock (cycle ``t + 2`` of a last
        beat); they hold them from ``t + 3``.
    taps : Out(ArrayLayout(signed(acc_width), copies x cols))
        Shadow rows ``0 .. copies - 1``, row ``g`` at ``g cols``.
    """

    def __init__(self, cfg: BankedConfig):
        self.cfg = cfg
        super().__init__({
            "v": In(1), "first": In(1), "last": In(1),
            "feat": In(data.ArrayLayout(signed(cfg.data_width), cfg.window)),
            "wt": In(data.ArrayLayout(signed(cfg.weight_width), cfg.rows)),
            "nl": In(unsigned(2)), "shift": In(1), "cap": Out(1),
            "taps": Out(data.ArrayLayout(signed(cfg.acc_width), cfg.window)),
        })

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        acc_t = signed(cfg.acc_width)
        logs = [k for k in range(3) if 1 << k <= cfg.copies]
        v5, first5, last5, last6 = Signal(), Signal(), Signal(), Signal()
        m.d.sync += [v5.eq(self.v), first5.eq(self.first), last5.eq(self.v & self.last),
                     last6.eq(last5)]
        m.d.comb += self.cap.eq(last6)
        shadow = [[Signal(acc_t, name=f"sh{r}_{c}") for c in range(cfg.cols)]
                  for r in range(cfg.rows)]
        for r in range(cfg.rows):
            for c in range(cfg.cols):
                f = self.feat[c]
                for k in logs[1:]:
                    f = Mux(self.nl == k, self.feat[(r % (1 << k)) * cfg.cols + c], f)
                p = Signal(signed(cfg.data_width + cfg.weight_width), name=f"p{r}_{c}")
                acc = Signal(acc_t, name=f"acc{r}_{c}")
                m.d.sync += p.eq(self.wt[r] * f)
                with m.If(v5):
                    m.d.sync += acc.eq(Mux(first5, p, acc + p))
                nxt = 0
                for k in logs:
                    below = shadow[r + (1 << k)][c] if r + (1 << k) < cfg.rows else 0
                    nxt = below if k == 0 else Mux(self.nl == k, below, nxt)
                with m.If(last6):
                    m.d.sync += shadow[r][c].eq(acc)
                with m.Elif(self.shift):
                    m.d.sync += shadow[r][c].eq(nxt)
        for g in range(cfg.copies):
            m.d.comb += [self.taps[g * cfg.cols + c].eq(shadow[g][c]) for c in range(cfg.cols)]
        return m
