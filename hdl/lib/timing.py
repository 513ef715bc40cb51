# SPDX-License-Identifier: Apache-2.0
"""The timing harness ``spnn synth`` places around a block for Fmax (docs/synth.md)."""

from amaranth.hdl import Cat, ClockSignal, Instance, Module, ResetSignal, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["TimingHarness"]


class TimingHarness(wiring.Component):
    """A Verilog module between serial shift chains, so that every path of the module is
    register to register and the design needs three pins whatever the module's ports.

    Parameters
    ----------
    module : str
        The wrapped module's name (instantiated as ``dut``).
    inputs, outputs : list of (str, int)
        Its other input and output ports, ``(name, width)``, in order.
    clock, reset : str
        Its clock and synchronous reset ports (``clk``, ``rst``; an accelerator shell's
        ``aclk``, ``aresetn``).
    reset_low : bool
        The reset is active low (``aresetn``).

    Attributes
    ----------
    si : In(1)
        Serial input: shifted through one chain of ``sum(input widths)`` flip-flops that
        drives every input bit of the module.
    load : In(1)
        Registered; high captures every output bit of the module into the output chain.
    so : Out(1)
        Serial output: the output chain's last bit, registered.

    The module's reset is the harness's reset through one register; its clock is the
    harness's clock.
    """

    si: In(1)
    load: In(1)
    so: Out(1)

    def __init__(self, module: str, inputs, outputs, clock="clk", reset="rst", reset_low=False):
        self._module = module
        self._clock, self._reset, self._reset_low = clock, reset, reset_low
        self._inputs = list(inputs)
        self._outputs = list(outputs)
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        rst_q = Signal(reset_less=True)
        m.d.sync += rst_q.eq(~ResetSignal() if self._reset_low else ResetSignal())
        kwargs = {f"i_{self._clock}": ClockSignal(), f"i_{self._reset}": rst_q}
        n_in = sum(w for _, w in self._inputs)
        n_out = sum(w for _, w in self._outputs)
        if n_in:
            chain = Signal(n_in, reset_less=True)
            si = Signal(reset_less=True)
            m.d.sync += [si.eq(self.si), chain.eq(Cat(si, chain[:-1]))]
            pos = 0
            for name, width in self._inputs:
                kwargs[f"i_{name}"] = chain[pos:pos + width]
                pos += width
        outs = []
        for name, width in self._outputs:
            sig = Signal(width, name=f"dut_{name}")
            kwargs[f"o_{name}"] = sig
            outs.append(sig)
        load = Signal(reset_less=True)
        m.d.sync += load.eq(self.load)
        capture = Signal(max(n_out, 1), reset_less=True)
        with m.If(load):
            m.d.sync += capture.eq(Cat(*outs) if outs else 0)
        with m.Else():
            m.d.sync += capture.eq(capture >> 1)
        so = Signal(reset_less=True)
        m.d.sync += so.eq(capture[0])
        m.d.comb += self.so.eq(so)
        m.submodules.dut = Instance(self._module, **kwargs)
        return m
