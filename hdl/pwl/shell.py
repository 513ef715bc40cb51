# SPDX-License-Identifier: Apache-2.0
"""The PWL unit's accelerator shell: AXI4-Stream at bus width, AXI4-Lite control."""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from gen.pwl import fit_table
from hdl.lib.axil import AxiLiteSignature
from hdl.lib.axis import AxisSignature
from hdl.lib.fifo import Queue
from hdl.lib.shell import CONTROL_MAP, JobControl, clock_from_ports, connect_flat, flat_members
from hdl.pwl.unit import PwlUnit

__all__ = ["PwlShell"]


class PwlShell(wiring.Component):
    """``bus_words`` PWL units side by side behind AXI4-Stream and AXI4-Lite.

    Parameters
    ----------
    cfg : gen.pwl.PwlConfig
        The unit (function, formats, segments) and ``bus_words``, the words per beat:
        1..32 (16..512-bit ``TDATA`` for 16-bit words), one unit per word.

    Attributes
    ----------
    aclk, aresetn : In(1)
        Clock; synchronous reset while low.
    s_axis_x_tdata, _tkeep, _tlast, _tvalid, _tready :
        Input codes (``in_fmt``, each word in its own ``ceil(width / 8)`` bytes, word ``k``
        in bits ``16k..``), ``bus_words`` per beat; ``tkeep`` marks the present words (a
        packet's last beat may be partial); ``tlast`` ends the job's packet.  Beats are
        taken only during a job, at one beat per clock while ``m_axis_y`` is not
        back-pressured.
    m_axis_y_tdata, _tkeep, _tlast, _tvalid, _tready :
        Results (``out_fmt``), beat for beat: the same lanes kept, ``tlast`` on the
        result of the input's ``tlast`` beat.  Latency ``cfg.latency`` clocks.
    s_axi_* :
        AXI4-Lite control (``hdl/lib/control.rdl``): write ``CTRL.start``, stream one
        packet, then ``STATUS.done`` (and ``IRQ_STATUS.done``) is set.  ``BUSY`` counts
        the clocks an input beat was taken, ``STALL_IN`` the clocks the shell could take
        one and none was offered (until the input ``tlast``), ``STALL_OUT`` the clocks
        ``m_axis_y`` was back-pressured; ``CYCLES`` runs from the clock after the start
        write to the output ``tlast`` beat.
    irq : Out(1)
        Level interrupt: ``IRQ_STATUS.done & IRQ_ENABLE.done``.
    """

    def __init__(self, cfg):
        bus_words = cfg.bus_words
        self.cfg, self.bus_words = cfg, bus_words
        self.regmap = CONTROL_MAP
        self.table = fit_table(cfg)
        self.x_sig = AxisSignature(cfg.in_fmt.width, bus_words)
        self.y_sig = AxisSignature(cfg.out_fmt.width, bus_words)
        super().__init__({
            "aclk": In(1), "aresetn": In(1),
            **flat_members("s_axis_x", self.x_sig, In),
            **flat_members("m_axis_y", self.y_sig, Out),
            **flat_members("s_axi", AxiLiteSignature(CONTROL_MAP.addr_width), In),
            "irq": Out(1),
        })

    @property
    def latency(self) -> int:
        return self.table.config.latency

    def elaborate(self, platform):
        m = Module()
        clock_from_ports(m, self)
        n, cfg = self.bus_words, self.cfg
        m.submodules.ctl = ctl = JobControl(self.regmap)
        connect_flat(m, self, "s_axi", ctl.axi)
        units = [PwlUnit(self.table) for _ in range(n)]
        for k, unit in enumerate(units):
            m.submodules[f"unit{k}"] = unit
        # keep and last of each beat in flight, in order beside the (in-order) pipelines
        side = data.StructLayout({"keep": n, "last": 1})
        m.submodules.side = side_q = Queue(side, self.latency + 2)

        in_done = Signal()                   # the job's input tlast has been taken
        lead = units[0]
        take = Signal()
        kb_in = self.x_sig.lane_bits // 8
        can = ctl.busy & ~in_done & lead.i.ready & side_q.i.ready
        m.d.comb += [
            self.s_axis_x_tready.eq(can),
            take.eq(can & self.s_axis_x_tvalid),
            side_q.i.valid.eq(take),
            side_q.i.p.keep.eq(Cat(self.s_axis_x_tkeep[k * kb_in] for k in range(n))),
            side_q.i.p.last.eq(self.s_axis_x_tlast),
        ]
        lane_in, lane_out = self.x_sig.lane_bits, self.y_sig.lane_bits
        kb_out = self.y_sig.lane_bits // 8
        for k, unit in enumerate(units):
            m.d.comb += [
                unit.i.valid.eq(take),
                unit.i.payload.eq(self.s_axis_x_tdata.word_select(k, lane_in)[:cfg.in_fmt.width]),
                unit.o.ready.eq(self.m_axis_y_tready),
                self.m_axis_y_tdata.word_select(k, lane_out).eq(unit.o.payload.as_unsigned()),
                self.m_axis_y_tkeep[k * kb_out:(k + 1) * kb_out].eq(
                    Cat(side_q.o.p.keep[k] for _ in range(kb_out))),
            ]
        out = self.m_axis_y_tvalid & self.m_axis_y_tready
        m.d.comb += [
            self.m_axis_y_tvalid.eq(lead.o.valid),
            self.m_axis_y_tlast.eq(side_q.o.p.last),
            side_q.o.ready.eq(out),
            ctl.end.eq(out & side_q.o.p.last),
            ctl.took_input.eq(take),
            ctl.stall_in.eq(self.s_axis_x_tready & ~self.s_axis_x_tvalid),
            ctl.stall_out.eq(self.m_axis_y_tvalid & ~self.m_axis_y_tready),
            self.irq.eq(ctl.irq),
        ]
        with m.If(take & self.s_axis_x_tlast):
            m.d.sync += in_done.eq(1)
        with m.If(ctl.start):
            m.d.sync += in_done.eq(0)
        return m
