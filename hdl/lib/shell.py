# SPDX-License-Identifier: Apache-2.0
"""What every accelerator shell shares: flat AXI port names, ``aclk``/``aresetn``, and the
job control block behind the AXI4-Lite control registers (``hdl/lib/control.rdl``).

A shell is the top level a Vivado block design instantiates: its ports carry the names
Vivado infers interfaces from (``s_axis_<name>_tdata``, ``m_axis_<name>_tvalid``,
``s_axi_awaddr``, one ``aclk``, active-low ``aresetn``), so its members are flat:
:func:`flat_members` spells an interface's members out under a prefix, and
:func:`connect_flat` joins them to the interface of a sub-component.
"""

from amaranth.hdl import ClockDomain, ClockSignal, Module, ResetSignal, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from gen.core.regmap import compile_rdl
from hdl.lib.axil import AxiLiteRegisters, AxiLiteSignature, hw_members

__all__ = ["flat_members", "connect_flat", "clock_from_ports", "JobControl", "CONTROL_MAP"]

CONTROL_MAP = compile_rdl()


def flat_members(prefix: str, signature: wiring.Signature, flow=In) -> dict:
    """``{f"{prefix}_{name}": member}`` for a signature of plain ports, seen from the side
    that ``flow`` gives (``In``: the shell receives the interface, e.g. an AXI subordinate
    or stream receiver; ``Out``: it drives it)."""
    out = {}
    for name, member in signature.members.items():
        sig_flow = member.flow if flow is Out else member.flow.flip()
        out[f"{prefix}_{name}"] = sig_flow(member.shape, init=member.init)
    return out


def connect_flat(m, shell, prefix: str, iface):
    """Join the shell's flat ports ``<prefix>_<name>`` to ``iface`` (a sub-component's
    interface facing the same way, e.g. its ``In(AxisSignature)`` member)."""
    for name, member in iface.signature.members.items():
        port, inner = getattr(shell, f"{prefix}_{name}"), getattr(iface, name)
        if member.flow == In:
            m.d.comb += inner.eq(port)
        else:
            m.d.comb += port.eq(inner)


def clock_from_ports(m, shell):
    """The ``sync`` domain of the shell and everything in it: clock ``aclk``, synchronous
    reset while ``aresetn`` is low."""
    m.domains.sync = ClockDomain("sync", local=True)
    m.d.comb += [ClockSignal("sync").eq(shell.aclk), ResetSignal("sync").eq(~shell.aresetn)]


class JobControl(wiring.Component):
    """The control registers and the job they start and measure.

    Parameters
    ----------
    regmap : gen.core.regmap.RegMap
        The shell's register map: ``hdl/lib/control_regs.rdl``'s registers (the default map
        holds only those) and the block's job registers after them.

    Attributes
    ----------
    axi : In(AxiLiteSignature(regmap.addr_width))
        The AXI4-Lite control port.
    start : Out(1)
        One clock high when software writes ``CTRL.start``; the job begins (``busy``) the
        clock after.
    busy : Out(1)
        From the clock after ``start`` to the clock after ``end``.
    end : In(1)
        The job's last transfer (e.g. the output beat with ``tlast``).
    took_input, stall_in, stall_out : In(1)
        Counted while ``busy``: a clock the block took input (``BUSY``), waited for an
        input beat it could take (``STALL_IN``), was back-pressured on an output
        (``STALL_OUT``).
    irq : Out(1)
        ``IRQ_STATUS.done & IRQ_ENABLE.done`` (level).
    job : Out(...)
        Present when the map has registers beyond the control ones: their fields, named and
        directed as :class:`hdl.lib.axil.AxiLiteRegisters`' ``hw`` members.

    ``CYCLES`` counts the clocks of ``busy``; every counter is 64 bits (``*_LO``/``*_HI``),
    cleared by ``start`` and held after ``end`` until the next ``start``.  ``BUSY``,
    ``STALL_IN`` and ``STALL_OUT`` count their event one clock after it (a registered
    event), so they hold their final value from the second clock after ``end``.
    ``STATUS.done`` is set by ``end`` and cleared by ``start``; ``IRQ_STATUS.done`` is set
    by ``end``.
    """

    def __init__(self, regmap=CONTROL_MAP):
        self.regmap = regmap
        self.regs = AxiLiteRegisters(regmap)
        own = set(hw_members(CONTROL_MAP))
        hw = self.regs.signature.members["hw"].signature.members
        self.job_fields = [name for name in hw if name not in own]
        members = {
            "axi": In(AxiLiteSignature(regmap.addr_width)),
            "start": Out(1), "busy": Out(1), "end": In(1),
            "took_input": In(1), "stall_in": In(1), "stall_out": In(1),
            "irq": Out(1),
        }
        if self.job_fields:
            members["job"] = Out(wiring.Signature({name: hw[name] for name in self.job_fields}))
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        m.submodules.regs = regs = self.regs
        wiring.connect(m, wiring.flipped(self.axi), regs.axi)
        hw = regs.hw
        for name in self.job_fields:
            inner, outer = getattr(hw, name), getattr(self.job, name)
            flow = self.signature.members["job"].signature.members[name].flow
            m.d.comb += (outer.eq(inner) if flow == Out else inner.eq(outer))
        done = Signal()
        counters = {name: Signal(64, name=f"count_{name}")
                    for name in ("cycles", "busy", "stall_in", "stall_out")}
        m.d.comb += [self.start.eq(hw.ctrl_start), hw.status_busy.eq(self.busy),
                     hw.status_done.eq(done), hw.irq_status_done_set.eq(self.end & self.busy),
                     self.irq.eq(hw.irq_status_done & hw.irq_enable_done)]
        for name, counter in counters.items():
            reg = name.upper()
            m.d.comb += [getattr(hw, f"{reg.lower()}_lo_value").eq(counter[:32]),
                         getattr(hw, f"{reg.lower()}_hi_value").eq(counter[32:])]
        with m.If(self.busy):
            m.d.sync += counters["cycles"].eq(counters["cycles"] + 1)
            with m.If(self.end):
                m.d.sync += [self.busy.eq(0), done.eq(1)]
        # the events come from the block's and the buses' handshakes (deep logic): each is
        # registered, and its counter counts it a clock later, so no 64-bit counter's
        # enable waits for them (the counts after a job are the same: software reads them
        # no earlier than two clocks after the end)
        for name, cond in (("busy", self.took_input), ("stall_in", self.stall_in),
                           ("stall_out", self.stall_out)):
            event = Signal(name=f"event_{name}")
            m.d.sync += event.eq(self.busy & cond & ~self.start)
            with m.If(event):
                m.d.sync += counters[name].eq(counters[name] + 1)
        with m.If(self.start):
            m.d.sync += [self.busy.eq(1), done.eq(0)] + [c.eq(0) for c in counters.values()]
        return m
