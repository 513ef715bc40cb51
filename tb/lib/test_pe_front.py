# SPDX-License-Identifier: Apache-2.0
"""The PE front end (hdl/lib/pe_front.py) in the Amaranth simulator: every pushed item
``(x, start, count)`` becomes the entry reads ``start .. start + count - 1`` with ``x``,
one per clock and back to back across items; an item pushed into an idle front end is
issued the next clock; ``idle`` says nothing is left to issue.  The SpMV and LSTM PEs use
it in both of its forms (``multi`` supplied by the pusher or compared here)."""

import random

from amaranth.sim import Simulator
import pytest

from hdl.lib.pe_front import PeFront

XW, AB, CB = 8, 6, 4


def _items(rng, n):
    return [(rng.randrange(-128, 128), rng.randrange(1 << AB), rng.randrange(1, 1 << CB))
            for _ in range(n)]


@pytest.mark.parametrize("multi", [False, True])
@pytest.mark.parametrize("depth, push_prob", [(2, 1.0), (4, 0.3), (8, 0.7), (17, 1.0)])
def test_pe_front_issues_every_entry_in_order(multi, depth, push_prob):
    rng = random.Random(depth * 10 + multi)
    items = _items(rng, 60)
    items[:3] = [(5, 0, 1), (-3, (1 << AB) - 1, 2), (7, 9, 1)]   # count 1, address wrap
    expected = [(x, (start + k) % (1 << AB)) for x, start, count in items
                for k in range(count)]
    dut = PeFront(XW, AB, CB, depth, multi=multi)
    issued = []

    async def bench(ctx):
        pending, taken = list(items), 0          # taken: entries of the items pushed
        prev_addr, prev_level = None, 0
        for _ in range(20 * len(expected)):
            valid = bool(pending) and rng.random() < push_prob
            if valid:
                x, start, count = pending[0]
                ctx.set(dut.push.payload.x, x)
                ctx.set(dut.push.payload.start, start)
                ctx.set(dut.push.payload.count, count)
                if multi:
                    ctx.set(dut.push.payload.multi, count > 1)
            ctx.set(dut.push.valid, valid)
            if ctx.get(dut.v):
                issued.append((ctx.get(dut.x), prev_addr))
            else:
                # an item waiting in the last clock (one pushed the clock before
                # included) was issued in it: no bubbles, and one clock from push to issue
                assert prev_level == 0
            level = ctx.get(dut.level)
            assert level <= depth
            assert ctx.get(dut.idle) == (taken == len(issued))   # nothing left to issue
            took = valid and ctx.get(dut.push.ready)
            prev_addr, prev_level = ctx.get(dut.addr), level
            await ctx.tick()
            if took:
                taken += pending.pop(0)[2]
            if not pending and taken == len(issued) and not ctx.get(dut.v):
                break

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert issued == expected
