# SPDX-License-Identifier: Apache-2.0
"""Unit tests of the conv array's sub-components (:mod:`hdl.conv`), one or more per
component, in the Amaranth simulator: each checks what the component's docstring says it
does, with directed cases and a random one against a small Python model."""

import random

import numpy as np
import pytest
from amaranth.lib import data
from amaranth.sim import Simulator

from gen.conv import ConvConfig, ConvLayer, descriptor_fields, pass_layout, plan
from gen.conv.descriptor import descriptor
from gen.conv.layout import MIN_BOX
from hdl.conv.box import TileBox, box_fields
from hdl.conv.control import FSM_STATES, STAT_BUSY_BITS, Control
from hdl.conv.drain import Drain
from hdl.conv.loaders import Loaders
from hdl.conv.pipeline import MacPipeline
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
    after its step; stepping whenever ``room`` never overflows the five words; with
    ``o.ready`` always high ``room`` never drops (a step every clock)."""
    cfg = ConvConfig(rows=2, cols=4, max_groups=2, feat_depth=16, weight_depth=16,
                     out_depth=16, max_slots=4, max_dim=4)
    dut = OutputFifo(cfg)
    rng = random.Random(seed)
    expect, got, pending = [], [], []
    room_low = []

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
    assert len(got) > 40
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
