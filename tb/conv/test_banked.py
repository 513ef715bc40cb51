# SPDX-License-Identifier: Apache-2.0
"""The banked MAC array (hdl/conv/banked, gen/conv/banked).

Pure Python: the job limits, the host layouts against the golden model through an
independent walk of the descriptor's address arithmetic (also in the channel-aligned output
layout of the requantising shell), the requantisation config limits and planner.
RTL (both simulators): random layers (kernels 1..4, strides 1..3, padding, batches, 1, 2, 4
or 8 copies, chunks, resident and per-step weights, strips that do not fill the columns),
several jobs back to back: sums == golden exactly, every transfer on c/w/x/o/s on the clock
the cycle model predicts (full rate and random idle sources / back-pressured outputs),
statistics == model; directed edges; a reset in the middle of a job.
"""

import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from gen.conv import ConvLayer, ref_conv
from gen.conv.banked import (BankedConfig, assemble, descriptor_fields, feature_beats,
                             make_job, plan_layer, run_cycles, run_plan, steps, weight_beats)
from gen.conv.banked.job import _channel_pitch, _image_pitch
from gen.conv.twin import rtl_banked
from gen.core.stimulus import Pattern, job_patterns

CFG = BankedConfig(rows=8, cols=4, bus_words=4, feat_depth=64, weight_depth=64, out_depth=64)
CFG_WIDE = BankedConfig(rows=8, cols=4, bus_words=16, copies=4, feat_depth=32,
                        weight_depth=64, out_depth=32)
CFG_NARROW = BankedConfig(rows=6, cols=4, bus_words=3, copies=1, feat_depth=64,
                          weight_depth=64, out_depth=64)
CFG_EIGHT = BankedConfig(rows=16, cols=2, bus_words=4, copies=8, feat_depth=64,
                         weight_depth=64, out_depth=64)


def golden(x, w, layer):
    """The whole layer's sums ``(B, Oc, Ho, Wo)``."""
    return np.stack([ref_conv(x[b], w, layer.stride, layer.pad) for b in range(layer.batch)])


def random_item(rng, cfg, align=None):
    """A random layer and a job of it that fits ``cfg`` (``align``: :func:`make_job`'s)."""
    while True:
        k = int(rng.integers(1, 5))
        s = int(rng.integers(1, 4))
        p = int(rng.integers(0, min(k, 2)))
        oc = int(rng.choice([1, 2, 3, 4, 6, 8]))
        ic = int(rng.integers(1, 5))
        layer = ConvLayer(oc, ic, int(rng.integers(k, 10)), int(rng.integers(k, 12)), k, k,
                          s, p, int(rng.integers(1, 4)))
        rs = int(rng.choice([d for d in range(1, layer.ho + 1) if layer.ho % d == 0]))
        segw = int(rng.choice([d for d in range(1, layer.wo + 1) if layer.wo % d == 0]))
        kk = ic * k * k
        res = bool(rng.integers(0, 2)) if kk <= 2 * cfg.weight_depth else False
        try:
            fold = int(rng.choice([f for f in (1, 2, 3) if layer.batch % f == 0]))
            job = make_job(layer, cfg, rs=rs, segw=segw, icq=int(rng.integers(1, ic + 1)),
                           resident=res, align=align, fold=fold,
                           span=bool(rng.integers(0, 3) == 0),
                           pack=bool(rng.integers(0, 3) == 0))
        except ValueError:
            continue
        x = rng.integers(-128, 128, (layer.batch, ic, layer.h, layer.w))
        w = rng.integers(-128, 128, (oc, ic, k, k))
        return x, w, job


# ------------------------------------------------------------------ pure Python

@pytest.mark.parametrize("kwargs, message", [
    (dict(rs=4, segw=8), "strips 4x8 must divide the output map 6x8"),
    (dict(rs=2, segw=8, R=3), "R=3 must divide Oc=4"),
    (dict(rs=2, segw=8, n=3), "n must be one of 1, 2, 4, 8 and at most 2, not 3"),
    (dict(rs=2, segw=8, n=4), "n must be one of 1, 2, 4, 8 and at most 2, not 4"),
])
def test_job_limits(kwargs, message):
    with pytest.raises(ValueError, match=message.replace(".", r"\.")):
        make_job(ConvLayer(4, 3, 6, 8, 3, 3, 1, 1), CFG, **kwargs)


def test_job_limits_weights_and_outputs():
    big = ConvLayer(8, 16, 4, 4, 3, 3, 1, 1)          # K = 144 > 2 x 64
    with pytest.raises(ValueError, match="a chunk of 16 channels needs 144 weight words"):
        make_job(big, CFG, rs=1, segw=4, icq=16)
    with pytest.raises(ValueError, match="resident weights need 144 words per row"):
        make_job(big, CFG, rs=1, segw=4, icq=4, resident=True)
    with pytest.raises(ValueError, match="a step's features need 840 words"):
        make_job(ConvLayer(4, 4, 10, 10, 3, 3, 1, 1), CFG, rs=10, segw=10, icq=4)
    wide = ConvLayer(8, 1, 8, 9, 1, 1)
    with pytest.raises(ValueError, match="a strip's outputs need"):
        make_job(wide, CFG, rs=8, segw=9, n=1)


def _walk(x, w, job, cfg):
    """The array's arithmetic from the descriptor alone (independent of the RTL): each
    round's window of feature words (with the per-column rows below column 0), the weight
    addresses of its beats and the drain addresses of its sums."""
    d = {k: v[0] for k, v in descriptor_fields(job, cfg).items()}
    M, MO, MC = (1 << cfg.fbits) - 1, (1 << cfg.obits) - 1, (1 << cfg.count_width) - 1
    nb, bw, cols, wd = cfg.nb, cfg.bus_words, cfg.cols, cfg.window
    fsets = [np.zeros(M + 1, np.int64) for _ in range(2)]
    wmem = np.zeros((cfg.rows, 2 * cfg.weight_depth), np.int64)
    omem = np.zeros(MO + 1, np.int64)          # both output sets, the set in the MSB
    xb, wb = iter(feature_beats(x, job, cfg)), iter(weight_beats(w, job))
    n, R, Q = 1 << d["nl"], d["R"], d["Q"]
    # per window column: its column and row minus the thresholds, its rows / images below
    # column 0 in bank addresses (row carries mx, image carries ex more)
    init = [(k % d["segw"], k // d["segw"] % d["rs"],
             k // d["segw"] * d["mx"] + k // (d["segw"] * d["rs"]) * d["ex"])
            for k in range(wd)]
    out, ts = [], 0
    for i, g, t, q in steps(job):
        last = q == Q - 1
        row = 0
        for r in range(((d["xbl"] if last else d["xbq"])) // d["bpr"]):
            for j in range(d["bpr"]):
                for k, v in enumerate(next(xb)):
                    fsets[i % 2][(row + j * bw + k) & M] = v
            # the next row: D on, at an image's last row ipj, at the channel's last cpj
            img_end = r % d["hrows"] == d["hrows"] - 1
            last_img = r // d["hrows"] % d["fold"] == d["fold"] - 1
            row += (d["cpj"] if last_img else d["ipj"]) if img_end else d["D"]
        if d["res"]:
            wbase = q * d["kq"]
        else:
            wbase = (i % 2) * cfg.weight_depth
        if t == 0 or not d["res"]:
            for a in range((d["wbl"] if last else d["wbq"]) // d["wg"]):
                for j in range(d["wg"]):
                    for k, v in enumerate(next(wb)):
                        ch = j * bw + k
                        if ch < R:
                            wmem[ch * n:(ch + 1) * n, wbase + a] = v
        f0 = 0
        ox, oy, xs = ([v[j] for v in init] for j in range(3))
        for rd in range(d["rounds"]):
            if rd:
                c = [(ox[k] >= d["thr"], oy[k] + (ox[k] >= d["thr"]) >= d["ythr"])
                     for k in range(wd)]
                f0 = (f0 + d[("fstep", "fwrap", "fimg", "fimgw")[c[0][0] + 2 * c[0][1]]]) & M
                for k in range(wd):
                    wk, ik = c[k]
                    ox[k] = (ox[k] + (d["rwrap"] if wk else d["rstep"])) & MC
                    oy[k] = oy[k] + d["ystep"] + wk - (d["rs"] if ik else 0)
                    xs[k] += (wk - c[0][0]) * d["mx"] + (ik - c[0][1]) * d["ex"]
            nv = d["lastw"] if rd == d["rounds"] - 1 else d["W"]
            acc = np.zeros((cfg.rows, cols), np.int64)
            off, kx, ky, px, py = 0, 0, 0, 0, 0
            for b in range(d["kl"] if last else d["kq"]):
                win = [fsets[i % 2][(f0 + off + k + nb * xs[k]) & M] for k in range(wd)]
                for r in range(n * R):
                    g_ = r % n
                    acc[r] += wmem[r, wbase + b] * np.array(win[g_ * cols:(g_ + 1) * cols])
                if kx < d["kw"] - 1:
                    off += d["d_xwrap"] if px == d["s"] - 1 else d["d_xin"]
                    kx, px = kx + 1, (px + 1) % d["s"]
                elif ky < d["kh"] - 1:
                    off += d["d_ywrap"] if py == d["s"] - 1 else d["d_yin"]
                    kx, px, ky, py = 0, 0, ky + 1, (py + 1) % d["s"]
                else:
                    kx, px, ky, py, off = 0, 0, 0, 0, off + d["d_ic"]
            e0 = (ts % 2) * (MO + 1) // 2 + rd * d["W"]
            for ch in range(R):
                vals = np.concatenate([acc[ch * n + g_] for g_ in range(n)])[:nv]
                idx = [(e0 + ch * d["cp"] + p) & MO for p in range(nv)]
                omem[idx] = vals + (omem[idx] if q else 0)
        if last:
            base = (ts % 2) * (MO + 1) // 2
            out += [int(omem[(base + k) & MO]) for k in range(d["obeats"] * bw)]
            ts += 1
    return assemble(out, job)


@settings(max_examples=400, deadline=None)
@given(nb=st.sampled_from([2, 4, 8, 16, 64, 128]), bw=st.sampled_from([1, 3, 4, 16, 32]),
       wr=st.integers(1, 40), extra=st.integers(0, 300), hr=st.integers(1, 12),
       rs=st.integers(1, 12), fold=st.integers(1, 12))
def test_image_pitch_keeps_every_word(nb, bw, wr, extra, hr, rs, fold):
    """The image pitch: ``rs D`` modulo ``nb``, at least a row's words, and with the images
    written one after the other in whole beats (``bpr bw`` words a row) every image's every
    word is still there at the end (a write simulation)."""
    D, rs = wr + extra, min(rs, hr)
    wbeat = -(-wr // bw) * bw
    ip = _image_pitch(D, hr, wr, wbeat, rs * D % nb, nb, fold)
    assert ip % nb == rs * D % nb and ip >= wr
    assert ip <= hr * D + (rs * D - hr * D) % nb
    mem = {}
    for b in range(fold):
        for r in range(hr):
            for k in range(wbeat):
                mem[b * ip + r * D + k] = (b, r, k) if k < wr else None
    assert all(mem[b * ip + r * D + k] == (b, r, k)
               for b in range(fold) for r in range(hr) for k in range(wr))


@settings(max_examples=300, deadline=None)
@given(nb=st.sampled_from([2, 8, 64, 128]), bw=st.sampled_from([1, 3, 4, 16, 32]),
       wr=st.integers(1, 40), extra=st.integers(0, 200), hr=st.integers(1, 10),
       rs=st.integers(1, 10), fold=st.integers(1, 6), icq=st.integers(2, 5))
def test_channel_pitch_keeps_every_word(nb, bw, wr, extra, hr, rs, fold, icq):
    """The channel pitch: with the channels written one after the other (each its images'
    rows in whole beats) every channel's every word is still there at the end (a write
    simulation), and it is no larger than channel after channel."""
    D, rs = wr + extra, min(rs, hr)
    wbeat = -(-wr // bw) * bw
    ip = _image_pitch(D, hr, wr, wbeat, rs * D % nb, nb, fold)
    cp = _channel_pitch(D, hr, wr, wbeat, ip, fold)
    assert 1 <= cp <= (fold - 1) * ip + hr * D
    mem = {}
    for c in range(icq):
        for b in range(fold):
            for r in range(hr):
                for k in range(wbeat):
                    mem[c * cp + b * ip + r * D + k] = (c, b, r, k) if k < wr else None
    assert all(mem[c * cp + b * ip + r * D + k] == (c, b, r, k) for c in range(icq)
               for b in range(fold) for r in range(hr) for k in range(wr))


@settings(max_examples=150, deadline=None)
@given(cfg=st.sampled_from([CFG, CFG_WIDE, CFG_NARROW, CFG_EIGHT]), k=st.integers(1, 4),
       s=st.integers(1, 3), ic=st.integers(2, 7), h=st.integers(4, 12), w=st.integers(4, 14),
       batch=st.integers(1, 4), data=st.data())
def test_packed_rows_keep_every_word(cfg, k, s, ic, h, w, batch, data):
    """``pack``: a step's channels side by side in each bank row.  Writing the ``x`` stream
    as the loader does (rows ``D`` apart, ``ipj`` after an image's last row, whole beats)
    leaves every window word ``(c, b, y, x)`` of every step at ``c CPf + b IP + row(y) D +
    col(x)``, ``CPf = s Ws``; the last chunk's rows are as long as the others'."""
    k = min(k, h, w)
    layer = ConvLayer(2, ic, h, w, k, k, s, 0, batch)
    rs = data.draw(st.sampled_from([d for d in range(1, layer.ho + 1) if layer.ho % d == 0]))
    segw = data.draw(st.sampled_from([d for d in range(1, layer.wo + 1) if layer.wo % d == 0]))
    fold = data.draw(st.sampled_from([f for f in range(1, batch + 1) if batch % f == 0]))
    icq = data.draw(st.integers(2, ic))
    try:
        job = make_job(layer, cfg, rs=rs, segw=segw, icq=icq, fold=fold, pack=True,
                       n=1, R=1, resident=False)
    except ValueError:
        return
    assert job.CPf == s * job.Ws and job.D >= icq * s * job.Ws
    assert job.D % cfg.nb == segw % cfg.nb and job.xbeats(0) == job.xbeats(job.Q - 1)
    d = {key: v[0] for key, v in descriptor_fields(job, cfg).items()}
    ids = np.arange(1, batch * ic * h * w + 1).reshape(batch, ic, h, w)
    beats = iter(feature_beats(ids, job, cfg))
    M, bw = (1 << cfg.fbits) - 1, cfg.bus_words
    rows = [(y % s) * job.Hs + y // s for y in range(job.rin)]
    cols = [(x % s) * job.Ws + x // s for x in range(job.segin)]
    for _i, _g, t, q in steps(job):
        mem, row = {}, 0
        for r in range(job.xbeats(q) // d["bpr"]):
            for j in range(d["bpr"]):
                for lane, v in enumerate(next(beats)):
                    mem[(row + j * bw + lane) & M] = v
            row += (d["ipj"] if r % d["hrows"] == d["hrows"] - 1 else d["D"])
        b0, oy0, ox0 = job.strips[t]
        for c in range(job.icq if q < job.Q - 1 else job.icl):
            for b in range(fold):
                for y in range(job.rin):
                    for x in range(job.segin):
                        yy, xx = oy0 * s + y, ox0 * s + x
                        want = ids[b0 + b, q * job.icq + c, yy, xx] if yy < h and xx < w else 0
                        got = mem.get(c * job.CPf + b * job.IP + rows[y] * job.D + cols[x])
                        assert got == want, (c, b, y, x)


@pytest.mark.parametrize("seed", range(12))
def test_layouts_and_descriptor_walk(seed):
    """The host layouts and the descriptor's address arithmetic compute the layer."""
    rng = np.random.default_rng(seed)
    cfg = [CFG, CFG_WIDE, CFG_NARROW][seed % 3]
    for _ in range(4):
        x, w, job = random_item(rng, cfg)
        np.testing.assert_array_equal(_walk(x, w, job, cfg), golden(x, w, job.layer))


@pytest.mark.parametrize("seed", range(6))
def test_aligned_layout_walk(seed):
    """The channel-aligned output layout (``align``, the requantising shell's): channel
    ``r`` of a strip at ``r cp``, ``cp = ceil(P / bw) bw``, ``R ceil(P / bw)`` beats a
    strip, each channel's last beat ``P - (cb - 1) bw`` words; the descriptor's walk and
    :func:`assemble` (padded and not) compute the layer."""
    rng = np.random.default_rng(100 + seed)
    cfg = [CFG, CFG_WIDE, CFG_NARROW][seed % 3]
    bw = cfg.bus_words
    for _ in range(4):
        x, w, job = random_item(rng, cfg, align=True)
        cb = -(-job.P // bw)
        d = {k: v[0] for k, v in descriptor_fields(job, cfg).items()}
        assert (d["cp"], d["obeats"], d["olast"]) == (cb * bw, job.R * cb,
                                                      job.P - (cb - 1) * bw)
        assert sum(job.beat_words()) == job.E and len(job.beat_words()) == job.obeats
        want = golden(x, w, job.layer)
        np.testing.assert_array_equal(_walk(x, w, job, cfg), want)
        f = job.fold
        flat = [want[b:b + f, job.oc0 + g * job.R + r, y0:y0 + job.rs, x0:x0 + job.segw].ravel()
                for g in range(job.G) for b, y0, x0 in job.strips for r in range(job.R)]
        mask = np.zeros(want.shape, bool)
        for b, y0, x0 in job.strips:
            mask[b:b + f, :, y0:y0 + job.rs, x0:x0 + job.segw] = True
        np.testing.assert_array_equal(
            assemble(np.concatenate(flat), job, padded=False), np.where(mask, want, 0))
        padded = np.concatenate([np.pad(f, (0, cb * bw - job.P)) for f in flat])
        np.testing.assert_array_equal(assemble(padded, job), np.where(mask, want, 0))


def test_aligned_job_limits():
    """The aligned layout's out-set check counts the channels' padding; a requantising
    config forces ``align`` and limits a job's channels to ``rq_depth``."""
    layer = ConvLayer(3, 1, 13, 13, 1, 1)                      # P = 169, 512 words a set
    assert make_job(layer, CFG, rs=13, segw=13, n=1).obeats == 127   # 3 x 169 = 507 words
    with pytest.raises(ValueError, match="a strip's outputs need 516 words"):
        make_job(layer, CFG, rs=13, segw=13, n=1, align=True)      # 3 x 43 beats x 4
    layer = ConvLayer(8, 1, 8, 9, 1, 1)
    rq = BankedConfig(rows=8, cols=4, bus_words=4, feat_depth=64, weight_depth=64,
                      out_depth=64, rq_width=8, rq_depth=4)
    assert make_job(layer, rq, rs=1, segw=9, R=4, n=1, oc=4).align
    with pytest.raises(ValueError, match="needs the channel-aligned output layout"):
        make_job(layer, rq, rs=1, segw=9, R=4, n=1, oc=4, align=False)
    with pytest.raises(ValueError, match="holds 4 biases"):
        make_job(layer, rq, rs=1, segw=9, R=4, n=1)


@pytest.mark.parametrize("kwargs, message", [
    ({"rq_width": 1}, "rq_width must be 0 (no requantisation stage) or 2..32, not 1"),
    ({"rq_width": 33}, "rq_width must be 0 (no requantisation stage) or 2..32, not 33"),
    ({"rq_width": 8, "rq_depth": 12}, "rq_depth must be a power of two 1..65536, not 12"),
    ({"rq_depth": 1 << 17}, "rq_depth must be a power of two 1..65536, not 131072"),
])
def test_config_requant_limits(kwargs, message):
    import re
    with pytest.raises(ValueError, match=re.escape(message)):
        BankedConfig(**kwargs)
    cfg = BankedConfig(rq_width=8, rq_depth=64)
    assert cfg.module_name.endswith("_rq8d64") and cfg.shell_name.endswith("_rq8d64")
    assert "_rq" not in BankedConfig().module_name


def test_planner_with_requant():
    """A requantising config plans channel-aligned jobs that fit the output set with the
    channels' padding, at most ``rq_depth`` channels a job (a part cut in several jobs);
    without requantisation the plan is the one before (the same jobs, unaligned)."""
    layer = ConvLayer(16, 3, 9, 10, 3, 3, 1, 1)
    rq = BankedConfig(rows=8, cols=4, bus_words=4, feat_depth=64, weight_depth=64,
                      out_depth=64, rq_width=8, rq_depth=8)
    plan = plan_layer(layer, rq)
    assert all(j.align and j.G * j.R <= 8 for j in plan.jobs)
    assert all(j.obeats * 4 <= rq.nb * rq.out_depth for j in plan.jobs)
    assert sorted({j.oc0 for j in plan.jobs}) == [0, 8]
    covered = np.zeros((layer.batch, layer.oc, layer.ho, layer.wo), int)
    for j in plan.jobs:
        for im, ys, xs in j.regions():
            covered[im, j.oc0:j.oc0 + j.G * j.R, ys, xs] += 1
    assert (covered == 1).all()
    assert plan.cycles == run_cycles(plan.jobs, rq, record=False)["last_out"] - \
        run_cycles(plan.jobs, rq, record=False)["first_in"] + 1
    assert not any(j.align for j in plan_layer(layer, CFG).jobs)


def test_model_reads_the_patterns():
    """The cycle model depends on every port's pattern (a model that ignored one could not
    fail the RTL comparison)."""
    rng = np.random.default_rng(1)
    jobs = [random_item(rng, CFG)[2] for _ in range(3)]
    base = run_cycles(jobs, CFG)
    for port in "cwxo":
        late = Pattern.bits([0] * 30 + [1]) if port == "c" else Pattern.bits([0, 1])
        slow = run_cycles(jobs, CFG, {port: late})
        assert slow[port] != base[port] and slow["o"][-1] >= base["o"][-1], port


# ------------------------------------------------------------------ RTL

def check_rtl(items, cfg, sim, *, valid=None, ready=None, name="banked"):
    outs, stats, result = rtl_banked(items, cfg, sim, valid=valid, ready=ready, name=name)
    for (x, w, job), y in zip(items, outs):
        np.testing.assert_array_equal(y, golden(x, w, job.layer))
    model = run_cycles([job for _x, _w, job in items], cfg, job_patterns(result["job"]))
    for port in "cwx":
        assert result["sources"][port]["cycles"] == model[port], port
    for port in "os":
        assert result["sinks"][port]["cycles"] == model[port], port
    assert stats == model["stats"]
    return model


@pytest.mark.parametrize("cfg, seed, valid, ready", [
    (CFG, 1, None, None), (CFG, 2, 0.7, 0.6), (CFG_WIDE, 3, None, 0.3),
    (CFG_WIDE, 4, 0.4, None), (CFG_NARROW, 5, 0.8, 0.8), (CFG_NARROW, 6, None, None),
    (CFG_EIGHT, 7, None, None), (CFG_EIGHT, 8, 0.6, 0.5)])
def test_rtl_random_jobs(sim, cfg, seed, valid, ready):
    """Five random jobs back to back: sums, every transfer's clock and the statistics."""
    rng = np.random.default_rng(seed)
    items = [random_item(rng, cfg) for _ in range(5)]
    check_rtl(items, cfg, sim, valid=valid, ready=ready, name=f"rand{seed}")


def test_rtl_directed_edges(sim):
    """Rounds of one beat (1 x 1, one channel per chunk: the drain paces the rounds), a
    single tile column with two copies, an odd tile count, 4 x 4 kernels at stride 3,
    channel groups with per-step weights, a strip narrower than the columns."""
    rng = np.random.default_rng(11)
    layers = [
        (ConvLayer(1, 2, 3, 5, 1, 1, 2, 0), dict(rs=1, segw=3, icq=1, n=2, resident=False)),
        (ConvLayer(8, 3, 6, 6, 1, 1, 1, 0), dict(rs=2, segw=6, icq=1, n=1, R=2)),
        (ConvLayer(3, 2, 7, 4, 3, 3, 1, 1), dict(rs=7, segw=1, icq=2, n=2)),
        (ConvLayer(4, 4, 9, 9, 4, 4, 3, 1), dict(rs=3, segw=3, icq=2, n=1, resident=False)),
        (ConvLayer(8, 4, 5, 6, 3, 3, 1, 1), dict(rs=5, segw=2, icq=2, n=1, R=4,
                                                 resident=False)),
    ]
    items = []
    for layer, kw in layers:
        job = make_job(layer, CFG, **kw)
        items.append((rng.integers(-128, 128, (layer.batch, layer.ic, layer.h, layer.w)),
                      rng.integers(-128, 128, (layer.oc, layer.ic, layer.kh, layer.kw)), job))
    check_rtl(items, CFG, sim, ready=0.5, name="edges")


def test_rtl_saturating_values(sim):
    """Extreme codes in every word: the sums reach their largest magnitudes exactly."""
    layer = ConvLayer(4, 4, 4, 8, 3, 3, 1, 1)
    x = np.full((1, 4, 4, 8), -128)
    w = np.full((4, 4, 3, 3), -128)
    w[1] = 127
    job = make_job(layer, CFG, rs=2, segw=8, icq=2)
    check_rtl([(x, w, job)], CFG, sim, name="extreme")


@pytest.mark.parametrize("cfg, seed, valid, ready", [
    (CFG, 31, None, None), (CFG_WIDE, 32, 0.6, 0.4), (CFG_NARROW, 33, None, 0.5)])
def test_rtl_aligned_jobs(sim, cfg, seed, valid, ready):
    """Random jobs with the channel-aligned output layout (only the descriptor's ``cp``,
    ``obeats`` and ``olast`` differ; the array is unchanged): sums == golden, every
    transfer on the clock the cycle model predicts, statistics == model."""
    rng = np.random.default_rng(seed)
    items = [random_item(rng, cfg, align=True) for _ in range(4)]
    assert any(job.P % cfg.bus_words for _x, _w, job in items)
    check_rtl(items, cfg, sim, valid=valid, ready=ready, name=f"aligned{seed}")


@pytest.mark.parametrize("where", ["loads", "compute", "stream"])
def test_rtl_reset_mid_job(sim, where):
    """``rst`` while the first job loads, computes (just before its first sum leaves), or
    streams its first strip out: the
    streams restart and the run after the reset is exact (sums and statistics)."""
    rng = np.random.default_rng(21)
    items = [random_item(rng, CFG) for _ in range(2)]
    model = run_cycles([job for _x, _w, job in items], CFG)
    at = {"loads": 3, "compute": model["o"][0] - 3, "stream": model["o"][1] + 1}[where]
    outs, stats, result = rtl_banked(items, CFG, sim, reset_at=at, name=f"reset_{where}")
    before = result["before_reset"]
    assert result["resets"] and before["s"]["data"] == []
    assert bool(before["o"]["data"]) == (where == "stream")
    for (x, w, job), y in zip(items, outs):
        np.testing.assert_array_equal(y, golden(x, w, job.layer))
    assert stats == model["stats"]


@pytest.mark.parametrize("layer, jobs", [(ConvLayer(11, 3, 9, 10, 3, 3, 1, 1), 2),
                                         (ConvLayer(6, 5, 12, 7, 2, 2, 2, 0, 2), 1),
                                         (ConvLayer(5, 4, 9, 8, 1, 1, 2, 0), 1)])
def test_rtl_planned_layer(sim, layer, jobs):
    """Planned layers (one cut into a part of 8 channels and a remainder of 3 on more
    copies; a batch of two at stride 2 in strips; a 1 x 1 kernel at stride 2, run on the
    subsampled input): the assembled output equals the golden model's and the jobs'
    end-to-end clocks equal the plan's."""
    rng = np.random.default_rng(layer.oc)
    x = rng.integers(-128, 128, (layer.batch, layer.ic, layer.h, layer.w))
    w = rng.integers(-128, 128, (layer.oc, layer.ic, layer.kh, layer.kw))
    plan = plan_layer(layer, CFG)
    assert len(plan.jobs) >= jobs
    runs = []

    def conv(items):
        outs, _stats, result = rtl_banked(items, CFG, sim, name=f"plan{layer.oc}")
        runs.append(result)
        return outs
    np.testing.assert_array_equal(run_plan(x, w, plan, conv), golden(x, w, layer))
    res = runs[0]
    first = min(res["sources"]["w"]["cycles"][0], res["sources"]["x"]["cycles"][0])
    assert res["sinks"]["o"]["cycles"][-1] - first + 1 == plan.cycles


@pytest.mark.parametrize("kwargs, message", [
    ({"copies": 3}, "copies must be 1, 2, 4 or 8, not 3"),
    ({"rows": 2, "copies": 4}, "copies must be at most rows (2), not 4"),
    ({"rows": 4, "copies": 8}, "copies must be at most rows (4), not 8"),
    ({"feat_depth": 100}, "feat_depth must be a power of two >= 2, not 100"),
    ({"out_depth": 1}, "out_depth must be a power of two >= 2, not 1"),
    ({"bus_words": 33}, "bus_words must be 1..32, not 33"),
    ({"data_width": 1}, "data_width must be 2..18, not 1"),
    ({"rows": 0}, "rows must be a positive integer, not 0"),
    ({"rows": 1024}, "the array is at most 512 x 64, not 1024 x 4"),
])
def test_config_limits(kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        BankedConfig(**kwargs)


def test_model_without_records_agrees():
    """``record=False`` (the planner's fast path) gives the same figures as the full
    per-transfer model."""
    rng = np.random.default_rng(4)
    jobs = [random_item(rng, CFG)[2] for _ in range(4)]
    full, fast = run_cycles(jobs, CFG), run_cycles(jobs, CFG, record=False)
    for key in ("c", "s", "stats", "jobs", "first_in", "last_out", "beats"):
        assert full[key] == fast[key], key
    assert full["last_out"] == full["o"][-1] and full["first_in"] == min(full["w"][0],
                                                                        full["x"][0])
    assert fast["o"] == fast["w"] == fast["x"] == []
    assert full["beats"] == {"w": len(full["w"]), "x": len(full["x"]), "o": len(full["o"])}


@pytest.mark.parametrize("cfg", [CFG, CFG_WIDE, CFG_NARROW], ids=["b4", "b16", "b3"])
@pytest.mark.parametrize("rq_width", [0, 8])
def test_shell_job_cycles_is_the_shell_model(cfg, rq_width):
    """:func:`gen.conv.banked.shell_job_cycles` (the planner-speed figure of one AXI job at
    full rate) == every job's end-to-end clocks in the clock-stepped shell model of a
    sequence of jobs, with and without the requantisation stage (biases loaded)."""
    from dataclasses import replace
    from gen.conv.banked import shell_job_cycles
    from gen.conv.banked.shell_cycles import banked_shell_cycle_model
    from gen.core.sim import axi_ports
    from hdl.conv.banked.shell import banked_shell_ports
    shell = replace(cfg, rq_width=rq_width, rq_depth=16) if rq_width else cfg
    rng = np.random.default_rng(30 + rq_width)
    jobs = []
    while len(jobs) < 12:
        job = random_item(rng, cfg)[2]
        try:
            jobs.append(make_job(job.layer, shell, rs=job.rs, segw=job.segw, icq=job.icq,
                                 n=job.n, R=job.R, resident=job.resident, strips=job.strips,
                                 fold=job.fold))
        except ValueError:
            continue
    sources, sinks = axi_ports(*banked_shell_ports(shell))
    records = banked_shell_cycle_model(jobs, shell, {p: pat for p, _, pat in sources + sinks},
                                       bias_loads=[bool(rq_width)] * len(jobs))
    for k, (job, rec) in enumerate(zip(jobs, records)):
        assert shell_job_cycles(job, shell) == rec["end"] - rec["first_in"] + 1, k


@pytest.mark.parametrize("cfg", [CFG, CFG_WIDE, CFG_EIGHT], ids=["b4", "b16", "c8"])
def test_rtl_folded_images(sim, cfg):
    """Strips over several images (``fold``): rounds that cross images with a column carry,
    with none, several images in one round (``W`` > an image's positions), a stride-2
    layer in half-map strips, per-step weights, images side by side in the row pitch
    (``IP < D``, on the 8-copy array); with back-pressure."""
    rng = np.random.default_rng(21)
    layers = [
        (ConvLayer(2, 2, 7, 7, 3, 3, 1, 1, 4), dict(rs=7, segw=7, icq=1, fold=2)),
        (ConvLayer(3, 1, 2, 2, 1, 1, 1, 0, 6), dict(rs=2, segw=2, fold=3, n=1)),
        (ConvLayer(4, 2, 8, 5, 3, 3, 2, 1, 2), dict(rs=2, segw=3, fold=2, resident=False)),
        (ConvLayer(2, 3, 3, 5, 2, 2, 1, 0, 3), dict(rs=1, segw=4, fold=3, icq=2)),
        (ConvLayer(2, 2, 2, 2, 3, 3, 1, 1, 4), dict(rs=2, segw=2, fold=4, icq=1)),
    ]
    items = []
    for layer, kw in layers:
        job = make_job(layer, cfg, **kw)
        items.append((rng.integers(-128, 128, (layer.batch, layer.ic, layer.h, layer.w)),
                      rng.integers(-128, 128, (layer.oc, layer.ic, layer.kh, layer.kw)), job))
    assert any(job.IP < job.D for *_xw, job in items) == (cfg is CFG_EIGHT)
    check_rtl(items, cfg, sim, valid=0.8, ready=0.7, name="fold")


@pytest.mark.parametrize("cfg", [CFG, CFG_WIDE, CFG_NARROW], ids=["b4", "b16", "b3"])
def test_rtl_packed_rows(sim, cfg):
    """A step's channels side by side in each bank row (``pack``): rows shorter than a
    beat (several channels a beat), longer, a last chunk of fewer channels (its rows
    padded), stride 2 with images folded, per-step weights; the same layers without
    ``pack`` between them; with back-pressure on every stream."""
    rng = np.random.default_rng(41)
    specs = [(ConvLayer(4, 5, 5, 5, 3, 3, 1, 1), dict(rs=5, segw=5, icq=2, pack=True)),
             (ConvLayer(4, 5, 5, 5, 3, 3, 1, 1), dict(rs=5, segw=5, icq=2)),
             (ConvLayer(3, 3, 4, 9, 1, 1, 1, 0), dict(rs=2, segw=1, icq=3, pack=True)),
             (ConvLayer(2, 4, 6, 6, 3, 3, 2, 1, 2), dict(rs=1, segw=3, icq=3, fold=2,
                                                         pack=True, resident=False)),
             (ConvLayer(6, 2, 3, 3, 2, 2, 1, 0, 3), dict(rs=2, segw=2, icq=2, fold=3,
                                                         pack=True))]
    items = []
    for layer, kw in specs:
        job = make_job(layer, cfg, **kw)
        items.append((rng.integers(-128, 128, (layer.batch, layer.ic, layer.h, layer.w)),
                      rng.integers(-128, 128, (layer.oc, layer.ic, layer.kh, layer.kw)), job))
    packed = [job for *_xw, job in items if job.pack]
    assert any(job.icl < job.icq for job in packed)
    # several channels' rows in one beat, and bank rows of more than one beat
    assert any(job.layer.stride * job.Ws < cfg.bus_words for job in packed)
    assert any(job.bpr > 1 for job in packed)
    check_rtl(items, cfg, sim, valid=0.7, ready=0.6, name="pack")


@pytest.mark.parametrize("cfg", [CFG, CFG_WIDE], ids=["b4", "b16"])
def test_rtl_span_strips(sim, cfg):
    """Strips whose sums fill both output sets (``span``): two strips of a job over two
    chunks (sums read back across the sets' boundary), a job of one-set strips after it
    and one before and after a channel-aligned ``span`` job (each strip waits for the
    stream of the one before); with back-pressure on the sums."""
    rng = np.random.default_rng(31)
    big = ConvLayer(8, 3, 8, 10, 3, 3, 1, 1, 2)
    small = ConvLayer(3, 2, 4, 6, 3, 3, 1, 1, 2)
    specs = [(big, dict(rs=8, segw=10, n=1, icq=2, span=True)),
             (small, dict(rs=2, segw=6, icq=1)),
             (big, dict(rs=8, segw=10, n=1, icq=2, span=True, align=True, resident=False)),
             (small, dict(rs=4, segw=3, icq=2, fold=2))]
    items = []
    for layer, kw in specs:
        job = make_job(layer, cfg, **kw)
        items.append((rng.integers(-128, 128, (layer.batch, layer.ic, layer.h, layer.w)),
                      rng.integers(-128, 128, (layer.oc, layer.ic, layer.kh, layer.kw)), job))
    one_set = cfg.nb * cfg.out_depth
    assert all(job.obeats * cfg.bus_words > one_set for *_xw, job in items if job.span)
    with pytest.raises(ValueError, match="a strip's outputs need 640 words"):
        make_job(big, cfg, rs=8, segw=10, n=1, icq=2)
    check_rtl(items, cfg, sim, valid=0.9, ready=0.5, name="span")
