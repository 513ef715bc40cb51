# SPDX-License-Identifier: Apache-2.0
"""The FC engine's accelerator shell: job sizes in AXI4-Lite registers, activations,
FD-CSR metadata and results over AXI4-Stream, the weight memory's requests and responses
as two unframed AXI4-Stream side channels (``hdl/fc/regs.rdl``)."""

from pathlib import Path

from amaranth.lib import data

from gen.core.regmap import compile_rdl
from hdl.fc.engine import FcEngine
from hdl.lib.axi_shell import AxiShell, AxisPort, RegPort
from hdl.lib.requant import PARAM_FIELDS, RequantWrap

__all__ = ["FcShell", "shell_ports", "regmap_for", "REGS_RDL", "REGMAP"]

REGS_RDL = Path(__file__).with_name("regs.rdl")
REGMAP = compile_rdl(REGS_RDL, "spnn_fc")
REGMAP_RQ = compile_rdl(REGS_RDL, "spnn_fc", defines={"RQ": ""})


def regmap_for(cfg):
    """The shell's register map (with the ``RQ_*`` registers and ``JOB_INPUTS.b_en`` when
    ``rq_width`` > 0)."""
    return REGMAP_RQ if cfg.rq_width else REGMAP


def shell_ports(cfg):
    """``(inputs, outputs)``: the shell's :class:`hdl.lib.axi_shell.AxisPort` s for ``cfg``."""
    meta = cfg.segs_per_beat * (cfg.row_width + cfg.addr_width)
    vaddr = cfg.addr_width + cfg.nz_per_clock.bit_length()
    rows = cfg.rows_per_beat
    yw = cfg.rq_width or cfg.acc_width
    x = (AxisPort("x", "x", cfg.x_fmt.width, cfg.batch, packed=False) if rows == 1 else
         AxisPort("x", "x", cfg.x_fmt.width, cfg.bus_words, group=cfg.batch))
    y = (AxisPort("y", "y", yw, cfg.batch, packed=False) if rows == 1 else
         AxisPort("y", "y", yw, cfg.bus_words, group=cfg.batch))
    bias = (AxisPort("b", "b", cfg.acc_width, max(1, cfg.bus_words)),) if cfg.rq_width else ()
    return ((x,
             AxisPort("meta", "meta", meta, 1, packed=False),
             AxisPort("vdata", "vdata", cfg.w_fmt.width, cfg.nz_per_clock, packed=False,
                      framed=False)) + bias,
            (AxisPort("vaddr", "vaddr", vaddr, 1, packed=False, framed=False),
             y))


class FcShell(AxiShell):
    """The FC engine behind AXI4-Stream and AXI4-Lite.

    Parameters
    ----------
    cfg : gen.fc.FcConfig

    Attributes
    ----------
    aclk, aresetn : In(1)
        Clock; synchronous reset while low.
    s_axis_x_tdata, _tkeep, _tlast, _tvalid, _tready :
        The rows of ``X`` (``batch`` words of ``x_fmt`` each, every word in whole bytes),
        ``rows_per_beat`` rows per beat (``max(1, bus_words / batch)``; ``tkeep`` marks the
        present rows of a partial last beat); ``cols`` rows, ``tlast`` on the last beat.
    s_axis_meta_tdata, ... :
        One FD-CSR metadata beat per transfer (masks then offsets, as the bare engine's
        ``meta`` payload, in whole bytes); ``tlast`` on the job's last.
    m_axis_vaddr_tdata, ... / s_axis_vdata_tdata, ... :
        The weight memory: read requests (``addr``, ``count``) and the responses in request
        order (``nz_per_clock`` values of ``w_fmt``); unframed side channels (``tlast``
        unused), open whenever the engine is.
    m_axis_y_tdata, ... :
        The rows of ``W @ X`` (``batch`` sums of ``acc_width`` bits each, zero-padded),
        ``rows_per_beat`` per beat; ``tlast`` on the beat with the ``Y_BEATS``-th row.
        With ``rq_width`` > 0 the sums requantised to ``rq_width`` bits
        (:class:`hdl.lib.requant.RequantStage`; one channel per row: ``RQ_POSITIONS`` 1,
        ``RQ_CHANNELS`` = rows).
    s_axis_b_tdata, ... :
        Only with ``rq_width`` > 0: the rows' biases (``acc_width`` codes in ``y_fmt``),
        ``bus_words`` per beat, ``RQ_CHANNELS`` words when ``JOB_INPUTS.b_en`` is set.
    s_axi_*, irq :
        Control (``hdl/fc/regs.rdl``: ``ROWS``, ``COLS`` replace the bare engine's ``cmd``
        stream) and its interrupt.
    """

    def __init__(self, cfg):
        self.cfg = cfg
        inputs, outputs = shell_ports(cfg)
        block, registers = FcEngine(cfg), (RegPort("cmd", ("rows_value", "cols_value")),)
        if cfg.rq_width:
            block = RequantWrap(block, "y", cfg.acc_width, cfg.rq_width, lanes=cfg.batch,
                                depth=cfg.rq_depth, array=True)
            registers += (RegPort("rq", PARAM_FIELDS),)
        super().__init__(block, regmap_for(cfg), inputs, outputs, registers=registers)
