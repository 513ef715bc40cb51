# SPDX-License-Identifier: Apache-2.0
"""The SpMV engine's accelerator shell: AXI4-Stream weights, activations and results,
AXI4-Lite job control (``hdl/spmv/regs.rdl``)."""

from pathlib import Path

from gen.core.regmap import compile_rdl
from hdl.lib.axi_shell import AxiShell, AxisPort, RegPort
from hdl.lib.requant import PARAM_FIELDS, RequantWrap
from hdl.spmv.engine import SpmvEngine

__all__ = ["SpmvShell", "shell_ports", "regmap_for", "REGS_RDL", "REGMAP"]

REGS_RDL = Path(__file__).with_name("regs.rdl")
REGMAP = compile_rdl(REGS_RDL, "spnn_spmv")
REGMAP_RQ = compile_rdl(REGS_RDL, "spnn_spmv", defines={"RQ": ""})


def regmap_for(cfg):
    """The shell's register map (with the ``RQ_*`` registers and ``JOB_INPUTS.b_en`` when
    ``rq_width`` > 0)."""
    return REGMAP_RQ if cfg.rq_width else REGMAP


def shell_ports(cfg):
    """``(inputs, outputs)``: the shell's :class:`hdl.lib.axi_shell.AxisPort` s for ``cfg``."""
    bias = ((AxisPort("b", "b", cfg.out_fmt.width, cfg.bus_words),) if cfg.rq_width else ())
    return ((AxisPort("w", "w", cfg.word_width, cfg.w_lanes, packed=False),
             AxisPort("x", "x", cfg.x_fmt.width, cfg.bus_words)) + bias,
            (AxisPort("o", "y", cfg.rq_width or cfg.out_fmt.width, cfg.bus_words)
             if cfg.drain_lanes == 1
             else AxisPort("o", "y", cfg.out_fmt.width, cfg.drain_lanes, packed=False,
                           partial=True),))


class SpmvShell(AxiShell):
    """The SpMV engine behind AXI4-Stream and AXI4-Lite.

    Parameters
    ----------
    cfg : gen.spmv.SpmvConfig
        The engine and ``bus_words`` (activation and result words per beat, 1..32).

    Attributes
    ----------
    aclk, aresetn : In(1)
        Clock; synchronous reset while low.
    s_axis_w_tdata, _tkeep, _tlast, _tvalid, _tready :
        Weight beats (:func:`gen.spmv.weight_beats`): one beat of ``w_lanes`` words per
        transfer, word ``k`` (``word_width`` bits) in its own ``ceil(word_width / 8)``
        bytes; every beat full; ``tlast`` on the job's last beat (its last END beat).
    s_axis_x_tdata, _tkeep, _tlast, _tvalid, _tready :
        Activations (``x_fmt``), ``bus_words`` per beat, the job's blocks' columns in the
        order of :func:`gen.spmv.tile_jobs`; ``tlast`` on the last.
    m_axis_y_tdata, _tkeep, _tlast, _tvalid, _tready :
        Results (``out_fmt``, zero-padded to whole bytes), block row by block row in row
        order, ``bus_words`` per beat (``drain_lanes`` 1), or one drain transfer of
        ``drain_lanes`` rows per beat (``tkeep`` marks the rows present: a block row's last
        beat may be partial); ``tlast`` on the beat with the ``Y_WORDS``-th word.  With
        ``rq_width`` > 0 the results requantised to ``rq_width`` bits
        (:class:`hdl.lib.requant.RequantStage`; one bias per row: ``RQ_POSITIONS`` 1,
        ``RQ_CHANNELS`` = the rows).
    s_axis_b_tdata, ... :
        Only with ``rq_width`` > 0: one bias per row (``out_fmt`` codes), ``bus_words`` per
        beat, ``RQ_CHANNELS`` words when ``JOB_INPUTS.b_en`` is set.
    s_axi_*, irq :
        Control (``hdl/spmv/regs.rdl``, :mod:`hdl.lib.axi_shell`) and its interrupt.
    """

    def __init__(self, cfg):
        self.cfg = cfg
        inputs, outputs = shell_ports(cfg)
        block, registers = SpmvEngine(cfg), ()
        if cfg.rq_width:
            block = RequantWrap(block, "o", cfg.out_fmt.width, cfg.rq_width,
                                depth=cfg.rq_depth)
            registers = (RegPort("rq", PARAM_FIELDS),)
        super().__init__(block, regmap_for(cfg), inputs, outputs, registers=registers)
