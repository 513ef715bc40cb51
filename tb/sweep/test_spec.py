# SPDX-License-Identifier: Apache-2.0
"""``spnn sweep``: the spec (grid, points, sampling, workloads), one-line errors that write
nothing, the Pareto front, the results file and the serial run's outputs."""

import csv

import numpy as np
import pytest

from gen.cli import main
from gen.core.config import SpnnError
from gen.sweep.pareto import front
from gen.sweep.report import predict_seconds
from gen.sweep.results import ResultsLog, columns_for, read_rows
from gen.sweep.spec import load_spec, parse_spec, sample_indices
from gen.sweep.workloads import seed_matrix
from tb.sweep.conftest import SMALL, spmv_spec, write_spec


def test_grid_expands_in_order_last_key_fastest(tmp_path):
    spec = load_spec(write_spec(tmp_path, spmv_spec()))
    assert spec.keys == ("pes", "fifo_depth", "alloc")
    assert [tuple(p.values.values()) for p in spec.points][:3] == [
        (2, 2, "zigzag"), (2, 2, "balanced"), (2, 8, "zigzag")]
    assert len(spec.points) == 8 and all(p.error is None for p in spec.points)
    assert spec.points[0].config.rows_per_pe == 16          # base applies to every point
    assert spec.points[0].options == {"alloc": "zigzag"}
    assert len({p.id for p in spec.points}) == 8


def test_points_list_and_refused_combination(tmp_path):
    spec = load_spec(write_spec(tmp_path, spmv_spec(
        grid=None, points=[{"pes": 4, "w_lanes": 2}, {"pes": 2, "w_lanes": 4},
                           {"pes": 8, "w_lanes": 4}])))
    spec_errors = [p.error for p in spec.points]
    assert spec_errors[0] is None and spec_errors[2] is None
    assert "w_lanes must be between 1 and pes = 2, not 4" in spec_errors[1]


@pytest.mark.parametrize("method", ["random", "lhs"])
def test_sampling_gives_n_distinct_points(method):
    sizes = [4, 5, 3]
    idx = sample_indices(sizes, {"method": method, "n": 12, "seed": 3})
    assert len(idx) == 12 == len(set(idx)) and idx == sorted(idx)
    assert sample_indices(sizes, {"method": method, "n": 12, "seed": 3}) == idx
    if method == "lhs":      # Latin hypercube: every value of every key is used
        pos = np.array(np.unravel_index(idx, sizes)).T
        for k, m in enumerate(sizes):
            assert set(pos[:, k]) == set(range(m))


def test_bundled_seed_matrix_is_the_benchmarks():
    w, x = seed_matrix(1024, 153, 0.117, 0)
    assert w.shape == (1024, 153) and np.count_nonzero(w) == 18331
    assert np.all(np.abs(x) >= 1) and np.all(np.abs(x) < 2048)


def _refused(tmp_path, capsys, text_or_spec, match, argv=()):
    path = tmp_path / "spec.yaml"
    if isinstance(text_or_spec, str):
        path.write_text(text_or_spec)
    else:
        write_spec(tmp_path, text_or_spec)
    out = tmp_path / "out"
    assert main(["sweep", str(path), "-o", str(out), *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("spnn: error: "), err
    assert match in err, err
    assert not out.exists()


@pytest.mark.parametrize("spec, match", [
    (spmv_spec(block="spmvx"), "block: must be one of conv, fc, lstm, pwl, spmv, not 'spmvx'"),
    (spmv_spec(grid={"pez": [2]}), "grid.pez: is not a spmv config field or option; allowed:"),
    (spmv_spec(grid={"pes": [2, 300]}),
     "grid.pes: 300 fits no point (pes must be between 1 and 256, not 300)"),
    (spmv_spec(grid={"pes": ["two"]}), "grid.pes: 'two' fits no point (pes must be an integer"),
    (spmv_spec(grid={"alloc": ["best"]}),
     "grid.alloc: must be one of balanced, interleave, zigzag, lpt, not 'best'"),
    (spmv_spec(grid={"pes": []}), "grid.pes: must be a non-empty list of values"),
    (spmv_spec(stages=["model", "place"]), "stages: must name stages of model, rtl, synth, "
     "not 'place'"),
    (spmv_spec(stages={"rtl": {"sim": "vcs"}}),
     "stages.rtl.sim: must be one of verilator, icarus, not 'vcs'"),
    (spmv_spec(stages={"synth": {"targets": ["virtex"]}}),
     "stages.synth.targets: must be targets of xc7, ecp5, ice40, not 'virtex'"),
    (spmv_spec(workloads=[{"weights": "missing.npy"}]),
     "workloads[0].weights: no such file"),
    (spmv_spec(workloads=["vgg16"]),
     "workloads[0]: bundled matrix workloads are seed, seed-skewed, not 'vgg16'"),
    (spmv_spec(workloads=[{"network": "vgg16"}]),
     "workloads[0].network: unknown key for a matrix workload (spmv); allowed:"),
    (spmv_spec(sample={"method": "sobol", "n": 2}),
     "sample.method: must be random or lhs, not 'sobol'"),
    (spmv_spec(pareto=[["cycles", "luts"]]), "pareto[0]: 'luts' is not an objective"),
    (spmv_spec(colour="red"), "colour: unknown key; allowed: block, base, grid"),
    (spmv_spec(base={"pes": 0}, grid={"fifo_depth": [2]}),
     "base.pes: no point is a valid spmv config (pes must be between 1 and 256, not 0)"),
    (spmv_spec(grid={"pes": [2], "w_lanes": [4]}),
     "grid.w_lanes: 4 fits no point (w_lanes must be between 1 and pes = 2, not 4)"),
])
def test_bad_spec_is_one_line_exit_2_nothing_written(tmp_path, capsys, spec, match):
    spec = {k: v for k, v in spec.items() if v is not None}
    _refused(tmp_path, capsys, spec, match)


def test_bad_yaml_and_files(tmp_path, capsys):
    _refused(tmp_path, capsys, "block: spmv\ngrid: {pes: [2, 4]\n", "not valid YAML at line")
    _refused(tmp_path, capsys, "- just\n- a list\n", "spec: must be a mapping")
    assert main(["sweep", str(tmp_path / "none.yaml"), "-o", str(tmp_path / "o")]) == 2
    assert "SPEC: no such file" in capsys.readouterr().err


def test_pickled_npy_is_refused(tmp_path, capsys):
    np.save(tmp_path / "w.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    _refused(tmp_path, capsys, spmv_spec(workloads=[{"weights": "w.npy"}]),
             "workloads[0].weights: ")


@pytest.mark.parametrize("argv, match", [
    (["--workers", "0"], "--workers must be"),
    (["--retries", "x"], "--retries must be an integer"),
    (["--scheduler", "tcp://127.0.0.1:1", "--workers", "2"], "--scheduler runs the sweep"),
])
def test_bad_flags(tmp_path, capsys, argv, match):
    _refused(tmp_path, capsys, spmv_spec(), match, argv)


def test_unreachable_scheduler_is_one_line(tmp_path, capsys):
    _refused(tmp_path, capsys, spmv_spec(), "--scheduler 'tcp://127.0.0.1:9': cannot connect",
             ["--scheduler", "tcp://127.0.0.1:9", "--connect-timeout", "1"])


def test_workloads_of_other_blocks(tmp_path):
    conv = parse_spec({"block": "conv", "grid": {"cols": [4, 8]},
                       "workloads": [{"network": "resnet18", "layers": ["conv1"]},
                                     {"layer": {"oc": 4, "ic": 2, "h": 6, "w": 6, "k": 3}}],
                       "stages": ["model"]}, tmp_path)
    assert [w.name for w in conv.workloads] == ["resnet18.conv1", "layer-4x2x3x3-6x6"]
    pwl = parse_spec({"block": "pwl", "grid": {"segments": [8]},
                      "workloads": ["all-codes", {"samples": 10}], "stages": ["model"]},
                     tmp_path)
    assert [w.name for w in pwl.workloads] == ["all-codes", "samples-10"]
    np.save(tmp_path / "w.npy", np.eye(4, dtype=np.int8))
    fc = parse_spec({"block": "fc", "grid": {"batch": [1]}, "workloads": [{"weights": "w.npy"}],
                     "stages": ["model"]}, tmp_path)
    assert fc.workloads[0].name == "w" and fc.workloads[0].arrays["w"].shape == (4, 4)
    lstm = parse_spec({"block": "lstm", "grid": {"pes": [4]}, "stages": ["model"],
                       "workloads": ["ese", {"generate": {"inputs": 3, "hidden": 5}}]},
                      tmp_path)
    assert [w.name for w in lstm.workloads] == ["ese", "lstm-3x5-0.2"]
    for bad, match in ((["nosuch"], "bundled lstm workloads are ese, small"),
                       ([{"generate": {"hidden": 0}}], "hidden: must be an integer between"),
                       ([{"generate": {"density": 2}}], "density: must be a number in"),
                       ([{"generate": {"rows": 3}}], "generate.rows: unknown key"),
                       ([{"layer": 3}], "unknown key for a lstm workload")):
        with pytest.raises(SpnnError, match=match):
            parse_spec({"block": "lstm", "grid": {"pes": [4]}, "stages": ["model"],
                        "workloads": bad}, tmp_path)


def test_pareto_front_and_prediction():
    rows = [{"c": 10, "l": 5}, {"c": 8, "l": 7}, {"c": 12, "l": 4}, {"c": 11, "l": 6},
            {"c": 8, "l": 7}, {"c": None, "l": 1}, {"ecp5.fmax_mhz": 1}]
    assert front(rows, "c", "l") == [0, 1, 2, 4]
    assert front([{"f.fmax_mhz": 100, "l": 5}, {"f.fmax_mhz": 120, "l": 6},
                  {"f.fmax_mhz": 90, "l": 6}], "f.fmax_mhz", "l") == [0, 1]
    assert predict_seconds([3, 3, 2, 2, 2], workers=(1, 2, 4)) == {1: 12.0, 2: 7.0, 4: 4.0}


def test_results_log_survives_a_torn_line_and_new_columns(tmp_path):
    path = tmp_path / "results.csv"
    cols = columns_for({"pes": 1}, ["alloc"], ["cycles"])
    key = "a" * 64
    with ResultsLog(path, cols) as log:
        log.append({"key": key, "pes": 2, "status": "ok", "cycles": 5})
    with open(path, "a") as handle:
        handle.write("b" * 64 + ",x,spmv,4")         # a crash in the middle of a row
    cols2 = columns_for({"pes": 1}, ["alloc"], ["cycles", "lut"])
    with ResultsLog(path, cols2) as log:
        assert log.done() == {key}
        log.append({"key": "c" * 64, "pes": 4, "status": "failed", "error": "x, y"})
    header, rows = read_rows(path)
    assert header == cols2 and list(rows) == [key, "c" * 64]
    assert rows["c" * 64]["error"] == "x, y" and rows[key]["cycles"] == "5"


def test_serial_run_writes_every_output(tmp_path, capsys):
    spec = write_spec(tmp_path, spmv_spec(grid={"pes": [2, 4], "mem_depth": [2, 64]},
                                          workloads=[SMALL]))
    out = tmp_path / "out"
    assert main(["sweep", str(spec), "-o", str(out), "--serial", "-q"]) == 0
    names = sorted(p.name for p in out.iterdir())
    assert names == ["pareto.png", "results.csv", "summary.csv", "summary.md", "sweep.json"]
    with open(out / "summary.csv") as handle:
        summary = list(csv.DictReader(handle))
    status = {(r["pes"], r["mem_depth"]): r["status"] for r in summary}
    # mem_depth 2 does not hold a column's weights: recorded, and the sweep went on
    assert status == {("2", "2"): "failed", ("2", "64"): "ok", ("4", "2"): "failed",
                      ("4", "64"): "ok"}
    failed = [r for r in summary if r["status"] == "failed"]
    assert all("weight entries" in r["error"] for r in failed)
    assert str(tmp_path) not in (out / "summary.md").read_text()


def test_onnx_workloads(tmp_path):
    from tb.model.models import cnn, save
    save(cnn(), tmp_path / "cnn.onnx")
    conv = parse_spec({"block": "conv", "grid": {"cols": [4]}, "workloads": [
        {"onnx": "cnn.onnx"}], "stages": ["model"]}, tmp_path)
    assert [(w.name, w.params["ic"], w.params["h"], w.params["stride"])
            for w in conv.workloads] == [("cnn.conv1", 1, 8, 1), ("cnn.conv2", 4, 4, 2)]
    spmv = parse_spec({"block": "spmv", "grid": {"pes": [4]}, "workloads": [
        {"onnx": "cnn.onnx"}], "stages": ["model"]}, tmp_path)
    (w,) = spmv.workloads
    assert w.name == "cnn.fc" and w.arrays["w"].shape == (10, 32)
    assert np.abs(w.arrays["w"]).max() <= 127 and w.arrays["w"].dtype.kind == "i"
    with pytest.raises(SpnnError, match=r"workloads\[0\].onnx .*nope.onnx"):
        parse_spec({"block": "conv", "grid": {"cols": [4]}, "workloads": [
            {"onnx": "nope.onnx"}], "stages": ["model"]}, tmp_path)
