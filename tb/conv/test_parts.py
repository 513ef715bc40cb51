# SPDX-License-Identifier: Apache-2.0
"""Unit tests of the conv array's sub-components (:mod:`hdl.conv`), one or more per
component, in the Amaranth simulator: each checks what the component's docstring says it
does, with directed cases and a random one against a small Python model."""

import random

import numpy as np
import pytest
from amaranth.lib import data
from amaranth.sim import Simulator

from gen.conv import ConvConfig, ConvLayer, descriptor_fields, pass_lanes, pass_layout, plan
from gen.conv.descriptor import descriptor
from gen.conv.layout import MIN_BOX
from hdl.conv.box import TileBox, box_fields
from hdl.conv.columns import Columns
from hdl.conv.control import FSM_STATES, STAT_BUSY_BITS, Control
from hdl.conv.copy import Copy
from hdl.conv.drain import Drain
from hdl.conv.issue import IssueControl
from hdl.conv.layouts import PASS_FIELDS, pass_regs_layout
from hdl.conv.loaders import Loaders
from hdl.conv.pipeline import MacPipeline
from hdl.conv.stall import IssueStall
from hdl.conv.streamer import OUT_FIFO_DEPTH, OutputFifo, Streamer

CFG = ConvConfig(rows=8, cols=4, max_groups=4, feat_depth=512, weight_depth=512,
                 out_depth=128, max_slots=64, max_dim=16)


def _layout(cfg):
    return data.StructLayout({n: w for n, w in descriptor_fields(cfg)})


def _run(dut, bench, vcd=None):
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


# ------------------------------------------------------------------ OutputFifo

@pytest.mark.parametrize("ready_p, seed", [(1.0, 0), (0.5, 1), (0.2, 2)])
def test_output_fifo(ready_p, seed):
    """Words leave in step order, each the bank word ``words[bank][col]`` of the clock two
    after its step; ``room`` is exactly "FIFO words + words on their way + this clock's step
    < 5"; stepping whenever ``room`` never overflows the five words; with
    ``o.ready`` always high ``room`` never drops (a step every clock)."""
    cfg = ConvConfig(rows=2, cols=4, max_groups=2, feat_depth=16, weight_depth=16,
                     out_depth=16, max_slots=4, max_dim=4)
    dut = OutputFifo(cfg)
    rng = random.Random(seed)
    expect, got, pending = [], [], []
    room_low, exact = [], []

    async def bench(ctx):
        for cyc in range(300):
            want = rng.random() < 0.8
            room = ctx.get(dut.room)
            if not room:
                room_low.append(cyc)
            step = int(want and room and cyc < 250)
            col, bank = rng.randrange(4), rng.randrange(2)
            words = [[rng.randrange(-1000, 1000) for _ in range(4)] for _ in range(2)]
            ctx.set(dut.step, step)
            ctx.set(dut.col, col)
            ctx.set(dut.bank, bank)
            for b in range(2):
                for c in range(4):
                    ctx.set(dut.words[b][c], words[b][c])
            ready = int(rng.random() < ready_p)
            ctx.set(dut.o.ready, ready)
            # room is exact (the streamer's cycles depend on it): the words in the FIFO,
            # the two on their way and this clock's step leave room for one more
            level = len(expect) - len(got)
            exact.append(ctx.get(dut.room) == (level + len(pending) + step < OUT_FIFO_DEPTH))
            # a step of clock t pushes words[bank_t][col_t] as seen in clock t + 2
            pending[:] = [(t - 1, b, c) for t, b, c in pending]
            expect.extend(words[b][c] for t, b, c in pending if t == 0)
            pending[:] = [p for p in pending if p[0] > 0]
            if step:
                pending.append((2, bank, col))
            if ctx.get(dut.o.valid) and ready:
                got.append(ctx.get(dut.o.payload))
            await ctx.tick()
    _run(dut, bench)
    assert got == expect[:len(got)] and len(got) >= len(expect) - OUT_FIFO_DEPTH
    assert len(got) > 40 and all(exact)
    if ready_p == 1.0:
        assert room_low == []
    else:
        assert room_low


# ------------------------------------------------------------------ Streamer

def _stream_order(sched):
    """(col, addr) of every output word in stream order (image, o, oy, ox): column ``c``
    of tile ``t`` holds window group ``t * cols + c``, copy ``g`` its window ``j * n + g``,
    at slot address ``t * n * Oc + g * Oc + o``."""
    layer, cols = sched.layer, sched.cfg.cols
    out, cend = [], []
    for p in sched.passes:
        cend.append((cend[-1] if cend else 0) + p.r * p.count)
    for img in range(layer.batch):
        for o in range(layer.oc):
            p = sched.passes[next(i for i, e in enumerate(cend) if o < e)]
            _, wv, _ = pass_layout(layer, cols, p.n, sched.flat)
            for oy in range(layer.ho):
                for ox in range(layer.wo):
                    j, g = divmod(ox, p.n)
                    t, c = divmod((img * layer.ho + oy) * wv + j, cols)
                    out.append((c, t * p.n * layer.oc + g * layer.oc + o))
    return out


def _streamer_bench(dut, scheds, rng, room_p):
    """Hands every layer of ``scheds`` to the streamer as the FSM does (STAT, then HANDOFF
    until the streamer is idle) and returns per layer the (bank, col, addr) of its steps."""
    runs = []

    async def bench(ctx):
        for sched in scheds:
            d = descriptor(sched)
            for name, _ in descriptor_fields(sched.cfg):
                ctx.set(getattr(dut.d, name), int(d[name]))
            ctx.set(dut.room, 1)
            for _ in range(3):
                await ctx.tick()
            while ctx.get(dut.busy):            # the previous layer streams on
                await ctx.tick()
            ctx.set(dut.stat_take, 1)
            await ctx.tick()
            ctx.set(dut.stat_take, 0)
            ctx.set(dut.in_handoff, 1)
            own0 = ctx.get(dut.own)
            steps = []
            handoff = True
            for _ in range(20000):
                if ctx.get(dut.step):
                    steps.append((ctx.get(dut.bank), ctx.get(dut.col), ctx.get(dut.addr)))
                ctx.set(dut.room, int(rng.random() < room_p))
                await ctx.tick()
                if handoff and ctx.get(dut.busy):
                    # the FSM leaves HANDOFF when it sees the streamer idle: here, the
                    # handoff has happened (busy rises the clock after it)
                    ctx.set(dut.in_handoff, 0)
                    handoff = False
                    assert ctx.get(dut.own) == own0 ^ 3
                if not handoff and not ctx.get(dut.busy):
                    break
            runs.append(steps)
    return bench, runs


@pytest.mark.parametrize("room_p, seed", [(1.0, 0), (0.6, 1)])
def test_streamer_order(room_p, seed):
    """Layers of several passes, of 1 to 4 copies, batches, flat and strip mappings:
    every step reads the output word of the next position in stream order, from the bank
    the compute side just left; the banks alternate from layer to layer."""
    scheds = [plan(ConvLayer(11, 2, 5, 6, 3, 3, stride=1, pad=1), CFG, "remainder"),
              plan(ConvLayer(5, 2, 4, 5, 3, 3, stride=1, pad=1, batch=2), CFG, "remainder"),
              plan(ConvLayer(3, 1, 5, 5, 3, 3, stride=2, pad=0), CFG, "naive"),
              plan(ConvLayer(2, 1, 5, 7, 3, 3, stride=1, pad=1), CFG, "seed"),
              plan(ConvLayer(2, 1, 4, 6, 3, 3, stride=1, pad=1, batch=2), CFG, "remainder")]
    assert max(len(s.passes) for s in scheds) >= 2
    assert {p.n for s in scheds for p in s.passes} == {1, 2, 3, 4}
    assert {s.flat for s in scheds} == {False, True}
    dut = Streamer(CFG, _layout(CFG))
    bench, runs = _streamer_bench(dut, scheds, random.Random(seed), room_p)
    _run(dut, bench)
    for k, (sched, steps) in enumerate(zip(scheds, runs)):
        assert [(c, a) for _, c, a in steps] == _stream_order(sched), k
        assert {b for b, _, _ in steps} == {k % 2}


# ------------------------------------------------------------------ Loaders

def _weight_writes(sched, chunk, w):
    """{(address, row): weight} of one chunk: weight (o, ic, ky, kx) of the chunk at
    block b * kq + kx * q * kh + ic * kh + ky (b counts the blocks across the passes), in
    the banks of rows g * R + li of the copies g < n of its pass."""
    layer = sched.layer
    q = sched.chunk_sizes[chunk]
    kq = q * layer.kh * layer.kw
    out, o0, b = {}, 0, 0
    for p in sched.passes:
        for blk in range(p.count):
            for li in range(p.r):
                o = o0 + blk * p.r + li
                for ic in range(q):
                    for ky in range(layer.kh):
                        for kx in range(layer.kw):
                            addr = (b * kq + kx * q * layer.kh + ic * layer.kh + ky)
                            for g in range(p.n):
                                out[(addr, g * p.r + li)] = int(w[o, chunk * sched.icq + ic,
                                                                  ky, kx])
            b += 1
        o0 += p.r * p.count
    return out


def _feature_writes(sched, chunk, x):
    """{address: word} of one chunk's padded maps, banks [ic][image][Hp][Wp]."""
    layer = sched.layer
    q = sched.chunk_sizes[chunk]
    hp, wp, pad = layer.h + 2 * layer.pad, layer.w + 2 * layer.pad, layer.pad
    out = {}
    for img in range(layer.batch):
        for ic in range(q):
            for yp in range(hp):
                for xp in range(wp):
                    y, xx = yp - pad, xp - pad
                    inside = 0 <= y < layer.h and 0 <= xx < layer.w
                    v = int(x[img, chunk * sched.icq + ic, y, xx]) if inside else 0
                    out[((ic * layer.batch + img) * hp + yp) * wp + xp] = v
    return out


def _loaders_bench(dut, sched, w, x, rng, valid_p):
    """Runs the chunks of ``sched`` through the loaders as the FSM does (descriptor taken,
    CHUNK, WLOAD until x_start, XLOAD until x_done) and records the bank writes."""
    layer, cfg = sched.layer, sched.cfg
    d = descriptor(sched)
    res = {"w": [], "f": [], "bad": []}

    async def bench(ctx):
        fields = [n for n, _ in descriptor_fields(cfg)]
        for n in fields:
            ctx.set(getattr(dut.dsrc, n), int(d[n]))
        ctx.set(dut.take, 1)
        ctx.set(dut.take_pass, 1)
        for chunk in range(sched.chunks):
            q = sched.chunk_sizes[chunk]
            ws = [int(w[o, chunk * sched.icq + ic, ky, kx]) for o in range(layer.oc)
                  for ic in range(q) for ky in range(layer.kh) for kx in range(layer.kw)]
            xs = [int(x[b, chunk * sched.icq + ic, yy, xx]) for b in range(layer.batch)
                  for ic in range(q) for yy in range(layer.h) for xx in range(layer.w)]
            ctx.set(dut.chunk_go, 1)
            await ctx.tick()
            ctx.set(dut.take, 0)
            ctx.set(dut.take_pass, 0)
            ctx.set(dut.chunk_go, 0)
            for n in fields:
                ctx.set(getattr(dut.d, n), int(d[n]))
            ctx.set(dut.chunk, 0b1111)
            ctx.set(dut.last_chunk, int(chunk == sched.chunks - 1))
            await ctx.tick()                            # CHUNK
            ctx.set(dut.chunk, 0)
            ctx.set(dut.kq, q * layer.kh * layer.kw)
            ctx.set(dut.cqkh, q * layer.kh)
            ctx.set(dut.wl_on, 1)
            phase, writes_w, writes_f = "w", {}, {}
            for _ in range(20000):
                vw = int(bool(ws) and rng.random() < valid_p)
                vx = int(bool(xs) and rng.random() < valid_p)
                ctx.set(dut.w.valid, vw)
                ctx.set(dut.w.payload, ws[0] if ws else 0)
                ctx.set(dut.x.valid, vx)
                ctx.set(dut.x.payload, xs[0] if xs else 0)
                if vw and ctx.get(dut.w.ready):
                    ws.pop(0)
                if vx and ctx.get(dut.x.ready):
                    xs.pop(0)
                hit = ctx.get(dut.w_hit)
                for r in range(cfg.rows):
                    if hit >> r & 1:
                        writes_w[(ctx.get(dut.w_addr), r)] = ctx.get(dut.w_data)
                for c in range(cfg.cols):
                    if ctx.get(dut.f_en[c]):
                        writes_f.setdefault(c, {})[ctx.get(dut.f_addr[c])] = \
                            ctx.get(dut.f_data[c])
                x_start, x_done = ctx.get(dut.x_start), ctx.get(dut.x_done)
                await ctx.tick()
                if phase == "w" and x_start:
                    phase = "x"
                    ctx.set(dut.wl_on, 0)
                    ctx.set(dut.xl_on, 1)
                elif phase == "x" and x_done:
                    phase = "drain"
                    ctx.set(dut.xl_on, 0)
                elif phase.startswith("drain"):
                    phase += "+"
                    if len(phase) > 8:
                        break
            res["w"].append(writes_w)
            res["f"].append(writes_f)
            res["bad"].append((len(ws), len(xs)))
    return bench, res


@pytest.mark.parametrize("valid_p, seed", [(1.0, 0), (0.5, 1)])
def test_loaders(valid_p, seed):
    """Each weight lands in the banks of the rows of its copies at its block address, each
    padded feature position in every column's bank (zeros at the borders, no word taken),
    over two chunks of input channels, a batch and two passes; WLOAD ends on the chunk's
    last weight, XLOAD on its last feature word."""
    cfg = ConvConfig(rows=8, cols=4, max_groups=4, feat_depth=512, weight_depth=512,
                     out_depth=128, max_slots=64, max_dim=16, max_passes=3)
    layer = ConvLayer(19, 5, 4, 5, 3, 3, stride=1, pad=1, batch=2)
    sched = plan(layer, cfg, "remainder", icq=3)
    assert sched.chunks == 2 and len(sched.passes) >= 2 and sched.passes[0].count == 2
    rng = np.random.default_rng(seed)
    w = rng.integers(-128, 128, (layer.oc, layer.ic, layer.kh, layer.kw))
    x = rng.integers(-128, 128, (layer.batch, layer.ic, layer.h, layer.w))
    dut = Loaders(cfg, _layout(cfg))
    bench, res = _loaders_bench(dut, sched, w, x, random.Random(seed), valid_p)
    _run(dut, bench)
    assert res["bad"] == [(0, 0)] * sched.chunks
    for chunk in range(sched.chunks):
        assert res["w"][chunk] == _weight_writes(sched, chunk, w)
        for c in range(cfg.cols):
            assert res["f"][chunk][c] == _feature_writes(sched, chunk, x)


# ------------------------------------------------------------------ TileBox

def _box_model(d, states, skip, cqkh):
    """The box of the lanes ``states`` [(img, jn, ty, jns)]: the kernel rows / columns not
    in the padding for some valid lane; the whole kernel without skip or when it has
    fewer than MIN_BOX positions."""
    kh, kw, pad, h, w = d["kh"], d["kw"], d["pad"], d["h"], d["w"]
    ok = [s for s in states if s[0] < d["batch"] and s[1] < d["wo"]]
    ylo = min(max(pad - ty, 0) for _, _, ty, _ in ok)
    yhi = max(min(kh, pad + h - ty) for _, _, ty, _ in ok)
    xlo = min(max(pad - jns, 0) for _, _, _, jns in ok)
    xhi = max(min(kw, pad + w - jns) for _, _, _, jns in ok)
    nky, nkx = yhi - ylo, xhi - xlo
    if not skip or nky * nkx < MIN_BOX:
        ylo, xlo, nky, nkx = 0, 0, kh, kw
    out = {"ky0": ylo, "kx0": xlo, "fbox": ylo * d["wp"] + xlo, "wbox": xlo * cqkh + ylo}
    for ax, n in (("y", nky), ("x", nkx)):
        out.update({f"k{ax}l": n - 1, f"k{ax}m": (n - 2) % 256, f"k{ax}m1": (n - 3) % 256,
                    f"k{ax}z": int(n == 1), f"k{ax}m0": int(n == 2)})
    return out


@pytest.mark.parametrize("skip, seed", [(1, 0), (1, 1), (0, 2)])
def test_tile_box(skip, seed):
    """The next tile's box (``cbox``, from ``cur``) 6 clocks after the states, and the
    first tile's box (``ibox``, column c's state on ``walk`` while ``walk_load[c]``), both
    against the model over random lanes of a 5 x 5 kernel with padding 2."""
    layer = ConvLayer(1, 1, 6, 7, 5, 5, stride=1, pad=2, batch=2)
    sched = plan(layer, CFG, "naive", skip_pad=bool(skip))
    d = descriptor(sched)
    dut = TileBox(CFG, _layout(CFG))
    rng = random.Random(seed)
    fields = list(box_fields(CFG))
    cqkh = 5
    checked = []

    def lane():
        img = rng.choice([0, 0, 0, 1, 2])
        jn = rng.randrange(0, 9)
        ty = rng.randrange(0, layer.ho + 1)
        return img, jn, ty, jn

    async def bench(ctx):
        for n, _ in descriptor_fields(CFG):
            ctx.set(getattr(dut.d, n), int(d[n]))
        ctx.set(dut.n, 1)
        ctx.set(dut.cqkh, cqkh)
        await ctx.tick().repeat(3)              # (the per-layer constants load)
        for _ in range(12):
            states = [lane() for _ in range(CFG.cols)]
            states[rng.randrange(CFG.cols)] = (0, rng.randrange(layer.wo), rng.randrange(
                layer.ho), 0)                       # at least one valid lane
            states = [(i, j, t, j if k else s) for k, (i, j, t, s) in enumerate(states)]
            for c, st in enumerate(states):
                for f, v in zip(("img", "jn", "ty", "jns"), st):
                    ctx.set(getattr(dut.cur[c], f), v)
            for c, st in enumerate(states):         # the walk: column c's state in clock c
                for f, v in zip(("img", "jn", "ty", "jns"), st):
                    ctx.set(getattr(dut.walk, f), v)
                ctx.set(dut.walk_load, 1 << c)
                await ctx.tick()
            ctx.set(dut.walk_load, 0)
            for f, v in zip(("img", "jn", "ty", "jns"), (9, 9, 9, 9)):
                ctx.set(getattr(dut.walk, f), v)   # (no load: ignored)
            await ctx.tick().repeat(6)
            want = _box_model(d, states, skip, cqkh)
            got_c = {f: ctx.get(getattr(dut.cbox, f)) for f in fields}
            got_i = {f: ctx.get(getattr(dut.ibox, f)) for f in fields}
            assert got_c == want and got_i == want, (states, got_i)
            checked.append(want["kyl"] + 1 < layer.kh or want["kxl"] + 1 < layer.kw)
    _run(dut, bench)
    assert any(checked) == bool(skip)


# ------------------------------------------------------------------ Control

def test_control_sequence():
    """A two-chunk layer through the FSM: IDLE takes the descriptor (c.ready), CHUNK loads
    each chunk's constants (kq / dq / cqkh / iccl of the first or the last chunk), WLOAD
    and XLOAD end on x_start / x_done, COMPUTE one clock after the issue stage, pipeline
    and drain are idle, STAT sends the busy count (the sum of pc over the layer) and the
    compute cycles, HANDOFF waits for the streamer."""
    layer = ConvLayer(3, 5, 4, 4, 3, 3, stride=1, pad=1)
    sched = plan(layer, CFG, "remainder", icq=3)
    assert sched.chunks == 2
    d = descriptor(sched)
    dut = Control(CFG, _layout(CFG))
    names = FSM_STATES
    log = {}

    async def bench(ctx):
        for n, _ in descriptor_fields(CFG):
            ctx.set(getattr(dut.c.payload, n), int(d[n]))
        ctx.set(dut.pipe_idle_n, 1)
        ctx.set(dut.drain_idle_n, 1)
        await ctx.tick().repeat(2)
        assert names[ctx.get(dut.state)] == "IDLE" and ctx.get(dut.c.ready)
        ctx.set(dut.c.valid, 1)
        await ctx.tick()
        ctx.set(dut.c.valid, 0)
        assert ctx.get(dut.d.as_value()) == ctx.get(dut.c.payload.as_value())
        busy, ccyc = 0, 0
        for chunk in range(2):
            assert names[ctx.get(dut.state)] == "CHUNK"
            await ctx.tick()
            last = chunk == 1
            assert names[ctx.get(dut.state)] == "WLOAD" and ctx.get(dut.wl_on)
            assert ctx.get(dut.kq) == d["kq_last" if last else "kq"]
            assert ctx.get(dut.dq) == d["dq_last" if last else "dq"]
            assert ctx.get(dut.cqkh) == d["qkh_last" if last else "qkh"]
            assert ctx.get(dut.iccl) == d["icq_last" if last else "icq"] - 1
            assert ctx.get(dut.last_chunk) == last and ctx.get(dut.first_chunk) == (not last)
            await ctx.tick().repeat(3)
            ctx.set(dut.x_start, 1)
            await ctx.tick()
            ctx.set(dut.x_start, 0)
            assert names[ctx.get(dut.state)] == "XLOAD" and ctx.get(dut.xl_on)
            await ctx.tick().repeat(2)
            ctx.set(dut.x_done, 1)
            ctx.set(dut.issuing, 1)
            await ctx.tick()
            ctx.set(dut.x_done, 0)
            assert names[ctx.get(dut.state)] == "COMPUTE" and ctx.get(dut.computing)
            ctx.set(dut.pipe_idle_n, 0)
            for k in range(7):                  # the compute phase: MAC enables counted
                ctx.set(dut.pc, k + chunk)
                busy += k + chunk
                if k == 4:
                    ctx.set(dut.issuing, 0)
                await ctx.tick()
                ccyc += 1
            ctx.set(dut.pc, 0)
            ctx.set(dut.pipe_idle_n, 1)
            n = 0
            while names[ctx.get(dut.state)] == "COMPUTE":
                await ctx.tick()
                ccyc += 1
                n += 1
            log[chunk] = n
        assert names[ctx.get(dut.state)] == "STAT" and ctx.get(dut.s.valid)
        await ctx.tick().repeat(3)
        word = ctx.get(dut.s.payload)
        assert word & ((1 << STAT_BUSY_BITS) - 1) == busy
        assert word >> STAT_BUSY_BITS == ccyc
        ctx.set(dut.s.ready, 1)
        ctx.set(dut.stream_busy, 1)
        assert ctx.get(dut.stat_take)
        await ctx.tick()
        ctx.set(dut.s.ready, 0)
        assert names[ctx.get(dut.state)] == "HANDOFF" and ctx.get(dut.in_handoff)
        await ctx.tick().repeat(3)
        assert names[ctx.get(dut.state)] == "HANDOFF" and not ctx.get(dut.c.ready)
        ctx.set(dut.stream_busy, 0)
        await ctx.tick()
        assert names[ctx.get(dut.state)] == "IDLE" and ctx.get(dut.c.ready)
    _run(dut, bench)
    # the phase ends two clocks after pipe_idle_n (registered, then c_end registered)
    assert log == {0: 3, 1: 3}


# ------------------------------------------------------------------ Drain

@pytest.mark.parametrize("n, r, seed", [(2, 3, 0), (3, 2, 1), (1, 8, 2)])
def test_drain(n, r, seed):
    """Captures of ``n`` copies of ``R`` rows drain into the owned bank at their tile
    addresses (copy g: shadow rows g R ..), summed with the old values after the first
    chunk (a layer's first chunk overwrites the previous layer's); the streamer then reads the bank back through port 0 (``words``, two clocks
    after ``st_addr``) once the bank is no longer owned; ``idle_n`` falls while a drain
    is pending."""
    dut = Drain(CFG)
    rng = random.Random(seed)
    MC, tiles = CFG.cols, 3
    expect = {}
    seen_busy = []

    async def bench(ctx):
        ctx.set(dut.own, 0b01)
        ctx.set(dut.cap_n, n)
        ctx.set(dut.cap_r, r)
        ctx.set(dut.cap_rle, int(r <= CFG.drain_rows))
        for chunk in range(4):                      # two layers of two chunks
            ctx.set(dut.first_chunk, int(chunk % 2 == 0))
            for t in range(tiles):
                vals = [[rng.randrange(-1000, 1000) for _ in range(MC)] for _ in range(n * r)]
                for row in range(n * r):
                    for c in range(MC):
                        ctx.set(dut.shadow[row][c], vals[row][c])
                for g in range(n):                  # the copies capture one after another
                    gob = t * n * 4 + g * 4 + 1
                    ctx.set(dut.cap_next, 1 << g)
                    ctx.set(dut.cap_gob_next[g], gob)
                    await ctx.tick()
                    ctx.set(dut.cap_next, 0)
                    ctx.set(dut.cap, 1 << g)
                    await ctx.tick()
                    ctx.set(dut.cap, 0)
                    for i in range(r):
                        for c in range(MC):
                            old = expect.get((gob + i, c), 0) if chunk % 2 else 0
                            expect[(gob + i, c)] = old + vals[g * r + i][c]
                for _ in range(n * -(-r // CFG.drain_rows) + 6):
                    seen_busy.append(not ctx.get(dut.idle_n))
                    await ctx.tick()
                assert ctx.get(dut.idle_n)
        ctx.set(dut.own, 0b10)                      # bank 0 streams now
        addrs = sorted({a for a, _ in expect})
        got = {}
        for k in range(len(addrs) + 1):
            if k < len(addrs):
                ctx.set(dut.st_addr, addrs[k])
            await ctx.tick()
            if k >= 1:                              # (the word of the previous address)
                for c in range(MC):
                    got[(addrs[k - 1], c)] = ctx.get(dut.words[0][c])
        assert got == expect
    _run(dut, bench)
    assert any(seen_busy)


# ------------------------------------------------------------------ MacPipeline

@pytest.mark.parametrize("seed", [0, 1])
def test_mac_pipeline(seed):
    """Two staggered copies of R = 3 rows (on tiles of different parity): each row's MACs
    sum the products of its copy's beats (row weight bank at the beat's weight address,
    column feature bank of the tile parity at window base + feature offset, zero in an
    invalid lane); the tile's sums are
    captured ISSUE_TO_ACC clocks after its last beat (cap, with cap_gob_next a clock
    ahead); a stalled clock (adv low) issues nothing; pc counts the MAC enables."""
    from gen.conv.cycles import ISSUE_TO_ACC
    dut = MacPipeline(CFG)
    rng = random.Random(seed)
    MR, MC, R, n, K = CFG.rows, CFG.cols, 3, 2, 5
    wbank = [[rng.randrange(-128, 128) for _ in range(32)] for _ in range(MR)]
    fbank = [[rng.randrange(-128, 128) for _ in range(64)] for _ in range(MC)]
    # (the copies on tiles of one parity share a feature read port: all read the word of
    # the lowest such copy, as the stagger guarantees; here copy g is on parity g)
    base = [[3 * c + 1, 5 * c + 2] for c in range(MC)]
    lanes = [[1, 1, 0, 1], [1, 0, 1, 1]]
    beats = {g: [(rng.randrange(20), rng.randrange(32)) for _ in range(K)] for g in range(n)}
    start = {0: 0, 1: 2}
    stall = 3                                   # the issue stage stalls in this clock
    caps, pcs = [], []

    async def bench(ctx):
        for r in range(MR):                     # fill the banks through the write ports
            for a, v in enumerate(wbank[r]):
                ctx.set(dut.w_addr, a)
                ctx.set(dut.w_data, v)
                ctx.set(dut.w_hit, 1 << r)
                await ctx.tick()
        ctx.set(dut.w_hit, 0)
        for a in range(64):
            for c in range(MC):
                ctx.set(dut.f_addr[c], a)
                ctx.set(dut.f_data[c], fbank[c][a])
                ctx.set(dut.f_en[c], 1)
            await ctx.tick()
        for c in range(MC):
            ctx.set(dut.f_en[c], 0)
            ctx.set(dut.base[c][0], base[c][0])
            ctx.set(dut.base[c][1], base[c][1])
        ctx.set(dut.par, 0b10)
        ctx.set(dut.r, R)
        ctx.set(dut.n, n)
        ctx.set(dut.setup, 1)
        await ctx.tick().repeat(8)
        ctx.set(dut.setup, 0)
        for g in range(n):
            ctx.set(dut.gob[g], 100 + g)
            ctx.set(dut.lanev[g], sum(b << c for c, b in enumerate(lanes[g])))
        t, done = 0, {0: 0, 1: 0}
        for clk in range(40):
            adv = int(clk != stall)
            act = 0
            for g in range(n):
                k = done[g]
                if clk >= start[g] and k < K:
                    act |= 1 << g
                    ctx.set(dut.foff[g], beats[g][k][0])
                    ctx.set(dut.waddr[g], beats[g][k][1])
                    ctx.set(dut.fk, (ctx.get(dut.fk) & ~(1 << g)) | (int(k == 0) << g))
                    ctx.set(dut.last_k, (ctx.get(dut.last_k) & ~(1 << g))
                            | (int(k == K - 1) << g))
                    if adv:
                        done[g] += 1
            ctx.set(dut.act, act)
            ctx.set(dut.adv, adv)
            ctx.set(dut.first, 1)
            if ctx.get(dut.cap):
                caps.append((clk, ctx.get(dut.cap), ctx.get(dut.cap_n), ctx.get(dut.cap_r)))
            if ctx.get(dut.cap_next):
                caps.append(("next", ctx.get(dut.cap_next),
                             [ctx.get(dut.cap_gob_next[g]) for g in range(n)]))
            pcs.append(ctx.get(dut.pc))
            await ctx.tick()
            t += 1
        ctx.set(dut.act, 0)
        for r in range(n * R):
            g = r // R
            for c in range(MC):
                want = sum(wbank[r][wa] * fbank[c][base[c][g] + fo] for fo, wa in beats[g]) \
                    if lanes[g][c] else 0
                assert ctx.get(dut.shadow[r][c]) == want, (r, c)
    _run(dut, bench)
    # copy g issues its last beat at start + K - 1 (+ 1 if it stalled), captured (cap)
    # ISSUE_TO_ACC clocks later
    last = {g: start[g] + K - 1 + int(start[g] <= stall < start[g] + K + 1) for g in range(n)}
    got = [(c[0], c[1]) for c in caps if c[0] != "next"]
    assert got == [(last[g] + ISSUE_TO_ACC, 1 << g) for g in range(n)]
    assert [c[1] for c in caps if c[0] == "next"] == [1, 2]
    assert all(c[2] == n and c[3] == R for c in caps if c[0] != "next")
    assert sum(pcs) == sum(K * R * sum(lanes[g]) for g in range(n))


# ------------------------------------------------------------------ IssueStall

def _stall_jobs(rng, ng, kq1, passes):
    """Per pass, per copy the last-beat flags of its beats (tiles of 1 beat with kq1, else of
    2..5 beats), the stagger ``D`` and the idle clocks before the pass's set-up ends."""
    jobs = []
    for _ in range(passes):
        n = rng.randint(1, ng)
        tiles = rng.randint(1, 4)
        lens = [1] * tiles if kq1 else [rng.randint(2, 5) for _ in range(tiles)]
        beats = [flag for L in lens for flag in [0] * (L - 1) + [1]]
        jobs.append({"n": n, "beats": beats, "D": rng.randint(1, 3), "gap": rng.randint(1, 4)})
    return jobs


@pytest.mark.parametrize("drain_rows, r, kq1, seed", [(1, 1, 0, 0), (1, 3, 0, 1), (2, 5, 0, 2),
                                                      (3, 4, 1, 3), (1, 2, 1, 4)])
def test_issue_stall(drain_rows, r, kq1, seed):
    """The stall against a direct model of the drain at issue time: a copy's capture (the
    issue of its tile's last beat) waits while its previous capture is not drained, the
    first capture of a pass while anything is; captures issued together drain one after
    the other, ``ceil(R / drain_rows)`` clocks each.  The copies are emulated in the
    testbench (closed loop: they advance only when ``adv`` is high); ``w`` is checked too."""
    cfg = ConvConfig(rows=8, cols=4, max_groups=4, feat_depth=64, weight_depth=64,
                     out_depth=32, max_slots=8, max_dim=8, drain_rows=drain_rows)
    NG, dg = cfg.max_groups, -(-r // drain_rows)
    dut = IssueStall(cfg, 16)
    rng = random.Random(seed)
    jobs = _stall_jobs(rng, NG, kq1, 4)
    stalls = []

    async def bench(ctx):
        ctx.set(dut.r, r)
        ctx.set(dut.kq1, kq1)
        ctx.set(dut.clear, 1)
        await ctx.tick().repeat(3)
        ctx.set(dut.clear, 0)
        pdL, pdF = 0, [0] * NG
        for job in jobs:
            for _ in range(job["gap"]):
                assert ctx.get(dut.adv)
                await ctx.tick()
                pdL, pdF = max(0, pdL - 1), [max(0, x - 1) for x in pdF]
            ctx.set(dut.setup_last, 1)
            await ctx.tick()
            ctx.set(dut.setup_last, 0)
            pdL, pdF = max(0, pdL - 1), [max(0, x - 1) for x in pdF]
            pos = [0] + [None] * (NG - 1)       # beat index of each started copy
            first0, advs = True, 0
            beats, n = job["beats"], job["n"]
            while any(p is not None and p < len(beats) for p in pos) or None in pos[:n]:
                act = [p is not None and p < len(beats) for p in pos]
                W = [int(act[g] and beats[pos[g]]) for g in range(NG)]
                blocked = (any(W[g] and pdF[g] > 0 for g in range(NG))
                           or (W[0] and first0 and pdL > 0))
                adv = ctx.get(dut.adv)
                assert adv == (not blocked), (job, pos, pdL, pdF)
                assert ctx.get(dut.w) == sum(b << g for g, b in enumerate(W))
                stalls.append(blocked)
                nxt = pos.index(None) if None in pos[:n] else None
                stp = [0] * NG
                if nxt is not None and advs >= nxt * job["D"]:
                    stp[nxt] = 1
                lkx = [int(act[g] and pos[g] + 1 < len(beats) and beats[pos[g] + 1])
                       for g in range(NG)]
                ctx.set(dut.act, sum(a << g for g, a in enumerate(act)))
                ctx.set(dut.lkx, sum(b << g for g, b in enumerate(lkx)))
                ctx.set(dut.stp, sum(b << g for g, b in enumerate(stp)))
                await ctx.tick()
                if adv:
                    k = 0
                    for g in range(NG):
                        if W[g]:
                            k += 1
                            pdF[g] = pdL + k * dg
                    pdL += k * dg
                    first0 = first0 and not W[0]
                    advs += 1
                    pos = [p + 1 if a else p for p, a in zip(pos, act)]
                    if nxt is not None and stp[nxt]:
                        pos[nxt] = 0
                pdL, pdF = max(0, pdL - 1), [max(0, x - 1) for x in pdF]
            ctx.set(dut.act, 0)
            ctx.set(dut.lkx, 0)
            ctx.set(dut.stp, 0)
    _run(dut, bench)
    # (with one drain clock per capture and tiles of two or more beats nothing waits)
    assert any(stalls) == (dg > 1 or bool(kq1)) and not all(stalls)


# ------------------------------------------------------------------ Copy

def _copy_beats(p, g):
    """Every beat of a copy over ``count`` blocks of ``tiles`` tiles of the whole kernel:
    the outputs the copy presents with it."""
    fw, ww = 1 << (CFG.feat_depth.bit_length() + 1), 1 << (CFG.weight_depth.bit_length() + 1)
    kh, kw, icc, kq = p["kh"], p["kw"], p["icc"], p["kw"] * p["icc"] * p["kh"]
    gs, wbase = (0, 0) if g == 0 else (p["sgs"], p["wpass"])
    gobase = 0 if g == 0 else p["sgoc"] + p["cbpass"]
    out = []
    for b in range(p["count"]):
        for t in range(p["tiles"]):
            for kx in range(kw):
                for ic in range(icc):
                    for ky in range(kh):
                        out.append({
                            "foff": (gs + kx + ic * p["hwp"] + ky * p["wp"]) % fw,
                            "waddr": (wbase + b * kq + kx * icc * kh + ic * kh + ky) % ww,
                            "gob": (gobase + b * p["r"] + t * p["noc"]) % (1 << 24),
                            "last_k": int(kx == kw - 1 and ic == icc - 1 and ky == kh - 1),
                            "fk": int(kx == ic == ky == 0), "par": (b * p["tiles"] + t) % 2,
                            "first": int(t == 0 and b == 0),
                            "glt": int(t == p["tiles"] - 1), "glb": int(b == p["count"] - 1),
                            "ttq": int(t == p["tiles"] - 2), "blkq": int(b == p["count"] - 2)})
    for i, beat in enumerate(out):
        beat["lkx"] = int(i + 1 < len(out) and out[i + 1]["last_k"])
        beat["done"] = int(i == len(out) - 1)
    return out


@pytest.mark.parametrize("g, seed", [(0, 0), (0, 1), (1, 2), (3, 3), (2, 4)])
def test_copy(g, seed):
    """A copy's beats in <kernel column, input channel, kernel row> order over its tiles and
    blocks (whole-kernel boxes), stepping only when ``adv``: feature offset, weight address,
    output address, tile flags and parity, lane bits by parity; ``done`` on the very last
    beat, then inactive.  Copy 0 starts from its cleared block offsets, the others from the
    start values they load while idle."""
    rng = random.Random(seed)
    p = {"kh": rng.randint(1, 3), "kw": rng.randint(1, 3), "icc": rng.randint(1, 3),
         "tiles": rng.randint(1, 3), "count": rng.randint(1, 3), "r": rng.randint(1, 4),
         "noc": rng.randint(1, 9), "hwp": rng.randint(9, 40), "wp": rng.randint(3, 8),
         "sgs": rng.randint(0, 5), "sgoc": rng.randint(0, 30), "wpass": rng.randint(0, 50),
         "cbpass": rng.randint(0, 7)}
    kq = p["kw"] * p["icc"] * p["kh"]
    dut = Copy(CFG, g, _layout(CFG), pass_regs_layout(CFG))
    want = _copy_beats(p, g)
    box = {"ky0": 0, "kx0": 0, "fbox": 0, "wbox": 0}
    for ax, n in (("y", p["kh"]), ("x", p["kw"])):
        box.update({f"k{ax}l": n - 1, f"k{ax}m": (n - 2) % 256, f"k{ax}m1": (n - 3) % 256,
                    f"k{ax}z": int(n == 1), f"k{ax}m0": int(n == 2)})
    icc, tiles, count = p["icc"], p["tiles"], p["count"]
    consts = {"kq1": int(kq == 1), "iccz": int(icc == 1), "iccm0": int(icc == 2),
              "iccm1": (icc - 3) % (1 << 16), "tiles1": int(tiles == 1),
              "tiles_is2": int(tiles == 2), "tiles3": (tiles - 3) % (1 << 24),
              "count1": int(count == 1), "count_is2": int(count == 2),
              "count3": (count - 3) % (1 << 16),
              **{f: p[f] for f in ("sgs", "sgoc", "wpass", "cbpass")}}
    lv = [rng.randrange(16), rng.randrange(16)]
    got = []

    async def bench(ctx):
        for f, v in consts.items():
            ctx.set(getattr(dut.k, f), v)
        for f in ("hwp", "kh", "wp"):
            ctx.set(getattr(dut.d, f), p[f])
        for f in ("r", "noc"):
            ctx.set(getattr(dut.cp, f), p[f])
        ctx.set(dut.kq, kq)
        ctx.set(dut.cqkh, p["icc"] * p["kh"])
        for bx in (dut.sbox[0], dut.sbox[1], dut.ibox, dut.cbox):
            for f, v in box.items():
                ctx.set(getattr(bx, f), v)
        for par in range(2):
            ctx.set(dut.lv[par], lv[par])
        ctx.set(dut.clear, 1)
        await ctx.tick().repeat(2)               # (an idle copy loads its start values)
        ctx.set(dut.clear, 0)
        ctx.set(dut.stp, 1)
        await ctx.tick()
        ctx.set(dut.start, 1)
        if g:                                     # copies >= 1 start when the stage advances
            ctx.set(dut.adv, 0b111)
        await ctx.tick()
        ctx.set(dut.start, 0)
        ctx.set(dut.stp, 0)
        for _ in range(20 * len(want) + 20):
            if not ctx.get(dut.act):
                break
            adv = int(rng.random() < 0.6)
            ctx.set(dut.adv, 0b111 * adv)
            if adv:
                beat = {f: ctx.get(getattr(dut, f)) for f in want[0]}
                assert ctx.get(dut.lanev) == lv[beat["par"]]
                got.append(beat)
            await ctx.tick()
        assert not ctx.get(dut.act) and not ctx.get(dut.done)
    _run(dut, bench)
    assert got == want


# ------------------------------------------------------------------ Columns

@pytest.mark.parametrize("layer, policy, skip", [
    (ConvLayer(3, 2, 5, 6, 3, 3, stride=1, pad=1, batch=2), "remainder", False),
    (ConvLayer(5, 1, 9, 7, 3, 2, stride=2, pad=0, batch=1), "naive", False),
    (ConvLayer(2, 2, 4, 9, 1, 3, stride=1, pad=1, batch=3), "remainder", False),
    (ConvLayer(2, 1, 3, 4, 3, 3, stride=1, pad=0, batch=4), "remainder", False),
    (ConvLayer(1, 1, 6, 7, 5, 5, stride=1, pad=2, batch=2), "naive", True),
    (ConvLayer(1, 1, 11, 9, 5, 5, stride=2, pad=2, batch=2), "naive", True)])
def test_columns(layer, policy, skip):
    """Per pass, the set-up walk loads column c's first window group in set-up clock
    c + 1; each tile entry then writes every column's window base (image, output row and
    first output column of its group in the padded map) and lane-valid bits into the
    slot of the tile's parity, against :func:`gen.conv.pass_lanes`, over two blocks; with
    ``skip`` the next tile's box (``cbox``, from the advanced column states) against the
    box model."""
    sched = plan(layer, CFG, policy, skip_pad=skip)
    d = descriptor(sched)
    dut = Columns(CFG, _layout(CFG), pass_regs_layout(CFG))
    MC, NG = CFG.cols, CFG.max_groups
    hp, wp, s = layer.h + 2 * layer.pad, layer.w + 2 * layer.pad, layer.stride
    fmask = (1 << (CFG.feat_depth.bit_length() + 1)) - 1
    rng = random.Random(layer.h)
    checked, boxes = [], []

    async def bench(ctx):
        for n, _ in descriptor_fields(CFG):
            ctx.set(getattr(dut.d, n), int(d[n]))
        for f in ("adv_box", "adv_slot", "adv_col"):
            ctx.set(getattr(dut, f), -1)
        ctx.set(dut.cqkh, layer.ic * layer.kh)
        await ctx.tick().repeat(2)               # (the per-layer constants load)
        for e, p in enumerate(sched.passes):
            img, oy, ox, valid = pass_lanes(sched, p, images=True)
            for f in PASS_FIELDS:
                ctx.set(getattr(dut.cp, f), int(d[f"p{e}_{f}"]))
            ctx.set(dut.e, e)
            ctx.set(dut.sk_first, 1)
            await ctx.tick()
            ctx.set(dut.sk_first, 0)
            for c in range(MC):
                ctx.set(dut.pinit_load, 1 << c)
                await ctx.tick()
            ctx.set(dut.pinit_load, 0)
            await ctx.tick().repeat(4)          # to the last set-up clock, cols + 5
            par = 0
            for blk in range(2):
                for t in range(p.tiles):
                    fi = int(t == 0)
                    ctx.set(dut.fi_col, -fi)
                    ctx.set(dut.fi_box, fi)
                    for f in ("go_box", "go_slot", "go_col"):
                        ctx.set(getattr(dut, f), -1)
                    ctx.set(dut.tgt, par)
                    await ctx.tick()
                    for f in ("go_box", "go_slot", "go_col"):
                        ctx.set(getattr(dut, f), 0)
                    for c in range(MC):
                        base = (img[t, 0, c] * hp * wp + oy[t, 0, c] * s * wp + ox[t, 0, c] * s)
                        assert ctx.get(dut.base[c][par]) == base & fmask, (e, t, c)
                        for g in range(p.n):
                            bit = (ctx.get(dut.lv[g][par]) >> c) & 1
                            assert bit == int(valid[t, g, c]), (e, t, g, c)
                    checked.append(p.tiles)
                    par ^= 1
                    for _ in range(rng.randint(6, 8) if skip else rng.randint(0, 2)):
                        await ctx.tick()
                    u = t + 1                   # the next tile's box, from cur
                    if skip and u < p.tiles and valid[u, 0].any():
                        lanes = [(int(img[u, 0, c]), int(ox[u, 0, c]), int(oy[u, 0, c]) * s,
                                  int(ox[u, 0, c]) * s) for c in range(MC)]
                        want = _box_model(d, lanes, 1, layer.ic * layer.kh)
                        assert {f: ctx.get(getattr(dut.cbox, f)) for f in want} == want
                        boxes.append(want["kyl"] + 1 < layer.kh)
    _run(dut, bench)
    assert len(checked) >= 2 and any(boxes) == skip


# ------------------------------------------------------------------ IssueControl

@pytest.mark.parametrize("layer, seed", [(ConvLayer(10, 2, 4, 8, 3, 3, stride=1, pad=1), 0),
                                         (ConvLayer(6, 1, 4, 12, 3, 3, stride=1, pad=1), 1),
                                         (ConvLayer(2, 1, 9, 9, 5, 5, stride=2, pad=2), 2)])
def test_issue_control(layer, seed):
    """From ``x_done``: per pass a set-up of cols + 6 clocks (the pass registers load in its
    first clock, column c's walk load in clock c + 1, copy 0 starts and enters its first
    tile in the last); copy g starts on the (g dq)-th advancing issue clock after it with
    the start values g stride / g oc (``stp`` says so one clock ahead); the pass ends on the
    very last beat of copy n - 1, the chunk after the last pass.  The copies are emulated
    (a fixed number of beats each, stepping when ``adv``)."""
    sched = plan(layer, CFG, "remainder")
    d = descriptor(sched)
    dut = IssueControl(CFG, _layout(CFG), pass_regs_layout(CFG))
    MC, NG = CFG.cols, CFG.max_groups
    rng = random.Random(seed)
    starts = []

    async def bench(ctx):
        for n, _ in descriptor_fields(CFG):
            ctx.set(getattr(dut.d, n), int(d[n]))
        ctx.set(dut.iccl, d["icq"] - 1)
        ctx.set(dut.kq, d["kq"])
        ctx.set(dut.dq, d["dq"])
        ctx.set(dut.wblk0, 5)
        ctx.set(dut.cb0, 3)
        ctx.set(dut.adv_iss, 1)
        await ctx.tick().repeat(3)
        ctx.set(dut.x_done, 1)
        await ctx.tick()
        ctx.set(dut.x_done, 0)
        for e, p in enumerate(sched.passes):
            assert ctx.get(dut.issuing) and ctx.get(dut.setup) and ctx.get(dut.sk_first)
            assert ctx.get(dut.e) == e
            await ctx.tick()
            for f in PASS_FIELDS:
                assert ctx.get(getattr(dut.cp, f)) == d[f"p{e}_{f}"], f
            for c in range(MC):
                assert ctx.get(dut.pinit_load) == 1 << c and not ctx.get(dut.setup_last)
                await ctx.tick()
            assert ctx.get(dut.pinit_load) == 0
            await ctx.tick().repeat(4)
            assert ctx.get(dut.setup_last) and ctx.get(dut.start) == 1
            assert ctx.get(dut.fi_box) and ctx.get(dut.go_box)
            assert ctx.get(dut.go_slot) == ctx.get(dut.go_col) == ctx.get(dut.fi_col) == 15
            k = {f: ctx.get(getattr(dut.k, f)) for f in ("tiles1", "count1", "tiles3",
                                                         "count3", "tiles_is2", "count_is2")}
            assert k == {"tiles1": int(p.tiles == 1), "count1": int(p.count == 1),
                         "tiles3": (p.tiles - 3) % (1 << 24), "count3": (p.count - 3) % (1 << 16),
                         "tiles_is2": int(p.tiles == 2), "count_is2": int(p.count == 2)}
            await ctx.tick()
            assert not ctx.get(dut.setup)
            assert ctx.get(dut.k.wpass) == 5 and ctx.get(dut.k.cbpass) == 3
            beats = rng.randint(d["dq"] * p.n, d["dq"] * p.n + 6)
            pos = [0] + [None] * (NG - 1)
            advs = 0
            while True:
                act = [q is not None and q < beats for q in pos]
                adv = int(not any(act) or rng.random() < 0.7)
                ctx.set(dut.adv_iss, adv)
                ctx.set(dut.done, sum(int(a and pos[g] == beats - 1) << g
                                      for g, a in enumerate(act)))
                nxt = pos.index(None) if None in pos[:p.n] else None
                for g in range(1, NG):
                    want = int(g == nxt and advs + 1 == g * d["dq"])
                    assert (ctx.get(dut.stp) >> g) & 1 == want, (e, g, advs)
                start = ctx.get(dut.start)
                want = (1 << nxt) if nxt is not None and adv and advs + 1 == nxt * d["dq"] else 0
                assert start == want, (e, advs, start)
                if start:
                    assert ctx.get(dut.k.sgs) == nxt * layer.stride
                    assert ctx.get(dut.k.sgoc) == nxt * layer.oc
                    starts.append((e, nxt, advs))
                last = act[p.n - 1] and pos[p.n - 1] == beats - 1 and adv
                await ctx.tick()
                if adv:
                    advs += 1
                    pos = [q + 1 if a else q for q, a in zip(pos, act)]
                    if start:
                        pos[nxt] = 0
                if last:
                    break
            ctx.set(dut.done, 0)
            ctx.set(dut.adv_iss, 1)
            assert ctx.get(dut.issuing) == (e < len(sched.passes) - 1)
        await ctx.tick().repeat(3)
        assert not ctx.get(dut.issuing) and not ctx.get(dut.start)
    _run(dut, bench)
    assert [(e, g) for e, g, _ in starts] == [(e, g) for e, p in enumerate(sched.passes)
                                              for g in range(1, p.n)]
