# SPDX-License-Identifier: Apache-2.0
"""AXI4-Lite: the bus signature and a register file generated from a register map.

The register map is described once in SystemRDL and compiled by
:func:`gen.core.regmap.compile_rdl`; :class:`AxiLiteRegisters` turns it into gateware, so the
hardware, the C header, the IP-XACT map and the docs cannot disagree.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["AxiLiteSignature", "AxiLiteRegisters", "hw_members", "OKAY", "SLVERR"]

OKAY, SLVERR = 0b00, 0b10
# registers per first-step read multiplexer (the read's middle step)
GROUP_BITS = 3
GROUP = 1 << GROUP_BITS


class AxiLiteSignature(wiring.Signature):
    """AXI4-Lite with 32-bit data, from the manager's side (``Out`` = driven by the
    manager); a subordinate takes ``In(AxiLiteSignature(addr_width))``.

    Members (AMBA AXI4-Lite names): ``awaddr`` (``addr_width``), ``awprot`` (3),
    ``awvalid``/``awready``; ``wdata`` (32), ``wstrb`` (4), ``wvalid``/``wready``;
    ``bresp`` (2), ``bvalid``/``bready``; ``araddr``, ``arprot``, ``arvalid``/``arready``;
    ``rdata`` (32), ``rresp`` (2), ``rvalid``/``rready``.
    """

    def __init__(self, addr_width: int):
        self.addr_width = addr_width
        super().__init__({
            "awaddr": Out(addr_width), "awprot": Out(3), "awvalid": Out(1), "awready": In(1),
            "wdata": Out(32), "wstrb": Out(4), "wvalid": Out(1), "wready": In(1),
            "bresp": In(2), "bvalid": In(1), "bready": Out(1),
            "araddr": Out(addr_width), "arprot": Out(3), "arvalid": Out(1), "arready": In(1),
            "rdata": In(32), "rresp": In(2), "rvalid": In(1), "rready": Out(1),
        })


def _port(reg, field) -> str:
    return f"{reg.name}_{field.name}".lower()


def hw_members(regmap) -> dict:
    """``{name: member}`` of the ``hw`` interface of :class:`AxiLiteRegisters`."""
    members = {}
    for reg in regmap.registers:
        for f in reg.fields:
            if f.kind == "status":
                members[_port(reg, f)] = In(f.width)
            elif f.kind == "pulse":
                members[_port(reg, f)] = Out(f.width)
            elif f.kind == "control":
                members[_port(reg, f)] = Out(f.width, init=f.reset)
            elif f.kind == "w1c":
                members[_port(reg, f)] = Out(f.width, init=f.reset)
                members[_port(reg, f) + "_set"] = In(f.width)
    return members


class AxiLiteRegisters(wiring.Component):
    """The AXI4-Lite subordinate holding a :class:`gen.core.regmap.RegMap`.

    Parameters
    ----------
    regmap : gen.core.regmap.RegMap
        The compiled register map (32-bit registers).

    Attributes
    ----------
    axi : In(AxiLiteSignature(regmap.addr_width))
        The bus.  A write needs its address and data beats (accepted independently, in
        either order, ``awready``/``wready`` high while none is held); it takes effect the
        clock after both are held and is answered on ``b`` the same clock (``bresp`` OKAY,
        SLVERR for an address outside the map).  A read is accepted while none is in
        flight and answered three clocks later on ``r`` with the value of the clock after
        its acceptance.  One
        write and one read may be in flight at once; ``awprot``/``arprot`` are ignored.
        Byte strobes apply to ``control`` fields; ``pulse`` and ``w1c`` fields act on the
        written 1 bits of strobed bytes.
    hw : Out(...)
        One member per field, named ``<register>_<field>`` in lower case: ``Out`` for
        ``control`` (the register) and ``pulse`` (high for the one clock after the write),
        ``In`` for ``status``; a ``w1c`` field has ``Out`` ``<name>`` (the sticky bit) and
        ``In`` ``<name>_set`` (set when high; a set wins over a clear in the same clock).
        ``const`` fields have no port.
    """

    def __init__(self, regmap):
        self.regmap = regmap
        super().__init__({"axi": In(AxiLiteSignature(regmap.addr_width)),
                          "hw": Out(wiring.Signature(hw_members(regmap)))})

    def _read_value(self, reg):
        parts, pos = [], 0
        for f in sorted(reg.fields, key=lambda f: f.lsb):
            if f.lsb > pos:
                parts.append(Const(0, f.lsb - pos))
            if f.kind == "const":
                parts.append(Const(f.reset, f.width))
            elif f.kind == "pulse":
                parts.append(Const(0, f.width))
            else:
                parts.append(getattr(self.hw, _port(reg, f)))
            pos = f.lsb + f.width
        if pos < 32:
            parts.append(Const(0, 32 - pos))
        return Cat(*parts)

    def _write(self, m, reg, data, strobe):
        """Field updates of a write of ``data`` with byte ``strobe`` to ``reg``."""
        bits = Cat(*(strobe[i // 8] for i in range(32)))        # per-bit write enable
        for f in reg.fields:
            port = getattr(self.hw, _port(reg, f), None)
            sl = slice(f.lsb, f.lsb + f.width)
            if f.kind == "control":
                m.d.sync += port.eq((port & ~bits[sl]) | (data[sl] & bits[sl]))
            elif f.kind == "pulse":
                m.d.sync += port.eq(data[sl] & bits[sl])
            elif f.kind == "w1c":
                setter = getattr(self.hw, _port(reg, f) + "_set")
                m.d.sync += port.eq((port & ~(data[sl] & bits[sl])) | setter)

    def elaborate(self, platform):
        m = Module()
        axi, regs = self.axi, self.regmap.registers
        word = slice(2, self.regmap.addr_width)
        for reg in regs:                                      # every clock, unless written
            for f in reg.fields:
                port = getattr(self.hw, _port(reg, f), None)
                if f.kind == "pulse":
                    m.d.sync += port.eq(0)
                if f.kind == "w1c":
                    setter = getattr(self.hw, _port(reg, f) + "_set")
                    m.d.sync += port.eq(port | setter)

        # write channel: hold one address and one data beat, then write and answer (the
        # held beats and the response code have no reset: they are read only while
        # aw_held, w_held or bvalid, which have one; the reset net stays short)
        aw_held, w_held = Signal(), Signal()
        aw_addr = Signal(self.regmap.addr_width, reset_less=True)
        w_data, w_strb = Signal(32, reset_less=True), Signal(4, reset_less=True)
        bresp = Signal(2, reset_less=True)
        m.d.comb += axi.bresp.eq(bresp)
        m.d.comb += [axi.awready.eq(~aw_held), axi.wready.eq(~w_held)]
        with m.If(axi.awvalid & axi.awready):
            m.d.sync += [aw_held.eq(1), aw_addr.eq(axi.awaddr)]
        with m.If(axi.wvalid & axi.wready):
            m.d.sync += [w_held.eq(1), w_data.eq(axi.wdata), w_strb.eq(axi.wstrb)]
        with m.If(axi.bvalid & axi.bready):
            m.d.sync += axi.bvalid.eq(0)
        with m.If(aw_held & w_held & (~axi.bvalid | axi.bready)):
            m.d.sync += [aw_held.eq(0), w_held.eq(0), axi.bvalid.eq(1), bresp.eq(SLVERR)]
            with m.Switch(aw_addr[word]):
                for reg in regs:
                    with m.Case(reg.offset >> 2):
                        m.d.sync += bresp.eq(OKAY)
                        self._write(m, reg, w_data, w_strb)

        self._read_channel(m, word)
        return m

    def _read_channel(self, m, word):
        """One read in flight, in three registered steps (clock rate: a map of many
        registers is a wide multiplexer spread over the design): the address, then per
        group of ``GROUP`` registers the addressed one's value, then the group's value on
        ``rdata`` with ``rvalid``.  Only ``step`` and ``rvalid`` have a reset: the address,
        the group values, ``hit`` and ``rdata``/``rresp`` are loaded before they are read."""
        axi, regs = self.axi, self.regmap.registers
        index = {reg.offset >> 2: reg for reg in regs}
        groups = max(index) // GROUP + 1
        rd_addr = Signal(self.regmap.addr_width - 2, reset_less=True)
        step = Signal(2)                          # 1: address held, 2: group values held
        values = [Signal(32, name=f"rd_group{g}", reset_less=True) for g in range(groups)]
        hit = Signal(reset_less=True)
        rdata, rresp = Signal(32, reset_less=True), Signal(2, reset_less=True)
        m.d.comb += [axi.rdata.eq(rdata), axi.rresp.eq(rresp)]
        m.d.comb += axi.arready.eq((step == 0) & ~axi.rvalid)
        with m.If(axi.rvalid & axi.rready):
            m.d.sync += axi.rvalid.eq(0)
        with m.If(axi.arvalid & axi.arready):
            m.d.sync += [rd_addr.eq(axi.araddr[word]), step.eq(1)]
        with m.If(step == 1):
            m.d.sync += [step.eq(2), hit.eq(0)]
            for g, value in enumerate(values):
                m.d.sync += value.eq(0)
                with m.Switch(rd_addr[:GROUP_BITS]):
                    for k in range(GROUP):
                        reg = index.get(g * GROUP + k)
                        if reg is not None:
                            with m.Case(k):
                                m.d.sync += value.eq(self._read_value(reg))
            with m.Switch(rd_addr):
                for at in index:
                    with m.Case(at):
                        m.d.sync += hit.eq(1)
        with m.If(step == 2):
            m.d.sync += [step.eq(0), axi.rvalid.eq(1), rresp.eq(Mux(hit, OKAY, SLVERR)),
                         rdata.eq(0)]
            with m.Switch(rd_addr[GROUP_BITS:]):
                for g, value in enumerate(values):
                    with m.Case(g):
                        m.d.sync += rdata.eq(Mux(hit, value, 0))
