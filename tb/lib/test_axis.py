# SPDX-License-Identifier: Apache-2.0
"""AXI4-Stream at bus width (hdl/lib/axis.py): the beat <-> word adapters in the Amaranth
simulator (exact timing) and in loopback under both simulators with cocotbext-axi."""

import json

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator
import numpy as np
import pytest

from gen.core.block import Gateware
from gen.core.sim import run_cocotb
from hdl.lib.axis import AxisSignature, AxisToWords, WordsToAxis


class _Loop(wiring.Component):
    """AxisToWords -> WordsToAxis: beats in, the same words in beats out."""

    def __init__(self, word_width, words):
        self.ww, self.n = word_width, words
        super().__init__({"s": In(AxisSignature(word_width, words)),
                          "m": Out(AxisSignature(word_width, words))})

    def elaborate(self, platform):
        m = Module()
        m.submodules.unpack = unpack = AxisToWords(self.ww, self.n)
        m.submodules.pack = pack = WordsToAxis(self.ww, self.n)
        wiring.connect(m, wiring.flipped(self.s), unpack.s)
        wiring.connect(m, unpack.o, pack.i)
        wiring.connect(m, pack.m, wiring.flipped(self.m))
        return m


LOOP = Gateware("axis_loop", lambda cfg: _Loop(*cfg), lambda cfg: f"axis_loop_{cfg[0]}x{cfg[1]}")


# Two builds per simulator keep make test short: byte-padded 12-bit words in 3-word beats
# with heavy pauses, and byte-aligned 16-bit words in 4-word beats (the Amaranth-simulator
# tests below cover one-word beats and exact timing).
@pytest.mark.parametrize("word_width, words, pause", [(16, 4, 0.3), (12, 3, 0.5)])
def test_loopback(sim, tmp_path, word_width, words, pause):
    rng = np.random.default_rng(word_width * words)
    lengths = [1, words, words + 1, 2 * words - 1, 3 * words] + \
        [int(v) for v in rng.integers(1, 5 * words + 2, 6)]
    frames = [[int(v) for v in rng.integers(0, 1 << word_width, n)] for n in lengths]
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"word_width": word_width, "words": words, "seed": 7,
                                "frames": frames, "pause": pause}))
    run_cocotb(LOOP, (word_width, words), "tb.lib.cocotb_axis", sim=sim,
               name=f"loop-{int(pause * 10)}", env={"SPNN_AXIS": spec})


def _run(dut, process):
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(process)
    sim.run()


def test_unpack_keeps_one_word_per_clock():
    """Beats of 3 words, one with lane 1 missing and tlast: words leave on consecutive
    clocks with no gap between beats, the missing lane skipped, last on the final word."""
    dut = AxisToWords(16, 3)
    beats = [([1, 2, 3], 0b111111, 0), ([4, 5, 6], 0b110011, 1)]
    seen = []

    async def process(ctx):
        ctx.set(dut.o.ready, 1)
        clock, k = 0, 0
        while len(seen) < 5 and clock < 20:
            if k < len(beats):
                words, keep, last = beats[k]
                ctx.set(dut.s.tdata, sum(w << (16 * i) for i, w in enumerate(words)))
                ctx.set(dut.s.tkeep, keep)
                ctx.set(dut.s.tlast, last)
            ctx.set(dut.s.tvalid, k < len(beats))
            took = ctx.get(dut.s.tvalid) and ctx.get(dut.s.tready)
            if ctx.get(dut.o.valid):
                seen.append((clock, ctx.get(dut.o.p.data), ctx.get(dut.o.p.last)))
            await ctx.tick()
            k += took
            clock += 1
    _run(dut, process)
    assert [(d, l) for _, d, l in seen] == [(1, 0), (2, 0), (3, 0), (4, 0), (6, 1)]
    clocks = [c for c, _, _ in seen]
    assert clocks == list(range(clocks[0], clocks[0] + 5))


def test_pack_partial_last_beat():
    """5 words with last into 4-word beats: one full beat, then one word with tkeep 0b11
    and tlast; the input never stalls while the output is ready."""
    dut = WordsToAxis(16, 4)
    out, stalls = [], []

    async def process(ctx):
        ctx.set(dut.m.tready, 1)
        words = [10, 11, 12, 13, 14]
        k = clock = 0
        while len(out) < 2 and clock < 20:
            ctx.set(dut.i.valid, k < len(words))
            if k < len(words):
                ctx.set(dut.i.p.data, words[k])
                ctx.set(dut.i.p.last, k == len(words) - 1)
                stalls.append(not ctx.get(dut.i.ready))
            if ctx.get(dut.m.tvalid):
                out.append((ctx.get(dut.m.tdata), ctx.get(dut.m.tkeep), ctx.get(dut.m.tlast)))
            took = k < len(words) and ctx.get(dut.i.ready)
            await ctx.tick()
            k += took
            clock += 1
    _run(dut, process)
    assert out == [(10 | 11 << 16 | 12 << 32 | 13 << 48, 0xFF, 0), (14, 0b11, 1)]
    assert not any(stalls)


def test_unpack_ready_ignores_the_block():
    """``s.tready`` never follows ``o.ready`` within a clock: with the block stalled the
    adapter takes two beats (its two slots), then holds ``tready`` low whatever ``o.ready``
    does in that clock, and takes the next beat only after a slot has emptied."""
    dut = AxisToWords(16, 2)
    ready_seen = []

    async def process(ctx):
        ctx.set(dut.s.tdata, 1 | 2 << 16)
        ctx.set(dut.s.tkeep, 0b1111)
        ctx.set(dut.s.tvalid, 1)
        ctx.set(dut.o.ready, 0)
        taken = 0
        for _ in range(4):
            taken += ctx.get(dut.s.tready)
            await ctx.tick()
        assert taken == 2
        for block_ready in (0, 1):          # same clock, both values of o.ready
            ctx.set(dut.o.ready, block_ready)
            ready_seen.append(ctx.get(dut.s.tready))
        await ctx.tick()                    # first word leaves, the slot still holds one
        ctx.set(dut.o.ready, 0)
        ready_seen.append(ctx.get(dut.s.tready))
        ctx.set(dut.o.ready, 1)
        await ctx.tick()                    # second word leaves: the slot is free next clock
        ctx.set(dut.o.ready, 0)
        ready_seen.append(ctx.get(dut.s.tready))
    _run(dut, process)
    assert ready_seen == [0, 0, 0, 1]
