# SPDX-License-Identifier: Apache-2.0
"""The banked array's accelerator shell: the job descriptor and statistics in AXI4-Lite
registers (``hdl/conv/regs.rdl``, descriptor registers ``DESC_k`` generated from
:func:`gen.conv.banked.descriptor_widths`), weights, features and sums over AXI4-Stream at
``bus_words`` words per beat; with ``rq_width`` > 0 the sums requantised on their way out
(:class:`hdl.lib.requant.RequantStage`, registers ``RQ_*`` including ``RQ_STRIPS``)."""

from functools import lru_cache
from pathlib import Path

from amaranth.hdl import Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import Out

from gen.conv.banked import BankedConfig, descriptor_widths
from gen.core.regmap import compile_rdl
from hdl.conv.banked.array import STAT_LAYOUT, BankedArray
from hdl.conv.banked.loaders import desc_layout
from hdl.conv.shell import REGS_RDL, _compiled, desc_rdl
from hdl.lib.axi_shell import AxiShell, AxisPort, RegPort, RegSink
from hdl.lib.requant import STRIP_PARAM_FIELDS, RequantWrap

__all__ = ["BankedShell", "banked_desc_layout", "banked_regmap", "banked_desc_registers",
           "banked_shell_ports"]

STATS = ("mac_busy_lo_value", "mac_busy_hi_value", "compute_cycles_value")
# register field names for the descriptor fields whose names differ only in case
# (register-map names are lower case)
RDL_NAMES = {"G": "groups", "S": "strips", "Q": "chunks", "R": "channels", "nR": "rows",
             "W": "positions", "D": "pitch"}


def banked_desc_layout(cfg: BankedConfig) -> tuple:
    """``((register, field, lsb, width), ...)``: the descriptor's fields in payload order
    (register names: :data:`RDL_NAMES` for those that differ only in case) packed into the
    32-bit registers ``DESC_0 ..`` from bit 0, a field that would cross a register boundary
    moved to the next register."""
    out, reg, at = [], 0, 0
    for name, width in descriptor_widths(cfg).items():
        if at + width > 32:
            reg, at = reg + 1, 0
        out.append((reg, RDL_NAMES.get(name, name), at, width))
        at += width
    return tuple(out)


@lru_cache(maxsize=None)
def _compiled_rq(layout: tuple):
    """The map with the requantisation registers, ``RQ_STRIPS`` among them."""
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "conv_desc.rdl").write_text(desc_rdl(layout))
        return compile_rdl(REGS_RDL, "spnn_conv", None, {"RQ": "", "RQ_STRIPS": ""},
                           include_dirs=(tmp,))


def banked_regmap(cfg: BankedConfig):
    """The shell's register map (the conv shell's, with this array's ``DESC_k``; with
    ``rq_width`` > 0 the requantisation registers ``RQ_SCALE``, ``RQ_POSITIONS``,
    ``RQ_CHANNELS``, ``RQ_STRIPS`` and ``JOB_INPUTS.b_en``)."""
    layout = banked_desc_layout(cfg)
    return _compiled_rq(layout) if cfg.rq_width else _compiled(layout, False)


def banked_desc_registers(cfg: BankedConfig, fields: dict) -> list:
    """``[[offset, value], ...]``: the ``DESC_k`` registers holding the descriptor
    (:func:`gen.conv.banked.descriptor_fields` values by field name)."""
    layout = banked_desc_layout(cfg)
    regmap, words = banked_regmap(cfg), [0] * (layout[-1][0] + 1)
    values = {RDL_NAMES.get(k, k): v for k, v in fields.items()}
    for reg, name, lsb, width in layout:
        words[reg] |= (int(values[name]) & ((1 << width) - 1)) << lsb
    return [[regmap.offset(f"DESC_{k}"), v] for k, v in enumerate(words)]


def banked_shell_ports(cfg: BankedConfig):
    """``(inputs, outputs)``: the shell's :class:`hdl.lib.axi_shell.AxisPort` s (with
    ``rq_width`` > 0 the bias port ``s_axis_b`` too)."""
    bw = cfg.bus_words
    bias = (AxisPort("b", "b", cfg.acc_width, bw),) if cfg.rq_width else ()
    return ((AxisPort("w", "w", cfg.weight_width, bw, packed=False),
             AxisPort("x", "x", cfg.data_width, bw, packed=False)) + bias,
            (AxisPort("o", "o", cfg.rq_width or cfg.acc_width, bw, packed=False,
                      partial=True),))


class _Framed(wiring.Component):
    """:class:`BankedArray` (with ``rq_width`` > 0 behind a :class:`hdl.lib.requant.
    RequantStage`) whose ``o`` beats say how many of their words are results: all but a
    strip's last beat (``olast`` words; the strip's padding stays off the bus); with
    ``rq_width`` > 0 (the channel-aligned layout) all but each channel's last beat, the
    ``cp / bus_words``-th of the channel (``olast`` words).

    Members: ``c``, ``w``, ``x``, ``s`` as the array's; ``o`` : Out(stream.Signature({data:
    ArrayLayout(signed(rq_width or acc_width), bus_words), n: unsigned(6)})); with
    ``rq_width`` > 0 the stage's ``b`` (In(stream.Signature(signed(acc_width))): biases) and
    ``rq`` (In(stream.Signature(RequantParams(16, strips=True))): the job's parameters).
    """

    def __init__(self, cfg: BankedConfig):
        self.cfg = cfg
        bw = cfg.bus_words
        self.array = BankedArray(cfg)
        self.inner = self.array
        if cfg.rq_width:
            self.inner = RequantWrap(self.array, "o", cfg.acc_width, cfg.rq_width, lanes=bw,
                                     depth=cfg.rq_depth, array=True, strips=True)
        sig = self.inner.signature.members
        members = {"c": sig["c"], "w": sig["w"], "x": sig["x"], "s": sig["s"],
                   "o": Out(stream.Signature(data.StructLayout({
                       "data": data.ArrayLayout(signed(cfg.rq_width or cfg.acc_width), bw),
                       "n": unsigned(6)})))}
        if cfg.rq_width:
            members.update(b=sig["b"], rq=sig["rq"])
        super().__init__(members)

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        m.submodules.array = arr = self.inner
        for name in ("c", "w", "x") + (("b", "rq") if cfg.rq_width else ()):
            wiring.connect(m, wiring.flipped(getattr(self, name)), getattr(arr, name))
        wiring.connect(m, arr.s, wiring.flipped(self.s))
        olast = Signal(6)
        moved = arr.o.valid & arr.o.ready
        ctake = self.c.valid & self.c.ready
        # whether this beat is the strip's (channel's) last, a register: its compare made a
        # clock ahead on the next counter and the next limit (no carry chain between the
        # counter and tkeep or the shell's word count)
        if cfg.rq_width:
            # words of the channel before this beat, against the channel pitch less a beat
            cpm, wc = Signal(cfg.obits), Signal(cfg.obits)
            last = Signal(init=1)        # wc == cpm (both 0 after reset)
            wc_next, cpm_next = Signal(cfg.obits), Signal(cfg.obits)
            m.d.comb += [wc_next.eq(Mux(moved, Mux(last, 0, wc + cfg.bus_words), wc)),
                         cpm_next.eq(Mux(ctake, self.c.payload.cp - cfg.bus_words, cpm))]
            m.d.sync += [wc.eq(wc_next), cpm.eq(cpm_next), last.eq(wc_next == cpm_next)]
            with m.If(ctake):
                m.d.sync += olast.eq(self.c.payload.olast)
            n = Mux(last, olast, cfg.bus_words)
        else:
            k = Signal(cfg.count_width)
            obm1 = Signal((k - 1).shape(), init=-1)   # the strip's beats - 1 (obeats 0)
            last = Signal()              # k == obm1 (never after reset: obm1 is -1)
            # last after a transfer, from the registers alone (k + 1 == obm1, or a strip of
            # one beat after its last): the output FIFO's valid and the bus's ready only
            # choose between it and last, no adder or compare behind them (clock rate)
            last_mv = Mux(last, obm1 == 0, k + 1 == obm1)
            obm1_new = self.c.payload.obeats - 1
            # the beat's words, a register beside last (the shell's tkeep and word count
            # decode it)
            n = Signal(6, init=cfg.bus_words)
            with m.If(ctake):
                # a descriptor is taken while no output of the job before is pending
                m.d.sync += [k.eq(0), obm1.eq(obm1_new), last.eq(obm1_new == 0),
                             olast.eq(self.c.payload.olast),
                             n.eq(Mux(obm1_new == 0, self.c.payload.olast, cfg.bus_words))]
            with m.Elif(moved):
                m.d.sync += [k.eq(Mux(last, 0, k + 1)), last.eq(last_mv),
                             n.eq(Mux(last_mv, olast, cfg.bus_words))]
        m.d.comb += [self.o.valid.eq(arr.o.valid), arr.o.ready.eq(self.o.ready),
                     self.o.payload.data.eq(arr.o.payload), self.o.payload.n.eq(n)]
        return m


class BankedShell(AxiShell):
    """The banked array behind AXI4-Stream and AXI4-Lite: one job per AXI job.

    Parameters
    ----------
    cfg : gen.conv.banked.BankedConfig
        The array; ``bus_words`` words per beat on every stream; ``rq_width`` > 0: the
        requantisation stage (``rq_depth`` biases) on ``m_axis_o``.

    Attributes
    ----------
    aclk, aresetn : In(1)
        Clock; synchronous reset while low.
    s_axis_w_tdata, _tkeep, _tlast, _tvalid, _tready :
        The job's weights (:func:`gen.conv.banked.weight_beats`), ``bus_words`` words of
        ``ceil(weight_width / 8)`` bytes a beat, every word kept; ``tlast`` on the last.
    s_axis_x_tdata, _tkeep, _tlast, _tvalid, _tready :
        The job's features (:func:`gen.conv.banked.feature_beats`), likewise.
    m_axis_o_tdata, _tkeep, _tlast, _tvalid, _tready :
        The sums (``acc_width`` codes, zero-padded to whole bytes), strip by strip ``R x
        P`` in ``(channel, position)`` order (:func:`gen.conv.banked.assemble` with
        ``padded=False``); a strip's last beat holds its remaining words (``tkeep``);
        ``tlast`` on the ``O_WORDS``-th.  With ``rq_width`` > 0 the results requantised to
        ``rq_width`` bits, each channel of a strip from a new beat (the channel-aligned
        layout, :func:`gen.conv.banked.make_job`), its last beat holding its remaining
        words; ``RQ_POSITIONS`` = ``ceil(P / bus_words)`` (beats per channel),
        ``RQ_CHANNELS`` = ``G R``, ``RQ_STRIPS`` = ``S`` with ``group`` = ``R``.
    s_axis_b_tdata, _tkeep, _tlast, _tvalid, _tready :
        Only with ``rq_width`` > 0: the stage's biases (``acc_width`` codes in the sums'
        fraction bits) of the job's channels ``oc0 .. oc0 + G R - 1``, ``bus_words`` a beat,
        when ``JOB_INPUTS.b_en`` is set (and ``RQ_SCALE.bias``).
    s_axi_*, irq :
        Control (``hdl/conv/regs.rdl``: the descriptor ``DESC_k``, ``O_WORDS``, the job's
        statistics ``MAC_BUSY_*`` and ``COMPUTE_CYCLES`` = beats issued; with ``rq_width``
        > 0 ``RQ_*``) and its interrupt.
    """

    def __init__(self, cfg: BankedConfig):
        self.cfg = cfg
        inputs, outputs = banked_shell_ports(cfg)
        regmap = banked_regmap(cfg)
        fields = tuple(f"desc_{reg}_{name}" for reg, name, _, _ in banked_desc_layout(cfg))
        assert desc_layout(cfg).size == sum(w for *_, w in banked_desc_layout(cfg))
        registers = (RegPort("c", fields),)
        if cfg.rq_width:
            registers += (RegPort("rq", STRIP_PARAM_FIELDS),)
        super().__init__(_Framed(cfg), regmap, inputs, outputs, registers=registers,
                         sinks=(RegSink("s", STATS),))
        assert STAT_LAYOUT.size == 80
