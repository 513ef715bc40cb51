# SPDX-License-Identifier: Apache-2.0
"""Generic cocotb bench of an accelerator shell: AXI4-Lite control and AXI4-Stream data
through cocotbext-axi's manager, source and sink.

Part of the product (``spnn run <block> --bus-words N``), started by
:func:`gen.core.sim.run_cocotb`.  The job (``$SPNN_JOB``, JSON):

* ``jobs``: a list, each ``{"regs": [[offset, value], ...], "packets": {port: [words]},
  "receive": [port, ...]}``: write the registers, write ``CTRL.start``, send one packet on
  each source port named in ``packets``, receive one packet on each sink port in
  ``receive`` (default: every sink), wait for ``STATUS.done``, read the counters and the
  registers at the offsets of ``read`` (optional), note ``irq``, acknowledge the interrupt
  (write 1 to ``IRQ_STATUS``).  With ``reset_after``: that many clocks after the start,
  hold ``aresetn`` low for 4 clocks, drop what the sources still held and the sinks had
  received, and record ``reset``, the counters, ``status`` and ``irq_status`` read after it;
* ``sources`` / ``sinks``: ``[{"port": "s_axis_x", "word_bytes": 2, "pattern": {...}}]``,
  the pattern (:class:`gen.core.stimulus.Pattern` JSON) giving, per clock after reset, whether
  the source offers data / the sink is ready;
* ``max_cycles``.

The result (``$SPNN_RESULT``) has, per job: the received packets (words, unsigned); the
counters read back (``cycles``, ``busy``, ``stall_in``, ``stall_out``); ``reads`` (the
values at ``read``); ``status``; ``irq``
before and after the acknowledgement; and what the bench saw on the ports: ``start_ack``
(clock of the start write's response), ``first_in`` (first input beat), ``end`` (the last
output ``tlast`` beat), ``beats_in``, ``beats_out``, ``stall_in`` (clocks a source port was
ready and offered nothing, summed over the ports), ``stall_out`` (clocks a sink port was
offered a beat and not ready, summed), ``stall_in_any`` / ``stall_out_any`` (clocks in which
at least one port was).  Clocks count from the end of reset.
"""

import json
import os

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge, Timer, with_timeout
from cocotbext.axi import (AxiLiteBus, AxiLiteMaster, AxiStreamBus, AxiStreamFrame,
                           AxiStreamSink, AxiStreamSource)

from gen.core.stimulus import Pattern

CTRL, STATUS, IRQ_ENABLE, IRQ_STATUS = 0x08, 0x0C, 0x10, 0x14
COUNTERS = {"cycles": 0x20, "busy": 0x28, "stall_in": 0x30, "stall_out": 0x38}


def _pauses(pattern: Pattern):
    """cocotbext-axi pause generator: one value per clock, pause = not pattern."""
    cycle = 0
    while True:
        yield not pattern.at(cycle)
        cycle += 1


class _Ports:
    """Per clock: the start write's response and every stream beat."""

    def __init__(self, dut, sources, sinks):
        self.dut, self.clock = dut, 0
        self.sources, self.sinks = sources, sinks
        self.clear()
        cocotb.start_soon(self._run())

    def clear(self):
        self.start_ack = self.end = self.first_in = None
        self.beats_in = self.beats_out = self.stall_in = self.stall_out = 0
        self.stall_in_any = self.stall_out_any = 0

    async def _run(self):
        d = self.dut
        while True:
            await RisingEdge(d.aclk)
            await ReadOnly()
            self.clock += 1
            if self.start_ack is None and int(d.s_axi_bvalid.value):
                self.start_ack = self.clock
            starving = blocked = 0
            for port in self.sources:
                valid = int(getattr(d, f"{port}_tvalid").value)
                ready = int(getattr(d, f"{port}_tready").value)
                self.beats_in += valid & ready
                self.stall_in += ready & (1 - valid)
                starving |= ready & (1 - valid)
                if valid and ready and self.first_in is None:
                    self.first_in = self.clock
            for port in self.sinks:
                valid = int(getattr(d, f"{port}_tvalid").value)
                ready = int(getattr(d, f"{port}_tready").value)
                self.beats_out += valid & ready
                self.stall_out += valid & (1 - ready)
                blocked |= valid & (1 - ready)
                if valid and ready and int(getattr(d, f"{port}_tlast").value):
                    self.end = self.clock
            self.stall_in_any += starving
            self.stall_out_any += blocked


async def _read(axil, addr):
    return int.from_bytes((await axil.read(addr, 4)).data, "little")


async def _run_job(job, axil, sources, sinks, ports, spec):
    for offset, value in job.get("regs", []):
        await axil.write(offset, int(value).to_bytes(4, "little"))
    ports.clear()
    await axil.write(CTRL, (1).to_bytes(4, "little"))
    for entry in spec["sources"]:
        if entry["port"] not in job["packets"]:
            continue
        wb = entry["word_bytes"]
        words = job["packets"][entry["port"]]
        await sources[entry["port"]].send(AxiStreamFrame(
            b"".join(int(w).to_bytes(wb, "little") for w in words)))
    if job.get("reset_after") is not None:
        return await _reset_job(job, axil, sources, sinks, ports)
    packets = {}
    receive = job.get("receive", [e["port"] for e in spec["sinks"]])
    for entry in spec["sinks"]:
        if entry["port"] not in receive:
            continue
        wb = entry["word_bytes"]
        frame = await sinks[entry["port"]].recv()
        packets[entry["port"]] = [int.from_bytes(frame.tdata[k:k + wb], "little")
                                  for k in range(0, len(frame.tdata), wb)]
    status = await _read(axil, STATUS)
    while not status & 0b10:
        status = await _read(axil, STATUS)
    counters = {}
    for name, offset in COUNTERS.items():
        counters[name] = await _read(axil, offset) | (await _read(axil, offset + 4)) << 32
    reads = [await _read(axil, offset) for offset in job.get("read", [])]
    irq = int(ports.dut.irq.value)
    await axil.write(IRQ_STATUS, (1).to_bytes(4, "little"))          # acknowledge (W1C)
    await RisingEdge(ports.dut.aclk)
    return {"packets": packets, "counters": counters, "reads": reads, "status": status,
            "irq": irq,
            "irq_after_ack": int(ports.dut.irq.value),
            "irq_status_after_ack": await _read(axil, IRQ_STATUS),
            "start_ack": ports.start_ack, "first_in": ports.first_in, "end": ports.end,
            "beats_in": ports.beats_in, "beats_out": ports.beats_out,
            "stall_in": ports.stall_in, "stall_out": ports.stall_out,
            "stall_in_any": ports.stall_in_any, "stall_out_any": ports.stall_out_any}


async def _reset_job(job, axil, sources, sinks, ports):
    """``reset_after`` clocks into the job, hold ``aresetn`` low for 4 clocks, drop what the
    sources had queued and the sinks had received, and read back the registers."""
    dut = ports.dut
    await ClockCycles(dut.aclk, int(job["reset_after"]))
    beats_out = ports.beats_out
    dut.aresetn.value = 0
    await ClockCycles(dut.aclk, 4)
    for bfm in list(sources.values()) + list(sinks.values()):
        bfm.clear()
    dut.aresetn.value = 1
    await ClockCycles(dut.aclk, 2)
    counters = {}
    for name, offset in COUNTERS.items():
        counters[name] = await _read(axil, offset) | (await _read(axil, offset + 4)) << 32
    return {"reset": True, "packets": {}, "counters": counters,
            "status": await _read(axil, STATUS), "irq": int(dut.irq.value),
            "irq_status": await _read(axil, IRQ_STATUS), "beats_out_before_reset": beats_out,
            "beats_in": ports.beats_in}


@cocotb.test()
async def shell_job(dut):
    with open(os.environ["SPNN_JOB"]) as handle:
        spec = json.load(handle)
    # aresetn is low (and the bus models built) before the first clock edge, so no
    # register samples an undriven aresetn
    dut.aresetn.value = 0
    dut.aclk.value = 0
    kwargs = {"reset_active_level": False}
    axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axi"), dut.aclk, dut.aresetn, **kwargs)
    sources = {e["port"]: AxiStreamSource(AxiStreamBus.from_prefix(dut, e["port"]), dut.aclk,
                                          dut.aresetn, **kwargs) for e in spec["sources"]}
    sinks = {e["port"]: AxiStreamSink(AxiStreamBus.from_prefix(dut, e["port"]), dut.aclk,
                                      dut.aresetn, **kwargs) for e in spec["sinks"]}
    await Timer(1, unit="ns")
    cocotb.start_soon(Clock(dut.aclk, 10, unit="ns").start())
    await ClockCycles(dut.aclk, 4)
    dut.aresetn.value = 1
    for entry in spec["sources"]:
        sources[entry["port"]].set_pause_generator(
            _pauses(Pattern.from_json(entry["pattern"])))
    for entry in spec["sinks"]:
        sinks[entry["port"]].set_pause_generator(
            _pauses(Pattern.from_json(entry["pattern"])))
    ports = _Ports(dut, [e["port"] for e in spec["sources"]], [e["port"] for e in spec["sinks"]])
    results = []
    for job in spec["jobs"]:
        results.append(await with_timeout(_run_job(job, axil, sources, sinks, ports, spec),
                                          10 * spec["max_cycles"], "ns"))
    from cocotb.utils import get_sim_time
    with open(os.environ["SPNN_RESULT"], "w") as handle:
        json.dump({"jobs": results, "clocks": int(get_sim_time("ns") // 10)}, handle)
