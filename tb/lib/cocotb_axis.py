# SPDX-License-Identifier: Apache-2.0
"""cocotb bench of the AXI4-Stream adapters (hdl/lib/axis.py) in loopback, driven by
cocotbext-axi's stream source and sink (started by tb/lib/test_axis.py).

``SPNN_AXIS`` names a JSON file: ``word_width``, ``words``, ``seed``, ``frames`` (lists of
word values) and ``pause`` (probability of an idle clock on the source and of a
back-pressured clock on the sink).
"""

import json
import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles
from cocotbext.axi import AxiStreamBus, AxiStreamFrame, AxiStreamSink, AxiStreamSource


def _pauses(rng, rate):
    while True:
        yield rng.random() < rate


@cocotb.test()
async def loopback(dut):
    """Every frame comes back word for word; the last beat of each is partial exactly when
    the frame's length does not divide the bus, and tlast ends each frame."""
    with open(os.environ["SPNN_AXIS"]) as handle:
        spec = json.load(handle)
    kb = (spec["word_width"] + 7) // 8
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    dut.rst.value = 1
    source = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_"), dut.clk, dut.rst)
    sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, "m_"), dut.clk, dut.rst)
    rng = random.Random(spec["seed"])
    if spec["pause"]:
        source.set_pause_generator(_pauses(random.Random(rng.random()), spec["pause"]))
        sink.set_pause_generator(_pauses(random.Random(rng.random()), spec["pause"]))
    await ClockCycles(dut.clk, 3)
    dut.rst.value = 0
    for words in spec["frames"]:
        raw = b"".join(int(w).to_bytes(kb, "little") for w in words)
        await source.send(AxiStreamFrame(raw))
    for words in spec["frames"]:
        frame = await sink.recv()
        got = [int.from_bytes(frame.tdata[k:k + kb], "little")
               for k in range(0, len(frame.tdata), kb)]
        assert got == words, (got, words)
    assert sink.empty()
