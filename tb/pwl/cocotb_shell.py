# SPDX-License-Identifier: Apache-2.0
"""cocotb bench of the PWL shell (hdl/pwl/shell.py): cocotbext-axi drives AXI4-Lite control
and the AXI4-Stream ports (started by tb/pwl/test_shell.py).

``SPNN_SHELL`` names a JSON file: ``bus_words``, ``jobs`` (``[{"x": codes, "y": expected
codes}]``), ``seed``, ``pause_in`` / ``pause_out`` (idle / back-pressure probability per
clock).  Every result word is compared with the golden model's, every beat's framing with
the input's, and every performance counter with what this bench saw on the ports.
"""

import json
import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge
from cocotbext.axi import (AxiLiteBus, AxiLiteMaster, AxiStreamBus, AxiStreamFrame,
                           AxiStreamSink, AxiStreamSource)

CTRL, STATUS, IRQ_ENABLE, IRQ_STATUS = 0x08, 0x0C, 0x10, 0x14
COUNTERS = {"cycles": 0x20, "busy": 0x28, "stall_in": 0x30, "stall_out": 0x38}


def _pauses(rng, rate):
    while True:
        yield rng.random() < rate


class _Watch:
    """Per clock: the port events the counters are specified by."""

    def __init__(self, dut):
        self.dut, self.clock = dut, 0
        self.reset()
        cocotb.start_soon(self._run())

    def reset(self):
        self.took = self.stall_in = self.stall_out = 0
        self.start_ack = self.end = None

    async def _run(self):
        d = self.dut
        while True:
            await RisingEdge(d.aclk)
            await ReadOnly()
            self.clock += 1
            if self.start_ack is None and int(d.s_axi_bvalid.value):
                self.start_ack = self.clock
            if int(d.s_axis_x_tvalid.value) and int(d.s_axis_x_tready.value):
                self.took += 1
            if int(d.s_axis_x_tready.value) and not int(d.s_axis_x_tvalid.value):
                self.stall_in += 1
            if int(d.m_axis_y_tvalid.value) and not int(d.m_axis_y_tready.value):
                self.stall_out += 1
            if int(d.m_axis_y_tvalid.value) and int(d.m_axis_y_tready.value) and \
                    int(d.m_axis_y_tlast.value):
                self.end = self.clock


async def _reg(axil, addr):
    return int.from_bytes((await axil.read(addr, 4)).data, "little")


async def _counter(axil, name):
    lo = await _reg(axil, COUNTERS[name])
    return lo | await _reg(axil, COUNTERS[name] + 4) << 32


@cocotb.test()
async def jobs(dut):
    with open(os.environ["SPNN_SHELL"]) as handle:
        spec = json.load(handle)
    cocotb.start_soon(Clock(dut.aclk, 10, unit="ns").start())
    dut.aresetn.value = 0
    axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axi"), dut.aclk, dut.aresetn,
                         reset_active_level=False)
    source = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis_x"), dut.aclk, dut.aresetn,
                             reset_active_level=False)
    sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, "m_axis_y"), dut.aclk, dut.aresetn,
                         reset_active_level=False)
    rng = random.Random(spec["seed"])
    if spec["pause_in"]:
        source.set_pause_generator(_pauses(random.Random(rng.random()), spec["pause_in"]))
    if spec["pause_out"]:
        sink.set_pause_generator(_pauses(random.Random(rng.random()), spec["pause_out"]))
    await ClockCycles(dut.aclk, 4)
    dut.aresetn.value = 1
    await ClockCycles(dut.aclk, 2)
    watch = _Watch(dut)
    assert await _reg(axil, 0x00) == 0x53500000
    await axil.write(IRQ_ENABLE, (1).to_bytes(4, "little"))
    for n, job in enumerate(spec["jobs"]):
        watch.reset()
        await axil.write(CTRL, (1).to_bytes(4, "little"))
        await source.send(AxiStreamFrame(b"".join((v & 0xFFFF).to_bytes(2, "little")
                                                  for v in job["x"])))
        frame = await sink.recv()
        got = [int.from_bytes(frame.tdata[k:k + 2], "little", signed=True)
               for k in range(0, len(frame.tdata), 2)]
        assert got == job["y"], (n, got[:8], job["y"][:8])
        await ClockCycles(dut.aclk, 2)
        assert await _reg(axil, STATUS) == 0b10, n                  # done, not busy
        assert int(dut.irq.value) == 1
        beats = -(-len(job["x"]) // spec["bus_words"])
        assert watch.took == beats == await _counter(axil, "busy"), n
        assert await _counter(axil, "cycles") == watch.end - watch.start_ack, n
        assert await _counter(axil, "stall_in") == watch.stall_in, n
        assert await _counter(axil, "stall_out") == watch.stall_out, n
        await axil.write(IRQ_STATUS, (1).to_bytes(4, "little"))
        assert await _reg(axil, IRQ_STATUS) == 0 and int(dut.irq.value) == 0
    assert sink.empty()
