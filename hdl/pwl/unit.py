# SPDX-License-Identifier: Apache-2.0
"""Pipelined piecewise-linear sigmoid/tanh unit."""

from amaranth.hdl import Array, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from gen.pwl import PwlTable
from hdl.lib.arith import round_shift, saturate

__all__ = ["PwlUnit", "search_bound", "shift_up", "table_rom"]


def shift_up(value, shift: int):
    """``value << shift``; ``value`` itself when ``shift`` is 0 (the usual case), so the
    netlist is unchanged for formats whose product already has the most fraction bits."""
    return value << shift if shift else value


def table_rom(m, cfg, table, seg, en):
    """The segment table as two synchronous ROMs (``slopes``, ``intercepts``) addressed by
    ``seg``, read when ``en``; returns their read ports (data one clock after the address)."""
    m.submodules.slopes = slopes = Memory(shape=signed(cfg.slope_width),
                                          depth=cfg.segments, init=table.slopes)
    m.submodules.intercepts = icpts = Memory(shape=signed(table.icpt_width),
                                             depth=cfg.segments, init=table.intercepts)
    slope_rd = slopes.read_port(domain="sync")
    icpt_rd = icpts.read_port(domain="sync")
    m.d.comb += [slope_rd.addr.eq(seg), icpt_rd.addr.eq(seg),
                 slope_rd.en.eq(en), icpt_rd.en.eq(en)]
    return slope_rd, icpt_rd


def search_bound(bounds, segments, j, seg, width):
    """Boundary compared at step ``j`` of the binary segment search: the candidates of that
    level (every ``2 * half``-th boundary, ``half = segments >> (j + 1)``) indexed by the
    ``j`` bits of ``seg`` already decided (a constant at the first step)."""
    k = segments.bit_length() - 1
    half = segments >> (j + 1)
    level = [bounds[i + half - 1] for i in range(0, segments, 2 * half)]
    if len(level) == 1:
        return Const(level[0], unsigned(width))
    return Array(Const(b, unsigned(width)) for b in level)[seg >> (k - j)]


class PwlUnit(wiring.Component):
    """Piecewise-linear ``sigmoid`` or ``tanh``, one result per clock.

    The segment table is fitted by :func:`gen.pwl.fit_table`; the arithmetic is
    exactly :func:`gen.pwl.ref_pwl` (see that module for the equations).

    Parameters
    ----------
    table : :class:`gen.pwl.PwlTable`
        The fitted table; its ``config`` gives function, formats and segment count.

    Members
    -------
    i : In(stream.Signature(signed(in_fmt.width)))
        Input samples, ``in_fmt`` (default Q4.12).  Valid/ready stream.
    o : Out(stream.Signature(signed(out_fmt.width)))
        Results, ``out_fmt`` (default Q2.14), in input order.  Valid/ready stream.

    Latency/throughput
    ------------------
    :attr:`latency` = ``log2(segments) + 6`` clocks from an input transfer to its
    result being valid (when ``o`` is never stalled); one sample per clock.  The
    pipeline stalls as a whole while ``o.valid & ~o.ready``; ``i.ready`` is
    ``~o.valid | o.ready`` (combinational from ``o.ready``).

    Stages: magnitude and clamp; one binary-search comparison per stage over the
    segment boundaries; table ROM read; multiply; add intercept; round, saturate and clamp;
    mirror.
    """

    def __init__(self, table: PwlTable):
        if not isinstance(table, PwlTable):
            raise TypeError(f"table must be a PwlTable, not {table!r}")
        self.table = table
        cfg = table.config
        super().__init__({
            "i": In(stream.Signature(signed(cfg.in_fmt.width))),
            "o": Out(stream.Signature(signed(cfg.out_fmt.width))),
        })

    @property
    def search_stages(self) -> int:
        return self.table.config.segments.bit_length() - 1

    @property
    def latency(self) -> int:
        return self.table.config.latency

    ii = 1

    def elaborate(self, platform):
        m = Module()
        table, cfg = self.table, self.table.config
        k = self.search_stages
        in_w = cfg.in_fmt.width

        advance = Signal()
        m.d.comb += [advance.eq(~self.o.valid | self.o.ready), self.i.ready.eq(advance)]

        # Stage 0: sign and clamped magnitude.
        x = self.i.payload
        neg, mag, valid = Signal(name="neg"), Signal(unsigned(in_w), name="mag"), \
            Signal(name="valid")
        magnitude = Mux(x < 0, -x, x)
        with m.If(advance):
            m.d.sync += [
                valid.eq(self.i.valid),
                neg.eq(x < 0),
                mag.eq(Mux(magnitude > cfg.a_max, cfg.a_max, magnitude)),
            ]

        # Stages 1..k: binary search; after stage j the top j+1 bits of `seg` are decided.
        seg = Const(0, unsigned(max(k, 1)))
        bounds = table.boundaries
        for j in range(k):
            half = cfg.segments >> (j + 1)
            bound = search_bound(bounds, cfg.segments, j, seg, in_w)
            nseg = Signal(unsigned(k), name=f"seg_{j}")
            nmag, nneg, nvalid = (Signal.like(mag, name=f"mag_{j}"), Signal(name=f"neg_{j}"),
                                  Signal(name=f"valid_{j}"))
            with m.If(advance):
                m.d.sync += [
                    nseg.eq(seg | Mux(mag >= bound, half, 0)),
                    nmag.eq(mag), nneg.eq(neg), nvalid.eq(valid),
                ]
            seg, mag, neg, valid = nseg, nmag, nneg, nvalid

        # Table ROM, read synchronously.
        slope_rd, icpt_rd = table_rom(m, cfg, table, seg, advance)
        r_mag, r_neg, r_valid = (Signal.like(mag, name="r_mag"), Signal(name="r_neg"),
                                 Signal(name="r_valid"))
        with m.If(advance):
            m.d.sync += [r_mag.eq(mag), r_neg.eq(neg), r_valid.eq(valid)]

        # Multiply (registered, maps onto the DSP's output register), then add the intercept.
        # The sum has table.acc_frac fraction bits: the intercept is shifted up to the
        # product's (shift_in) or, when it has more fraction bits, the product up to its.
        shift_in = table.acc_frac - table.icpt_frac
        shift_p = table.acc_frac - table.product_frac
        slope_max = max(abs(s) for s in table.slopes)
        product = Signal(signed((slope_max * cfg.a_max).bit_length() + 1), name="product")
        intercept = Signal(signed(table.icpt_width), name="intercept")
        m_neg, m_valid = Signal(name="m_neg"), Signal(name="m_valid")
        with m.If(advance):
            m.d.sync += [
                product.eq(slope_rd.data * r_mag.as_signed()),
                intercept.eq(icpt_rd.data),
                m_neg.eq(r_neg), m_valid.eq(r_valid),
            ]
        acc_bound = ((slope_max * cfg.a_max) << shift_p) \
            + (max(abs(b) for b in table.intercepts) << shift_in)
        acc = Signal(signed(acc_bound.bit_length() + 1), name="acc")
        p_neg, p_valid = Signal(name="p_neg"), Signal(name="p_valid")
        with m.If(advance):
            m.d.sync += [
                acc.eq(shift_up(product, shift_p) + (intercept << shift_in)),
                p_neg.eq(m_neg), p_valid.eq(m_valid),
            ]

        # Round, saturate and clamp to 1.0 (one stage), then mirror (the next): splitting the
        # two keeps the carry chains of the rounding adder and the mirror apart.
        one = Const(1 << cfg.out_fmt.frac_bits, signed(cfg.out_fmt.width + 2))
        rounded = saturate(round_shift(acc, table.acc_frac - cfg.out_fmt.frac_bits),
                           cfg.out_fmt)
        positive = Signal(signed(cfg.out_fmt.width + 1), name="positive")
        q_neg, q_valid = Signal(name="q_neg"), Signal(name="q_valid")
        with m.If(advance):
            m.d.sync += [
                positive.eq(Mux(rounded > one, one, rounded)),  # a minimax line may overshoot
                q_neg.eq(p_neg), q_valid.eq(p_valid),
            ]
        mirrored = (one - positive) if cfg.func == "sigmoid" else -positive
        with m.If(advance):
            m.d.sync += [
                self.o.payload.eq(saturate(Mux(q_neg, mirrored, positive), cfg.out_fmt)),
                self.o.valid.eq(q_valid),
            ]
        return m

    def port_info(self) -> dict:
        """Per top-level member: fixed-point format and protocol (for the manifest)."""
        cfg = self.table.config
        return {
            "i": {"format": str(cfg.in_fmt), "protocol": "valid/ready stream, input samples"},
            "o": {"format": str(cfg.out_fmt),
                  "protocol": f"valid/ready stream, {cfg.func}(i) in input order"},
        }

    def manifest_extra(self) -> dict:
        return {"table": self.table.to_dict()}

    def wave_signals(self) -> dict:
        """Internal signals worth a look in a waveform viewer: {group: [(name, width)]}."""
        k = self.search_stages
        valids = [("valid", 1)] + [(f"valid_{j}", 1) for j in range(k)] + \
                 [("r_valid", 1), ("m_valid", 1), ("p_valid", 1), ("q_valid", 1)]
        return {"pipeline (stall, stage valid bits)": [("advance", 1)] + valids,
                "datapath": [("mag", self.table.config.in_fmt.width), (f"seg_{k - 1}", k),
                             ("r_mag", self.table.config.in_fmt.width)]}
