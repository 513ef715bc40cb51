# SPDX-License-Identifier: Apache-2.0
"""``spnn run model``: a compiled network in integer arithmetic on the golden models and
on the RTL (bit-exact against each other), against onnxruntime within a stated bound, and
the command's errors."""

import importlib.util
import json

import numpy as np
import pytest

from gen.cli import main
from gen.model import compile_model, load_onnx, run_float
from gen.model.run import run_plan
from tb.model.models import cnn, residual, save

pytest.importorskip("onnxruntime")


def _exit_code(argv):
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


def _x(shape, n, seed=0):
    return np.random.default_rng(seed).normal(0, 1, (n, *shape)).astype(np.float32)


@pytest.mark.parametrize("build, shape", [(cnn, (1, 8, 8)), (residual, (4, 6, 6))],
                         ids=["cnn", "residual"])
def test_golden_error_bound(tmp_path, build, shape):
    """Integer run vs the float reference: within 8 % of the output range with the conv
    array's 8-bit activations, within 0.5 % with 16-bit ones (the formats are calibrated
    on the same inputs, so nothing saturates); the same inputs give the same codes in any
    batch split."""
    from dataclasses import replace
    from gen.conv.banked import BankedConfig
    graph = load_onnx(save(build(), tmp_path / "m.onnx"))
    x = _x(shape, 24)
    ref = run_float(graph, x)
    span = np.max(np.abs(ref))
    wide = {"conv": replace(BankedConfig(), data_width=16, weight_width=16, acc_width=48)}
    errors = []
    for cfgs, bound in ((None, 0.08), (wide, 0.005)):
        plan = compile_model(graph, x, batch=4, cfgs=cfgs)
        y, _ = run_plan(graph, plan, x)
        errors.append(np.max(np.abs(y - ref)) / span)
        assert errors[-1] <= bound
        y8, _ = run_plan(graph, dict(plan, batch=8), x)
        np.testing.assert_array_equal(y8, y)
    assert errors[1] < errors[0]


def _compile(tmp_path, build, shape, batch, sets):
    model = build()
    model.graph.node[0].name = "/conv1/Conv"          # as torch.onnx.export names nodes
    save(model, tmp_path / "m.onnx")
    np.save(tmp_path / "calib.npy", _x(shape, 16))
    plan = tmp_path / f"plan-{batch}"
    argv = ["compile", str(tmp_path / "m.onnx"), "--calib", str(tmp_path / "calib.npy"),
            "--batch", str(batch), "-o", str(plan)]
    for s in sets:
        argv += ["--set", s]
    assert main(argv) == 0
    return plan


@pytest.mark.parametrize("batch, gemm_block", [(1, "spmv"), (2, "fc")])
def test_rtl_equals_golden(tmp_path, sim, batch, gemm_block):
    """Every block layer of the CNN on its RTL (native engine): conv jobs on the MAC array,
    the Gemm on the sparse PE array (batch 1) or the FC engine (batch 2); the outputs equal
    the golden run's bit for bit and the report says how many layer runs were checked."""
    sets = ["spmv.pes=4", "spmv.rows_per_pe=8", "fc.batch=2"]
    plan = _compile(tmp_path, cnn, (1, 8, 8), batch, sets)
    assert gemm_block in (plan / "plan.md").read_text()
    np.save(tmp_path / "x.npy", _x((1, 8, 8), 3, seed=1) * 0.5)
    outs = {}
    for engine in ("golden", "rtl"):
        argv = ["run", "model", "--plan", str(plan), "--input", str(tmp_path / "x.npy"),
                "--engine", engine, "--sim", sim, "--out", str(tmp_path / f"{engine}.npy"),
                "--report", str(tmp_path / f"{engine}.json")]
        assert main(argv) == 0
        outs[engine] = np.load(tmp_path / f"{engine}.npy")
    np.testing.assert_array_equal(outs["rtl"], outs["golden"])
    report = json.loads((tmp_path / "rtl.json").read_text())
    assert report["rtl_layer_runs"] == 3 * -(-3 // batch)
    assert report["engine"] == "rtl" and report["inputs"] == 3
    assert report["cycles"] == report["cycles_per_batch"] * -(-3 // batch)
    # measured per block layer on the RTL; the conv layers' jobs run through the shell with
    # its requantisation stage, one AXI job each: together the plan's cycles
    # (gen.conv.banked.shell_job_cycles, exact at full rate)
    blocks = [e for e in report["layers"] if e["block"] != "host"]
    assert all(e["measured_cycles"] > 0 for e in blocks)
    assert report["measured_cycles"] == sum(e["measured_cycles"] for e in blocks)
    if batch == 1:                      # every chunk is the compiled batch
        plan_layers = {e["name"]: e for e in json.loads((plan / "plan.json").read_text())[
            "layers"]}
        for e in blocks:
            if e["block"] == "conv":
                assert e["measured_cycles"] == 3 * plan_layers[e["name"]]["cycles"]
    golden = json.loads((tmp_path / "golden.json").read_text())
    assert golden["measured_cycles"] is None


def test_report_and_accuracy(tmp_path):
    plan = _compile(tmp_path, residual, (4, 6, 6), 4, [])
    x = _x((4, 6, 6), 10, seed=3) * 0.8
    np.save(tmp_path / "x.npy", x)
    graph = load_onnx(tmp_path / "m.onnx")
    labels = np.argmax(run_float(graph, x), axis=1)
    np.save(tmp_path / "l.npy", labels)
    plot = importlib.util.find_spec("matplotlib") is not None      # the ml extra
    assert main(["run", "model", "--plan", str(plan), "--input", str(tmp_path / "x.npy"),
                 "--labels", str(tmp_path / "l.npy"), "--engine", "golden", "--limit", "8",
                 "--report", str(tmp_path / "r.json")]
                + (["--plot", str(tmp_path / "c.png")] if plot else [])) == 0
    if plot:
        assert (tmp_path / "c.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    r = json.loads((tmp_path / "r.json").read_text())
    assert r["inputs"] == 8 and r["accuracy_onnxruntime"] == 1.0
    assert r["max_abs_error_vs_onnxruntime"] <= 0.08 * r["output_range"]
    assert r["inputs_per_second"] == pytest.approx(4 * 150e6 / r["cycles_per_batch"])
    assert [e["block"] for e in r["layers"]].count("conv") == 2
    # the roofline: per block layer (compute or bandwidth bound, never above the cycles),
    # and the network's (the layers' summed) against its predicted cycles
    blocks = [e for e in r["layers"] if e["block"] != "host"]
    assert all(0 < e["roofline_cycles"] <= e["cycles"] for e in blocks)
    assert r["roofline_cycles_per_batch"] == sum(e["roofline_cycles"] for e in blocks)
    assert r["efficiency_vs_roofline"] == pytest.approx(
        r["roofline_cycles_per_batch"] / r["cycles_per_batch"])


def test_errors_one_line_exit_2_nothing_written(tmp_path, capsys):
    plan = _compile(tmp_path, cnn, (1, 8, 8), 1, [])
    np.save(tmp_path / "x.npy", _x((1, 8, 8), 2))
    np.save(tmp_path / "wrong.npy", _x((1, 7, 8), 2))
    np.save(tmp_path / "huge.npy", _x((1, 8, 8), 2) * 100)
    np.save(tmp_path / "lab.npy", np.zeros(1, np.int64))
    (tmp_path / "empty").mkdir()
    base = ["run", "model", "--plan", str(plan), "--engine", "golden"]
    for argv, msg in (
            (["run", "model", "--plan", str(tmp_path / "empty"), "--input",
              str(tmp_path / "x.npy")], "not a plan folder"),
            (base + ["--input", str(tmp_path / "wrong.npy")], "does not match the model input"),
            (base + ["--input", str(tmp_path / "huge.npy")], "outside the model input's format"),
            (base + ["--input", str(tmp_path / "x.npy"), "--labels", str(tmp_path / "lab.npy")],
             "--labels"),
            (base + ["--input", str(tmp_path / "x.npy"), "--limit", "0"], "--limit"),
            (base + ["--input", str(tmp_path / "x.npy"), "--fmax", "0"], "--fmax"),
            (base + ["--input", str(tmp_path / "x.npy"), "--fmax", "100", "--fmax-from",
                     str(tmp_path)], "not both"),
            (base + ["--input", str(tmp_path / "x.npy"), "--fmax-from",
                     str(tmp_path / "nosuch")], "no such file"),
            (base + ["--input", str(tmp_path / "x.npy"), "--fmax-from", str(tmp_path / "empty")],
             "no place-and-route report of block")):
        out = tmp_path / "y.npy"
        assert _exit_code(argv + ["--out", str(out)]) == 2, argv
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and msg in err, err
        assert not out.exists()


def test_fmax_from_synthesis_reports(tmp_path):
    """--fmax-from: per block the median Fmax over its reports (seeds), the plan at the
    slowest block's; latency and inputs/s at that clock; a report of an unused block is
    ignored."""
    from gen.cli import main as spnn
    plan = _compile(tmp_path, cnn, (1, 8, 8), 2, ["fc.batch=2"])
    blocks = {e["block"] for e in json.loads((plan / "plan.json").read_text())["layers"]}
    assert blocks >= {"conv", "fc"}
    reports = tmp_path / "synth" / "synth"
    reports.mkdir(parents=True)
    for i, (block, fmax) in enumerate([("conv", 151.0), ("conv", 140.0), ("conv", 149.0),
                                       ("fc", 160.0), ("pwl", 90.0)]):
        (reports / f"r{i}.json").write_text(json.dumps(
            {"block": block, "module": f"{block}_axi", "fmax_mhz": fmax, "seed": i,
             "target": "ecp5"}))
    (reports / "notes.json").write_text("[1, 2]")                # not a report: skipped
    np.save(tmp_path / "x.npy", _x((1, 8, 8), 3))
    assert spnn(["run", "model", "--plan", str(plan), "--input", str(tmp_path / "x.npy"),
                 "--engine", "golden", "--fmax-from", str(tmp_path / "synth"),
                 "--report", str(tmp_path / "r.json")]) == 0
    r = json.loads((tmp_path / "r.json").read_text())
    assert r["fmax_mhz"] == 149.0 and r["fmax_source"]["slowest"] == "conv"
    assert r["fmax_source"]["per_block"]["fc"]["fmax_mhz"] == 160.0
    assert "pwl" not in r["fmax_source"]["per_block"]
    assert r["latency_us_per_batch"] == pytest.approx(r["cycles_per_batch"] / 149.0)
