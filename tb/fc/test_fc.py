# SPDX-License-Identifier: Apache-2.0
"""FD-CSR FC engine: RTL == golden == exact integer W @ X, cycles == model (both simulators).

Every RTL job, stalled or not, checks the cycle of every transfer on every port against
:func:`gen.fc.fc_cycle_model` run with the job's own per-port patterns (and the total
through the ``cycle_log`` fixture); unstalled jobs also against :func:`fc_schedule`.

Two RTL configurations keep the Verilator builds few: ``ONE`` (batch 3, one non-zero per
clock, 2 segments of 16 per beat) and ``FOUR`` (batch 2, four non-zeros per clock, 2
segments of 8 per beat).  Each test runs several jobs on one build.
"""

import numpy as np
import pytest

from gen.fc import (FcConfig, encode, fc_cycle_model, fc_job, fc_schedule, prune_random, ref_fc,
                    unpack_requests, unpack_y)
from gen.fc.twin import rtl_fc
from gen.core.stimulus import Pattern, job_patterns
from hdl.fc import GATEWARE

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


def _same(kind, port, measured, model):
    """Assert two transfer-cycle lists are equal, naming the first difference."""
    if list(measured) == list(model):
        return
    i = next((i for i, (a, b) in enumerate(zip(measured, model)) if a != b),
             min(len(measured), len(model)))
    got = measured[i] if i < len(measured) else "none"
    want = model[i] if i < len(model) else "none"
    raise AssertionError(f"{kind} {port}: transfer {i} at clock {got} in the RTL, {want} in "
                         f"fc_cycle_model ({len(measured)} vs {len(model)} transfers)")


def _assert_model(res, model, cycle_log=None):
    """Every port's transfer cycles (and those before a reset) == ``model``
    (:func:`fc_cycle_model`); the job's total through ``cycle_log`` when given."""
    for kind in ("sources", "sinks"):
        for port, cycles in model[kind].items():
            _same(kind[:-1], port, res[kind][port]["cycles"], cycles)
    if model["before_reset"] is not None:
        for port, cycles in model["before_reset"]["sinks"].items():
            _same("sink before reset", port, res["before_reset"][port]["cycles"], cycles)
    assert res["requests"] == model["requests"], "memory requests differ from the model"
    if cycle_log is not None:
        cmd, y = res["sources"]["cmd"]["cycles"], res["sinks"]["y"]["cycles"]
        cycle_log(y[-1] - cmd[0] + 1, model["cycles"])


def _check(w, x, cfg, sim, name, cycle_log=None, **kwargs):
    """Run one job; assert values, the memory requests and every port's transfer cycles
    against :func:`fc_cycle_model` with the job's own patterns."""
    y, res = rtl_fc(w, x, cfg, sim, name=name, **kwargs)
    golden = ref_fc(w, x, cfg)
    np.testing.assert_array_equal(y, golden)
    assert (golden.astype(object) == _exact(w, x)).all()
    sched = res["schedule"]
    assert res["requests"] == sched["requests"], "memory requests differ from the schedule"
    _assert_model(res, res["model"], cycle_log)
    return y, res, sched


def _assert_cycles(res, sched, offset=0):
    y_cycles = np.array(res["sinks"]["y"]["cycles"]) - offset
    np.testing.assert_array_equal(y_cycles, sched["y_cycles"])
    meta = np.array(res["sources"]["meta"]["cycles"]) - offset
    np.testing.assert_array_equal(meta, sched["meta_cycles"])
    assert res["sources"]["cmd"]["cycles"][0] - offset == 0


@pytest.mark.parametrize("which", sorted(CONFIGS))
def test_random_layers(sim, which, cycle_log):
    """Several densities, shapes (cols not a multiple of 16) and batch sizes."""
    cfg = CONFIGS[which]
    rng = np.random.default_rng(10 + cfg.nz_per_clock)
    cases = [(6, 37, 0.09, cfg.batch), (4, 128, 0.04, 1), (5, 100, 0.25, cfg.batch),
             (3, 16, 0.6, 2), (1, 1, 1.0, 1), (8, 45, 1.0, cfg.batch)]
    for i, (rows, cols, density, n) in enumerate(cases):
        w = _w(rng, cfg, rows, cols, density)
        x = _x(rng, cfg, cols, min(n, cfg.batch))
        _, res, sched = _check(w, x, cfg, sim, f"rand{i}", cycle_log)
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
def test_back_pressure(sim, which, cycle_log):
    """Idle cycles on every input stream and back-pressure on vaddr and y: every port's
    transfers on fc_cycle_model's clocks (a pipeline that stalls more than it must, e.g.
    on y back-pressure with the y register empty, is late here)."""
    cfg = CONFIGS[which]
    rng = np.random.default_rng(20)
    w = _w(rng, cfg, 9, 70, 0.15)
    w[2] = 0
    x = _x(rng, cfg, 70, cfg.batch)
    for i, (vp, rp) in enumerate([(0.5, 1.0), (1.0, 0.3), (0.6, 0.5)]):
        _, res, sched = _check(w, x, cfg, sim, f"bp{i}", cycle_log, valid_prob=vp,
                               ready_prob=rp, seed=i)
        assert res["model"]["cycles"] > sched["cycles"]     # the stalls cost clocks


# Explicit per-port patterns.  "one": y ready 1 clock in 3, meta in bursts of 4 clocks
# every 10, vdata 2 clocks in 3, vaddr every other clock, x and cmd idle now and then.
# "four": y ready 1 clock in 3 (often with the y register empty), meta in bursts, the
# rest always.
EXPLICIT = {
    "one": {"y": Pattern.bits([1, 0, 0]), "meta": Pattern.bits([1] * 4 + [0] * 6),
            "vdata": Pattern.bits([1, 1, 0]), "vaddr": Pattern.bits([0, 1]),
            "x": Pattern.bits([1, 1, 1, 0, 1]), "cmd": Pattern.bits([0, 0, 1])},
    "four": {"y": Pattern.bits([1, 0, 0]), "meta": Pattern.bits([1, 1, 0, 0, 0])},
}


@pytest.mark.parametrize("which", sorted(CONFIGS))
def test_explicit_patterns(sim, which, cycle_log):
    """Deterministic ``Pattern.bits`` stimulus (:data:`EXPLICIT`): every transfer on
    fc_cycle_model's clock; y transfers only on its ready clocks."""
    cfg, pats = CONFIGS[which], EXPLICIT[which]
    rng = np.random.default_rng(70 + cfg.nz_per_clock)
    w = _w(rng, cfg, 8, 40, 0.3)
    w[3] = 0
    x = _x(rng, cfg, 40, cfg.batch)
    _, res, _ = _check(w, x, cfg, sim, "bits", cycle_log, patterns=pats)
    assert all(c % 3 == 0 for c in res["sinks"]["y"]["cycles"])
    assert res["sources"]["cmd"]["cycles"] == [2 if "cmd" in pats else 0]


@pytest.mark.parametrize("which", sorted(CONFIGS))
def test_low_probability(sim, which, cycle_log):
    """Very sparse hand-shakes: every port at probability 0.08, a small job."""
    cfg = CONFIGS[which]
    rng = np.random.default_rng(80)
    w = _w(rng, cfg, 4, 20, 0.3)
    x = _x(rng, cfg, 20, cfg.batch)
    _, res, sched = _check(w, x, cfg, sim, "lowp", cycle_log, valid_prob=0.08,
                           ready_prob=0.08, seed=3)
    assert res["model"]["cycles"] > 5 * sched["cycles"]


@pytest.mark.native_agree
@pytest.mark.parametrize("which", sorted(CONFIGS))
def test_reset_mid_layer(sim, which, cycle_log):
    """Reset half-way through the rows; the restarted job is exact and on the model's time
    (unstalled: fc_schedule shifted to the restart; then with idle inputs and
    back-pressure: fc_cycle_model, before and after the reset)."""
    cfg = CONFIGS[which]
    rng = np.random.default_rng(30)
    w = _w(rng, cfg, 10, 60, 0.2)
    x = _x(rng, cfg, 60, cfg.batch)
    sched = fc_schedule(encode(w, cfg.row_width), cfg)
    reset_at = int(sched["y_cycles"][4]) + 1       # after 5 of the 10 results
    y, res, sched = _check(w, x, cfg, sim, "reset", cycle_log, reset_at=reset_at)
    assert len(res["before_reset"]["y"]["data"]) == 5
    _assert_cycles(res, sched, offset=res["sources"]["cmd"]["cycles"][0])
    stalled = {"valid_prob": 0.6, "ready_prob": 0.5, "seed": 4}
    job, _, fd = fc_job(w, x, cfg, **stalled)
    reset_at = int(fc_cycle_model(fd, cfg, job)["y_cycles"][4]) + 1
    _, res, _ = _check(w, x, cfg, sim, "reset_bp", cycle_log, reset_at=reset_at, **stalled)
    assert len(res["before_reset"]["y"]["data"]) == 5


@pytest.mark.parametrize("stalls", [{}, {"valid_prob": 0.6, "ready_prob": 0.5, "seed": 6}],
                         ids=["always", "stalled"])
def test_back_to_back_jobs(sim, stalls, cycle_log):
    """Two layers of different sizes through one engine: the second `cmd` is taken the
    clock after the first job's last result, and every transfer follows fc_cycle_model of
    the two jobs (unstalled: each job also follows fc_schedule)."""
    from gen.core.sim import run_job
    cfg = ONE
    rng = np.random.default_rng(60)
    w1, w2 = _w(rng, cfg, 5, 70, 0.2), _w(rng, cfg, 4, 33, 0.5)
    x1, x2 = _x(rng, cfg, 70, cfg.batch), _x(rng, cfg, 33, cfg.batch)
    j1, s1, fd1 = fc_job(w1, x1, cfg, **stalls)
    j2, s2, fd2 = fc_job(w2, x2, cfg, **stalls)
    job = dict(j1)
    job["sources"] = [dict(a, data=a["data"] + b["data"])
                      for a, b in zip(j1["sources"], j2["sources"])]
    job["sinks"] = [dict(a, count=a["count"] + b["count"])
                    for a, b in zip(j1["sinks"], j2["sinks"])]
    job["max_cycles"] = j1["max_cycles"] + j2["max_cycles"]
    res = run_job(GATEWARE, cfg, job, sim=sim, name="two_jobs" + ("_bp" if stalls else ""))
    y = unpack_y(res["sinks"]["y"]["data"], cfg)
    np.testing.assert_array_equal(y[:5], ref_fc(w1, x1, cfg))
    np.testing.assert_array_equal(y[5:], ref_fc(w2, x2, cfg))
    res["requests"] = unpack_requests(res["sinks"]["vaddr"]["data"], cfg)
    model = fc_cycle_model([fd1, fd2], cfg, job)
    _assert_model(res, model, cycle_log)
    cmd = res["sources"]["cmd"]["cycles"]
    assert cmd[1] == res["sinks"]["y"]["cycles"][4] + 1
    if not stalls:
        assert cmd[0] == 0
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


# ------------------------------------------------------- fc_cycle_model (no simulator)

def _model_cases(rng, n):
    """``n`` random (cfg, w, fd) over k, row widths, beat widths and FIFO depths."""
    for _ in range(n):
        k = int(rng.choice([1, 2, 4]))
        width, segs = int(rng.choice([4, 8, 16])), int(rng.choice([1, 2, 4]))
        cfg = FcConfig(batch=2, nz_per_clock=k, row_width=width, segs_per_beat=segs,
                       max_cols=256, max_rows=64, addr_width=12,
                       fifo_depth=int(rng.integers(2, 6)))
        rows, cols = int(rng.integers(1, 9)), int(rng.integers(1, 160))
        density = float(rng.choice([0.0, 0.05, 0.2, 0.6, 1.0]))
        w = prune_random((rows, cols), density, rng, cfg.w_fmt.width)
        yield cfg, w, encode(w, width)


def test_cycle_model_reduces_to_schedule():
    """With every port always valid / ready, fc_cycle_model == fc_schedule: every y and
    meta cycle, the memory requests, the total; cmd at 0 and x at 1..cols.  An empty
    pattern dict, explicit ``Pattern.always()`` and an unstalled fc_job agree."""
    rng = np.random.default_rng(90)
    for cfg, _, fd in _model_cases(rng, 40):
        sched, model = fc_schedule(fd, cfg), fc_cycle_model(fd, cfg)
        np.testing.assert_array_equal(model["y_cycles"], sched["y_cycles"])
        np.testing.assert_array_equal(model["meta_cycles"], sched["meta_cycles"])
        assert model["requests"] == sched["requests"]
        assert model["cycles"] == sched["cycles"] == model["jobs"][0]["cycles"]
        assert model["sources"]["cmd"] == [0]
        assert model["sources"]["x"] == list(range(1, fd.cols + 1))
    always = {p: Pattern.always() for p in ("cmd", "x", "meta", "vdata", "vaddr", "y")}
    w = _w(rng, ONE, 5, 40, 0.3)
    job, sched, fd = fc_job(w, _x(rng, ONE, 40, 2), ONE)
    assert fc_cycle_model(fd, ONE, always)["sinks"] == fc_cycle_model(fd, ONE, job)["sinks"]


def test_cycle_model_follows_patterns():
    """Stimulus rules the model must keep whatever the engine does: a sink transfers only
    on its ready clocks, a source only once its pattern has allowed a clock; the job dict
    and its ``job_patterns`` give the same model; stalls only delay (never reorder or
    regroup) the memory requests; two unstalled jobs back to back are each fc_schedule."""
    rng = np.random.default_rng(91)
    for i, (cfg, w, fd) in enumerate(_model_cases(rng, 12)):
        x = np.ones((fd.cols, 1), dtype=np.int64)
        job, sched, _ = fc_job(w, x, cfg, valid_prob=0.4, ready_prob=0.3, seed=i)
        pats = job_patterns(job)
        model = fc_cycle_model(fd, cfg, job)
        assert model["sinks"] == fc_cycle_model(fd, cfg, pats)["sinks"]
        for port in ("vaddr", "y"):
            assert all(pats[port].at(c) for c in model["sinks"][port])
        for port in ("cmd", "x", "meta", "vdata"):
            prev = -1                   # valid was raised on an allowed clock since then
            for c in model["sources"][port]:
                assert any(pats[port].at(t) for t in range(prev + 1, c + 1))
                prev = c
        assert model["requests"] == sched["requests"]
        assert model["cycles"] >= sched["cycles"]
    w1, w2 = _w(rng, ONE, 3, 30, 0.3), _w(rng, ONE, 2, 17, 0.5)
    fd1, fd2 = encode(w1, ONE.row_width), encode(w2, ONE.row_width)
    two = fc_cycle_model([fd1, fd2], ONE)
    c1 = two["jobs"][1]["cmd"]
    assert c1 == two["jobs"][0]["y_cycles"][-1] + 1
    np.testing.assert_array_equal(two["jobs"][1]["y_cycles"] - c1,
                                  fc_schedule(fd2, ONE)["y_cycles"])
    with pytest.raises(ValueError, match="unknown FC ports"):
        fc_cycle_model(fd1, ONE, {"z": Pattern.always()})
    with pytest.raises(ValueError, match="comes after the job's last transfer"):
        fc_cycle_model(fd1, ONE, reset_at=10_000)


# ------------------------------------------------------------------ spnn run fc

def _spnn(*argv):
    from gen.cli import main
    return main([str(a) for a in argv])


def _save_wx(tmp_path, seed, shape, density):
    """Pruned 12-bit W (``shape``) and a 3-column X as W.npy and X.npy in ``tmp_path``."""
    rng = np.random.default_rng(seed)
    w = prune_random(shape, density, rng, 12)
    x = rng.integers(-300, 300, size=(shape[1], 3))
    np.save(tmp_path / "W.npy", w)
    np.save(tmp_path / "X.npy", x)
    return w, x


@pytest.mark.rtl
def test_cli_run_fc(tmp_path, capsys):
    """End to end under Icarus (one small build): raw codes (exact) and float input."""
    import json
    from gen.core.sim import sim_available
    if not sim_available("icarus"):
        pytest.skip("Icarus not installed")
    w, x = _save_wx(tmp_path, 50, (6, 40), 0.2)
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


def test_cli_run_fc_through_the_shell(sim, tmp_path, capsys):
    """``--bus-words 4`` at batch 2 (two passes of 2 columns, 3 input columns): two rows of X
    and of Y per beat; exact, with the end-to-end and roofline fields."""
    import json
    w, x = _save_wx(tmp_path, 52, (7, 37), 0.3)
    assert _spnn("run", "fc", "--weights", tmp_path / "W.npy", "--x", tmp_path / "X.npy",
                 "--raw", "--lanes", "2", "--bus-words", "4", "--out", tmp_path / "Y.npy",
                 "--report", tmp_path / "r.json", "--sim", sim) == 0
    np.testing.assert_array_equal(np.load(tmp_path / "Y.npy"), w @ x)
    r = json.loads((tmp_path / "r.json").read_text())
    assert r["interface"] == "axi" and r["bus_words"] == 4 and r["rows_per_beat"] == 2
    assert r["passes"] == 2 and r["config"]["bus_words"] == 4
    assert r["bus_beats"]["s_axis_x"] == 2 * 19 and r["bus_beats"]["m_axis_y"] == 2 * 4
    assert r["roofline_cycles"] == max(r["compute_bound_cycles"], r["bandwidth_bound_cycles"])
    assert r["end_to_end_cycles"] == r["cycles"] >= r["roofline_cycles"]
    assert r["efficiency_vs_roofline"] == r["roofline_cycles"] / r["cycles"]
    assert r["counters"]["cycles"] >= r["cycles"] - 2
    assert "AXI shell at 4 words per beat" in capsys.readouterr().out


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
    (["--weights", "{d}/W.npy", "--x", "{d}/X.npy", "--bus-words", "4"],
     "--bus-words must be 1 or a multiple of the hardware batch 3 (whole rows of X per "
     "beat), not 4"),
    (["--weights", "{d}/W.npy", "--x", "{d}/X.npy", "--bus-words", "33"],
     "--bus-words must be"),
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
    from gen.fc.schedule import _beats
    from gen.fc import decode_walk
    from hdl.fc.decoder import FdcsrDecoder

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
