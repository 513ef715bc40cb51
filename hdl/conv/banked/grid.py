# SPDX-License-Identifier: Apache-2.0
"""The MAC grid of the banked array: products, accumulators and the shadow rows."""

from amaranth.hdl import Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from gen.conv.banked import BankedConfig

__all__ = ["MacGrid"]


class MacGrid(wiring.Component):
    """``rows x cols`` multiply-accumulate cells.  Row ``r`` multiplies its weight with the
    features of copy ``sel[r]``; the product is registered, then accumulated (``first``
    restarts the sum); after a tile's last beat the sums move into the shadow rows, which
    shift up by one row per ``shift`` while the drain reads row 0.

    Members
    -------
    v, first, last : In(1)
        The beat at the inputs (cycle ``t``): valid, first and last beat of its tile.
    feat : In(ArrayLayout(ArrayLayout(signed(data_width), cols), copies))
    wt : In(ArrayLayout(signed(weight_width), rows))
    sel : In(unsigned(rows))
        Per row its copy (static during a job).
    shift : In(1)
        Shift the shadow rows up by one (row 0 read this clock).
    cap : Out(1)
        The shadow rows load the sums at the end of this clock (cycle ``t + 2`` of a last
        beat); they hold them from ``t + 3``.
    row0 : Out(ArrayLayout(signed(acc_width), cols))
        Shadow row 0.
    """

    def __init__(self, cfg: BankedConfig):
        self.cfg = cfg
        super().__init__({
            "v": In(1), "first": In(1), "last": In(1),
            "feat": In(data.ArrayLayout(data.ArrayLayout(signed(cfg.data_width), cfg.cols),
                                        cfg.copies)),
            "wt": In(data.ArrayLayout(signed(cfg.weight_width), cfg.rows)),
            "sel": In(cfg.rows), "shift": In(1), "cap": Out(1),
            "row0": Out(data.ArrayLayout(signed(cfg.acc_width), cfg.cols)),
        })

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        acc_t = signed(cfg.acc_width)
        v5, first5, last5, last6 = Signal(), Signal(), Signal(), Signal()
        m.d.sync += [v5.eq(self.v), first5.eq(self.first), last5.eq(self.v & self.last),
                     last6.eq(last5)]
        m.d.comb += self.cap.eq(last6)
        shadow = [[Signal(acc_t, name=f"sh{r}_{c}") for c in range(cfg.cols)]
                  for r in range(cfg.rows)]
        for r in range(cfg.rows):
            for c in range(cfg.cols):
                f = self.feat[0][c] if cfg.copies == 1 else \
                    Mux(self.sel[r], self.feat[1][c], self.feat[0][c])
                p = Signal(signed(cfg.data_width + cfg.weight_width), name=f"p{r}_{c}")
                acc = Signal(acc_t, name=f"acc{r}_{c}")
                m.d.sync += p.eq(self.wt[r] * f)
                with m.If(v5):
                    m.d.sync += acc.eq(Mux(first5, p, acc + p))
                nxt = shadow[r + 1][c] if r + 1 < cfg.rows else 0
                with m.If(last6):
                    m.d.sync += shadow[r][c].eq(acc)
                with m.Elif(self.shift):
                    m.d.sync += shadow[r][c].eq(nxt)
        m.d.comb += [self.row0[c].eq(shadow[0][c]) for c in range(cfg.cols)]
        return m
