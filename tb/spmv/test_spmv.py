# SPDX-License-Identifier: Apache-2.0
"""Tests of the sparse matrix-vector engine: compiler, golden model, cycle model, RTL, CLI."""

import json
import math

import numpy as np
import pytest

from gen.core.fixed import QFormat, requantise
from gen.spmv import (ALLOCATORS, SpmvConfig, allocate, compile_tiled, compile_weights,
                      cycle_model, gather_tiled, load_report, prune, ref_spmv, tile_jobs,
                      weight_beats)
from gen.spmv.twin import run_jobs

# Two hardware configurations keep the simulator builds few.
CFG_A = SpmvConfig(pes=3, fifo_depth=2, rows_per_pe=8, max_cols=32, mem_depth=256, w_lanes=2)
# two results per clock (drain_lanes): rows stay on their lane's PEs
CFG_D = SpmvConfig(pes=4, fifo_depth=2, rows_per_pe=8, max_cols=32, mem_depth=256, w_lanes=2,
                   drain_lanes=2)
CFG_B = SpmvConfig(pes=1, fifo_depth=1, rows_per_pe=16, max_cols=16, mem_depth=256,
                   w_fmt=QFormat(8, 0), x_fmt=QFormat(8, 0), acc_width=16,
                   out_fmt=QFormat(16, 0))


def _sparse(rng, rows, cols, density, fmt):
    w = rng.integers(fmt.min_code, fmt.max_code + 1, (rows, cols))
    return w * (rng.random((rows, cols)) < density)


def _exact(w, x, cfg):
    """Exact integer W @ x, re-scaled to out_fmt (equals the golden model without saturation)."""
    return requantise(np.asarray(w, dtype=np.int64) @ np.asarray(x, dtype=np.int64),
                      cfg.acc_frac, cfg.out_fmt)


# ---------------------------------------------------------------- config

@pytest.mark.parametrize("kwargs, exc, message", [
    ({"pes": 0}, ValueError, "pes must be between 1 and 256, not 0"),
    ({"pes": 2.0}, TypeError, "pes must be an integer, not 2.0"),
    ({"fifo_depth": 0}, ValueError, "fifo_depth must be between 1 and 64, not 0"),
    ({"rows_per_pe": 1}, ValueError, "rows_per_pe must be between 2 and 4096, not 1"),
    ({"acc_width": 20}, ValueError, "acc_width must be at least w_fmt + x_fmt width = 24, "
                                    "not 20"),
    ({"w_fmt": "Q1.7"}, TypeError, "w_fmt must be a QFormat, not 'Q1.7'"),
    ({"pes": 3, "w_lanes": 4}, ValueError, "w_lanes must be between 1 and pes = 3, not 4"),
    ({"x_fmt": QFormat(20, 20)}, ValueError, "x_fmt must be 2 to 32 bits wide, not 40 (Q20.20)"),
    ({"pes": 4, "w_lanes": 2, "drain_lanes": 4}, ValueError,
     "drain_lanes must be 1 or w_lanes = 2 (when it divides pes = 4), not 4"),
    ({"pes": 3, "w_lanes": 2, "drain_lanes": 2}, ValueError,
     "drain_lanes must be 1 or w_lanes = 2 (when it divides pes = 3), not 2"),
    ({"drain_lanes": 0}, ValueError, "drain_lanes must be between 1 and 64, not 0"),
])
def test_config_errors(kwargs, exc, message):
    with pytest.raises(exc) as info:
        SpmvConfig(**kwargs)
    assert str(info.value) == message


def test_engine_rejects_other_config():
    from hdl.spmv.engine import SpmvEngine
    with pytest.raises(TypeError, match="cfg must be an SpmvConfig"):
        SpmvEngine({"pes": 3})


# ---------------------------------------------------------------- compiler

def test_interleave_and_zigzag_deal_as_documented():
    nnz = np.array([1, 5, 3, 9, 0, 7, 2])
    pe, local = allocate(nnz, 3, "interleave")
    assert list(pe) == [0, 1, 2, 0, 1, 2, 0] and list(local) == [0, 0, 0, 1, 1, 1, 2]
    # sorted most first: rows 3(9) 5(7) 1(5) | 2(3) 6(2) 0(1) | 4(0) -> 0 1 2 | 2 1 0 | 0
    pe, local = allocate(nnz, 3, "zigzag")
    assert list(pe[[3, 5, 1, 2, 6, 0, 4]]) == [0, 1, 2, 2, 1, 0, 0]
    assert local[3] == 0 and local[0] == 1 and local[4] == 2


def test_lpt_and_balanced_beat_zigzag_on_skewed_rows():
    rng = np.random.default_rng(5)
    dens = np.where(np.arange(200) % 7 == 0, 0.9, 0.05)  # few heavy rows
    w = (rng.random((200, 120)) < dens[:, None]).astype(np.int64)
    cfg = SpmvConfig(pes=16, rows_per_pe=16, max_cols=128, mem_depth=4096,
                     w_fmt=QFormat(2, 0))
    ratio = {a: load_report(compile_weights(w, cfg, a))["max_over_mean"] for a in ALLOCATORS}
    assert ratio["lpt"] <= ratio["zigzag"] <= ratio["interleave"]
    assert ratio["balanced"] <= ratio["zigzag"]


@pytest.mark.parametrize("alloc", ALLOCATORS)
def test_plan_layout_reconstructs_matrix(alloc):
    rng = np.random.default_rng(1)
    cfg = SpmvConfig(pes=5, rows_per_pe=8, max_cols=40, mem_depth=256)
    w = _sparse(rng, 37, 29, 0.3, cfg.w_fmt)
    w[4] = 0          # an all-zero row
    w[:, 7] = 0       # an all-zero column
    plan = compile_weights(w, cfg, alloc)
    # every row has a unique (pe, local) slot
    slots = set(zip(plan.row_pe.tolist(), plan.row_local.tolist()))
    assert len(slots) == 37 and max(plan.row_local) < cfg.rows_per_pe
    back = np.zeros_like(w)
    inv = {s: r for r, s in enumerate(zip(plan.row_pe.tolist(), plan.row_local.tolist()))}
    for p in range(cfg.pes):
        assert plan.starts[p, 0] == 0
        for j in range(29):
            s, c = plan.starts[p, j], plan.counts[p, j]
            if j + 1 < 29:
                assert plan.starts[p, j + 1] == s + c       # column-packed, no terminators
            for value, local in plan.entries[p][s:s + c]:
                back[inv[(p, local)], j] = value
    np.testing.assert_array_equal(back, w)
    assert plan.nnz == np.count_nonzero(w)
    # one word per non-zero, one SKIP per empty (column, PE) pair, ROW words, END
    assert len(weight_beats(plan)) == 37 + plan.nnz + int((plan.counts == 0).sum()) + 1
    report = load_report(plan)
    assert sum(report["loads"]) == plan.nnz
    assert report["ideal_cycles"] == math.ceil(plan.nnz / 5)
    images = plan.memory_images()
    assert len(images) == 2 * cfg.pes + 1
    assert len(images["rowmap.hex"].split()) == 37


@pytest.mark.parametrize("shape, kwargs, message", [
    ((3, 3, 3), {}, "weights must be a 2-D matrix, not 3-D"),
    ((25, 4), {}, "rows must be at most pes \\* rows_per_pe = 24, not 25"),
    ((4, 33), {}, "cols must be at most max_cols = 32, not 33"),
])
def test_compile_errors(shape, kwargs, message):
    with pytest.raises(ValueError, match=message):
        compile_weights(np.ones(shape, dtype=np.int64), CFG_A, **kwargs)


def test_compile_rejects_codes_and_overfull_memory():
    with pytest.raises(ValueError, match="weight codes must lie in \\[-128, 127\\]"):
        compile_weights(np.array([[200]]), CFG_A)
    with pytest.raises(ValueError, match="a PE needs 65 weight entries; mem_depth is 64"):
        compile_weights(np.ones((3, 65), dtype=np.int64), SpmvConfig(
            pes=3, rows_per_pe=8, max_cols=80, mem_depth=64))


def test_weight_beats_lanes():
    """Lane l carries rows r = l mod L and PEs p = l mod L; lanes padded, one END beat."""
    from gen.spmv import KIND_END, KIND_ENTRY, KIND_LAST, KIND_NOP, KIND_ROW, KIND_SKIP
    cfg = SpmvConfig(pes=3, rows_per_pe=4, max_cols=8, mem_depth=16, w_lanes=2,
                     w_fmt=QFormat(8, 0))
    w = np.zeros((5, 4), dtype=np.int64)
    w[:, 0] = [1, 2, 3, 4, 5]
    plan = compile_weights(w, cfg, "interleave")   # rows 0,3 -> PE0, 1,4 -> PE1, 2 -> PE2
    beats = weight_beats(plan)
    ww, mask = cfg.word_width, (1 << cfg.word_width) - 1
    lanes = [[(b >> (lane * ww)) & mask for b in beats] for lane in range(2)]
    kind = lambda word: word >> (ww - 3)  # noqa: E731
    # lane 0 (PEs 0, 2): ROW 0, 2, 4 | column 0: PE0 ENTRY LAST, PE2 LAST | columns 1-3:
    # SKIP for PE0 and PE2 ; lane 1 (PE1): ROW 1, 3 | ENTRY LAST | 3 SKIP | NOP padding
    assert [kind(wd) for wd in lanes[0]] == [KIND_ROW] * 3 + [KIND_ENTRY, KIND_LAST,
                                                              KIND_LAST] + [KIND_SKIP] * 6 \
        + [KIND_END]
    assert [kind(wd) for wd in lanes[1]] == [KIND_ROW] * 2 + [KIND_ENTRY, KIND_LAST] + \
        [KIND_SKIP] * 3 + [KIND_NOP] * 5 + [KIND_END]
    assert beats[-1] & 1 and len(beats) == 13


def test_prune_keeps_largest():
    w = np.array([[0.1, -0.9], [0.5, 0.2]])
    np.testing.assert_array_equal(prune(w, 0.5), [[0, -0.9], [0.5, 0]])
    assert np.count_nonzero(prune(np.ones((10, 10)), 0.117)) == 12


def test_compile_tiled_blocks_and_sums():
    rng = np.random.default_rng(3)
    cfg = SpmvConfig(pes=2, rows_per_pe=4, max_cols=16, mem_depth=8, w_fmt=QFormat(8, 0))
    w = _sparse(rng, 19, 37, 0.6, cfg.w_fmt)
    blocks = compile_tiled(w, cfg, "lpt")
    # 8 rows per block row; columns halved until every PE's block fits 8 entries
    assert {b.rows for b in blocks} <= {8, 3} and max(b.cols for b in blocks) < 16
    assert all(b.loads.max() <= 8 for b in blocks)
    back = np.zeros_like(w)
    for b in blocks:
        inv = {s: r for r, s in enumerate(zip(b.row_pe.tolist(), b.row_local.tolist()))}
        for p in range(cfg.pes):
            for (value, local), j in zip(b.entries[p], b.entry_cols[p]):
                back[b.row_offset + inv[(p, local)], b.col_offset + j] = value
    np.testing.assert_array_equal(back, w)
    firsts = [b for b in blocks if b.first]
    lasts = [b for b in blocks if b.last]
    assert len(firsts) == len(lasts) == 3
    assert sum(len(weight_beats(b)) for b in blocks) == 19 + np.count_nonzero(w) + sum(
        int((b.counts == 0).sum()) for b in blocks) + len(blocks)
    x = rng.integers(-100, 100, 37)
    model = cycle_model(tile_jobs(blocks, x), cfg, w_valid_prob=0.5)
    assert len(model["o"]) == 19 and len(model["x"]) == 37 * 3


# ---------------------------------------------------------------- golden model

def test_golden_is_exact_integer_product_without_saturation():
    rng = np.random.default_rng(2)
    cfg = SpmvConfig(w_fmt=QFormat(8, 0), x_fmt=QFormat(16, 0), acc_width=40,
                     out_fmt=QFormat(40, 0))
    w = _sparse(rng, 50, 40, 0.4, cfg.w_fmt)
    x = rng.integers(-32768, 32768, 40)
    np.testing.assert_array_equal(ref_spmv(w, x, cfg), w @ x)


def test_golden_saturates_every_add_in_column_order():
    # acc 16 bits: 3 * 127*127 saturates to 32767, then - 127*127 = 16638
    w = np.array([[127, 127, 127, -127]])
    x = np.array([127, 127, 127, 127])
    assert ref_spmv(w, x, CFG_B)[0] == 32767 - 16129
    assert ref_spmv(-w, x, CFG_B)[0] == -32768 + 16129


def test_golden_rounds_half_up_to_out_format():
    cfg = SpmvConfig(w_fmt=QFormat(1, 7), x_fmt=QFormat(4, 12), out_fmt=QFormat(8, 0))
    # 0.5 * 1.0 = +0.5 -> 1 and -0.5 -> 0 (round half up); 0.5 * 1.5 = 0.75 -> 1
    w = np.array([[64], [-64], [64]])
    np.testing.assert_array_equal(ref_spmv(w[:2], np.array([4096]), cfg), [1, 0])
    np.testing.assert_array_equal(ref_spmv(w[2:], np.array([6144]), cfg), [1])


# ---------------------------------------------------------------- cycle model

def test_model_spends_one_cycle_per_nonzero_and_none_on_empty_columns():
    # P = 2: even columns hold 4 entries for PE0 only, odd columns 4 for PE1 only.
    cfg = SpmvConfig(pes=2, fifo_depth=16, rows_per_pe=8, max_cols=64, mem_depth=1024,
                     w_fmt=QFormat(8, 0))
    w = np.zeros((16, 60), dtype=np.int64)
    w[:8, 0::2] = 1
    w[8:, 1::2] = 1
    plan = compile_weights(w, cfg, "interleave")
    # interleave puts rows 0..7 on both PEs: even rows to PE0, odd to PE1
    x = np.ones(60, dtype=np.int64)
    job = cycle_model([(plan, x)], cfg)["jobs"][0]
    ideal = plan.nnz // 2
    # pipeline fill: broadcast tree, pointer read, pointer register, push register,
    # issue, entry address register, entry register, operand register, multiply,
    # product register, accumulator register, add; no cycle for the empty (column, PE)
    # pairs
    fill = cfg.push_delay + 1 + cfg.pe_latency
    assert fill == 12 and job["compute_cycles"] == ideal + fill
    # zero activations cost the PEs nothing: only the one-per-clock input remains
    x0 = np.zeros(60, dtype=np.int64)
    x0[59] = 1
    job = cycle_model([(plan, x0)], cfg)["jobs"][0]
    # the last activation is accepted at clock 59 and its 4 sums are final at
    # 59 + fill - 1 .. 59 + fill + 2
    assert job["compute_cycles"] == 59 + fill + 4


def test_model_seed_matrix_meets_target():
    rng = np.random.default_rng(0)
    rows, cols = 1024, 153
    nnz = round(0.117 * rows * cols)
    w = np.zeros(rows * cols, dtype=np.int64)
    w[rng.choice(rows * cols, nnz, replace=False)] = 1
    w = w.reshape(rows, cols)
    cfg = SpmvConfig()
    plan = compile_weights(w, cfg, "balanced")
    report = load_report(plan)
    assert report["max_over_mean"] <= 1.01
    job = cycle_model([(plan, np.ones(cols, dtype=np.int64))], cfg)["jobs"][0]
    assert job["compute_cycles"] <= 1.03 * report["ideal_cycles"]


# ---------------------------------------------------------------- RTL

def _jobs_a(rng):
    """Directed and random jobs for CFG_A (P = 3, FIFO depth 2)."""
    fmt = CFG_A.w_fmt
    xs = lambda n: rng.integers(-3000, 3000, n)  # noqa: E731
    jobs = []
    for rows, cols, density, alloc in [(10, 7, 0.3, "interleave"), (23, 31, 0.6, "zigzag"),
                                       (17, 13, 0.95, "lpt"), (20, 32, 0.1, "balanced")]:
        w = _sparse(rng, rows, cols, density, fmt)
        x = xs(cols)
        x[rng.random(cols) < 0.3] = 0
        jobs.append((w, x, alloc))
    w = _sparse(rng, 14, 9, 0.7, fmt)
    w[[0, 5, 13]] = 0            # all-zero rows
    w[:, [1, 8]] = 0             # all-zero columns
    jobs.append((w, xs(9), "balanced"))
    jobs.append((w, np.zeros(9, dtype=np.int64), "zigzag"))       # all-zero x
    onehot = np.zeros(9, dtype=np.int64)
    onehot[4] = fmt.max_code
    jobs.append((w, onehot, "lpt"))                               # one-hot x
    jobs.append((np.zeros((6, 5), dtype=np.int64), xs(5), "zigzag"))  # empty matrix
    jobs.append((np.zeros((0, 5), dtype=np.int64), xs(5), "lpt"))    # no rows
    jobs.append((np.ones((4, 0), dtype=np.int64), xs(0), "lpt"))     # no columns
    jobs.append((_sparse(rng, 2, 11, 0.8, fmt), xs(11), "zigzag"))    # P > rows
    # same-accumulator hazard: dense rows, so every PE updates one accumulator in
    # consecutive clocks across consecutive columns
    jobs.append((np.full((3, 20), fmt.min_code, dtype=np.int64), xs(20), "interleave"))
    hz = np.zeros((6, 16), dtype=np.int64)
    hz[0] = 100
    hz[3, ::2] = -50
    jobs.append((hz, xs(16), "interleave"))
    return jobs


def _check(jobs, ys, cfg):
    for (w, x, _), y in zip(jobs, ys):
        golden = ref_spmv(w, x, cfg)
        np.testing.assert_array_equal(y, golden)
        np.testing.assert_array_equal(golden, _exact(w, x, cfg))


def _assert_cycles(result, model):
    assert result["sources"]["w"]["cycles"] == model["w"]
    assert result["sources"]["x"]["cycles"] == model["x"]
    assert result["sinks"]["o"]["cycles"] == model["o"]


def test_rtl_random_and_directed(sim):
    rng = np.random.default_rng(11)
    jobs = _jobs_a(rng)
    plans = [(compile_weights(w, CFG_A, alloc), x) for w, x, alloc in jobs]
    ys, result = run_jobs(plans, CFG_A, sim, name="directed")
    _check(jobs, ys, CFG_A)
    _assert_cycles(result, cycle_model(plans, CFG_A))


def test_rtl_backpressure_and_gaps(sim):
    rng = np.random.default_rng(12)
    jobs = _jobs_a(rng)[:5]
    plans = [(compile_weights(w, CFG_A, alloc), x) for w, x, alloc in jobs]
    knobs = {"w_valid_prob": 0.6, "x_valid_prob": 0.7, "o_ready_prob": 0.4, "seed": 4}
    ys, result = run_jobs(plans, CFG_A, sim, name="backpressure", **knobs)
    _check(jobs, ys, CFG_A)
    _assert_cycles(result, cycle_model(plans, CFG_A, **knobs))


@pytest.mark.native_agree
def test_rtl_reset_mid_job(sim):
    rng = np.random.default_rng(13)
    w = _sparse(rng, 20, 25, 0.5, CFG_A.w_fmt)
    x = rng.integers(-3000, 3000, 25)
    plans = [(compile_weights(w, CFG_A, "balanced"), x)]
    model = cycle_model(plans, CFG_A)["jobs"][0]
    # late in compute every PE's accumulator row 0 holds a partial sum: the INIT clear
    # after the reset must reach it (it once arrived in the PE's reset clock and was lost)
    for name, at in (("reset_compute", model["compute_start"] + 5),
                     ("reset_late_compute", model["drain_start"] - 2),
                     ("reset_drain", model["drain_start"] + CFG_A.drain_latency + 3)):
        ys, result = run_jobs(plans, CFG_A, sim, name=name, reset_at=at)
        np.testing.assert_array_equal(ys[0], ref_spmv(w, x, CFG_A))
        if name == "reset_drain":
            assert 0 < len(result["before_reset"]["o"]["data"]) < 20


def test_rtl_single_pe_saturation_and_hazard(sim):
    rng = np.random.default_rng(14)
    fmt = CFG_B.w_fmt
    jobs = [
        (np.array([[127, 127, 127, -127]]), np.full(4, 127), "zigzag"),   # saturation
        (-np.array([[127, 127, 127, -127]]), np.full(4, 127), "zigzag"),
        (np.full((1, 16), 3), rng.integers(-128, 128, 16), "zigzag"),        # hazard
        (_sparse(rng, 13, 11, 0.5, fmt), rng.integers(-128, 128, 11), "lpt"),
        (_sparse(rng, 16, 16, 0.9, fmt), rng.integers(-128, 128, 16), "balanced"),
    ]
    plans = [(compile_weights(w, CFG_B, alloc), x) for w, x, alloc in jobs]
    knobs = {"o_ready_prob": 0.5, "x_valid_prob": 0.8, "seed": 2}
    ys, result = run_jobs(plans, CFG_B, sim, name="p1", **knobs)
    for (w, x, _), y in zip(jobs, ys):
        np.testing.assert_array_equal(y, ref_spmv(w, x, CFG_B))
    assert ys[0][0] == 32767 - 16129 and ys[1][0] == -32768 + 16129
    for (w, x, _), y in list(zip(jobs, ys))[2:]:
        if np.abs(np.abs(w) @ np.abs(x)).max() < 32768:
            np.testing.assert_array_equal(y, w @ x)       # exact integer W @ x
    _assert_cycles(result, cycle_model(plans, CFG_B, **knobs))


def test_tiled_rtl(sim):
    """Checkerboard of 2 x 3 blocks (24 x 32 max per block): double-buffered loading,
    partial sums kept across column blocks, full-rate and bandwidth-limited weights."""
    rng = np.random.default_rng(15)
    w = _sparse(rng, 40, 70, 0.4, CFG_A.w_fmt)
    w[:, 40:50] = 0
    x = rng.integers(-3000, 3000, 70)
    blocks = compile_tiled(w, CFG_A, "balanced")
    assert [(b.row_offset, b.col_offset, b.first, b.last) for b in blocks] == [
        (0, 0, True, False), (0, 32, False, False), (0, 64, False, True),
        (24, 0, True, False), (24, 32, False, False), (24, 64, False, True)]
    jobs = tile_jobs(blocks, x)
    golden = ref_spmv(w, x, CFG_A)
    np.testing.assert_array_equal(golden, _exact(w, x, CFG_A))
    for name, knobs in (("tiled", {}),
                        ("tiled_bw", {"w_valid_prob": 0.3, "o_ready_prob": 0.7, "seed": 9})):
        ys, result = run_jobs(jobs, CFG_A, sim, name=name, **knobs)
        np.testing.assert_array_equal(gather_tiled(blocks, ys), golden)
        model = cycle_model(jobs, CFG_A, **knobs)
        _assert_cycles(result, model)
    # double buffering: at full bandwidth each next block loads while this one computes
    info = cycle_model(jobs, CFG_A)["jobs"]
    assert all(info[b + 1]["load_start"] < info[b]["done"] for b in range(len(info) - 1))


# ---------------------------------------------------------------- CLI

@pytest.fixture
def npys(tmp_path):
    rng = np.random.default_rng(21)
    files = {
        "W": rng.integers(-100, 100, (20, 13)) * (rng.random((20, 13)) < 0.4),
        "x": rng.integers(-1000, 1000, 13),
        "Wf": rng.normal(0, 0.2, (20, 13)),
        "xf": rng.normal(0, 1, 13),
        "W3": np.zeros((2, 2, 2)),
        "xnan": np.array([1.0, np.nan] + [0.0] * 11),
        "xinf": np.array([np.inf] + [0.0] * 12),
        "x12": np.zeros(12, dtype=np.int64),
        "huge": np.full((2, 13), 2 ** 40),
        "xbig": np.array([2.5] + [0.0] * 12),
        "xu64": np.array([2 ** 64 - 1] + [0] * 12, dtype=np.uint64),
        "W0": np.zeros((20, 0)),
        "x0": np.zeros(0),
    }
    paths = {}
    for name, arr in files.items():
        paths[name] = str(tmp_path / f"{name}.npy")
        np.save(paths[name], arr)
    paths["tmp"] = tmp_path
    return paths


@pytest.mark.parametrize("argv, message", [
    (["--weights", "W3", "--x", "x"], "--weights must be a 2-D matrix, not 3-D (shape (2, 2, 2))"),
    (["--weights", "W", "--x", "W"], "--x must be a 1-D vector, not 2-D (shape (20, 13))"),
    (["--weights", "W", "--x", "x12"],
     "--x must have one value per weight column: weights are 20 x 13, x has 12 values"),
    (["--weights", "W", "--x", "xnan"], "--x: values must be finite, found NaN"),
    (["--weights", "W", "--x", "xinf"], "--x: values must be finite, found Inf"),
    (["--weights", "W", "--x", "x", "--pes", "0"], "--pes must be between 1 and 256, not 0"),
    (["--weights", "W", "--x", "x", "--pes", "two"], "--pes must be an integer, not 'two'"),
    (["--weights", "W", "--x", "x", "--fifo-depth", "0"],
     "--fifo-depth must be between 1 and 64, not 0"),
    (["--weights", "W", "--x", "x", "--w-fmt", "int4"],
     "--weights: value -100 lies outside [-8, 7] (codes of --w-fmt Q4.0)"),
    (["--weights", "Wf", "--x", "xbig", "--x-fmt", "Q2.6"],
     "--x: value 2.5 lies outside the range of --x-fmt Q2.6, [-2, 1.98438]"),
    (["--weights", "W", "--x", "xu64"],
     "--x: integer values need 65 bits; at most 32 are supported"),
    (["--weights", "W", "--x", "xu64", "--x-fmt", "Q32.0"],
     "--x: value 18446744073709551615 lies outside [-2147483648, 2147483647]"),
    (["--weights", "W0", "--x", "x0"], "--weights must not be empty, not shape (20, 0)"),
    (["--weights", "W", "--x", "x", "--acc-width", "8"],
     "--acc-width must be at least w_fmt + x_fmt width = 19, not 8"),
    (["--weights", "huge", "--x", "x"], "--weights: integer values need 42 bits; at most 32"),
    (["--weights", "W", "--x", "x", "--density", "0.5"],
     "--density prunes float weights; integer codes are used as given"),
    (["--weights", "W", "--x", "missing"], "--x: no such file"),
    (["--weights", "W", "--x", "x", "--rows-per-pe", "1"],
     "--rows-per-pe must be between 2 and 4096, not 1"),
    (["--weights", "W", "--x", "x", "--w-valid-prob", "0"],
     "--w-valid-prob must be between 0.01 and 1, not 0"),
])
def test_cli_errors(npys, capsys, argv, message):
    from gen.cli import main
    argv = [npys.get(a, a) for a in argv]
    out = str(npys["tmp"] / "y.npy")
    assert main(["run", "spmv", *argv, "--out", out, "--sim", "icarus"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"spnn: error: {message}") and err.count("\n") == 1
    assert not (npys["tmp"] / "y.npy").exists()


@pytest.mark.rtl
def test_cli_integer_run_is_exact(npys, capsys):
    from gen.cli import main
    from gen.core.sim import sim_available
    if not sim_available("icarus"):
        pytest.skip("needs Icarus")
    out, rep = str(npys["tmp"] / "y.npy"), str(npys["tmp"] / "r.json")
    assert main(["run", "spmv", "--weights", npys["W"], "--x", npys["x"], "--pes", "3",
                 "--alloc", "zigzag", "--fifo-depth", "2", "--out", out, "--report", rep,
                 "--sim", "icarus"]) == 0
    w, x = np.load(npys["W"]), np.load(npys["x"])
    np.testing.assert_array_equal(np.load(out), w @ x)
    report = json.loads(open(rep).read())
    for key in ("cycles", "ideal_cycles", "efficiency", "loads", "formats", "allocator",
                "max_over_mean", "total_cycles", "load_cycles"):
        assert key in report
    assert report["allocator"] == "zigzag" and report["max_abs_error"] == 0.0
    assert report["ideal_cycles"] == math.ceil(np.count_nonzero(w) / 3)
    assert sum(report["loads"]) == np.count_nonzero(w) and report["exact_integer_result"]
    assert report["formats"]["weights"]["name"] == "Q8.0"
    # float run with pruning: error vs the float product within the quantisation bound
    assert main(["run", "spmv", "--weights", npys["Wf"], "--x", npys["xf"], "--pes", "3",
                 "--fifo-depth", "2", "--density", "0.3", "--report", rep,
                 "--sim", "icarus"]) == 0
    report = json.loads(open(rep).read())
    wf = np.load(npys["Wf"])
    # |x| < 8, |w| < 1: quantisation errors 2**-8 (w) and 2**-13 (x) per product
    bound = 13 * (2 ** -8 * 8 + 2 ** -13)
    assert report["max_abs_error"] <= bound and report["max_abs_error_vs_quantised_product"] == 0
    assert report["nnz"] == round(0.3 * wf.size)
    # tiled: 20 rows on 2 PEs x 4 accumulators, 5 columns per block, slow weight stream
    assert main(["run", "spmv", "--weights", npys["W"], "--x", npys["x"], "--pes", "2",
                 "--rows-per-pe", "4", "--max-cols", "5", "--w-valid-prob", "0.5",
                 "--w-lanes", "2",
                 "--out", out, "--report", rep, "--sim", "icarus"]) == 0
    np.testing.assert_array_equal(np.load(out), w @ x)
    report = json.loads(open(rep).read())
    assert len(report["blocks"]) == 3 * 3 and report["exact_integer_result"]
    assert report["weight_bandwidth_words_per_clock"] == 1.0
    capsys.readouterr()


@pytest.mark.parametrize("ww, xw", [(2, 3), (3, 5), (4, 4), (5, 3), (6, 2)])
def test_radix4_product_exhaustive(ww, xw):
    """The PE's LUT multiplier equals w * x for every pair of codes (odd and even widths,
    the most negative values included), in Amaranth's own simulator."""
    from amaranth.hdl import Module, Signal, signed
    from amaranth.sim import Simulator
    from hdl.lib.arith import radix4_product
    m = Module()
    w, x = Signal(signed(ww)), Signal(signed(xw))
    x3, xn = Signal(signed(xw + 2)), Signal(signed(xw + 1))
    out = Signal(signed(ww + xw))
    m.d.comb += [x3.eq(x * 3), xn.eq(-x), out.eq(radix4_product(m, w, x, x3, xn)[:ww + xw])]
    pairs = [(a, b) for a in range(-(1 << ww - 1), 1 << ww - 1)
             for b in range(-(1 << xw - 1), 1 << xw - 1)]
    wrong = []

    async def bench(ctx):
        for a, b in pairs:
            ctx.set(w, a)
            ctx.set(x, b)
            await ctx.tick()
            if ctx.get(out) != a * b:
                wrong.append((a, b, ctx.get(out)))

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert not wrong, wrong[:5]


# ---------------------------------------------------------------- wide drain, column plans

@pytest.mark.parametrize("alloc", ALLOCATORS)
def test_wide_drain_keeps_rows_on_their_lane(alloc):
    rng = np.random.default_rng(31)
    w = _sparse(rng, 29, 17, 0.4, CFG_D.w_fmt)
    plan = compile_weights(w, CFG_D, alloc)
    assert np.array_equal(plan.row_pe % 2, np.arange(29) % 2)
    assert np.bincount(plan.row_pe, minlength=4).max() <= CFG_D.rows_per_pe
    # local indices are distinct per PE
    assert len({(p, i) for p, i in zip(plan.row_pe, plan.row_local)}) == 29


@pytest.mark.native_agree
def test_wide_drain_rtl(sim):
    """Two results per clock: directed and random jobs (odd row counts end on a half
    transfer), back-pressure and idle inputs, a tiled matrix (block rows of 32 and 11 rows),
    results exact and every transfer on the model's cycle."""
    rng = np.random.default_rng(32)
    jobs = _jobs_a(rng)
    plans = [(compile_weights(w, CFG_D, alloc), x) for w, x, alloc in jobs]
    knobs = {"w_valid_prob": 0.7, "x_valid_prob": 0.8, "o_ready_prob": 0.4, "seed": 3}
    ys, result = run_jobs(plans, CFG_D, sim, name="drain2", **knobs)
    _check(jobs, ys, CFG_D)
    _assert_cycles(result, cycle_model(plans, CFG_D, **knobs))
    assert len(result["sinks"]["o"]["cycles"]) == sum(-(-w.shape[0] // 2) for w, _, _ in jobs)
    w = _sparse(rng, 43, 70, 0.4, CFG_D.w_fmt)
    x = rng.integers(-3000, 3000, 70)
    blocks = compile_tiled(w, CFG_D, "balanced")
    tiled = tile_jobs(blocks, x)
    ys, result = run_jobs(tiled, CFG_D, sim, name="drain2_tiled", o_ready_prob=0.6, seed=5)
    np.testing.assert_array_equal(gather_tiled(blocks, ys), ref_spmv(w, x, CFG_D))
    _assert_cycles(result, cycle_model(tiled, CFG_D, o_ready_prob=0.6, seed=5))


def test_wide_drain_reset_in_drain(sim):
    rng = np.random.default_rng(33)
    w = _sparse(rng, 21, 25, 0.5, CFG_D.w_fmt)
    x = rng.integers(-3000, 3000, 25)
    plans = [(compile_weights(w, CFG_D, "balanced"), x)]
    at = cycle_model(plans, CFG_D)["jobs"][0]["drain_start"] + CFG_D.drain_latency + 2
    ys, result = run_jobs(plans, CFG_D, sim, name="drain2_reset", reset_at=at)
    np.testing.assert_array_equal(ys[0], ref_spmv(w, x, CFG_D))
    assert 0 < len(result["before_reset"]["o"]["data"]) < 11


def test_plan_columns_is_the_models_best():
    from gen.spmv import column_candidates, plan_columns, roofline_beats
    rng = np.random.default_rng(34)
    cfg = SpmvConfig(pes=8, rows_per_pe=16, max_cols=64, mem_depth=512, w_lanes=4,
                     drain_lanes=4, bus_words=4)
    w = _sparse(rng, 100, 60, 0.3, cfg.w_fmt)
    x = rng.integers(-3000, 3000, 60)
    cands = column_candidates(60, 64)
    assert [0] in cands and all(c[0] == 0 and c == sorted(set(c)) for c in cands)

    def end(starts):
        run = cycle_model(tile_jobs(compile_tiled(w, cfg, col_starts=starts), x), cfg)
        return run["o"][-1] + 1
    best = plan_columns(w, x, cfg)
    assert end(best) == min(end(c) for c in cands) < end([0])
    blocks = compile_tiled(w, cfg, col_starts=best)
    assert [b.col_offset for b in blocks] == best and blocks[-1].last and blocks[0].first
    np.testing.assert_array_equal(
        np.concatenate([b.counts for b in blocks], axis=1),
        compile_tiled(w, cfg)[0].counts)
    roof = roofline_beats(w, cfg)
    one = compile_tiled(w, cfg)[0]
    words = one.nnz + int((one.counts == 0).sum()) + 100
    assert roof == {"s_axis_w": -(-words // 4), "s_axis_x": 15, "m_axis_y": 25}
    # a matrix beyond one block keeps the max_cols tiling
    assert plan_columns(_sparse(rng, 10, 70, 0.3, cfg.w_fmt), np.ones(70), cfg) == [0]
    with pytest.raises(ValueError, match="col_starts must rise from 0"):
        compile_tiled(w, cfg, col_starts=[0, 30, 30])
