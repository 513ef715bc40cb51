# SPDX-License-Identifier: Apache-2.0
"""Requantisation of a block's sums on their way out of its shell.

Every integer accelerator ends its output path the same way (Gemmini's accumulator scaling,
TFLite's ``MultiplyByQuantizedMultiplier``): add the channel's bias, rescale by a multiplier
and a right shift with rounding, saturate to the next layer's input width, optionally clamp
at zero (a fused ReLU).  :class:`RequantStage` does that to a valid/ready stream of sums;
:class:`RequantWrap` puts it on one output stream of a block, so an
:class:`hdl.lib.axi_shell.AxiShell` around the wrapped block has the stage in its output
path, its parameters in job registers (``hdl/lib/requant_regs.rdl``) and its biases on an
AXI4-Stream input port.  The bit-exact golden model is :func:`gen.core.fixed.requant_sums`.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, signed, unsigned
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from gen.core.fixed import MULT_WIDTH, REQUANT_LATENCY as LATENCY, SHIFT_WIDTH

__all__ = ["RequantParams", "RequantStage", "RequantWrap", "PARAM_FIELDS",
           "STRIP_PARAM_FIELDS", "LATENCY"]



# The job registers of hdl/lib/requant_regs.rdl whose fields make the parameters, in order.
PARAM_FIELDS = ("rq_scale_mult", "rq_scale_shift", "rq_scale_relu", "rq_scale_bias",
                "rq_positions_value", "rq_channels_value")
# ... and of a stage with ``strips`` (the map compiled with ``RQ_STRIPS`` defined too)
STRIP_PARAM_FIELDS = PARAM_FIELDS + ("rq_strips_value", "rq_strips_group")


def RequantParams(channel_bits: int = 16, strips: bool = False):
    """The stage's per-job parameters, one transfer at every job start (the fields of the
    ``RQ_SCALE``, ``RQ_POSITIONS`` and ``RQ_CHANNELS`` registers, first in the LSBs):
    ``mult`` (unsigned ``MULT_WIDTH``), ``shift`` (``SHIFT_WIDTH``), ``relu``, ``bias`` (this
    job loads ``channels`` biases), ``positions`` (consecutive transfers sharing one channel,
    32 bits, >= 1), ``channels`` (16 bits, >= 1); with ``strips`` also those of
    ``RQ_STRIPS``: ``strips`` (16 bits, >= 1) and ``group`` (16 bits, >= 1)."""
    fields = {"mult": MULT_WIDTH, "shift": SHIFT_WIDTH, "relu": 1, "bias": 1,
              "positions": 32, "channels": channel_bits}
    if strips:
        fields.update(strips=16, group=16)
    return data.StructLayout(fields)


class RequantStage(wiring.Component):
    """Bias, multiply-shift with round half up, saturation and optional ReLU on a stream of
    sums, ``lanes`` sums per transfer sharing one channel.

    Transfer ``k`` of a job belongs to channel ``(k // positions) % channels`` (e.g. the
    conv array's ``(B, Oc, Ho, Wo)`` order: ``positions = Ho Wo``, ``channels = Oc``; the FC
    engine's rows: ``positions = 1``).  With ``strips`` the channels come in groups of
    ``group`` (which divides ``channels``), each group ``strips`` times in a row: run ``j =
    k // positions`` (modulo ``channels x strips``) belongs to channel ``(j // (strips x
    group)) group + j % group`` (the banked conv array's jobs: ``G`` groups of ``R``
    channels, each over ``S`` strips); ``strips = 1`` is the order without.  Each sum ``a``
    becomes
    ``clamp(floor(((a + bias[c]) * mult + 2**(shift-1)) / 2**shift), lo, 2**(W-1) - 1)``
    (no rounding term when ``shift`` is 0), ``lo = 0`` with ``relu``, else ``-2**(W-1)``.

    Parameters
    ----------
    acc_width : int
        Bits of a signed sum (and of a bias word).
    out_width : int
        ``W``: bits of a signed result.
    lanes : int
        Sums per transfer.
    depth : int
        Biases held (channels of a job at most).
    array : bool
        Payloads as ``ArrayLayout`` s even for one lane (default: only for several).
    strips : bool
        The parameters also hold ``strips`` and ``group`` (default False: the stage, its
        parameters and its logic as before; the ``RQ_STRIPS`` register).

    Members
    -------
    i : In(stream.Signature(signed(acc_width) or ArrayLayout(signed(acc_width), lanes)))
        The sums, in the block's output order.
    o : Out(stream.Signature(signed(out_width) or ArrayLayout(signed(out_width), lanes)))
        The results; ``o.valid`` and ``o.payload`` are registers.
    b : In(stream.Signature(signed(acc_width)))
        Biases, in channel order from channel 0 after every ``q``, in the sums' fraction
        bits; ready except in the clock ``q`` is offered.
    q : In(stream.Signature(RequantParams(16, strips)))
        The job's parameters (one transfer at every job start; always ready).  With
        ``bias`` set, no result leaves before ``channels`` biases have arrived; without, the
        biases of the last load are used.

    Latency/throughput
    ------------------
    One transfer per clock; ``LATENCY`` clocks from a sum taken to its result offered.  The
    datapath never stalls: its results wait in an output FIFO, and ``i`` is
    ready only while the sums in flight and the results waiting leave room (a counter), so
    ``o.ready`` reaches nothing but the FIFO and ``i.ready`` depends on registers only.
    """

    latency = LATENCY
    ii = 1

    def __init__(self, acc_width: int, out_width: int, lanes: int = 1, depth: int = 512,
                 array: bool = None, strips: bool = False):
        self.acc_width, self.out_width, self.lanes, self.depth = \
            acc_width, out_width, lanes, depth
        self.strips = strips
        array = lanes > 1 if array is None else array
        one = lambda w: data.ArrayLayout(signed(w), lanes) if array else signed(w)  # noqa
        super().__init__({
            "i": In(stream.Signature(one(acc_width))),
            "o": Out(stream.Signature(one(out_width))),
            "b": In(stream.Signature(signed(acc_width))),
            "q": In(stream.Signature(RequantParams(16, strips))),
        })

    def _lanes(self, value, width):
        raw = Value.cast(value).as_unsigned()
        return [raw[k * width:(k + 1) * width].as_signed() for k in range(self.lanes)]

    def _params(self, m, prod_w):
        """The job's parameters, the bias memory and its loading; returns the registers
        the datapath reads."""
        N = self.depth
        abits = max(1, (N - 1).bit_length())
        m.submodules.bias = mem = memory.Memory(shape=signed(self.acc_width), depth=N, init=[])
        wr, rd = mem.write_port(), mem.read_port(domain="sync")
        p = {"mult": Signal(MULT_WIDTH), "shift": Signal(SHIFT_WIDTH),
             "zero": Signal(),                     # shift >= prod_w: every result is 0
             "rnd": Signal(prod_w),                # 2**(shift-1), 0 at shift 0
             "lo": Signal(signed(self.out_width)), "pos_last": Signal(32),
             "ch_last": Signal(16), "waiting": Signal(), "rd": rd, "abits": abits}
        b_addr = Signal(16)
        # a bias word never meets the parameters in one clock (the shell offers them in the
        # clock after the start, when its input ports open): b waits that clock out
        m.d.comb += [self.q.ready.eq(1), self.b.ready.eq(~self.q.valid)]
        q = self.q.payload
        with m.If(self.q.valid):
            m.d.sync += [p["mult"].eq(q.mult), p["shift"].eq(q.shift),
                         p["zero"].eq(q.shift >= prod_w),
                         p["rnd"].eq((Const(1, prod_w + 1) << q.shift)[1:]),
                         p["lo"].eq(Mux(q.relu, 0, -(1 << (self.out_width - 1)))),
                         p["pos_last"].eq(q.positions - 1), p["ch_last"].eq(q.channels - 1),
                         p["waiting"].eq(q.bias), b_addr.eq(0)]
        # biases in channel order; the last one ends the wait
        m.d.comb += [wr.addr.eq(b_addr[:abits]), wr.data.eq(self.b.payload),
                     wr.en.eq(self.b.valid)]
        with m.If(self.b.valid):
            m.d.sync += b_addr.eq(b_addr + 1)
            with m.If(b_addr == p["ch_last"]):
                m.d.sync += p["waiting"].eq(0)
        return p

    def _strip_channels(self, m, p, step, ch, ch_end):
        """With ``strips``: the next run's channel when a run ends (``step``): the next of
        the group; after the group's last (or the job's last channel) its first again
        while the group has strips left, else the next group's first (0 after the last).
        Counters and "last" flags in registers, as for the channel."""
        q = self.q.payload
        r, st, base = Signal(16), Signal(16), Signal(16)
        r_end, st_end = Signal(), Signal()
        g_last, st_last = Signal(16), Signal(16)
        def restart():
            return [r.eq(0), r_end.eq(g_last == 0)]
        with m.If(step):
            with m.If(~(r_end | ch_end)):
                m.d.sync += [ch.eq(ch + 1), ch_end.eq(ch + 1 == p["ch_last"]), r.eq(r + 1),
                             r_end.eq(r + 1 == g_last)]
            with m.Elif(~st_end):
                m.d.sync += [ch.eq(base), ch_end.eq(base == p["ch_last"]), *restart(),
                             st.eq(st + 1), st_end.eq(st + 1 == st_last)]
            with m.Elif(ch_end):
                m.d.sync += [ch.eq(0), ch_end.eq(p["ch_last"] == 0), base.eq(0), *restart(),
                             st.eq(0), st_end.eq(st_last == 0)]
            with m.Else():
                m.d.sync += [ch.eq(ch + 1), ch_end.eq(ch + 1 == p["ch_last"]),
                             base.eq(ch + 1), *restart(), st.eq(0), st_end.eq(st_last == 0)]
        with m.If(self.q.valid):
            m.d.sync += [g_last.eq(q.group - 1), st_last.eq(q.strips - 1), r.eq(0),
                         r_end.eq(q.group == 1), st.eq(0), st_end.eq(q.strips == 1),
                         base.eq(0)]

    def elaborate(self, platform):
        m = Module()
        A, W = self.acc_width, self.out_width
        prod_w = A + 1 + MULT_WIDTH + 1
        p = self._params(m, prod_w)
        rd = p["rd"]

        # The datapath runs free (no clock enables): a result enters an output FIFO with
        # room for every result in flight, and a sum is taken only while a credit counter
        # says there is room, so o.ready reaches nothing but the FIFO.
        depth = LATENCY + 2           # a sum per clock keeps LATENCY + 1 in flight
        m.submodules.out = out = SyncFIFOBuffered(width=self.lanes * W, depth=depth)
        m.d.comb += [self.o.valid.eq(out.r_rdy), Value.cast(self.o.payload).eq(out.r_data),
                     out.r_en.eq(self.o.ready)]
        held, take, give = Signal(range(depth + 1)), Signal(), Signal()
        m.d.comb += [self.i.ready.eq(~p["waiting"] & (held < depth)),
                     take.eq(self.i.valid & self.i.ready),
                     give.eq(self.o.valid & self.o.ready)]
        m.d.sync += held.eq(held + take - give)
        # the channel of the next sum: positions left in it counted down, the "last
        # position" and "last channel" flags kept in registers (no compare on the enables)
        left, ch = Signal(32), Signal(16)
        pos_end, ch_end = Signal(), Signal()
        with m.If(take):
            m.d.sync += [left.eq(Mux(pos_end, p["pos_last"], left - 1)),
                         pos_end.eq(Mux(pos_end, p["pos_last"] == 0, left == 1))]
            if not self.strips:
                with m.If(pos_end):
                    m.d.sync += [ch.eq(Mux(ch_end, 0, ch + 1)),
                                 ch_end.eq(Mux(ch_end, p["ch_last"] == 0,
                                               ch + 1 == p["ch_last"]))]
        if self.strips:
            self._strip_channels(m, p, take & pos_end, ch, ch_end)
        with m.If(self.q.valid):
            q = self.q.payload
            m.d.sync += [left.eq(q.positions - 1), pos_end.eq(q.positions == 1),
                         ch.eq(0), ch_end.eq(q.channels == 1)]
        m.d.comb += rd.addr.eq(ch[:p["abits"]])

        # sum -> with its bias (the memory's output registered) -> + bias -> partial
        # products of 17-bit slices x mult (one multiplier each) -> their sum -> + rounding
        # term -> >> the shift's multiple of 8 -> >> the rest -> saturated: one register each
        valid = [Signal(name=f"v{k}") for k in range(1, LATENCY - 1)]
        m.d.sync += [valid[0].eq(take)] + [b.eq(a) for a, b in zip(valid, valid[1:])]
        cuts = list(range(0, A + 1, 17))
        res = []
        for k, a in enumerate(self._lanes(self.i.payload, A)):
            a1, a2 = Signal(signed(A), name=f"a1_{k}"), Signal(signed(A), name=f"a2_{k}")
            b2 = Signal(signed(A), name=f"b2_{k}")
            s3 = Signal(signed(A + 1), name=f"s3_{k}")
            pp = [Signal(signed(min(17, A + 1 - c) + MULT_WIDTH + 1), name=f"pp{j}_{k}")
                  for j, c in enumerate(cuts)]
            p5 = Signal(signed(prod_w), name=f"p5_{k}")
            r6 = Signal(signed(prod_w + 1), name=f"r6_{k}")
            g7 = Signal(signed(prod_w + 1), name=f"g7_{k}")
            h8 = Signal(signed(prod_w + 1), name=f"h8_{k}")
            o9 = Signal(signed(W), name=f"o9_{k}")
            parts = [s3[c:c + 17] if c + 17 <= A else s3[c:].as_signed() for c in cuts]
            m.d.sync += [a1.eq(a), a2.eq(a1), b2.eq(rd.data), s3.eq(a2 + b2),
                         *[x.eq(part * p["mult"]) for x, part in zip(pp, parts)],
                         p5.eq(sum(x << c for x, c in zip(pp, cuts))),
                         r6.eq(Mux(p["zero"], 0, p5 + p["rnd"])),
                         # the shift in two steps: by its multiple of 8, then the rest
                         g7.eq(r6 >> Cat(Const(0, 3), p["shift"][3:])),
                         h8.eq(g7 >> p["shift"][:3]),
                         o9.eq(Mux(h8 > (1 << (W - 1)) - 1, (1 << (W - 1)) - 1,
                                   Mux(h8 < p["lo"], p["lo"], h8)))]
            res.append(o9)
        m.d.comb += [out.w_en.eq(valid[-1]), out.w_data.eq(Cat(*res))]
        return m


class RequantWrap(wiring.Component):
    """A block with a :class:`RequantStage` on its output stream ``output``: every member of
    ``inner`` is forwarded, ``output`` carries the results, and two streams are added: the
    biases ``bias`` and the parameters ``params`` (see :class:`RequantStage`).

    Parameters
    ----------
    inner : wiring.Component
        The block; ``output`` names a stream member of it whose payload is ``lanes`` signed
        ``acc_width``-bit sums.
    output : str
    acc_width, out_width, lanes, depth, array, strips :
        As :class:`RequantStage`.
    bias, params : str
        Names of the added members.
    """

    def __init__(self, inner, output: str, acc_width: int, out_width: int, lanes: int = 1,
                 depth: int = 512, bias: str = "b", params: str = "rq", array: bool = None,
                 strips: bool = False):
        self.inner, self.output = inner, output
        self.stage = RequantStage(acc_width, out_width, lanes, depth, array, strips)
        self.bias_name, self.params_name = bias, params
        members = dict(inner.signature.members.items())
        members[output] = self.stage.signature.members["o"]
        members[bias] = self.stage.signature.members["b"]
        members[params] = self.stage.signature.members["q"]
        super().__init__(members)
        for name in ("latency", "ii"):
            if hasattr(inner, name):
                setattr(self, name, getattr(inner, name))

    def elaborate(self, platform):
        m = Module()
        m.submodules.block = self.inner
        m.submodules.requant = stage = self.stage
        for name, member in self.inner.signature.members.items():
            if name == self.output:
                continue
            outer, inner = getattr(self, name), getattr(self.inner, name)
            if member.is_signature:
                wiring.connect(m, wiring.flipped(outer), inner)
            elif member.flow == In:
                m.d.comb += inner.eq(outer)
            else:
                m.d.comb += outer.eq(inner)
        wiring.connect(m, getattr(self.inner, self.output), stage.i)
        wiring.connect(m, stage.o, wiring.flipped(getattr(self, self.output)))
        wiring.connect(m, wiring.flipped(getattr(self, self.bias_name)), stage.b)
        wiring.connect(m, wiring.flipped(getattr(self, self.params_name)), stage.q)
        return m
