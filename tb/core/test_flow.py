# SPDX-License-Identifier: Apache-2.0
"""The cycle twins of gen.core.flow against the gateware they model, clock by clock in the
Amaranth simulator under random valid/ready: every hand-shake signal the twin predicts
(``tready`` / ``i.ready``, ``valid``, ``last``, the beat's words) equals the gateware's in
every clock.  The shells' end-to-end tests (tb/<block>/test_shell.py) check the twins
again, composed, under both HDL simulators."""

from amaranth.sim import Simulator
import numpy as np
import pytest

from gen.core.fixed import REQUANT_LATENCY
from gen.core.flow import (AxisToWordsTwin, RequantTwin, Skid, WordsToAxisTwin, bench_start,
                           bench_window_end, packet_beats)
from hdl.lib.axis import AxisToWords, WordsToAxis
from hdl.lib.requant import RequantStage
from hdl.lib.skid import SkidBuffer

CLOCKS = 400


def _run(dut, process):
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(process)
    sim.run()


@pytest.mark.parametrize("words, p_valid, p_ready", [(1, 0.7, 0.6), (3, 0.5, 0.9),
                                                      (4, 0.9, 0.3)])
def test_axis_to_words_twin(words, p_valid, p_ready):
    """Beats of random ``tkeep`` (empty beats among them), held until taken, and a random
    ``o.ready``: ``tready``, ``o.valid`` and ``o.p.last`` as the twin says."""
    dut, twin = AxisToWords(8, words), AxisToWordsTwin()
    rng = np.random.default_rng(words)
    checked = []

    async def process(ctx):
        beat = None
        for _ in range(CLOCKS):
            if beat is None and rng.random() < p_valid:
                keep = int(rng.integers(0, 1 << words))
                beat = (keep, bool(rng.random() < 0.3))
            ctx.set(dut.s.tvalid, beat is not None)
            if beat is not None:
                ctx.set(dut.s.tkeep, beat[0])
                ctx.set(dut.s.tlast, beat[1])
            ready = bool(rng.random() < p_ready)
            ctx.set(dut.o.ready, ready)
            state = (ctx.get(dut.s.tready), ctx.get(dut.o.valid),
                     ctx.get(dut.o.valid) and ctx.get(dut.o.p.last))
            assert state == (twin.ready, twin.valid, twin.valid and twin.last)
            taken = beat if beat is not None and twin.ready else None
            checked.append(state)
            await ctx.tick()
            twin.clock(None if taken is None else (bin(taken[0]).count("1"), taken[1]),
                       twin.valid and ready)
            if taken is not None:
                beat = None
    _run(dut, process)
    assert any(s[0] for s in checked) and any(not s[0] for s in checked)


@pytest.mark.parametrize("words, p_valid, p_ready", [(1, 0.8, 0.5), (3, 0.9, 0.4),
                                                      (4, 0.8, 0.2)])
def test_words_to_axis_twin(words, p_valid, p_ready):
    """Words (random ``last``) and a random ``tready``: ``i.ready``, ``tvalid``, the beat's
    kept words and ``tlast`` as the twin says."""
    dut, twin = WordsToAxis(8, words), WordsToAxisTwin(words)
    rng = np.random.default_rng(10 + words)
    stalls = []

    async def process(ctx):
        for _ in range(CLOCKS):
            valid = bool(rng.random() < p_valid)
            last = bool(rng.random() < 0.2)
            tready = bool(rng.random() < p_ready)
            ctx.set(dut.i.valid, valid)
            ctx.set(dut.i.p.last, last)
            ctx.set(dut.m.tready, tready)
            assert ctx.get(dut.i.ready) == twin.ready(tready)
            assert ctx.get(dut.m.tvalid) == twin.tvalid
            if twin.tvalid:
                assert (bin(ctx.get(dut.m.tkeep)).count("1"), ctx.get(dut.m.tlast)) == \
                    (twin.out[0], twin.out[1])
            moved = valid and twin.ready(tready)
            stalls.append(valid and not moved)
            await ctx.tick()
            twin.clock(tready, last if moved else None)
    _run(dut, process)
    assert any(stalls)


def test_skid_twin():
    """Random ``i.valid`` / ``o.ready``: ``i.ready`` and ``o.valid`` as the twin says."""
    dut, twin = SkidBuffer(8), Skid()
    rng = np.random.default_rng(3)

    async def process(ctx):
        for _ in range(CLOCKS):
            valid, ready = bool(rng.random() < 0.7), bool(rng.random() < 0.5)
            ctx.set(dut.i.valid, valid)
            ctx.set(dut.o.ready, ready)
            assert (ctx.get(dut.i.ready), ctx.get(dut.o.valid)) == (twin.ready, twin.valid)
            push = True if valid and twin.ready else None
            await ctx.tick()
            twin.clock(push, twin.valid and ready)
    _run(dut, process)


class _Port:
    """A stand-in for the shell's ports around the stage: a source (``valid``, ``take``,
    ``drive``) or a sink (``at``, ``put``) driven by the test."""

    def __init__(self):
        self.valid = self.ready = False
        self.puts = []

    def drive(self, cycle):
        pass

    def take(self, ready, cycle):
        return self.valid and ready

    def at(self, cycle):
        return self.ready

    def put(self, cycle):
        self.puts.append(cycle)


@pytest.mark.parametrize("bias", [False, True])
def test_requant_twin(bias):
    """The parameters in clock 1 (loading 5 biases, or none), biases offered at random from
    clock 2, sums and ``o.ready`` at random: ``i.ready`` and ``o.valid`` as the twin says
    every clock (the credit counter, the pipeline, the output FIFO, the wait for the last
    bias)."""
    dut = RequantStage(24, 8, depth=16)
    twin = RequantTwin(REQUANT_LATENCY)
    q, b, out = _Port(), _Port(), _Port()
    twin.attach(out, q, b, bias, 5)
    rng = np.random.default_rng(int(bias))
    waited = []

    async def process(ctx):
        left = 5
        for cycle in range(CLOCKS):
            q.valid = cycle == 1
            ctx.set(dut.q.valid, q.valid)
            ctx.set(dut.q.p.bias, bias)
            ctx.set(dut.q.p.channels, 5)
            ctx.set(dut.q.p.positions, 1)
            b.valid = cycle >= 2 and left > 0 and bool(rng.random() < 0.1)
            ctx.set(dut.b.valid, b.valid)
            valid = cycle >= 2 and bool(rng.random() < 0.8)
            out.ready = bool(rng.random() < 0.4)
            ctx.set(dut.i.valid, valid)
            ctx.set(dut.o.ready, out.ready)
            assert (ctx.get(dut.i.ready), ctx.get(dut.o.valid)) == \
                (twin.at(cycle), twin.out_valid)
            waited.append(cycle >= 2 and not twin.at(cycle))
            if valid and twin.at(cycle):
                twin.put(cycle)
            if b.valid and not q.valid:
                left -= 1
            await ctx.tick()
            twin.clock(cycle)
    _run(dut, process)
    assert any(waited) and out.puts


def test_bench_timing():
    """The bench's clocks: the first job's start response after its register writes (four
    clocks each, the start write's three), its window after the last output beat (55
    clocks) or, without results, its STATUS polls every five clocks; packets in beats."""
    assert bench_start(4) == 19 and bench_start(2, after=183) == 184 + 11
    assert bench_window_end(19, 128, 128) == 183
    assert bench_window_end(19, None, 21) == 19 + 55          # done before the first poll
    assert bench_window_end(19, None, 22) == 19 + 55 + 5      # seen by the second
    assert bench_window_end(19, None, 30) == 19 + 55 + 2 * 5
    assert packet_beats(7, 3) == [(3, False), (3, False), (1, True)]
