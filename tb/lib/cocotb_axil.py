# SPDX-License-Identifier: Apache-2.0
"""cocotb bench of :class:`hdl.lib.axil.AxiLiteRegisters` driven by cocotbext-axi's
AXI4-Lite manager (started by tb/lib/test_axil.py through :func:`gen.core.sim.run_cocotb`).

``SPNN_AXIL`` names a JSON file: the register map (``registers``: name, offset, fields with
name, lsb, width, kind, reset) and ``seed``.  Every channel gets a pause generator (idle
address/data beats, back-pressure on the responses) from that seed.
"""

import json
import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge, ReadOnly
from cocotbext.axi import AxiLiteBus, AxiLiteMaster, AxiResp


def _spec():
    with open(os.environ["SPNN_AXIL"]) as handle:
        return json.load(handle)


def _pauses(rng, rate):
    while True:
        yield rng.random() < rate


async def _setup(dut, spec, pause=0.0):
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    dut.rst.value = 1
    for reg in spec["registers"]:
        for f in reg["fields"]:
            name = f"hw__{reg['name'].lower()}_{f['name']}"
            if f["kind"] == "status":
                getattr(dut, name).value = 0
            if f["kind"] == "w1c":
                getattr(dut, name + "_set").value = 0
    axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "axi_"), dut.clk, dut.rst,
                         reset_active_level=True)
    if pause:
        rng = random.Random(spec["seed"])
        for channel in (axil.write_if.aw_channel, axil.write_if.w_channel,
                        axil.write_if.b_channel, axil.read_if.ar_channel,
                        axil.read_if.r_channel):
            channel.set_pause_generator(_pauses(random.Random(rng.random()), pause))
    await ClockCycles(dut.clk, 3)
    dut.rst.value = 0
    await ClockCycles(dut.clk, 2)
    return axil


def _reg(spec, name):
    return next(r for r in spec["registers"] if r["name"] == name)


def _reset_value(reg):
    return sum(f["reset"] << f["lsb"] for f in reg["fields"] if f["kind"] in
               ("const", "control", "w1c"))


async def _read(axil, addr, resp=AxiResp.OKAY):
    out = await axil.read(addr, 4)
    assert out.resp == resp, (hex(addr), out.resp)
    return int.from_bytes(out.data, "little")


async def _write(axil, addr, value, strb=0xF, resp=AxiResp.OKAY):
    data = value.to_bytes(4, "little")
    if strb == 0xF:
        out = await axil.write(addr, data)
    else:   # a narrow write: cocotbext-axi derives wstrb from the address and length
        lo = (strb & -strb).bit_length() - 1
        n = strb.bit_length() - lo
        out = await axil.write(addr + lo, data[lo:lo + n])
    assert out.resp == resp, (hex(addr), out.resp)


@cocotb.test()
async def reset_values_and_constants(dut):
    """Every register reads its reset value (status inputs held at 0)."""
    spec = _spec()
    axil = await _setup(dut, spec)
    for reg in spec["registers"]:
        assert await _read(axil, reg["offset"]) == _reset_value(reg), reg["name"]


@cocotb.test()
async def control_fields_keep_strobed_bytes(dut):
    """A control register takes the strobed bytes only; unmapped addresses answer SLVERR
    and change nothing."""
    spec = _spec()
    axil = await _setup(dut, spec)
    reg = next(r for r in spec["registers"] if any(f["kind"] == "control" for f in r["fields"]))
    mask = sum(((1 << f["width"]) - 1) << f["lsb"] for f in reg["fields"]
               if f["kind"] == "control")
    await _write(axil, reg["offset"], 0xFFFFFFFF)
    assert await _read(axil, reg["offset"]) == mask
    await _write(axil, reg["offset"], 0, strb=0x2)            # byte 1 only
    assert await _read(axil, reg["offset"]) == mask & ~0xFF00
    await _write(axil, reg["offset"], 0)
    assert await _read(axil, reg["offset"]) == 0
    mapped = {r["offset"] for r in spec["registers"]}
    unmapped = next(a for a in range(0, spec["size"], 4) if a not in mapped)   # a hole
    await _write(axil, unmapped, 0xFFFFFFFF, resp=AxiResp.SLVERR)
    assert await _read(axil, unmapped, resp=AxiResp.SLVERR) == 0
    for other in spec["registers"]:
        assert await _read(axil, other["offset"]) == _reset_value(other), other["name"]


@cocotb.test()
async def pulse_is_one_clock(dut):
    """Writing 1 to a pulse field raises its output for exactly one clock; it reads 0."""
    spec = _spec()
    axil = await _setup(dut, spec)
    reg = next(r for r in spec["registers"] if any(f["kind"] == "pulse" for f in r["fields"]))
    f = next(f for f in reg["fields"] if f["kind"] == "pulse")
    port = getattr(dut, f"hw__{reg['name'].lower()}_{f['name']}")
    highs = []

    async def watch():
        for _ in range(60):
            await RisingEdge(dut.clk)
            await ReadOnly()
            highs.append(int(port.value))
    monitor = cocotb.start_soon(watch())
    await _write(axil, reg["offset"], 1 << f["lsb"])
    assert await _read(axil, reg["offset"]) == 0
    await _write(axil, reg["offset"], 0)
    await monitor
    assert sum(highs) == 1, highs


@cocotb.test()
async def status_and_w1c(dut):
    """Status fields read their inputs; a w1c field is set by its input, survives writing 0
    and is cleared by writing 1."""
    spec = _spec()
    axil = await _setup(dut, spec)
    rng = random.Random(spec["seed"])
    for reg in spec["registers"]:
        status = [f for f in reg["fields"] if f["kind"] == "status"]
        if status:
            want = 0
            for f in status:
                v = rng.randrange(1 << f["width"])
                getattr(dut, f"hw__{reg['name'].lower()}_{f['name']}").value = v
                want |= v << f["lsb"]
            await RisingEdge(dut.clk)
            assert await _read(axil, reg["offset"]) == want, reg["name"]
    reg = next(r for r in spec["registers"] if any(f["kind"] == "w1c" for f in r["fields"]))
    f = next(f for f in reg["fields"] if f["kind"] == "w1c")
    setter = getattr(dut, f"hw__{reg['name'].lower()}_{f['name']}_set")
    bit = 1 << f["lsb"]
    assert await _read(axil, reg["offset"]) & bit == 0
    await RisingEdge(dut.clk)
    setter.value = 1
    await RisingEdge(dut.clk)
    setter.value = 0
    assert await _read(axil, reg["offset"]) & bit == bit
    await _write(axil, reg["offset"], 0)
    assert await _read(axil, reg["offset"]) & bit == bit
    await _write(axil, reg["offset"], bit)
    assert await _read(axil, reg["offset"]) & bit == 0


@cocotb.test()
async def random_traffic_with_pauses(dut):
    """Random writes and reads of the control registers, every channel paused at random
    (idle beats, response back-pressure), against a Python model of the map."""
    spec = _spec()
    axil = await _setup(dut, spec, pause=0.4)
    rng = random.Random(spec["seed"] + 1)
    model = {r["offset"]: _reset_value(r) for r in spec["registers"]}
    masks = {r["offset"]: sum(((1 << f["width"]) - 1) << f["lsb"] for f in r["fields"]
                              if f["kind"] == "control") for r in spec["registers"]}
    writable = [o for o, m in masks.items() if m]
    for _ in range(60):
        offset = rng.choice(list(model))
        if rng.random() < 0.5 and offset in writable:
            value = rng.randrange(1 << 32)
            await _write(axil, offset, value)
            model[offset] = (model[offset] & ~masks[offset]) | (value & masks[offset])
        else:
            assert await _read(axil, offset) == model[offset], hex(offset)
