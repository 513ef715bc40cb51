# SPDX-License-Identifier: Apache-2.0
"""FD-CSR FC engine: RTL == golden == exact integer W @ X, cycles == model (both simulators).

Two RTL configurations keep the Verilator builds few: ``ONE`` (batch 3, one non-zero per
clock, 2 segments of 16 per beat) and ``FOUR`` (batch 2, four non-zeros per clock, 2
segments of 8 per beat).  Each test runs several jobs on one build.
"""

import numpy as np
import pytest

from gen.fdcsr import FcConfig, encode, fc_schedule, prune_random, ref_fc, rtl_fc

ONE = FcConfig(batch=3, nz_per_clock=1, segs_per_beat=2, max_cols=128, max_rows=64,
               addr_width=12)
FOUR = FcConfig(batch=2, nz_per_clock=4, row_width=8, segs_per_beat=2, max_cols=128,
                max_rows=64, addr_width=12)
CONFIGS = {"one": ONE, "four": FOUR}


def _exact(w, x):
    return np.array(w.astype(object) @ x.astype(object), dtype=object)


def _x(rng, cfg, cols, n):
    fmt = cfg.x_fmt
    return rng.integers(fmt.min_code, fmt.max_code + 1, size=(cols, n))


def _w(rng, cfg, rows, cols, density):
    codes = prune_random((rows, cols), density, rng, cfg.w_fmt.width)
    return codes


def _check(w, x, cfg, sim, name, **kwargs):
    """Run one job; assert values and (when streams are never stalled) the cycle model."""
    y, res = rtl_fc(w, x, cfg, sim, name=name, **kwargs)
    golden = ref_fc(w, x, cfg)
    np.testing.assert_array_equal(y, golden)
    assert (golden.astype(object) == _exact(w, x)).all()
    sched = res["schedule"]
    assert res["requests"] == sched["requests"], "memory requests differ from the model"
    return y, res, sched


def _assert_cycles(res, sched, offset=0):
    y_cycles = np.array(res["sinks"]["y"]["cycles"]) - offset
    np.testing.assert_array_equal(y_cycles, sched["y_cycles"])
    meta = np.array(res["sources"]["meta"]["cycles"]) - offset
    np.testing.assert_array_equal(meta, sched["meta_cycles"])
    assert res["sources"]["cmd"]["cycles"][0] - offset == 0


@pytest.mark.parametrize("which", sorted(CONFIGS))
def test_random_layers(sim, which):
    """Several densities, shapes (cols not a multiple of 16) and batch sizes."""
    cfg = CONFIGS[which]
    rng = np.random.default_rng(10 + cfg.nz_per_clock)
    cases = [(6, 37, 0.09, cfg.batch), (4, 128, 0.04, 1), (5, 100, 0.25, cfg.batch),
             (3, 16, 0.6, 2), (1, 1, 1.0, 1), (8, 45, 1.0, cfg.batch)]
    for i, (rows, cols, density, n) in enumerate(cases):
        w = _w(rng, cfg, rows, cols, density)
        x = _x(rng, cfg, cols, min(n, cfg.batch))
        _, res, sched = _check(w, x, cfg, sim, f"rand{i}")
        _assert_cycles(res, sched)
        total = res["sinks"]["y"]["cycles"][-1] - res["sources"]["cmd"]["cycles"][0] + 1
        assert total == sched["cycles"]


@pytest.mark.parametrize("which", sorted(CONFIGS))
def test_directed_rows(sim, which):
    """All-zero rows, fully dense rows, extreme codes, a single non-zero at the last column."""
    cfg = CONFIGS[which]
    rows, cols = 7, 50
    w = np.zeros((rows, cols), dtype=np.int64)
    w[1, :] = cfg.w_fmt.min_code                     # dense row of the most negative code
    w[3, :] = cfg.w_fmt.max_code                     # dense row of the largest code
    w[4, cols - 1] = -3                              # lone non-zero in the padded segment
    w[5, ::16] = 5                                   # one non-zero per segment
    x = np.full((cols, cfg.batch), cfg.x_fmt.min_code, dtype=np.int64)
    x[:, 0] = cfg.x_fmt.max_code
    if cfg.batch > 2:
        x[:, 2] = 0                                  # zero activations
    y, res, sched = _check(w, x, cfg, sim, "directed")
    _assert_cycles(res, sched)
    assert not y[0].any() and not y[2].any() and not y[6].any()
    # Zero rows still produce a result and cost one decoder clock per beat only.
    assert sched["decode_clocks"] < rows * cols


@pytest.mark.parametrize("which", sorted(CONFIGS))
def test_back_pressure(sim, which):
    """Idle cycles on every input stream and back-pressure on vaddr and y."""
    cfg = CONFIGS[which]
    rng = np.random.default_rng(20)
    w = _w(rng, cfg, 9, 70, 0.15)
    w[2] = 0
    x = _x(rng, cfg, 70, cfg.batch)
    for i, (vp, rp) in enumerate([(0.5, 1.0), (1.0, 0.3), (0.6, 0.5)]):
        _check(w, x, cfg, sim, f"bp{i}", valid_prob=vp, ready_prob=rp, seed=i)


@pytest.mark.parametrize("which", sorted(CONFIGS))
def test_reset_mid_layer(sim, which):
    """Reset half-way through the rows; the restarted job is exact and on the model's time."""
    cfg = CONFIGS[which]
    rng = np.random.default_rng(30)
    w = _w(rng, cfg, 10, 60, 0.2)
    x = _x(rng, cfg, 60, cfg.batch)
    sched = fc_schedule(encode(w, cfg.row_width), cfg)
    reset_at = int(sched["y_cycles"][4]) + 1       # after 5 of the 10 results
    y, res, sched = _check(w, x, cfg, sim, "reset", reset_at=reset_at)
    assert len(res["before_reset"]["y"]["data"]) == 5
    _assert_cycles(res, sched, offset=res["sources"]["cmd"]["cycles"][0])


def test_back_to_back_jobs(sim):
    """Two layers of different sizes through one engine: the second `cmd` is taken the
    clock after the first job's last result, and each job follows the model."""
    from gen.fdcsr import fc_job, unpack_y
    from gen.sim import run_job
    cfg = ONE
    rng = np.random.default_rng(60)
    w1, w2 = _w(rng, cfg, 5, 70, 0.2), _w(rng, cfg, 4, 33, 0.5)
    x1, x2 = _x(rng, cfg, 70, cfg.batch), _x(rng, cfg, 33, cfg.batch)
    j1, s1, _ = fc_job(w1, x1, cfg)
    j2, s2, _ = fc_job(w2, x2, cfg)
    job = dict(j1)
    job["sources"] = [dict(a, data=a["data"] + b["data"])
                      for a, b in zip(j1["sources"], j2["sources"])]
    job["sinks"] = [dict(a, count=a["count"] + b["count"])
                    for a, b in zip(j1["sinks"], j2["sinks"])]
    job["max_cycles"] = j1["max_cycles"] + j2["max_cycles"]
    res = run_job("fc", cfg, job, sim=sim, name="two_jobs")
    y = unpack_y(res["sinks"]["y"]["data"], cfg)
    np.testing.assert_array_equal(y[:5], ref_fc(w1, x1, cfg))
    np.testing.assert_array_equal(y[5:], ref_fc(w2, x2, cfg))
    cmd = res["sources"]["cmd"]["cycles"]
    assert cmd[0] == 0 and cmd[1] == res["sinks"]["y"]["cycles"][4] + 1
    ycyc = np.array(res["sinks"]["y"]["cycles"])
    np.testing.assert_array_equal(ycyc[:5], s1["y_cycles"])
    np.testing.assert_array_equal(ycyc[5:] - cmd[1], s2["y_cycles"])


def test_cycles_scale_with_nonzeros():
    """Model check on the RTL configs: decoder clocks within 10 % of ceil(nnz / k) for
    layers at the seed's densities (the RTL follows the model exactly, tests above)."""
    rng = np.random.default_rng(40)
    for cfg, density in ((ONE, 0.09), (ONE, 0.25)):
        w = _w(rng, cfg, 64, 128, density)
        sched = fc_schedule(encode(w, cfg.row_width), cfg)
        assert sched["decode_clocks"] <= 1.1 * sched["ideal_cycles"], (cfg, density)


# ------------------------------------------------------------------ spnn run fc

def _spnn(*argv):
    from gen.cli import main
    return main([str(a) for a in argv])


@pytest.mark.rtl
def test_cli_run_fc(tmp_path, capsys):
    """End to end under Icarus (one small build): raw codes (exact) and float input."""
    import json
    from gen.sim import sim_available
    if not sim_available("icarus"):
        pytest.skip("Icarus not installed")
    rng = np.random.default_rng(50)
    w = prune_random((6, 40), 0.2, rng, 12)
    x = rng.integers(-300, 300, size=(40, 3))
    np.save(tmp_path / "W.npy", w)
    np.save(tmp_path / "X.npy", x)
    assert _spnn("run", "fc", "--weights", tmp_path / "W.npy", "--x", tmp_path / "X.npy",
                 "--raw", "--lanes", "2", "--out", tmp_path / "Y.npy", "--report",
                 tmp_path / "r.json", "--sim", "icarus") == 0
    np.testing.assert_array_equal(np.load(tmp_path / "Y.npy"), w @ x)
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["block"] == "fc" and report["passes"] == 2 and report["lanes"] == 2
    assert report["cycles"] == report["model_cycles"] and report["max_abs_error"] == 0
    wf = w / 4096.0
    xf = x / 4096.0
    np.save(tmp_path / "Wf.npy", wf)
    np.save(tmp_path / "Xf.npy", xf)
    assert _spnn("run", "fc", "--weights", tmp_path / "Wf.npy", "--x", tmp_path / "Xf.npy",
                 "--out", tmp_path / "Yf.npy", "--report", tmp_path / "rf.json",
                 "--sim", "icarus") == 0
    report = json.loads((tmp_path / "rf.json").read_text())
    np.testing.assert_allclose(np.load(tmp_path / "Yf.npy"), wf @ xf,
                               atol=report["error_bound_if_unsaturated"])
    assert report["max_abs_error"] <= report["error_bound_if_unsaturated"]


def test_cli_integer_arrays_are_codes(sim, tmp_path, capsys):
    """Regression (#21): int16 W and X without --raw gave saturated Q2.14 garbage with exit
    0; integer arrays are codes now, so the result is the exact integer W @ X."""
    rng = np.random.default_rng(51)
    w = (rng.integers(-30000, 30000, (5, 20)) * (rng.random((5, 20)) < 0.3)).astype(np.int16)
    x = rng.integers(-30000, 30000, (20, 2)).astype(np.int16)
    np.save(tmp_path / "W.npy", w)
    np.save(tmp_path / "X.npy", x)
    assert _spnn("run", "fc", "--weights", tmp_path / "W.npy", "--x", tmp_path / "X.npy",
                 "--out", tmp_path / "Y.npy", "--sim", sim) == 0
    y = np.load(tmp_path / "Y.npy")
    assert y.dtype == np.int64
    np.testing.assert_array_equal(y, w.astype(np.int64) @ x.astype(np.int64))


@pytest.mark.parametrize("args, message", [
    (["--weights", "{d}/none.npy", "--x", "{d}/X.npy"], "--weights: no such file"),
    (["--weights", "{d}/X.npy", "--x", "{d}/X.npy"], "--x must have 3 rows"),
    (["--weights", "{d}/V.npy", "--x", "{d}/X.npy"], "--weights must be a 2-D array"),
    (["--weights", "{d}/W.npy", "--x", "{d}/X.npy", "--lanes", "5"],
     "--lanes must be N=3, 2N=6, 4N=12 or below N, not 5"),
    (["--weights", "{d}/W.npy", "--x", "{d}/X.npy", "--lanes", "x"],
     "--lanes must be an integer, not 'x'"),
    (["--weights", "{d}/W.npy", "--x", "{d}/X.npy", "--raw"],
     "--weights with --raw must hold integer codes"),
    (["--weights", "{d}/Wi.npy", "--x", "{d}/Xi.npy", "--raw", "--x-fmt", "Q4.12"],
     "--x: value 1048576 lies outside [-32768, 32767] (codes of --x-fmt Q4.12)"),
    (["--weights", "{d}/Wi.npy", "--x", "{d}/Xhuge.npy"],
     "--x: integer values need 32 bits; the FC engine takes at most 24"),
    (["--weights", "{d}/W.npy", "--x", "{d}/X.npy", "--x-fmt", "Q1.15"],
     "--x: value 1 lies outside the range of --x-fmt Q1.15, [-1, 0.999969]"),
    (["--weights", "{d}/W.npy", "--x", "{d}/Xnan.npy"], "--x: values must be finite"),
    (["--weights", "{d}/W.npy", "--x", "{d}/X.npy", "--segs-per-beat", "3"],
     "--segs-per-beat must be 1, 2, 4 or 8, not 3"),
    (["--weights", "{d}/W.npy", "--x", "{d}/X.npy", "--x-fmt", "Q30.2"],
     "--x-fmt must be 2 to 24 bits wide"),
])
def test_cli_run_fc_errors(tmp_path, capsys, args, message):
    np.save(tmp_path / "W.npy", np.ones((4, 10)) * 0.5)
    np.save(tmp_path / "X.npy", np.ones((10, 3)))
    np.save(tmp_path / "Xnan.npy", np.full((10, 3), np.nan))
    np.save(tmp_path / "V.npy", np.ones(10))
    np.save(tmp_path / "Wi.npy", np.ones((4, 10), dtype=np.int64))
    np.save(tmp_path / "Xi.npy", np.full((10, 3), 1 << 20, dtype=np.int64))
    np.save(tmp_path / "Xhuge.npy", np.full((10, 3), 1 << 30, dtype=np.int64))
    rc = _spnn("run", "fc", *[a.format(d=tmp_path) for a in args], "--out",
               tmp_path / "Y.npy", "--sim", "icarus")
    err = capsys.readouterr().err
    assert rc == 2 and message in err and err.count("\n") == 1
    assert not (tmp_path / "Y.npy").exists()


# ------------------------------------------------------- decoder alone (Amaranth simulator)

@pytest.mark.parametrize("k, width, segs", [(1, 16, 1), (2, 8, 2), (4, 16, 2)])
def test_decoder_unit(k, width, segs):
    """FdcsrDecoder on its own: only non-zeros are issued, with the seed's addresses and
    the right columns; group sizes follow decode_walk; one `last` group per row; random
    stalls on both sides do not change the grouping."""
    import random
    from amaranth.sim import Simulator
    from gen.fdcsr import _beats, decode_walk
    from hdl.fdcsr import FdcsrDecoder

    rng = np.random.default_rng(k * 100 + width)
    w = prune_random((5, 3 * width * segs - 3), 0.3, rng)
    w[2] = 0
    fd = encode(w, width)
    cfg = FcConfig(nz_per_clock=k, row_width=width, segs_per_beat=segs,
                   max_cols=4 * width * segs, addr_width=12)
    masks, offsets, counts = _beats(fd, cfg)
    bpr = masks.shape[1]
    beats = []
    for r in range(fd.rows):
        for b in range(bpr):
            word = 0
            for j in range(segs):
                word |= int(masks[r, b, j]) << (j * width)
            for j in range(segs):
                word |= int(offsets[r, b, j]) << (segs * width + j * 12)
            word |= (b * width * segs) << (segs * width + segs * 12)
            word |= int(b == bpr - 1) << (segs * width + segs * 12 + 8)
            word |= int(counts[r, b]) << (segs * width + segs * 12 + 9)   # nnz
            beats.append(word)
    dut = FdcsrDecoder(width, segs, k, 12, 8)
    got = []
    pyrng = random.Random(k)

    async def bench(ctx):
        idx, cycles = 0, 0
        while len([g for g in got if g[3]]) < fd.rows and cycles < 2000:
            offer = idx < len(beats) and pyrng.random() < 0.7
            ctx.set(dut.i.valid, int(offer))
            if offer:
                ctx.set(dut.i.payload.as_value(), beats[idx])
            ctx.set(dut.o.ready, int(pyrng.random() < 0.7))
            if offer and ctx.get(dut.i.ready):
                idx += 1
            if ctx.get(dut.o.valid) and ctx.get(dut.o.ready):
                word = ctx.get(dut.o.payload.as_value())
                cb = k.bit_length()
                count = word & ((1 << cb) - 1)
                addr = (word >> cb) & 0xFFF
                cols = [(word >> (cb + 12 + 8 * s)) & 0xFF for s in range(k)]
                last = (word >> (cb + 12 + 8 * k)) & 1
                got.append((count, addr, cols, last))
            await ctx.tick()
            cycles += 1

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()

    rows_nz = [[(c, i) for i, c in enumerate(np.flatnonzero(w[r]))] for r in range(fd.rows)]
    issued = [(addr + s, cols[s]) for count, addr, cols, _ in got for s in range(count)]
    flat = [(int(np.count_nonzero(w[:r])) + i, int(c)) for r in range(fd.rows)
            for c, i in rows_nz[r]]
    assert issued == flat
    _, groups = decode_walk(counts, k)
    assert [g[0] for g in got if g[0]] == groups
    assert sum(g[3] for g in got) == fd.rows and got[-1][3] == 1
