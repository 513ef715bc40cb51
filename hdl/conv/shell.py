# SPDX-License-Identifier: Apache-2.0
"""The MAC array's accelerator shell: the layer descriptor and statistics in AXI4-Lite
registers, weights, features and sums over AXI4-Stream (``hdl/conv/regs.rdl``)."""

from functools import lru_cache
from pathlib import Path

from gen.conv import descriptor_fields
from gen.core.regmap import compile_rdl
from hdl.conv.array import ConvArray
from hdl.conv.control import STAT_BUSY_BITS
from hdl.lib.axi_shell import AxiShell, AxisPort, RegPort, RegSink
from hdl.lib.requant import PARAM_FIELDS, RequantWrap

__all__ = ["ConvShell", "shell_ports", "regmap_for", "desc_layout", "desc_words",
           "desc_rdl", "desc_registers", "REGS_RDL"]

REGS_RDL = Path(__file__).with_name("regs.rdl")
STATS = ("mac_busy_lo_value", "mac_busy_hi_value", "compute_cycles_value")


def desc_layout(cfg) -> tuple:
    """``((register, field, lsb, width), ...)``: the layer descriptor's fields
    (:func:`gen.conv.descriptor_fields`, in their order) packed into the 32-bit registers
    ``DESC_0 ..`` from bit 0, a field that would cross a register boundary moved to the
    next register."""
    out, reg, at = [], 0, 0
    for name, width in descriptor_fields(cfg):
        if at + width > 32:
            reg, at = reg + 1, 0
        out.append((reg, name, at, width))
        at += width
    return tuple(out)


def desc_words(cfg) -> int:
    """32-bit registers holding the layer descriptor of ``cfg``."""
    return desc_layout(cfg)[-1][0] + 1


def desc_rdl(layout) -> str:
    """SystemRDL text of the descriptor registers ``DESC_k`` (one named field per
    descriptor field) for :func:`desc_layout` ``layout``."""
    lines = []
    for reg in range(layout[-1][0] + 1):
        fields = [(name, lsb, width) for r, name, lsb, width in layout if r == reg]
        lines.append("    reg {")
        lines.append(f'        name = "Layer descriptor {reg}";')
        lines.append('        desc = "Fields of the layer descriptor (gen.conv.descriptor, first '
                     'field in register 0); offered to the array at every start.";')
        for name, lsb, width in fields:
            # escaped: some names (w, h) are SystemRDL keywords
            lines.append(f"        field {{ sw = rw; hw = r; }} \\{name}"
                         f"[{lsb + width - 1}:{lsb}] = 0;")
        lines.append(f"    }} DESC_{reg} @ {0x100 + 4 * reg:#x};")
    return "\n".join(lines) + "\n"


@lru_cache(maxsize=None)
def _compiled(layout: tuple, requant: bool):
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "conv_desc.rdl").write_text(desc_rdl(layout))
        return compile_rdl(REGS_RDL, "spnn_conv", None, {"RQ": ""} if requant else None,
                           include_dirs=(tmp,))


def regmap_for(cfg):
    """The shell's register map for ``cfg`` (the descriptor registers ``DESC_k`` with its
    fields by name, :func:`desc_layout`; the requantisation registers ``RQ_*`` and
    ``JOB_INPUTS.b_en`` with ``rq_width`` > 0)."""
    return _compiled(desc_layout(cfg), bool(cfg.rq_width))


def desc_registers(cfg, values: dict) -> list:
    """``[[offset, value], ...]``: the ``DESC_k`` registers holding the descriptor field
    ``values`` (:func:`gen.conv.descriptor`)."""
    regmap, words = regmap_for(cfg), [0] * desc_words(cfg)
    for reg, name, lsb, width in desc_layout(cfg):
        words[reg] |= (int(values[name]) & ((1 << width) - 1)) << lsb
    return [[regmap.offset(f"DESC_{k}"), v] for k, v in enumerate(words)]


def shell_ports(cfg):
    """``(inputs, outputs)``: the shell's :class:`hdl.lib.axi_shell.AxisPort` s for ``cfg``."""
    w_port = (AxisPort("w", "w", cfg.weight_width, cfg.bus_words) if cfg.w_lanes == 1 else
              AxisPort("w", "w", cfg.weight_width, cfg.w_lanes, packed=False))
    bias = (AxisPort("b", "b", cfg.acc_width, cfg.bus_words),) if cfg.rq_width else ()
    return ((w_port,
             AxisPort("x", "x", cfg.data_width, cfg.bus_words)) + bias,
            (AxisPort("o", "o", cfg.rq_width or cfg.acc_width, cfg.bus_words),))


class ConvShell(AxiShell):
    """The MAC array behind AXI4-Stream and AXI4-Lite.

    Parameters
    ----------
    cfg : gen.conv.ConvConfig
        The array and ``bus_words`` (words per beat on every stream, 1..32).

    Attributes
    ----------
    aclk, aresetn : In(1)
        Clock; synchronous reset while low.
    s_axis_w_tdata, _tkeep, _tlast, _tvalid, _tready :
        The layer's weights (``weight_width`` codes, each word in ``ceil(weight_width / 8)``
        bytes), chunk by chunk ``Oc x icq x kh x kw`` in C order, ``bus_words`` per beat;
        with ``w_lanes`` > 1 one array beat of ``w_lanes`` weights per bus beat
        (:mod:`gen.conv.wstream`, every word kept); ``tlast`` on the layer's last.
    s_axis_x_tdata, _tkeep, _tlast, _tvalid, _tready :
        The layer's features (``data_width`` codes), chunk by chunk ``B x icq x H x W``;
        ``tlast`` on the layer's last.
    m_axis_o_tdata, _tkeep, _tlast, _tvalid, _tready :
        The exact sums (``acc_width`` codes, zero-padded to whole bytes), ``B x Oc x Ho x
        Wo`` in C order; ``tlast`` on the ``O_WORDS``-th.  With ``rq_width`` > 0 the sums
        requantised to ``rq_width`` bits (:class:`hdl.lib.requant.RequantStage`, ``RQ_*``
        registers; ``RQ_POSITIONS`` = ``Ho x Wo``, ``RQ_CHANNELS`` = ``Oc``).
    s_axis_b_tdata, _tkeep, _tlast, _tvalid, _tready :
        Only with ``rq_width`` > 0: the output stage's biases (``acc_width`` codes in the
        sums' fraction bits), ``RQ_CHANNELS`` words when ``JOB_INPUTS.b_en`` is set.
    s_axi_*, irq :
        Control (``hdl/conv/regs.rdl``: the descriptor ``DESC_k``, ``O_WORDS``, the layer's
        statistics ``MAC_BUSY_*`` and ``COMPUTE_CYCLES``) and its interrupt.
    """

    def __init__(self, cfg):
        self.cfg = cfg
        inputs, outputs = shell_ports(cfg)
        regmap = regmap_for(cfg)
        fields = tuple(f"desc_{reg}_{name}" for reg, name, _, _ in desc_layout(cfg))
        block, registers = ConvArray(cfg), (RegPort("c", fields, repeat="layers_count"),)
        if cfg.rq_width:
            block = RequantWrap(block, "o", cfg.acc_width, cfg.rq_width, depth=cfg.rq_depth)
            registers += (RegPort("rq", PARAM_FIELDS),)
        super().__init__(block, regmap, inputs, outputs, registers=registers,
                         sinks=(RegSink("s", STATS, repeat="layers_count",
                                        sums=(STAT_BUSY_BITS, 32)),))
