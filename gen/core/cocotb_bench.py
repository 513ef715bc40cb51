# SPDX-License-Identifier: Apache-2.0
"""Generic cocotb testbench: drive valid/ready streams from a job file, record results.

Part of the product, not of the test suite: every RTL run (``spnn run``, the tests, the
benchmarks) goes through it.

Runs inside the simulator (started by :func:`gen.core.sim.run_job`).  The job
(``$SPNN_JOB``, JSON) names input streams with their payloads and output streams
with the number of transfers expected; the result (``$SPNN_RESULT``) records
every transfer with its cycle number.  Port names follow Amaranth's flattening:
a stream member ``i`` is ``i__valid``, ``i__ready``, ``i__payload``.

Timing discipline: the testbench changes its inputs just after the falling edge
and samples handshakes in the read-only phase before the next rising edge, so a
transfer is recorded in the cycle whose rising edge completes it.  This works the
same under Icarus and Verilator.

Stimulus (:mod:`gen.core.stimulus`): each source has its own ``valid`` pattern (idle
cycles between transfers; a source that raised valid holds it and its payload
until accepted), each sink its own ``ready`` pattern (back-pressure), both
functions of the clock number alone; and ``reset_at``: assert ``rst`` for
``reset_cycles`` cycles at that cycle, after which every source restarts from its
first item and the sinks' counts start again (transfers before the reset are
returned separately; ``log`` keeps every transfer of every port across resets,
``resets`` the cycles at which a reset began).  The cycle counter does not advance
during the reset pulse.  ``watch`` lists extra signals sampled every cycle.
"""

import json
import os

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge

from gen.core.stimulus import normalise_job, sink_pattern, source_pattern


def _handle(dut, name):
    return getattr(dut, name)


class _Source:
    def __init__(self, dut, spec):
        self.port = spec["port"]
        self.valid = _handle(dut, self.port + "__valid")
        self.ready = _handle(dut, self.port + "__ready")
        self.payload = _handle(dut, self.port + "__payload")
        self.data = spec["data"]
        self.pattern = source_pattern(spec)
        self.log = []   # (cycle, payload) of every transfer, across resets
        self.restart()

    def restart(self):
        self.index, self.holding, self.cycles = 0, False, []
        self.valid.value = 0

    def drive(self, cycle):
        if self.holding:
            return
        if self.index < len(self.data) and self.pattern.at(cycle):
            self.payload.value = self.data[self.index]
            self.valid.value = 1
            self.holding = True
        else:
            self.valid.value = 0

    def sample(self, cycle):
        if self.holding and int(self.ready.value):
            self.cycles.append(cycle)
            self.log.append((cycle, self.data[self.index]))
            self.index += 1
            self.holding = False

    @property
    def done(self):
        return self.index >= len(self.data)


class _Sink:
    def __init__(self, dut, spec):
        self.port = spec["port"]
        self.valid = _handle(dut, self.port + "__valid")
        self.ready = _handle(dut, self.port + "__ready")
        self.payload = _handle(dut, self.port + "__payload")
        self.count = spec["count"]
        self.pattern = sink_pattern(spec)
        self.ready_now = 0
        self.log = []   # (cycle, payload) of every transfer, across resets
        self.restart()

    def restart(self):
        self.data, self.cycles = [], []

    def drive(self, cycle):
        self.ready_now = int(self.pattern.at(cycle))
        self.ready.value = self.ready_now

    def sample(self, cycle):
        if self.ready_now and int(self.valid.value):
            self.data.append(self.payload.value.to_unsigned())
            self.cycles.append(cycle)
            self.log.append((cycle, self.data[-1]))

    @property
    def done(self):
        return len(self.data) >= self.count


@cocotb.test()
async def run_stream_job(dut):
    job = normalise_job(json.loads(open(os.environ["SPNN_JOB"]).read()))
    result_path = os.environ["SPNN_RESULT"]
    clk, rst = dut.clk, dut.rst
    cocotb.start_soon(Clock(clk, job.get("clock_ns", 10), unit="ns").start())
    sources = [_Source(dut, s) for s in job.get("sources", [])]
    sinks = [_Sink(dut, s) for s in job.get("sinks", [])]
    watch = {name: _handle(dut, name) for name in job.get("watch", [])}
    trace = {name: [] for name in watch}
    for sink in sinks:
        sink.ready.value = 0
    rst.value = 1
    for _ in range(job.get("reset_cycles", 2)):
        await RisingEdge(clk)
    await FallingEdge(clk)
    rst.value = 0

    max_cycles = job.get("max_cycles", 100000)
    drain = job.get("drain_cycles", 8)
    reset_at = job.get("reset_at")
    before_reset, resets = None, []
    cycle, finished_at, error = 0, None, None
    while True:
        if reset_at is not None and cycle == reset_at:
            before_reset = {s.port: {"data": s.data, "cycles": s.cycles} for s in sinks}
            resets.append(cycle)
            rst.value = 1
            for src in sources:
                src.restart()
            for _ in range(job.get("reset_cycles", 2)):
                await RisingEdge(clk)
            await FallingEdge(clk)
            rst.value = 0
            for src in sources:
                src.restart()
            for sink in sinks:
                sink.restart()
        for src in sources:
            src.drive(cycle)
        for sink in sinks:
            sink.drive(cycle)
        await ReadOnly()
        for src in sources:
            src.sample(cycle)
        for sink in sinks:
            sink.sample(cycle)
        for name, handle in watch.items():
            trace[name].append(str(handle.value))
        cycle += 1
        if finished_at is None and all(s.done for s in sources) and all(s.done for s in sinks):
            finished_at = cycle
        if finished_at is not None and cycle >= finished_at + drain:
            break
        if cycle >= max_cycles:
            error = f"timeout after {max_cycles} cycles"
            break
        await FallingEdge(clk)

    extra = {s.port: len(s.data) - s.count for s in sinks if len(s.data) > s.count}
    if error is None and extra:
        error = f"unexpected extra output transfers: {extra}"
    result = {
        "error": error,
        "cycles_run": cycle,
        "sources": {s.port: {"cycles": s.cycles} for s in sources},
        "sinks": {s.port: {"data": s.data, "cycles": s.cycles} for s in sinks},
        "before_reset": before_reset,
        "resets": resets,
        "log": {s.port: s.log for s in sources + sinks},
        "trace": trace,
    }
    with open(result_path, "w") as handle:
        json.dump(result, handle)
