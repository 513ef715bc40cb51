# SPDX-License-Identifier: Apache-2.0
"""The accelerator shell of a stream block: its valid/ready streams behind AXI4-Stream ports
at bus width, its jobs started and measured over AXI4-Lite.

A block's shell (``hdl/<block>/shell.py``) is an :class:`AxiShell` built from the block's
config: the block component, its register map (``hdl/<block>/regs.rdl``: the control
registers of ``hdl/lib/control_regs.rdl`` and the job registers below) and one
:class:`AxisPort` per stream.

Job registers (the block's map names them; the shell finds them by name):

* ``JOB_INPUTS`` (``0x40``): one ``control`` field ``<port>_en`` per input port, reset 1.
  A job takes exactly one packet (up to its ``tlast`` beat) on each enabled input port and
  nothing on the others.
* ``<PORT>_WORDS`` (field ``count``, 32 bits): the words a job delivers on a packed output
  port (``<PORT>_BEATS`` on a direct or grouped one: its transfers); the shell sets
  ``tlast`` on the beat holding the ``count``-th.  0: the port sends nothing in this job.
* Descriptor registers (:class:`RegPort`): written before the start, offered to the block
  as one transfer at every start.
* Result registers (:class:`RegSink`): a block output with one transfer per job (e.g. its
  statistics), readable after the job.

Unframed ports (``AxisPort(framed=False)``, e.g. a weight memory's request and response
streams) are open whenever the block is and take no part in a job's framing.

A job starts when software writes ``CTRL.start`` and ends (``STATUS.done``,
``IRQ_STATUS.done``) in the clock in which its last event happens: every enabled input's
``tlast`` word has entered the block (counted from the clock after it entered) and every
counted output's ``tlast`` beat has left the shell.  The counters
(``hdl.lib.shell.JobControl``): ``BUSY`` counts the clocks with a transfer on any of the
block's own streams, ``STALL_IN`` the clocks some open input port was ready and not offered
a beat, ``STALL_OUT`` the clocks some output port offered a beat that was not taken.
"""

from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, signed
from amaranth.lib import wiring
from amaranth.lib.data import StructLayout
from amaranth.lib.wiring import In, Out

from hdl.lib.axil import AxiLiteSignature
from hdl.lib.axis import AxisSignature, AxisToWords, WordsToAxis
from hdl.lib.shell import JobControl, clock_from_ports, connect_flat, flat_members
from hdl.lib.skid import SkidBuffer

__all__ = ["AxisPort", "RegPort", "RegSink", "AxiShell"]


@dataclass(frozen=True)
class AxisPort:
    """One AXI4-Stream port of a shell.

    Parameters
    ----------
    inner : str
        The block's stream member (e.g. ``"x"``).
    name : str
        The bus name: ports ``s_axis_<name>_*`` (input) or ``m_axis_<name>_*`` (output).
    word_width : int
        Bits of one word; on the bus each word sits in ``ceil(word_width / 8)`` bytes
        (unsigned, zero-padded).
    words : int
        Words per beat.
    packed : bool
        True: a beat carries up to ``words`` of the block's transfers, one word each
        (``tkeep`` marks the present words; a packet's last beat may be partial; the block
        still takes one word per clock).  False: a beat is one transfer whose payload is
        ``words`` words (word ``k`` = payload bits ``k * word_width ..``), every word kept;
        an input beat passes a two-entry skid buffer (:class:`hdl.lib.skid.SkidBuffer`,
        one clock) on its way to the block.
    framed : bool
        True: part of the job (an input takes one packet per job, an output is counted and
        ends with ``tlast``).  False: a side channel open whenever the block is (e.g. a
        memory's requests and responses): never gated, never counted, ``tlast`` low.
    group : int
        Packed ports only: words per block transfer (e.g. a row of ``batch`` words); a beat
        carries up to ``words / group`` transfers (``words`` a multiple of ``group``),
        ``tkeep`` marks the present ones, each word still in its own lane.  An output port
        with ``group > 1`` is counted in transfers (``<PORT>_BEATS``).
    partial : bool
        Direct output ports only: the block's payload is ``{data: words words, n: words
        present}`` (a prefix, ``n <= words``; e.g. a drain of several rows per clock whose
        last transfer is short): ``tkeep`` marks the first ``n`` words, the port is counted
        in words (``<PORT>_WORDS`` as at the job's start) and ``tlast`` rides on the
        transfer holding the count-th.
    """

    inner: str
    name: str
    word_width: int
    words: int
    packed: bool = True
    framed: bool = True
    group: int = 1
    partial: bool = False

    def __post_init__(self):
        if self.group < 1 or self.words % self.group or (self.group > 1 and not self.packed):
            raise ValueError(f"{self.name}: a group of {self.group} words needs a packed port "
                             f"whose {self.words} words per beat it divides")
        if self.partial and self.packed:
            raise ValueError(f"{self.name}: a partial port is a direct (packed=False) one")

    @property
    def signature(self) -> AxisSignature:
        return AxisSignature(self.word_width, self.words)

    @property
    def word_bytes(self) -> int:
        return (self.word_width + 7) // 8


@dataclass(frozen=True)
class RegPort:
    """A block stream fed from job registers: at every start the shell offers one
    transfer whose payload is the ``fields`` (``hw`` member names of the register map,
    e.g. ``"rows_count"``) concatenated, the first in the LSBs, cut to the payload width;
    the job cannot end before the block has taken it.  The payload is the fields as they
    were the clock before (registered every clock): they must not change during a job.
    With ``repeat`` (the ``hw`` member of a count register, e.g. ``"layers_count"``) the
    same payload is offered that many times per job (0 counts as 1): the block runs as
    many jobs of its own back to back."""

    inner: str
    fields: tuple
    repeat: str = None


@dataclass(frozen=True)
class RegSink:
    """A block output stream read into status registers: the shell always takes it and
    latches each transfer's payload into the ``fields`` (``hw`` status members, the first
    from the payload's LSBs); a job ends only after one transfer, or after as many as the
    count register ``repeat`` says (0 counts as 1; as :class:`RegPort`).  With ``sums``
    (bit widths cutting the payload into numbers, from the LSBs) the numbers of a job's
    transfers are added up instead (the registers read 0 from the start to the first)."""

    inner: str
    fields: tuple
    repeat: str = None
    sums: tuple = None


class AxiShell(wiring.Component):
    """A block behind AXI4-Stream data ports and an AXI4-Lite control port.

    Parameters
    ----------
    inner : wiring.Component
        The block (its streams are ``stream.Signature`` members in the ``sync`` domain).
    regmap : gen.core.regmap.RegMap
        The shell's register map (see the module docstring for the job registers).
    inputs, outputs : sequence of AxisPort
    registers : sequence of RegPort
        Block streams fed from the job registers (a descriptor).
    sinks : sequence of RegSink
        Block output streams read into status registers (e.g. per-job statistics).

    Attributes
    ----------
    aclk, aresetn : In(1)
        Clock; synchronous reset of the shell and the block while ``aresetn`` is low.
    s_axis_<name>_tdata, _tkeep, _tlast, _tvalid, _tready :
        One AXI4-Stream receiver per input port; ``tready`` is low outside a job, on ports
        the job does not enable and after the port's ``tlast`` beat.
    m_axis_<name>_tdata, _tkeep, _tlast, _tvalid, _tready :
        One AXI4-Stream transmitter per output port; ``tlast`` on the beat with the job's
        last word (``<NAME>_WORDS``).
    s_axi_* :
        AXI4-Lite control (``regmap``).
    irq : Out(1)
        Level interrupt: ``IRQ_STATUS.done & IRQ_ENABLE.done``.
    """

    def __init__(self, inner, regmap, inputs, outputs, registers=(), sinks=()):
        self.inner, self.regmap = inner, regmap
        self.inputs, self.outputs = tuple(inputs), tuple(outputs)
        self.registers, self.sinks = tuple(registers), tuple(sinks)
        members = {"aclk": In(1), "aresetn": In(1)}
        for port in self.inputs:
            members.update(flat_members(f"s_axis_{port.name}", port.signature, In))
        for port in self.outputs:
            members.update(flat_members(f"m_axis_{port.name}", port.signature, Out))
        members.update(flat_members("s_axi", AxiLiteSignature(regmap.addr_width), In))
        members["irq"] = Out(1)
        super().__init__(members)

    def _bus(self, prefix, name):
        return getattr(self, f"{prefix}_{name}")

    def _job_field(self, ctl, name):
        return getattr(ctl.job, name) if name in ctl.job_fields else None

    def _input(self, m, ctl, port):
        """Gate, adapt and connect one input port; return (ok, moved, starving): the port
        has nothing (more) to take in this job, a word entered the block, the bus is ready
        and idle."""
        bus = lambda s: self._bus(f"s_axis_{port.name}", s)         # noqa: E731
        inner = getattr(self.inner, port.inner)
        enable = self._job_field(ctl, f"job_inputs_{port.name}_en")
        enable = Const(1) if enable is None else enable
        bus_done, word_done = Signal(name=f"{port.name}_bus_done"), \
            Signal(name=f"{port.name}_word_done")
        gate = (ctl.busy & enable & ~bus_done) if port.framed else Const(1)
        moved = Signal(name=f"{port.name}_moved")
        last_word = Signal(name=f"{port.name}_last_word")
        if port.packed:
            lane, g = 8 * port.word_bytes, port.group
            # a group is one wide word of g lanes to the adapter (same bytes, same tkeep)
            m.submodules[f"{port.name}_in"] = adapt = AxisToWords(
                port.word_width if g == 1 else g * lane, port.words // g)
            data = adapt.o.p.data
            m.d.comb += [adapt.s.tdata.eq(bus("tdata")), adapt.s.tkeep.eq(bus("tkeep")),
                         adapt.s.tlast.eq(bus("tlast")),
                         adapt.s.tvalid.eq(bus("tvalid") & gate),
                         bus("tready").eq(adapt.s.tready & gate),
                         inner.valid.eq(adapt.o.valid),
                         inner.payload.eq(data if g == 1 else Cat(
                             data.word_select(k, lane)[:port.word_width] for k in range(g))),
                         adapt.o.ready.eq(inner.ready),
                         moved.eq(adapt.o.valid & adapt.o.ready),
                         last_word.eq(moved & adapt.o.p.last)]
        else:
            # a direct beat enters a skid buffer (payload and tlast): the block's valid and
            # payload are registers and tready depends on a register only, so no bus input
            # reaches the block's logic in the clock it arrives
            lane = 8 * port.word_bytes
            width = port.words * port.word_width
            m.submodules[f"{port.name}_skid"] = skid = SkidBuffer(
                StructLayout({"data": width, "last": 1}))
            m.d.comb += [skid.i.valid.eq(bus("tvalid") & gate),
                         bus("tready").eq(skid.i.ready & gate),
                         skid.i.payload.data.eq(Cat(
                             bus("tdata").word_select(k, lane)[:port.word_width]
                             for k in range(port.words))),
                         skid.i.payload.last.eq(bus("tlast")),
                         inner.valid.eq(skid.o.valid), skid.o.ready.eq(inner.ready),
                         inner.payload.eq(skid.o.payload.data),
                         moved.eq(inner.valid & inner.ready),
                         last_word.eq(moved & skid.o.payload.last)]
        with m.If(bus("tvalid") & bus("tready") & bus("tlast")):
            m.d.sync += bus_done.eq(1)
        with m.If(last_word):
            m.d.sync += word_done.eq(1)
        with m.If(ctl.start):
            m.d.sync += [bus_done.eq(0), word_done.eq(0)]
        if not port.framed:
            return Const(1), moved, Const(0)
        starving = gate & bus("tready") & ~bus("tvalid")
        # done the clock after the block took the last word (a register: the block's ready
        # stays out of the job-end logic; a job's outputs end it later anyway)
        return ~enable | word_done, moved, starving

    def _output(self, m, ctl, port):
        """Count, frame and connect one output port; return (ok, moved, blocked)."""
        bus = lambda s: self._bus(f"m_axis_{port.name}", s)         # noqa: E731
        inner = getattr(self.inner, port.inner)
        unit = "words" if (port.packed and port.group == 1) or port.partial else "beats"
        target = self._job_field(ctl, f"{port.name}_{unit}_count")
        assert (target is None) == (not port.framed), f"{port.name}: framed outputs are counted"
        last = Signal(name=f"{port.name}_last")
        sent = Signal(name=f"{port.name}_sent")                     # tlast beat has left
        moved = inner.valid & inner.ready
        # words per transfer: the payload's n on a partial port, else one transfer
        step = inner.payload.n if port.partial else 1
        if port.partial:
            # count + step >= target (count: the words moved since the start) as rem <=
            # step, rem = target - count a register (target as at the start: the job's
            # registers hold during a job), with "rem <= k" for each step k = 0 .. words
            # registered a clock ahead: rem - step <= k is "rem <= k + step", compares of
            # the register with constants chosen by step, so the block's n (at most words)
            # only selects flags, no adder or comparator behind the payload
            nw = port.words
            rem = Signal(signed(34), name=f"{port.name}_rem")
            m.d.sync += rem.eq(Mux(ctl.start, target, Mux(moved, rem - step, rem)))
            le = [Signal(name=f"{port.name}_le{k}", init=1) for k in range(nw + 1)]
            # rem <= c (c <= 2 words) without a 34-bit compare of rem: rem only falls
            # during a job, by at most words a transfer, so if rem > 3 words a clock ago
            # (near clear) rem > 2 words now, and if near is set 0 <= rem <= 3 words or rem
            # < 0 (the sign); near is registered from the compare (target's at the start)
            top, lb = 3 * nw, (3 * nw).bit_length()
            near = Signal(name=f"{port.name}_near", init=1)
            m.d.sync += near.eq(Mux(ctl.start, target <= top, rem <= top))
            rle = [rem[-1] | (near & (rem[:lb] <= c)) for c in range(2 * nw + 1)]
            for k in range(nw + 1):
                after = Cat(rle[k + j] & (step == j) for j in range(nw + 1)).any()
                m.d.sync += le[k].eq(Mux(ctl.start, target <= k, Mux(moved, after, rle[k])))
            m.d.comb += last.eq(Cat(le[k] & (step == k) for k in range(nw + 1)).any())
        elif target is not None:
            # a register, "the next transfer is the target-th" kept a transfer ahead, from
            # a down-counter of the transfers left after the next one (``target - 2`` at
            # the start): the clock's logic is a decrement and a compare with 0 of
            # registers, no adder in front of a comparator (clock rate); the same bit as
            # ``count + 2 == target`` of an up-counter, modulo 2**32 alike
            after = Signal(32, name=f"{port.name}_after", reset_less=True)
            with m.If(moved):
                m.d.sync += [last.eq(after == 0), after.eq(after - 1)]
            with m.If(ctl.start):
                m.d.sync += [last.eq(target == 1), after.eq(target - 2)]
        if port.packed:
            assert target is not None, f"packed output {port.name} needs {port.name}_words"
            lane, g, w = 8 * port.word_bytes, port.group, port.word_width
            m.submodules[f"{port.name}_out"] = adapt = WordsToAxis(
                w if g == 1 else g * lane, port.words // g)
            payload = Value.cast(inner.payload).as_unsigned()
            if g > 1:                                   # each word into its own lane
                payload = Cat(Cat(payload[k * w:(k + 1) * w], Const(0, lane - w))
                              for k in range(g))
            m.d.comb += [adapt.i.valid.eq(inner.valid),
                         adapt.i.p.data.eq(payload),
                         adapt.i.p.last.eq(last), inner.ready.eq(adapt.i.ready)]
            for name in ("tdata", "tkeep", "tlast", "tvalid"):
                m.d.comb += bus(name).eq(getattr(adapt.m, name))
            m.d.comb += adapt.m.tready.eq(bus("tready"))
        else:
            lane, kb = 8 * port.word_bytes, port.word_bytes
            payload = Value.cast(inner.payload.data if port.partial
                                 else inner.payload).as_unsigned()
            keep = (Cat(Mux(k < step, (1 << kb) - 1, 0) for k in range(port.words))
                    if port.partial else (1 << (kb * port.words)) - 1)
            m.d.comb += [bus("tvalid").eq(inner.valid), inner.ready.eq(bus("tready")),
                         bus("tkeep").eq(keep), bus("tlast").eq(last)]
            for k in range(port.words):
                m.d.comb += bus("tdata").word_select(k, lane).eq(
                    payload[k * port.word_width:(k + 1) * port.word_width])
        event = bus("tvalid") & bus("tready") & bus("tlast")
        with m.If(event):
            m.d.sync += sent.eq(1)
        with m.If(ctl.start):
            m.d.sync += sent.eq(0)
        if target is None:
            return Const(1), moved, Const(0)
        return (target == 0) | sent | event, moved, bus("tvalid") & ~bus("tready")

    def _times(self, m, ctl, port, moved):
        """Whether more than this transfer are still due in this job: a counter of the
        transfers left, loaded at the start from ``port.repeat`` (0 counting as 1) and
        counted down by ``moved``, and its "more than one left" flag (a register)."""
        if port.repeat is None:
            return Const(0)
        count = getattr(ctl.job, port.repeat)
        left = Signal(len(count), name=f"{port.inner}_left")
        more = Signal(name=f"{port.inner}_more")
        with m.If(moved):
            m.d.sync += [left.eq(left - 1), more.eq(left > 2)]
        with m.If(ctl.start):
            m.d.sync += [left.eq(Mux(count == 0, 1, count)), more.eq(count > 1)]
        return more

    def _register(self, m, ctl, port):
        """Offer the descriptor once (or ``repeat`` times) per job; return (ok, moved, 0)."""
        inner = getattr(self.inner, port.inner)
        pending = Signal(name=f"{port.inner}_pending")
        payload = Cat(getattr(ctl.job, name) for name in port.fields)
        width = len(Value.cast(inner.payload))
        assert len(payload) >= width, f"{port.inner}: the fields hold {len(payload)} bits"
        moved = inner.valid & inner.ready
        more = self._times(m, ctl, port, moved)
        # the fields registered every clock (they change only by register writes, which
        # end before the start), so the block's descriptor register loads from flip-flops
        # of the shell's own rather than across the register file (clock rate)
        # (no reset: loaded every clock, read only under ``pending``, which has one)
        held = Signal(width, name=f"{port.inner}_fields", reset_less=True)
        m.d.sync += held.eq(payload[:width])
        m.d.comb += [inner.valid.eq(pending), inner.payload.eq(held)]
        with m.If(moved):
            m.d.sync += pending.eq(more)
        with m.If(ctl.start):
            m.d.sync += pending.eq(1)
        return ~pending | (moved & ~more), moved, Const(0)

    def _sink(self, m, ctl, port):
        """Latch (or add up) the block's transfers of a job into status registers;
        return (ok, moved, 0)."""
        inner = getattr(self.inner, port.inner)
        got = Signal(name=f"{port.inner}_got")
        held = [Signal(len(getattr(ctl.job, name)), name=f"{port.inner}_{name}")
                for name in port.fields]
        moved = inner.valid & inner.ready
        more = self._times(m, ctl, port, moved)
        m.d.comb += inner.ready.eq(1)
        m.d.comb += [getattr(ctl.job, name).eq(reg) for name, reg in zip(port.fields, held)]
        payload, now = Value.cast(inner.payload), Cat(*held)
        if port.sums:
            at, parts = 0, []
            for width in port.sums:
                parts.append((now[at:at + width] + payload[at:at + width])[:width])
                at += width
            payload = Cat(*parts)
        with m.If(moved):
            m.d.sync += [Cat(*held).eq(payload), got.eq(~more)]
        with m.If(ctl.start):
            m.d.sync += got.eq(0)
            if port.sums:
                m.d.sync += Cat(*held).eq(0)
        return got | (moved & ~more), moved, Const(0)

    def elaborate(self, platform):
        m = Module()
        clock_from_ports(m, self)
        m.submodules.block = self.inner
        m.submodules.ctl = ctl = JobControl(self.regmap)
        connect_flat(m, self, "s_axi", ctl.axi)
        ins = [self._input(m, ctl, port) for port in self.inputs]
        outs = [self._output(m, ctl, port) for port in self.outputs]
        ins += [self._register(m, ctl, port) for port in self.registers]
        outs += [self._sink(m, ctl, port) for port in self.sinks]
        m.d.comb += [
            ctl.end.eq(ctl.busy & Cat(ok for ok, _, _ in ins + outs).all()),
            ctl.took_input.eq(Cat(moved for _, moved, _ in ins + outs).any()),
            ctl.stall_in.eq(Cat(s for _, _, s in ins).any()),
            ctl.stall_out.eq(Cat(s for _, _, s in outs).any()),
            self.irq.eq(ctl.irq),
        ]
        return m
