# SPDX-License-Identifier: Apache-2.0
"""The LSTM engine's accelerator shell: AXI4-Stream weights, sequences and hidden states,
AXI4-Lite job control (``hdl/lstm/regs.rdl``)."""

from pathlib import Path

from amaranth.lib import data

from gen.core.regmap import compile_rdl
from hdl.lib.axi_shell import AxiShell, AxisPort, RegPort
from hdl.lib.requant import PARAM_FIELDS, RequantWrap
from hdl.lstm.engine import LstmEngine, word_layout, x_layout

__all__ = ["LstmShell", "shell_ports", "regmap_for", "REGS_RDL", "REGMAP"]

REGS_RDL = Path(__file__).with_name("regs.rdl")
REGMAP = compile_rdl(REGS_RDL, "spnn_lstm")
REGMAP_RQ = compile_rdl(REGS_RDL, "spnn_lstm", defines={"RQ": ""})


def regmap_for(cfg):
    """The shell's register map (with the ``RQ_*`` registers and ``JOB_INPUTS.b_en`` when
    ``rq_width`` > 0)."""
    return REGMAP_RQ if cfg.rq_width else REGMAP


def shell_ports(cfg):
    """``(inputs, outputs)``: the shell's :class:`hdl.lib.axi_shell.AxisPort` s for ``cfg``."""
    w_bits = data.Layout.cast(word_layout(cfg)).size
    x_bits = data.Layout.cast(x_layout(cfg)).size
    w_port = (AxisPort("w", "w", w_bits, cfg.bus_words) if cfg.w_lanes == 1 else
              AxisPort("w", "w", w_bits, cfg.w_lanes, packed=False))
    bias = (AxisPort("b", "b", cfg.x_fmt.width, cfg.bus_words),) if cfg.rq_width else ()
    return ((w_port, AxisPort("x", "x", x_bits, cfg.bus_words)) + bias,
            (AxisPort("o", "h", cfg.rq_width or cfg.x_fmt.width, cfg.bus_words),))


class LstmShell(AxiShell):
    """The LSTM engine behind AXI4-Stream and AXI4-Lite.

    Parameters
    ----------
    cfg : gen.lstm.LstmConfig
        The engine and ``bus_words`` (words per beat on every stream, 1..32).

    Attributes
    ----------
    aclk, aresetn : In(1)
        Clock; synchronous reset while low.
    s_axis_w_tdata, _tkeep, _tlast, _tvalid, _tready :
        Weight-stream words (:func:`gen.lstm.weight_words`: ROW*, BIAS*, (ENTRY* COL)*, END),
        ``bus_words`` per beat, each in ``ceil(w_bits / 8)`` bytes; once after reset, in a
        job of its own or with the first sequences; ``tlast`` on the END word.  With
        ``w_lanes`` > 1: one engine beat of ``w_lanes`` words per bus beat
        (:func:`gen.lstm.weight_beats`, every word kept), ``tlast`` on the END beat.
    s_axis_x_tdata, _tkeep, _tlast, _tvalid, _tready :
        Sequence words (:func:`gen.lstm.seq_words`: per sequence H x H0, H x C0, T*X x X),
        ``bus_words`` per beat; ``tlast`` on the job's last word.
    m_axis_h_tdata, _tkeep, _tlast, _tvalid, _tready :
        ``h_t`` (``x_fmt`` codes, zero-padded to whole bytes), H per step in unit order,
        ``bus_words`` per beat; ``tlast`` on the ``H_WORDS``-th word.  With ``rq_width`` > 0
        requantised to ``rq_width`` bits (:class:`hdl.lib.requant.RequantStage`; one bias
        per hidden unit: ``RQ_POSITIONS`` 1, ``RQ_CHANNELS`` = H).
    s_axis_b_tdata, ... :
        Only with ``rq_width`` > 0: one bias per hidden unit (``x_fmt`` codes),
        ``RQ_CHANNELS`` words when ``JOB_INPUTS.b_en`` is set.
    s_axi_*, irq :
        Control (``hdl/lstm/regs.rdl``, :mod:`hdl.lib.axi_shell`) and its interrupt.
    """

    def __init__(self, cfg):
        self.cfg = cfg
        inputs, outputs = shell_ports(cfg)
        block, registers = LstmEngine(cfg), ()
        if cfg.rq_width:
            block = RequantWrap(block, "o", cfg.x_fmt.width, cfg.rq_width, depth=cfg.rq_depth)
            registers = (RegPort("rq", PARAM_FIELDS),)
        super().__init__(block, regmap_for(cfg), inputs, outputs, registers=registers)
