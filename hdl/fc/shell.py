# SPDX-License-Identifier: Apache-2.0
"""The FC engine's accelerator shell: job sizes in AXI4-Lite registers, activations,
FD-CSR metadata and results over AXI4-Stream, the weight memory's requests and responses
as two unframed AXI4-Stream side channels (``hdl/fc/regs.rdl``)."""

from pathlib import Path

from amaranth.lib import data

from gen.core.regmap import compile_rdl
from hdl.fc.engine import FcEngine
from hdl.lib.axi_shell import AxiShell, AxisPort, RegPort

__all__ = ["FcShell", "shell_ports", "REGS_RDL", "REGMAP"]

REGS_RDL = Path(__file__).with_name("regs.rdl")
REGMAP = compile_rdl(REGS_RDL, "spnn_fc")


def shell_ports(cfg):
    """``(inputs, outputs)``: the shell's :class:`hdl.lib.axi_shell.AxisPort` s for ``cfg``."""
    meta = cfg.segs_per_beat * (cfg.row_width + cfg.addr_width)
    vaddr = cfg.addr_width + cfg.nz_per_clock.bit_length()
    rows = cfg.rows_per_beat
    x = (AxisPort("x", "x", cfg.x_fmt.width, cfg.batch, packed=False) if rows == 1 else
         AxisPort("x", "x", cfg.x_fmt.width, cfg.bus_words, group=cfg.batch))
    y = (AxisPort("y", "y", cfg.acc_width, cfg.batch, packed=False) if rows == 1 else
         AxisPort("y", "y", cfg.acc_width, cfg.bus_words, group=cfg.batch))
    return ((x,
             AxisPort("meta", "meta", meta, 1, packed=False),
             AxisPort("vdata", "vdata", cfg.w_fmt.width, cfg.nz_per_clock, packed=False,
                      framed=False)),
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
    s_axi_*, irq :
        Control (``hdl/fc/regs.rdl``: ``ROWS``, ``COLS`` replace the bare engine's ``cmd``
        stream) and its interrupt.
    """

    def __init__(self, cfg):
        self.cfg = cfg
        inputs, outputs = shell_ports(cfg)
        super().__init__(FcEngine(cfg), REGMAP, inputs, outputs,
                         registers=(RegPort("cmd", ("rows_value", "cols_value")),))
