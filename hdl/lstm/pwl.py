# SPDX-License-Identifier: Apache-2.0
"""The LSTM's PWL unit: :class:`hdl.pwl.PwlUnit`'s arithmetic on a deeper pipeline.

Inside the LSTM engine (ten PWL units on ECP5) the two stages of :class:`PwlUnit`
that chain a carry chain into comparisons (round + saturate + clamp to 1.0, and
mirror + saturate) limited the block to 110-133 MHz although the unit alone runs
at 160+ MHz.  This subclass computes exactly the same function
(:func:`gen.pwl.ref_pwl`) with every adder and every comparison in a stage of its
own.  It never stalls: ``i.ready`` is 1 and ``o.ready`` is ignored (the engine's
element-wise pipeline has fixed timing).
"""

from amaranth.hdl import Const, Module, Mux, Signal, signed, unsigned

from gen.lstm import PWL_EXTRA_STAGES as EXTRA_STAGES
from hdl.lib.arith import round_shift, saturate
from hdl.pwl.unit import PwlUnit, search_bound, shift_up, table_rom

__all__ = ["LstmPwlUnit", "EXTRA_STAGES"]


class LstmPwlUnit(PwlUnit):
    """Piecewise-linear ``sigmoid``/``tanh`` (:func:`gen.pwl.ref_pwl`), never stalled.

    Parameters
    ----------
    table : :class:`gen.pwl.PwlTable`

    Members
    -------
    i : In(stream.Signature(signed(in_fmt.width)))
        Input samples (``in_fmt``); ``i.ready`` is always 1.
    o : Out(stream.Signature(signed(out_fmt.width)))
        Results (``out_fmt``), valid exactly :attr:`latency` clocks after the input;
        ``o.ready`` is ignored.

    Latency/throughput
    ------------------
    :attr:`latency` = ``log2(segments) + 6 + EXTRA_STAGES`` (= :class:`PwlUnit`'s + 6);
    one sample per clock.  Stages: sign and ``|x|``; clamp; binary search (one
    comparison per stage); table ROM read; operand registers; multiply (DSP,
    registered); product register; add intercept; round; saturate; clamp to 1.0;
    mirror; saturate.
    """

    @property
    def latency(self) -> int:
        return self.table.config.latency + EXTRA_STAGES

    def elaborate(self, platform):
        m = Module()
        table, cfg = self.table, self.table.config
        k = self.search_stages
        in_w = cfg.in_fmt.width
        m.d.comb += self.i.ready.eq(1)

        def reg(value, name, shape=None):
            # only the valid bits are reset (a smaller reset fan-out)
            sig = Signal(shape if shape is not None else value.shape(), name=name,
                         reset_less="valid" not in name)
            m.d.sync += sig.eq(value)
            return sig

        # sign and |x| (one carry chain), then the clamp to a_max (one comparison)
        x = self.i.payload
        valid = reg(self.i.valid, "valid_a")
        neg = reg(x < 0, "neg_a")
        absx = reg(Mux(x < 0, -x, x), "absx", unsigned(in_w + 1))
        mag = reg(Mux(absx > cfg.a_max, cfg.a_max, absx), "mag", unsigned(in_w))
        neg, valid = reg(neg, "neg"), reg(valid, "valid")

        # binary search over the segment boundaries (as PwlUnit)
        seg = Const(0, unsigned(max(k, 1)))
        bounds = table.boundaries
        for j in range(k):
            half = cfg.segments >> (j + 1)
            bound = search_bound(bounds, cfg.segments, j, seg, in_w)
            seg = reg(seg | Mux(mag >= bound, half, 0), f"seg_{j}", unsigned(k))
            mag, neg, valid = reg(mag, f"mag_{j}"), reg(neg, f"neg_{j}"), reg(valid, f"valid_{j}")

        # table ROM, read synchronously
        slope_rd, icpt_rd = table_rom(m, cfg, table, seg, 1)
        r_mag, neg, valid = reg(mag, "r_mag"), reg(neg, "r_neg"), reg(valid, "r_valid")

        # multiply (registered), the product once more, then add the intercept
        # (the sum has table.acc_frac fraction bits, see PwlUnit)
        shift_in = table.acc_frac - table.icpt_frac
        shift_p = table.acc_frac - table.product_frac
        slope_max = max(abs(s) for s in table.slopes)
        pshape = signed((slope_max * cfg.a_max).bit_length() + 1)
        slope, r_mag = reg(slope_rd.data, "slope_q"), reg(r_mag, "r_mag_q")
        intercept = reg(icpt_rd.data, "intercept_r")
        neg, valid = reg(neg, "o_neg"), reg(valid, "o_valid")
        product = reg(slope * r_mag.as_signed(), "product", pshape)
        intercept = reg(intercept, "intercept")
        neg, valid = reg(neg, "m_neg"), reg(valid, "m_valid")
        product, intercept = reg(product, "product_q"), reg(intercept, "intercept_q")
        neg, valid = reg(neg, "n_neg"), reg(valid, "n_valid")
        acc_bound = ((slope_max * cfg.a_max) << shift_p) \
            + (max(abs(b) for b in table.intercepts) << shift_in)
        acc = reg(shift_up(product, shift_p) + (intercept << shift_in), "acc",
                  signed(acc_bound.bit_length() + 1))
        neg, valid = reg(neg, "p_neg"), reg(valid, "p_valid")

        # round; saturate; clamp to 1.0 (a minimax line may overshoot)
        one = Const(1 << cfg.out_fmt.frac_bits, signed(cfg.out_fmt.width + 2))
        rounded = reg(round_shift(acc, table.acc_frac - cfg.out_fmt.frac_bits), "rounded")
        neg, valid = reg(neg, "rd_neg"), reg(valid, "rd_valid")
        sat = reg(saturate(rounded, cfg.out_fmt), "sat")
        neg, valid = reg(neg, "s_neg"), reg(valid, "s_valid")
        positive = reg(Mux(sat > one, one, sat), "positive", signed(cfg.out_fmt.width + 1))
        neg, valid = reg(neg, "q_neg"), reg(valid, "q_valid")

        # mirror; saturate
        mirrored = (one - positive) if cfg.func == "sigmoid" else -positive
        result = reg(Mux(neg, mirrored, positive), "mirror", signed(cfg.out_fmt.width + 3))
        valid = reg(valid, "w_valid")
        payload = Signal(signed(cfg.out_fmt.width), name="payload", reset_less=True)
        m.d.sync += [payload.eq(saturate(result, cfg.out_fmt)), self.o.valid.eq(valid)]
        m.d.comb += self.o.payload.eq(payload)
        return m
