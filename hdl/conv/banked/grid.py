# SPDX-License-Identifier: Apache-2.0
"""The MAC grid of the banked array: products, accumulators and the shadow rows."""

from amaranth.hdl import Array, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from gen.conv.banked import BankedConfig
from hdl.lib.arith import radix4_product

__all__ = ["MacGrid"]


class MacGrid(wiring.Component):
    """``rows x cols`` multiply-accumulate cells.  Row ``r`` belongs to copy ``g = r mod
    n`` (``n = 2^nl``) and multiplies its weight with window columns ``g cols .. g cols +
    cols - 1``; the product is registered, then accumulated (``first`` restarts the sum);
    after a round's last beat the sums move into the shadow rows, which give the drain
    rows ``k n .. k n + n - 1`` (one channel's copies) at its ``k``-th ``shift``.

    The shadow rows are ``copies`` shift chains, chain ``j`` holding rows ``j, j + copies,
    ...``: a ``shift`` moves the ``n`` chains just read by one row (all of them if ``n`` is
    ``copies``), and tap ``g`` is the head of chain ``(k n + g) mod copies``.  So ``nl``
    reaches a few chain enables and the taps' multiplexers, not every shadow bit (clock
    rate: it was a select of all ``rows x cols`` shadow words).

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
    shift_n : In(1)
        ``shift`` of the next clock (the chains' enables are registers).
    cap : Out(1)
        The shadow rows load the sums at the end of this clock (cycle ``t + 4`` of a last
        beat); they hold them from ``t + 5``.
    taps : Out(ArrayLayout(signed(acc_width), copies x cols))
        Shadow rows ``0 .. copies - 1``, row ``g`` at ``g cols``.
    """

    def __init__(self, cfg: BankedConfig):
        self.cfg = cfg
        super().__init__({
            "v": In(1), "first": In(1), "last": In(1),
            "feat": In(data.ArrayLayout(signed(cfg.data_width), cfg.window)),
            "wt": In(data.ArrayLayout(signed(cfg.weight_width), cfg.rows)),
            "nl": In(unsigned(2)), "shift": In(1), "shift_n": In(1), "cap": Out(1),
            "taps": Out(data.ArrayLayout(signed(cfg.acc_width), cfg.window)),
        })

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        acc_t = signed(cfg.acc_width)
        logs = [k for k in range(4) if 1 << k <= cfg.copies]
        # t + 1: operands, t + 2: partial-product pairs, t + 3: product, t + 4: sum
        flags = [self.v, self.first, self.v & self.last]
        for i in range(3):
            nxt = [Signal(name=f"{n}{i + 3}") for n in ("v", "first", "last")]
            m.d.sync += [a.eq(b) for a, b in zip(nxt, flags)]
            flags = nxt
        v5, first5, last5 = flags
        last6 = Signal()
        m.d.sync += last6.eq(last5)
        m.d.comb += self.cap.eq(last6)
        # the operands registered: each row's weight with its multiples 3 w and -w, each
        # cell's feature of its copy (the radix-4 digits of the LUT multiplier)
        ww = cfg.weight_width
        # the datapath's registers have no reset (a sum is only used from a beat with
        # first, the shadow rows only after a capture): the shell's reset net drives the
        # control flags only
        wts = [Signal(signed(ww), name=f"w{r}", reset_less=True) for r in range(cfg.rows)]
        w3s = [Signal(signed(ww + 2), name=f"w3_{r}", reset_less=True)
               for r in range(cfg.rows)]
        wns = [Signal(signed(ww + 1), name=f"wn{r}", reset_less=True)
               for r in range(cfg.rows)]
        for r in range(cfg.rows):
            m.d.sync += [wts[r].eq(self.wt[r]), w3s[r].eq((self.wt[r] << 1) + self.wt[r]),
                         wns[r].eq(-self.wt[r])]
        shadow = [[Signal(acc_t, name=f"sh{r}_{c}", reset_less=True) for c in range(cfg.cols)]
                  for r in range(cfg.rows)]
        nc = cfg.copies
        # base = k n mod copies: the first chain the drain reads at its k-th shift (0 from a
        # capture on); chain j shifts when read: j >> nl == base >> nl
        # (one copy: a single chain, read at every shift; no base)
        if nc > 1:
            base = Signal(range(nc), name="sh_base")
            base_n = Signal(range(nc), name="sh_base_n")
            m.d.comb += base_n.eq(Mux(last6, 0, Mux(self.shift,
                                                    (base + (1 << self.nl))[:len(base)], base)))
            m.d.sync += base.eq(base_n)
        # per chain, registered from the next clock's values: ce (capture or shift) and sel
        # (capture, or no shift): the shadow word's enable is ce, its next value
        # Mux(sel, acc, the next row's); no control logic between these and the 2048
        # shadow flip-flops (each chain's pair is its own: different next-state logic)
        ce = [Signal(name=f"sh_ce{j}") for j in range(nc)]
        sel = [Signal(name=f"sh_sel{j}") for j in range(nc)]
        for j in range(nc):
            read = 0
            for k in logs:
                hit = Const(1) if nc == 1 else (Const(j >> k) == (base_n >> k))
                read = hit if k == 0 else Mux(self.nl == k, hit, read)
            m.d.sync += [ce[j].eq(last5 | (self.shift_n & read)),
                         sel[j].eq(last5 | ~(self.shift_n & read))]
        for r in range(cfg.rows):
            for c in range(cfg.cols):
                f = self.feat[c]
                for k in logs[1:]:
                    f = Mux(self.nl == k, self.feat[(r % (1 << k)) * cfg.cols + c], f)
                fr = Signal(signed(cfg.data_width), name=f"f{r}_{c}", reset_less=True)
                m.d.sync += fr.eq(f)
                p = Signal(signed(cfg.data_width + cfg.weight_width), name=f"p{r}_{c}",
                           reset_less=True)
                acc = Signal(acc_t, name=f"acc{r}_{c}", reset_less=True)
                m.d.sync += p.eq(radix4_product(m, fr, wts[r], w3s[r], wns[r],
                                                name=f"pp{r}_{c}_"))
                with m.If(v5):
                    m.d.sync += acc.eq(Mux(first5, p, acc + p))
                # the next row in the chain; a chain's last row loads at captures only (what
                # a shift would move into it is never read: the drain reads R n <= rows
                # rows a capture)
                if r + nc < cfg.rows:
                    with m.If(ce[r % nc]):
                        m.d.sync += shadow[r][c].eq(Mux(sel[r % nc], acc, shadow[r + nc][c]))
                else:
                    with m.If(last6):
                        m.d.sync += shadow[r][c].eq(acc)
        heads = Array(shadow[:nc])
        for g in range(nc):
            m.d.comb += [self.taps[g * cfg.cols + c].eq(
                heads[(base + g)[:len(base)]][c] if nc > 1 else shadow[0][c])
                for c in range(cfg.cols)]
        return m
