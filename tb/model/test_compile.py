# SPDX-License-Identifier: Apache-2.0
"""The model flow's front half: ONNX import (gen.model.graph), the float reference against
onnxruntime, ``spnn compile`` (plan, formats, block choice, predicted cycles) and its
errors (one line, exit 2, nothing written)."""

import json

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from gen.cli import main
from gen.core.config import SpnnError
from gen.core.fixed import QFormat
from gen.model import choose_format, compile_model, load_onnx, plan_table, run_float
from gen.model.reference import run_onnxruntime
from tb.model.models import cnn, residual, save, single

pytest.importorskip("onnxruntime")


def _ort(model, x):
    return run_onnxruntime(model.SerializeToString(), "x", x)


def _inputs(shape, n=5, seed=0):
    return np.random.default_rng(seed).normal(0, 1, (n, *shape)).astype(np.float32)


@pytest.mark.parametrize("build, shape", [(cnn, (1, 8, 8)), (residual, (4, 6, 6))],
                         ids=["cnn", "residual"])
def test_reference_equals_onnxruntime(tmp_path, build, shape):
    """Import (BatchNorm and bias folded) + the numpy reference = onnxruntime within
    float32 rounding."""
    model = build()
    x = _inputs(shape)
    graph = load_onnx(save(model, tmp_path / "m.onnx"))
    want = _ort(model, x)
    got = run_float(graph, x)
    assert got.shape == want.shape
    assert np.max(np.abs(got - want)) <= 1e-5 * max(1.0, np.max(np.abs(want)))
    assert "bn1" not in [layer.name for layer in graph.layers]      # folded into conv1


@pytest.mark.parametrize("op, attrs, shape", [
    ("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]), (2, 7, 7)),
    ("AveragePool", dict(kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1]), (2, 5, 5)),
    ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                         count_include_pad=1), (2, 5, 5)),
    ("GlobalAveragePool", {}, (3, 4, 4)),
    ("Relu", {}, (3, 4, 4)),
    ("Flatten", {}, (3, 4, 4)),
])
def test_host_operators_equal_onnxruntime(tmp_path, op, attrs, shape):
    x = _inputs(shape, n=3, seed=4)
    probe = single(op, shape, ["?"], **attrs)
    inferred = onnx.shape_inference.infer_shapes(probe)
    model = single(op, shape, [d.dim_value or "?" for d in
                               inferred.graph.output[0].type.tensor_type.shape.dim][1:], **attrs)
    got = run_float(load_onnx(save(model, tmp_path / "m.onnx")), x)
    np.testing.assert_allclose(got, _ort(model, x), rtol=1e-5, atol=1e-6)


def test_qdq_weights_are_dequantised(tmp_path):
    """A weight given as int8 + DequantizeLinear imports as its real values."""
    from onnx import TensorProto, helper
    q = np.array([[3, -7, 0, 127], [-128, 1, 2, 0]], dtype=np.int8)
    scale = np.array(0.05, dtype=np.float32)
    nodes = [helper.make_node("DequantizeLinear", ["q", "s"], ["w"], name="dq"),
             helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])],
        [numpy_helper.from_array(q, "q"), numpy_helper.from_array(scale, "s")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    g = load_onnx(save(model, tmp_path / "q.onnx"))
    np.testing.assert_allclose(g.layers[0].w, (q.astype(np.float64) * 0.05).T, rtol=1e-6)
    x = _inputs((2,), seed=2)
    np.testing.assert_allclose(run_float(g, x), _ort(model, x), rtol=1e-5, atol=1e-6)


def test_choose_format():
    assert choose_format(0.0, 8) == QFormat(1, 7)
    assert choose_format(0.99, 8) == QFormat(1, 7)
    assert choose_format(1.0, 8) == QFormat(2, 6)          # 1.0 needs an integer bit
    assert choose_format(5.5, 16) == QFormat(4, 12)
    with pytest.raises(SpnnError, match="does not fit 8 bits"):
        choose_format(200.0, 8)


def test_plan_blocks_formats_and_cycles(tmp_path):
    """Each conv on the MAC array with the cheapest mapping (cycles = its plan's jobs through
    the shell with the requantisation stage, one AXI job each), the sparse Gemm on the PE
    array at batch 1 and on the FC engine at batch 8; every calibrated value fits its
    format; host operators cost nothing."""
    from gen.conv import ConvLayer
    from gen.conv.banked import BankedConfig, shell_job_cycles
    from gen.model.compile import conv_plan, conv_shell
    model = cnn()
    graph = load_onnx(save(model, tmp_path / "m.onnx"))
    x = _inputs((1, 8, 8), n=16)
    plan = compile_model(graph, x, batch=1)
    by = {e["name"]: e for e in plan["layers"]}
    assert [by[n]["block"] for n in ("conv1", "conv2", "fc")] == ["conv", "conv", "spmv"]
    assert by["relu1"]["block"] == "host" and by["relu1"]["fused"]
    layer = ConvLayer(oc=8, ic=4, h=4, w=4, kh=3, kw=3, stride=2, pad=1)
    shell = conv_shell(BankedConfig(), 8, 8)
    cycles = {m: sum(shell_job_cycles(j, p.cfg) for j in p.jobs)
              for m in ("remainder", "naive") for p in [conv_plan(layer, shell, m)]}
    assert by["conv2"]["cycles"] == min(cycles.values())
    assert by["conv2"]["mapping"] == min(cycles, key=cycles.get)
    assert by["conv2"]["jobs"] == len(by["conv2"]["copies"]) >= 1
    best = conv_plan(layer, shell, by["conv2"]["mapping"]).jobs[0]
    assert [by["conv2"][k] for k in ("fold", "span", "pack")] == [best.fold, best.span,
                                                                 best.pack]
    assert plan["total_cycles"] == sum(e["cycles"] for e in plan["layers"])
    for e in plan["layers"]:
        if "in_format" in e:
            m = int(e["in_format"][1:].split(".")[0])
            assert plan["tensor_max_abs"][e["inputs"][0]] < 2 ** (m - 1)
    batched = compile_model(graph, x, batch=8)
    fc = [e for e in batched["layers"] if e["name"] == "fc"][0]
    assert fc["block"] == "fc" and "batch 8" in fc["reason"]
    dense = compile_model(load_onnx(save(cnn(gemm_density=0.9), tmp_path / "d.onnx")), x)
    assert [e for e in dense["layers"] if e["name"] == "fc"][0]["block"] == "fc"
    assert "| conv2 | conv | conv |" in plan_table(plan)


def test_cli_compile_writes_the_plan(tmp_path, capsys):
    save(residual(), tmp_path / "r.onnx")
    np.save(tmp_path / "x.npy", _inputs((4, 6, 6)))
    out = tmp_path / "plan"
    assert main(["compile", str(tmp_path / "r.onnx"), "--calib", str(tmp_path / "x.npy"),
                 "--set", "conv.rows=8", "-o", str(out)]) == 0
    plan = json.loads((out / "plan.json").read_text())
    assert plan["configs"]["conv"]["rows"] == 8
    assert [e["block"] for e in plan["layers"]].count("conv") == 2
    assert (out / "plan.md").read_text().startswith("# Plan of r.onnx")
    assert "Total predicted cycles" in capsys.readouterr().out


def _exit_code(argv):
    """``main``'s exit status: returned for a value error, raised by argparse for usage."""
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


def _bad_models(tmp_path):
    rng = np.random.default_rng(0)
    w = rng.normal(0, 1, (4, 2, 3, 3)).astype(np.float32)
    yield (single("Softmax", (3,), (3,)), "node 'the_softmax' (Softmax): operator Softmax "
           "is not supported; supported: Conv, Gemm")
    yield (single("Conv", (4, 6, 6), ["?", 4, 4], {"w": w}, ("x", "w"), group=2,
                  kernel_shape=[3, 3]), "node 'the_conv' (Conv): group 2: only group 1")
    yield (single("Conv", (2, 6, 6), ["?", 4, 4], {"w": w}, ("x", "w"), pads=[1, 0, 1, 0],
                  kernel_shape=[3, 3]), "pads [1, 0, 1, 0]: the array needs equal padding")
    dyn = single("Relu", (3, 4), (3, 4))
    dyn.graph.input[0].type.tensor_type.shape.dim[2].dim_param = "W"
    yield dyn, "has a dynamic axis 2 (W); only the batch axis may be dynamic"


def test_cli_errors_one_line_exit_2_nothing_written(tmp_path, capsys):
    np.save(tmp_path / "x3.npy", _inputs((3,)))
    cases = list(_bad_models(tmp_path))
    (tmp_path / "junk.onnx").write_bytes(b"\x08\x07garbage\xff\xff not protobuf")
    for k, (model, msg) in enumerate(cases + [(None, "not an ONNX model")]):
        path = tmp_path / "junk.onnx" if model is None else save(model, tmp_path / f"{k}.onnx")
        out = tmp_path / f"plan{k}"
        assert _exit_code(["compile", str(path), "--calib", str(tmp_path / "x3.npy"),
                           "-o", str(out)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and msg in err, err
        assert not out.exists()
    save(cnn(), tmp_path / "cnn.onnx")
    for argv, msg in (
            (["--calib", str(tmp_path / "x3.npy")], "--calib"),
            (["--calib", str(tmp_path / "x3.npy"), "--batch", "0"], "--batch"),
            (["--calib", str(tmp_path / "x3.npy"), "--set", "conv.rows=0"], "--set conv.rows"),
            (["--calib", str(tmp_path / "x3.npy"), "--set", "gpu.rows=4"], "--set gpu.rows"),
            (["--calib", str(tmp_path / "none.npy")], "--calib")):
        assert _exit_code(["compile", str(tmp_path / "cnn.onnx"), *argv,
                           "-o", str(tmp_path / "p")]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and msg in err, err
        assert not (tmp_path / "p").exists()


def test_pytorch_route(tmp_path):
    """The documented PyTorch route: ``torch.onnx.export(..., dynamo=False)`` of a small
    CNN (Conv, BatchNorm, ReLU, MaxPool, Flatten, Linear) imports, its float reference
    equals PyTorch's output, and it compiles."""
    torch = pytest.importorskip("torch")
    nn = torch.nn
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                        nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 4 * 4, 5)).eval()
    with torch.no_grad():
        net[1].running_mean.uniform_(-0.2, 0.2)
        net[1].running_var.uniform_(0.5, 2.0)
    path = tmp_path / "net.onnx"
    torch.onnx.export(net, torch.zeros(1, 1, 8, 8), str(path), dynamo=False,
                      input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "N"}, "y": {0: "N"}})
    graph = load_onnx(path)
    x = _inputs((1, 8, 8), n=4, seed=7)
    with torch.no_grad():
        want = net(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(run_float(graph, x), want, rtol=1e-4, atol=1e-5)
    plan = compile_model(graph, x)
    assert [e["block"] for e in plan["layers"] if e["block"] != "host"] == ["conv", "fc"]
