# SPDX-License-Identifier: Apache-2.0
"""The ONNX ``LSTM`` operator through the model flow: import (ONNX gate order i, o, f, c
mapped to the engine's i, f, g, o; checked against onnxruntime and ``torch.nn.LSTM``), the
glue operators around it (Transpose, Squeeze, Gather, the exporter's zero initial state),
``spnn compile`` on the LSTM engine, golden and RTL runs (bit for bit equal, RTL cycles =
the exact cycle model's), and the one-line errors of what the engine does not implement."""

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from gen.cli import main
from gen.model import compile_model, load_onnx, plan_table, run_float
from gen.model.reference import run_onnxruntime
from gen.model.run import run_plan

pytest.importorskip("onnxruntime")


def _const(name, value, dtype=np.int64):
    return helper.make_node("Constant", [], [name], name=f"c_{name}",
                            value=numpy_helper.from_array(np.asarray(value, dtype), name))


def _zero_state(hid):
    """The TorchScript exporter's zero initial state: ConstantOfShape([1, batch, H])."""
    return [helper.make_node("Shape", ["x"], ["shp"], name="shape"),
            _const("i0", 0), _const("one", [1]), _const("hid", [hid]), _const("ax0", [0]),
            helper.make_node("Gather", ["shp", "i0"], ["n"], name="batch", axis=0),
            helper.make_node("Unsqueeze", ["n", "ax0"], ["n1"], name="unsq"),
            helper.make_node("Concat", ["one", "n1", "hid"], ["dims"], name="cat", axis=0),
            helper.make_node("ConstantOfShape", ["dims"], ["zeros"], name="zeros",
                             value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.0]))]


def lstm_model(seed=0, nx=2, hid=3, steps=4, density=1.0, head="seq", zero_state=False,
               layout=0, **attrs):
    """``x (N, T, X)`` -> [Transpose] -> LSTM -> head: ``seq`` every step's h ``(N, T,
    H)`` (Squeeze, Transpose back), ``last`` the last step (torch's ``out[:, -1]``:
    Gather on the time axis) then Gemm to 5, ``h_n`` Y_h (torch's ``h_n[-1]``) then Gemm,
    ``raw`` the LSTM's Y itself (not batch first), ``cell`` Y_c then Gemm."""
    rng = np.random.default_rng(seed)

    def sparse(shape, scale):
        return (rng.normal(0, scale, shape) * (rng.random(shape) < density)).astype(np.float32)
    inits = {"W": sparse((1, 4 * hid, nx), 0.8), "R": sparse((1, 4 * hid, hid), 0.6),
             "B": rng.normal(0, 0.3, (1, 8 * hid)).astype(np.float32),
             "wf": rng.normal(0, 0.5, (5, hid)).astype(np.float32),
             "bf": rng.normal(0, 0.1, 5).astype(np.float32)}
    nodes = [_const("last", -1), _const("ax1", [1 if layout == 0 else 2])]
    seq = "x"
    if layout == 0:
        nodes.append(helper.make_node("Transpose", ["x"], ["xt"], name="tr_in", perm=[1, 0, 2]))
        seq = "xt"
    ins = [seq, "W", "R", "B"]
    if zero_state:
        nodes += _zero_state(hid)
        ins += ["", "zeros", "zeros"]
    nodes.append(helper.make_node("LSTM", ins, ["Y", "Y_h", "Y_c"], name="lstm",
                                  hidden_size=hid, **({"layout": 1} if layout else {}),
                                  **attrs))
    y_shape = [steps, hid]
    if head in ("seq", "last"):
        nodes.append(helper.make_node("Squeeze", ["Y", "ax1"], ["ys"], name="squeeze"))
        out = "ys"
        if layout == 0:
            nodes.append(helper.make_node("Transpose", ["ys"], ["yb"], name="tr_out",
                                          perm=[1, 0, 2]))
            out = "yb"
        if head == "last":
            nodes.append(helper.make_node("Gather", [out, "last"], ["h"], name="step", axis=1))
    elif head in ("h_n", "cell"):
        nodes.append(helper.make_node("Gather", ["Y_h" if head == "h_n" else "Y_c", "i0h"],
                                      ["h"], name="layer", axis=0))
        nodes.append(_const("i0h", -1))
        nodes.insert(0, nodes.pop())
    if head in ("last", "h_n", "cell"):
        nodes.append(helper.make_node("Gemm", ["h", "wf", "bf"], ["y"], name="fc", transB=1))
        y_shape = [5]
    else:
        nodes[-1].output[0] = "y"
        y_shape = [steps, 1, "N", hid] if head == "raw" else [steps, hid]
    batch_first = head != "raw"
    graph = helper.make_graph(
        nodes, "lstm", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                      ["N", steps, nx])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                       (["N"] if batch_first else []) + y_shape)],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _save(model, path):
    onnx.save(model, str(path))
    return path


def _seqs(n, steps=4, nx=2, seed=1, scale=1.0):
    return (np.random.default_rng(seed).normal(0, scale, (n, steps, nx))).astype(np.float32)


def _close(got, want):
    assert got.shape == want.shape
    assert np.max(np.abs(got - want)) <= 1e-5 * max(1.0, float(np.max(np.abs(want))))


@pytest.mark.parametrize("kw", [
    dict(head="seq"), dict(head="last"), dict(head="h_n"),
    dict(head="last", zero_state=True), dict(head="seq", density=0.4, seed=3)],
    ids=["seq", "last-step", "h_n", "zero-state", "sparse"])
def test_reference_equals_onnxruntime(tmp_path, kw):
    """Import + the float reference = onnxruntime (within 1e-5 of the output's range) for
    the LSTM and its glue: Transpose / Squeeze views, Gather of the last step or of Y_h,
    Constant, the exporter's zero initial state."""
    model = lstm_model(**kw)
    x = _seqs(5)
    graph = load_onnx(_save(model, tmp_path / "m.onnx"))
    assert [layer.op for layer in graph.layers][0] == "lstm"
    _close(run_float(graph, x), run_onnxruntime(model.SerializeToString(), "x", x))


def test_gate_order_against_torch(tmp_path):
    """The imported [W_ih W_hh] and b_ih + b_hh, loaded into ``torch.nn.LSTM`` (gate order i,
    f, g, o), give onnxruntime's output for the ONNX model (gate order i, o, f, c)."""
    torch = pytest.importorskip("torch")
    model = lstm_model(seed=5, hid=4, nx=3, steps=5)
    x = _seqs(3, steps=5, nx=3, seed=2)
    layer = load_onnx(_save(model, tmp_path / "m.onnx")).layers[0]
    net = torch.nn.LSTM(3, 4, batch_first=True).double()
    with torch.no_grad():
        net.weight_ih_l0.copy_(torch.from_numpy(layer.w[:, :3]))
        net.weight_hh_l0.copy_(torch.from_numpy(layer.w[:, 3:]))
        net.bias_ih_l0.copy_(torch.from_numpy(layer.b))
        net.bias_hh_l0.zero_()
        want = net(torch.from_numpy(x.astype(np.float64)))[0].numpy()
    _close(want, run_onnxruntime(model.SerializeToString(), "x", x).astype(np.float64))


def test_pytorch_route(tmp_path):
    """``torch.onnx.export(..., dynamo=False)`` of ``nn.LSTM(batch_first=True)`` + Linear on
    ``out[:, -1]`` and on ``h_n[-1]`` (Shape/Gather/Unsqueeze/Concat/ConstantOfShape zero
    state, Transpose, Squeeze, Gather) imports, equals PyTorch and compiles onto the LSTM
    engine and the FC engine."""
    torch = pytest.importorskip("torch")
    import warnings
    nn = torch.nn
    torch.manual_seed(0)

    class Net(nn.Module):
        def __init__(self, last):
            super().__init__()
            self.lstm, self.fc, self.last = nn.LSTM(3, 4, batch_first=True), nn.Linear(4, 2), last

        def forward(self, x):
            out, (h, _) = self.lstm(x)
            return self.fc(out[:, -1] if self.last else h[-1])
    x = _seqs(4, steps=5, nx=3, seed=6)
    for last in (True, False):
        net, path = Net(last).eval(), tmp_path / f"net{last}.onnx"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(net, torch.zeros(1, 5, 3), str(path), dynamo=False,
                              input_names=["x"], output_names=["y"],
                              dynamic_axes={"x": {0: "N"}, "y": {0: "N"}})
        graph = load_onnx(path)
        with torch.no_grad():
            want = net(torch.from_numpy(x)).numpy()
        np.testing.assert_allclose(run_float(graph, x), want, rtol=1e-4, atol=1e-6)
        plan = compile_model(graph, x, batch=2)
        assert [e["block"] for e in plan["layers"]] == ["lstm", "host", "fc"]


def test_plan_formats_cycles_and_golden_bound(tmp_path):
    """The LSTM layer's plan entry: the LSTM engine with its reason, x and h sharing the
    calibrated input format, weights and bias by the calibration rule, the fixed PWL-side
    formats, cycles = gen.lstm.cycle_model of one job (weights + the batch's calibration
    sequences); the integer run stays within 1 % of the float output's range."""
    from gen.core.fixed import quantise
    from gen.lstm import compile_lstm, cycle_model, quantise_lstm
    from gen.lstm import LstmConfig, LstmFloat
    graph = load_onnx(_save(lstm_model(head="last", density=0.6), tmp_path / "m.onnx"))
    x = _seqs(6)
    plan = compile_model(graph, x, batch=3)
    e = plan["layers"][0]
    assert e["block"] == "lstm" and "LSTM engine" in e["reason"] and e["steps"] == 4
    assert e["x_format"] == e["in_format"] == plan["formats"]["x"]
    peak = max(plan["tensor_max_abs"]["x"], plan["tensor_max_abs"][e["output"]])
    m = int(e["x_format"][1:].split(".")[0])
    assert peak < 2 ** (m - 1) and (m == 1 or peak >= 2 ** (m - 2))
    cfg = LstmConfig(**{k: v for k, v in _cfg(e["config"]).items()})
    assert (cfg.pre_fmt, cfg.act_fmt, cfg.c_fmt) == (LstmConfig().pre_fmt,
                                                    LstmConfig().act_fmt, LstmConfig().c_fmt)
    layer = graph.layers[0]
    q = quantise_lstm(LstmFloat(layer.w[:, :2], layer.w[:, 2:], layer.b), cfg)
    run = cycle_model(compile_lstm(q, cfg), [(quantise(s, cfg.x_fmt), None, None)
                                             for s in x[:3]])
    assert e["cycles"] == run["o"][-1] + 1
    assert "| lstm | lstm | lstm |" in plan_table(plan) and "3 seq x 4 steps" in plan_table(plan)
    y, _ = run_plan(graph, plan, x)
    ref = run_float(graph, x)
    assert np.max(np.abs(y - ref)) <= 0.01 * np.max(np.abs(ref))


def _cfg(d):
    from gen.core.config import config_from_strings
    from gen.lstm import LstmConfig
    return vars(config_from_strings(LstmConfig, {k: str(v) for k, v in d.items()}))


def test_rtl_equals_golden(tmp_path, sim):
    """``spnn compile`` + ``spnn run model`` on a tiny LSTM + Gemm (X 2, H 3, T 4, P 2,
    batch 2): the LSTM layer runs on its shell in one job (one weight load, h requantised
    in the shell's stage), the Gemm on the FC engine's shell; RTL == golden bit for bit,
    and the LSTM's measured clocks equal the plan's predicted cycles + the shell's (the
    run's inputs are the calibration's first batch)."""
    _save(lstm_model(head="last", density=0.7), tmp_path / "m.onnx")
    x = _seqs(2)
    np.save(tmp_path / "calib.npy", x)
    plan = tmp_path / "plan"
    assert main(["compile", str(tmp_path / "m.onnx"), "--calib", str(tmp_path / "calib.npy"),
                 "--batch", "2", "--set", "lstm.pes=2", "--set", "fc.batch=2",
                 "-o", str(plan)]) == 0
    outs = {}
    for engine in ("golden", "rtl"):
        assert main(["run", "model", "--plan", str(plan), "--input", str(tmp_path / "calib.npy"),
                     "--engine", engine, "--sim", sim, "--out", str(tmp_path / f"{engine}.npy"),
                     "--report", str(tmp_path / f"{engine}.json")]) == 0
        outs[engine] = np.load(tmp_path / f"{engine}.npy")
    np.testing.assert_array_equal(outs["rtl"], outs["golden"])
    report = json.loads((tmp_path / "rtl.json").read_text())
    assert report["rtl_layer_runs"] == 2
    lstm = next(e for e in report["layers"] if e["block"] == "lstm")
    # one job through the LSTM shell with its requantisation stage: the plan's cycles (the
    # engine's, first weight word to last h) + 3 (the shell's adapters) + the stage
    from gen.core.fixed import REQUANT_LATENCY
    assert lstm["measured_cycles"] == lstm["cycles"] + 3 + REQUANT_LATENCY


def _bad(tmp_path):
    """(model, expected message) pairs: what the LSTM engine does not implement."""
    hid = 3
    yield lstm_model(direction="bidirectional"), "direction bidirectional: only forward"
    yield (lstm_model(activations=["Sigmoid", "Tanh", "Relu"]),
           "activations ['Sigmoid', 'Tanh', 'Relu']: only the default")
    yield lstm_model(clip=3.0), "clip 3: cell clipping is not supported"
    yield lstm_model(input_forget=1), "input_forget 1: only 0"
    yield lstm_model(layout=1), "layout 1: only 0"
    peep = lstm_model()
    peep.graph.initializer.append(numpy_helper.from_array(np.ones((1, 3 * hid), np.float32), "P"))
    node = next(n for n in peep.graph.node if n.op_type == "LSTM")
    node.input.extend(["", "", "", "P"])
    yield peep, "peepholes (input P) are not supported"
    h0 = lstm_model()
    h0.graph.initializer.append(numpy_helper.from_array(np.ones((1, 1, hid), np.float32), "h0"))
    next(n for n in h0.graph.node if n.op_type == "LSTM").input.extend(["", "h0"])
    yield h0, "initial_h must be zero"
    lens = lstm_model()
    lens.graph.initializer.append(numpy_helper.from_array(np.array([4], np.int32), "lens"))
    next(n for n in lens.graph.node if n.op_type == "LSTM").input.append("lens")
    yield lens, "sequence_lens is not supported"
    yield lstm_model(head="cell"), "'Y_c' is the LSTM's cell state Y_c"
    yield lstm_model(head="raw"), "the output 'y' is not batch first"
    nodes = [helper.make_node("Transpose", ["x"], ["xt"], name="tr", perm=[0, 2, 1]),
             helper.make_node("Flatten", ["xt"], ["y"], name="flat")]
    flat = helper.make_model(helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8])]),
        opset_imports=[helper.make_opsetid("", 17)])
    flat.ir_version = 8
    yield flat, "node 'flat' (Flatten): input 'xt' is transposed"


def test_cli_errors_one_line_exit_2_nothing_written(tmp_path, capsys):
    np.save(tmp_path / "x.npy", _seqs(3))
    for k, (model, msg) in enumerate(_bad(tmp_path)):
        path = _save(model, tmp_path / f"{k}.onnx")
        out = tmp_path / f"plan{k}"
        try:
            code = main(["compile", str(path), "--calib", str(tmp_path / "x.npy"),
                         "-o", str(out)])
        except SystemExit as exc:
            code = exc.code
        err = capsys.readouterr().err.strip()
        assert code == 2, (msg, err)
        assert len(err.splitlines()) == 1 and msg in err, err
        assert not out.exists()
