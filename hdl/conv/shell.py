# SPDX-License-Identifier: Apache-2.0
"""The MAC array's accelerator shell: the layer descriptor and statistics in AXI4-Lite
registers, weights, features and sums over AXI4-Stream (``hdl/conv/regs.rdl``)."""

from functools import lru_cache
from pathlib import Path

from gen.conv import descriptor_fields
from gen.core.regmap import compile_rdl
from hdl.conv.array import ConvArray
from hdl.lib.axi_shell import AxiShell, AxisPort, RegPort, RegSink
from hdl.lib.requant import PARAM_FIELDS, RequantWrap

__all__ = ["ConvShell", "shell_ports", "regmap_for", "desc_words", "REGS_RDL"]

REGS_RDL = Path(__file__).with_name("regs.rdl")
STATS = ("mac_busy_lo_value", "mac_busy_hi_value", "compute_cycles_value")


def desc_words(cfg) -> int:
    """32-bit registers holding the layer descriptor of ``cfg``."""
    return -(-sum(width for _, width in descriptor_fields(cfg)) // 32)


@lru_cache(maxsize=None)
def _compiled(words: int, requant: bool):
    return compile_rdl(REGS_RDL, "spnn_conv", {"DESC_WORDS": words},
                       {"RQ": ""} if requant else None)


def regmap_for(cfg):
    """The shell's register map for ``cfg`` (``DESC_0 .. DESC_<n-1>`` sized to it; the
    requantisation registers ``RQ_*`` and ``JOB_INPUTS.b_en`` with ``rq_width`` > 0)."""
    return _compiled(desc_words(cfg), bool(cfg.rq_width))


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
        fields = tuple(f"desc_{k}_value" for k in range(desc_words(cfg)))
        block, registers = ConvArray(cfg), (RegPort("c", fields),)
        if cfg.rq_width:
            block = RequantWrap(block, "o", cfg.acc_width, cfg.rq_width, depth=cfg.rq_depth)
            registers += (RegPort("rq", PARAM_FIELDS),)
        super().__init__(block, regmap, inputs, outputs, registers=registers,
                         sinks=(RegSink("s", STATS),))
