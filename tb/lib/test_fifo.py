# SPDX-License-Identifier: Apache-2.0
"""The project's FIFO (hdl/lib/fifo.py) against a ``deque`` model, in the Amaranth simulator.

One contract for both forms, clock by clock: ``o.valid`` iff a word was taken in an
earlier clock and not yet given, ``o.payload`` the oldest one, ``i.ready`` iff fewer than
``depth`` words are held, ``level`` the number held.  The SpMV, LSTM and FC engines rely
on exactly this (their golden traces pin it), the registered form included.
"""

from collections import deque
import gc
import random
import warnings

from amaranth.hdl import UnusedElaboratable
from amaranth.sim import Simulator
import pytest

from hdl.lib.fifo import Queue

WIDTH = 10


def _run(dut, bench):
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


def _check(ctx, dut, model):
    assert ctx.get(dut.o.valid) == (len(model) > 0)
    if model:
        assert ctx.get(dut.o.payload) == model[0]
    assert ctx.get(dut.i.ready) == (len(model) < dut.depth)
    assert ctx.get(dut.level) == len(model)


async def _step(ctx, dut, model, valid, data, ready):
    """Drive one clock and check the outputs before it against the model."""
    ctx.set(dut.i.valid, valid)
    ctx.set(dut.i.payload, data)
    ctx.set(dut.o.ready, ready)
    _check(ctx, dut, model)
    took = valid and len(model) < dut.depth
    gave = ready and len(model) > 0
    await ctx.tick()
    if gave:
        model.popleft()
    if took:
        model.append(data)
    return took, gave


@pytest.mark.parametrize("registered", [False, True])
@pytest.mark.parametrize("depth", [1, 2, 3, 4, 5, 8, 17])
@pytest.mark.parametrize("valid_prob, ready_prob", [(1.0, 1.0), (0.5, 0.5), (0.9, 0.3),
                                                    (0.3, 0.9)])
def test_queue_matches_deque_model(registered, depth, valid_prob, ready_prob):
    if registered and depth == 1:
        pytest.skip("a registered head needs depth >= 2")
    dut = Queue(WIDTH, depth, registered=registered)
    rng = random.Random(depth * 1000 + int(valid_prob * 10) * 10 + int(ready_prob * 10))
    counts = {"full": 0, "both": 0}

    async def bench(ctx):
        model = deque()
        for _ in range(600):
            if len(model) == depth:
                counts["full"] += 1
            took, gave = await _step(ctx, dut, model, rng.random() < valid_prob,
                                     rng.getrandbits(WIDTH), rng.random() < ready_prob)
            counts["both"] += took and gave

    _run(dut, bench)
    if valid_prob > ready_prob:
        assert counts["full"] > 0            # the full state was reached
    if valid_prob == ready_prob == 1.0 and depth > 1:
        assert counts["both"] > 500          # one word in and one out per clock


@pytest.mark.parametrize("registered", [False, True])
@pytest.mark.parametrize("depth", [2, 5, 16])
def test_queue_fill_and_drain(registered, depth):
    """Fill while the reader stalls: exactly ``depth`` words are taken, a word offered
    while full is refused (also in a clock that reads), and they leave in order."""
    dut = Queue(WIDTH, depth, registered=registered)

    async def bench(ctx):
        model = deque()
        for k in range(depth + 3):
            took, _ = await _step(ctx, dut, model, True, k, False)
            assert took == (k < depth)
        assert list(model) == list(range(depth))
        took, gave = await _step(ctx, dut, model, True, 99, True)   # full: read only
        assert (took, gave) == (False, True)
        while model:
            await _step(ctx, dut, model, False, 0, True)
        for _ in range(2):
            await _step(ctx, dut, model, False, 0, True)          # empty stays empty

    _run(dut, bench)


def test_queue_word_into_empty_queue_is_offered_next_clock():
    """No same-clock pass-through; the next clock the word is at the head (both forms)."""
    for registered in (False, True):
        dut = Queue(WIDTH, 4, registered=registered)

        async def bench(ctx):
            ctx.set(dut.i.valid, 1)
            ctx.set(dut.i.payload, 0x155)
            ctx.set(dut.o.ready, 1)
            assert not ctx.get(dut.o.valid)
            await ctx.tick()
            ctx.set(dut.i.valid, 0)
            assert ctx.get(dut.o.valid) and ctx.get(dut.o.payload) == 0x155
            await ctx.tick()
            assert not ctx.get(dut.o.valid)

        _run(dut, bench)


@pytest.mark.parametrize("kwargs, exc, msg", [
    ({"depth": 0}, ValueError, "`depth` must be at least 1, not 0"),
    ({"depth": 1, "registered": True}, ValueError,
     "`depth` must be at least 2 with a registered head, not 1"),
    ({"depth": 2.0}, TypeError, "`depth` must be an integer, not 2.0"),
    ({"depth": True}, TypeError, "`depth` must be an integer, not True"),
    ({"depth": 4, "registered": 1}, TypeError, "`registered` must be a bool, not 1"),
])
def test_queue_init_wrong(kwargs, exc, msg):
    # (the refused object exists already, made by Elaboratable.__new__: collect it here
    # without its "created but never used" warning)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        with pytest.raises(exc, match=msg.replace("(", r"\(")):
            Queue(WIDTH, **kwargs)
        gc.collect()
