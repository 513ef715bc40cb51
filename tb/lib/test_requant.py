# SPDX-License-Identifier: Apache-2.0
"""The requantisation stage (hdl/lib/requant.py) on its own in the Amaranth simulator, against
its golden model :func:`gen.core.fixed.requant_sums`: channel counting over positions and
channels, biases loaded before the first result, the rounding and saturation edges, ReLU,
the widest products, back-pressure, and a second job reusing the loaded biases.  The conv
and FC shells run it under Icarus and Verilator (tb/conv/test_shell.py, tb/fc/test_shell.py).
"""

import numpy as np
import pytest
from amaranth.sim import Simulator

from gen.core.fixed import requant_sums
from hdl.lib.requant import LATENCY, RequantStage


def _params(mult, shift, relu, bias, positions, channels):
    return (mult | shift << 16 | int(relu) << 22 | int(bias) << 23 | positions << 24
            | channels << 56)


def _sig(x):
    """A payload as a plain value (a data view's bits)."""
    return x.as_value() if hasattr(x, "as_value") else x


def _set(ctx, port, pattern):
    """Drive ``pattern`` (unsigned bits) onto ``port``, signed ports with the signed value."""
    sig = _sig(port)
    if sig.shape().signed and pattern >> (len(sig) - 1):
        pattern -= 1 << len(sig)
    ctx.set(sig, pattern)


def _run(dut, jobs, ready_prob=1.0, seed=0):
    """Run ``jobs`` = [(params dict, biases or None, sums (transfers, lanes))] one after the
    other; return per job the results and the clocks of the first sum taken / result out."""
    rng = np.random.default_rng(seed)
    out = []

    async def bench(ctx):
        mask = (1 << dut.acc_width) - 1
        for p, biases, sums in jobs:
            got, t_in, t_out, clock, outs = [], None, None, 0, []
            ctx.set(dut.q.valid, 1)
            _set(ctx, dut.q.payload, _params(**p))
            await ctx.tick()
            ctx.set(dut.q.valid, 0)
            queue = list(biases if biases is not None else [])
            i, n = 0, len(sums)
            while len(got) < n:
                ctx.set(dut.b.valid, bool(queue))
                if queue:
                    _set(ctx, dut.b.payload, int(queue[0]) & mask)
                ctx.set(dut.i.valid, i < n)
                if i < n:
                    lanes = [int(v) & mask for v in sums[i]]
                    _set(ctx, dut.i.payload, sum(v << (k * dut.acc_width)
                                                 for k, v in enumerate(lanes)))
                ready = rng.random() < ready_prob
                ctx.set(dut.o.ready, ready)
                if queue and ctx.get(dut.b.ready):
                    queue.pop(0)
                if i < n and ctx.get(dut.i.ready):
                    t_in = clock if t_in is None else t_in
                    i += 1
                if ctx.get(dut.o.valid) and ready:
                    t_out = clock if t_out is None else t_out
                    outs.append(clock)
                    raw = ctx.get(_sig(dut.o.payload))
                    w = dut.out_width
                    got.append([((raw >> (k * w)) & ((1 << w) - 1)) - (
                        (1 << w) if (raw >> (k * w + w - 1)) & 1 else 0)
                        for k in range(dut.lanes)])
                await ctx.tick()
                clock += 1
                assert clock < 50 * (n + 10), "the stage stopped"
            ctx.set(dut.i.valid, 0)
            ctx.set(dut.b.valid, 0)
            out.append((np.array(got), t_in, t_out, outs))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return out


def _want(sums, biases, p, width):
    """Golden: transfer k belongs to channel (k // positions) % channels."""
    k = np.arange(len(sums))
    per = np.asarray(biases)[(k // p["positions"]) % p["channels"]]
    return requant_sums(sums, per[:, None], mult=p["mult"], shift=p["shift"], width=width,
                        relu=p["relu"])


@pytest.mark.parametrize("acc, width, lanes, ready_prob", [
    (32, 8, 1, 1.0), (48, 16, 1, 0.5), (20, 6, 3, 0.7), (64, 32, 2, 1.0)])
def test_stage_matches_golden(acc, width, lanes, ready_prob):
    rng = np.random.default_rng(acc + lanes)
    dut = RequantStage(acc, width, lanes=lanes, depth=16)
    jobs, wants = [], []
    last_bias = None
    for j, (mult, shift, relu, positions, channels) in enumerate([
            (1, 0, False, 3, 5), (3, 7, True, 1, 16), (65535, 63, False, 2, 4),
            (0, 5, False, 1, 2), (40000, 20, True, 4, 3)]):
        hi = 1 << (acc - 1)
        sums = rng.integers(-hi, hi, (2 * positions * channels + 3, lanes), dtype=np.int64) \
            if acc < 64 else rng.integers(-(1 << 62), 1 << 62, (2 * positions * channels + 3,
                                                                  lanes), dtype=np.int64)
        sums[0, 0], sums[1, 0] = hi - 1 if acc < 64 else (1 << 62), -hi if acc < 64 else 0
        load = j != 3                      # job 3 keeps the biases of job 2
        biases = rng.integers(-hi // 2, hi // 2, channels) if load else last_bias[:channels]
        last_bias = biases
        p = dict(mult=mult, shift=shift, relu=relu, bias=load, positions=positions,
                 channels=channels)
        jobs.append((p, biases if load else None, sums))
        wants.append(_want(sums, biases, p, width))
    for (got, t_in, t_out, outs), want in zip(_run(dut, jobs, ready_prob, seed=acc), wants):
        np.testing.assert_array_equal(got, want)
        if ready_prob == 1.0:
            # LATENCY clocks to the first result, then one result per clock
            assert t_out - t_in == LATENCY and outs == list(range(t_out, t_out + len(got)))


def test_rounding_and_saturation_edges():
    """Round half up at the exact halves (positive and negative), saturation at both ends,
    ReLU clamping, shift 0 (no rounding term)."""
    dut = RequantStage(16, 4, depth=2)
    sums = np.array([[4], [-4], [12], [-12], [13], [100], [-100], [7], [-1]])
    for relu in (False, True):
        p = dict(mult=1, shift=3, relu=relu, bias=True, positions=1, channels=1)
        (got, *_), = _run(dut, [(p, [0], sums)])
        np.testing.assert_array_equal(got[:, 0], requant_sums(sums[:, 0], 0, mult=1, shift=3,
                                                              width=4, relu=relu))
        want = [1, 0, 2, -1, 2, 7, -8, 1, 0]      # 4/8 -> 1, -4/8 -> 0, -12/8 -> -1
        want = [max(v, 0) for v in want] if relu else want
        assert list(got[:, 0]) == want
    p = dict(mult=5, shift=0, relu=False, bias=True, positions=1, channels=1)
    (got, *_), = _run(dut, [(p, [1], np.array([[0], [1], [-2], [2]]))])
    assert list(got[:, 0]) == [5, 7, -5, 7]


def test_golden_range_checks():
    with pytest.raises(ValueError, match="mult"):
        requant_sums([1], 0, mult=1 << 16, shift=0, width=8)
    with pytest.raises(ValueError, match="shift"):
        requant_sums([1], 0, mult=1, shift=64, width=8)
    # exact beyond int64: (2**62 + 2**62) * 65535 >> 63
    got = requant_sums([1 << 62], [1 << 62], mult=65535, shift=63, width=32)
    assert got[0] == ((1 << 63) * 65535 + (1 << 62)) >> 63


def test_job_registers_refuse_what_the_stage_cannot_hold():
    """More channels than the bias memory (or the 16-bit register) holds, no positions, or a
    bias list of another length: a ValueError, never a silently wrapped job."""
    from gen.conv import ConvConfig
    from gen.core.fixed import Requant
    from gen.core.regmap import requant_regs
    from hdl.conv.shell import regmap_for
    regmap = regmap_for(ConvConfig(rows=4, cols=2, max_groups=2, rq_width=8, rq_depth=8))
    regs = requant_regs(regmap, Requant(mult=3, shift=2, relu=True, bias=[1] * 8), 5, 8, 8)
    assert regs == [[0x60, 3 | 2 << 16 | 1 << 22 | 1 << 23], [0x64, 5], [0x68, 8]]
    for args, match in (((Requant(), 1, 9, 8), "1..8 channels"),
                        ((Requant(), 1, 1 << 16, 1 << 16), "1..65535 channels"),
                        ((Requant(), 0, 4, 8), "positions"),
                        ((Requant(bias=[1, 2]), 1, 3, 8), "2 biases for 3 channels")):
        with pytest.raises(ValueError, match=match):
            requant_regs(regmap, *args)
