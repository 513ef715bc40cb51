# SPDX-License-Identifier: Apache-2.0
"""The digits CNN from ONNX to RTL: ``spnn compile`` + ``spnn run model`` on the whole test
split.

The network of ``scripts/train_cnn_digits.py`` (conv 1->8, conv 8->16 + max-pool, conv
16->32, FC 512->10 on 8x8 digits), pruned to 70 % weight sparsity (conv and FC layers) and
exported to ONNX by that script (run first when ``build/explore`` lacks it; needs the ml
extra), is compiled with 256 training images as calibration (batch 16; the conv array with
16-bit words), then the 450 test images run three ways: onnxruntime on the float model, the
plan on the golden models, the plan on the RTL (Verilator, native engine; every layer's
result checked equal to the golden one); onnxruntime on the unpruned float model (``s00``)
gives the accuracy before pruning.  Writes ``build/bench/model.json`` and
``build/bench/model.md`` (``--docs``: the table into README.md and docs/model.md).

The digits LSTM classifier of ``scripts/train_lstm_digits.py`` (``nn.LSTM(8, 32)`` 82 %
pruned + ``nn.Linear(32, 10)`` on the last step, exported as an ONNX ``LSTM``; trained first
when ``build/bench`` lacks it) takes the same route (:func:`lstm_result`): compiled with 256
training sequences (batch 16, the LSTM engine with P = 8 as in that script), the 450 test
sequences through onnxruntime, the golden plan and the RTL plan.  Writes
``build/bench/model_lstm.json`` and ``.md`` (``--docs``: into README.md and docs/model.md).

Then pruned VGG16- and ResNet-18-shaped networks (random weights, 224 x 224) are compiled on
the 128 x 16 array with the seed's buffer sizes at batch 1, and their predicted cycles,
latency and images/s reported (:func:`network_rows`; batch 16 compiles too, but its conv
tiling search took 276 s for ResNet-18 alone, so the bench leaves it out).  Writes
``build/bench/model_networks.json`` and ``.md`` (``--docs``: into README.md and
docs/model.md).

Each of the three parts has its own pair of markers in the docs (:data:`SECTIONS`); a run
that skips a part (``--no-cnn``, ``--no-lstm``, ``--no-networks``) leaves that part's files
and doc sections as they are.

Usage: ``python -m scripts.bench_model [--level s70] [--limit N] [--no-cnn] [--no-lstm]
[--no-networks] [--docs]``.
"""

import argparse
from dataclasses import replace
import json
from pathlib import Path
import subprocess
import sys
import time

import numpy as np

from gen.core.fixed import REQUANT_LATENCY
from scripts import docs

EXPLORE = Path("build/explore")
LSTM_DIR = Path("build/bench")              # where scripts/train_lstm_digits.py writes
LSTM_FILES = ("lstm_digits.onnx", "lstm_digits_test_x.npy", "lstm_digits_test_y.npy",
              "lstm_digits_calib_x.npy")
DOC_FILES = ("README.md", "docs/model.md")
SCRIPT = "scripts/bench_model.py"
# part -> (doc markers' name, build/bench file stem)
SECTIONS = {"cnn": ("model table", "model"), "lstm": ("lstm model table", "model_lstm"),
            "networks": ("networks table", "model_networks")}


def _ensure_trained(level):
    if not (EXPLORE / level / "cnn.onnx").exists() or not (EXPLORE / "test_x.npy").exists():
        print("[model] training the digits CNN (scripts/train_cnn_digits.py)", flush=True)
        subprocess.run([sys.executable, "-m", "scripts.train_cnn_digits", "--out",
                        str(EXPLORE)], check=True)


def markdown(res) -> str:
    from gen.model import plan_table
    body = plan_table(res["plan"]).split("\n", 2)[2]          # without the title line
    dense = res.get("accuracy_float_dense")
    return "\n".join([
        f"Digits CNN ({res['level']}: weights {res['sparsity']:.0%} pruned in the conv layers, "
        f"{res['fc_sparsity']:.0%} in the FC layer), `python -m scripts.bench_model`: "
        f"{res['images']} test images, batch {res['plan']['batch']}, conv array "
        f"{res['array']} with 16-bit words.",
        "", "| path | accuracy |", "|---|---|"]
        + ([f"| float model before pruning (s00, onnxruntime) | {dense:.4f} |"]
           if dense is not None else []) + [
        f"| float model (onnxruntime) | {res['accuracy_float']:.4f} |",
        f"| plan on the golden models | {res['accuracy_golden']:.4f} |",
        f"| plan on the RTL (Verilator, native engine) | {res['accuracy_rtl']:.4f} |", "",
        f"RTL == golden on every output: {res['rtl_equals_golden']} "
        f"({res['rtl_layer_runs']} block-layer runs checked, {res['rtl_seconds']:.0f} s). "
        f"Max |golden - float| = {res['max_abs_error']:.4f} (output range "
        f"{res['output_range']:.2f}).", "", body.rstrip(), ""])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--level", default="s70", help="pruning level folder (default s70)")
    ap.add_argument("--limit", type=int, default=None, help="test images (default all)")
    ap.add_argument("--out", default="build/bench")
    ap.add_argument("--docs", action="store_true")
    ap.add_argument("--no-cnn", action="store_true", help="skip the digits CNN")
    ap.add_argument("--no-lstm", action="store_true", help="skip the digits LSTM")
    ap.add_argument("--fmax", type=float, default=CONV_FMAX_MHZ,
                    help="clock rate of the VGG16 / ResNet-18 figures in MHz (default "
                    f"{CONV_FMAX_MHZ}: the conv shell's measured ECP5 Fmax, README synth "
                    "table)")
    ap.add_argument("--fmax-from", metavar="REPORTS", default=None,
                    help="take the VGG16 / ResNet-18 clock from `spnn synth conv` reports "
                    "instead (gen.model.fmax_from_reports: a folder or a report)")
    ap.add_argument("--no-networks", action="store_true",
                    help="skip the VGG16 / ResNet-18 plans")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ok = True
    if not args.no_cnn:
        res = cnn_result(args.level, args.limit)
        write_part("cnn", res, markdown(res), out, args.docs)
        ok = ok and passed(res)
    if not args.no_lstm:
        res = lstm_result(args.limit)
        write_part("lstm", res, lstm_markdown(res), out, args.docs)
        ok = ok and passed(res)
    if not args.no_networks:
        fmax = args.fmax
        if args.fmax_from:
            from gen.model.fmax import fmax_from_reports
            fmax = fmax_from_reports(args.fmax_from, ["conv"])[0]
        rows = network_rows(fmax=fmax)
        write_part("networks", {"networks": rows}, networks_markdown(rows), out, args.docs)
    return 0 if ok else 1


def passed(res) -> bool:
    """RTL == golden on every output and the golden accuracy within 1 point of the float
    one."""
    return res["rtl_equals_golden"] and \
        abs(res["accuracy_golden"] - res["accuracy_float"]) <= 0.01


def write_part(part, res, table, out, write_docs=False):
    """``res`` and ``table`` to ``out/<stem>.json`` / ``.md`` and, with ``write_docs``, the
    table between the part's markers in :data:`DOC_FILES` (only this part's)."""
    what, stem = SECTIONS[part]
    (out / f"{stem}.json").write_text(json.dumps(res, indent=2) + "\n")
    (out / f"{stem}.md").write_text(table)
    print(table)
    if write_docs:
        docs.write_docs(table, what, SCRIPT, DOC_FILES)


def _compile_and_run(onnx_path, calib, x, cfgs, name):
    """``spnn compile`` (batch 16) and the plan on onnxruntime, the golden models and the RTL
    (Verilator, native engine): ``(plan, ref, gold, rtl, info, rtl_seconds)``."""
    from gen.core.sim import using_engine
    from gen.model import compile_model, load_onnx
    from gen.model.reference import run_onnxruntime
    from gen.model.run import run_plan
    graph = load_onnx(onnx_path)
    plan = compile_model(graph, calib, batch=16, cfgs=cfgs, name=name)
    ref = run_onnxruntime(onnx_path, "x", x)
    gold, _ = run_plan(graph, plan, x, engine="golden")
    t0 = time.perf_counter()
    with using_engine("native"):
        rtl, info = run_plan(graph, plan, x, engine="rtl")
    return plan, ref, gold, rtl, info, time.perf_counter() - t0


def cnn_result(level_name="s70", limit=None) -> dict:
    """The digits CNN at pruning level ``level_name`` through ``spnn compile`` + the plan's
    golden and RTL runs (Verilator, native engine) on the test split, against onnxruntime
    on the pruned and the unpruned (``s00``) float models."""
    from gen.conv.banked import BankedConfig
    from gen.model.reference import run_onnxruntime
    _ensure_trained(level_name)
    manifest = json.loads((EXPLORE / "manifest.json").read_text())
    level = next(v for v in manifest["levels"] if v["folder"] == level_name)
    onnx_path = EXPLORE / level_name / "cnn.onnx"
    x = np.load(EXPLORE / "test_x.npy", allow_pickle=False)[:limit]
    y = np.load(EXPLORE / "test_y.npy", allow_pickle=False)[:limit]
    calib = np.load(EXPLORE / "calib_x.npy", allow_pickle=False)
    conv = replace(BankedConfig(), data_width=16, weight_width=16, acc_width=48)
    plan, ref, gold, rtl, info, rtl_seconds = _compile_and_run(
        onnx_path, calib, x, {"conv": conv}, "digits-cnn")
    acc = lambda out: float(np.mean(np.argmax(out, axis=1) == y))   # noqa: E731
    dense = EXPLORE / "s00" / "cnn.onnx"
    return {"level": level_name, "sparsity": level["sparsity"],
            "fc_sparsity": level.get("fc_sparsity", 0.0), "images": int(len(x)),
            "array": f"{conv.rows}x{conv.cols}", "plan": plan,
            "accuracy_float_dense": acc(run_onnxruntime(dense, "x", x)) if dense.exists()
            else None,
            "accuracy_float": acc(ref), "accuracy_golden": acc(gold), "accuracy_rtl": acc(rtl),
            "rtl_equals_golden": bool(np.array_equal(rtl, gold)),
            "rtl_layer_runs": info["rtl_runs"], "rtl_seconds": rtl_seconds,
            "max_abs_error": float(np.max(np.abs(gold - ref))),
            "output_range": float(np.max(np.abs(ref)))}


# ---- the digits LSTM classifier through ONNX ---------------------------------------------

def _ensure_lstm():
    if not all((LSTM_DIR / f).exists() for f in LSTM_FILES):
        print("[model] training the digits LSTM (scripts/train_lstm_digits.py --no-rtl)",
              flush=True)
        subprocess.run([sys.executable, "-m", "scripts.train_lstm_digits", "--no-rtl",
                        "--out", str(LSTM_DIR)], check=True)


def lstm_result(limit=None) -> dict:
    """The digits LSTM through ``spnn compile`` + the plan's golden and RTL runs (Verilator,
    native engine) on the test split, against onnxruntime."""
    from gen.lstm import LstmConfig
    _ensure_lstm()
    onnx_path = LSTM_DIR / "lstm_digits.onnx"
    x = np.load(LSTM_DIR / "lstm_digits_test_x.npy", allow_pickle=False)[:limit]
    y = np.load(LSTM_DIR / "lstm_digits_test_y.npy", allow_pickle=False)[:limit]
    calib = np.load(LSTM_DIR / "lstm_digits_calib_x.npy", allow_pickle=False)
    lstm = replace(LstmConfig(), pes=8, fifo_depth=8)          # as train_lstm_digits.py
    plan, ref, gold, rtl, info, rtl_seconds = _compile_and_run(
        onnx_path, calib, x, {"lstm": lstm}, "digits-lstm")
    acc = lambda out: float(np.mean(np.argmax(out, axis=1) == y))   # noqa: E731
    direct = LSTM_DIR / "lstm_digits.json"
    direct = json.loads(direct.read_text()) if direct.exists() else {}
    return {"sequences": int(len(x)), "plan": plan, "accuracy_float": acc(ref),
            "accuracy_golden": acc(gold), "accuracy_rtl": acc(rtl),
            "rtl_equals_golden": bool(np.array_equal(rtl, gold)),
            "rtl_layer_runs": info["rtl_runs"], "rtl_seconds": rtl_seconds,
            "measured_cycles": info["measured_cycles"],
            "max_abs_error": float(np.max(np.abs(gold - ref))),
            "output_range": float(np.max(np.abs(ref))),
            "direct_path": {"accuracy": direct.get("accuracy"), "formats": direct.get("formats")}}


def lstm_markdown(res) -> str:
    from gen.model import plan_table
    plan = res["plan"]
    lstm = next(e for e in plan["layers"] if e["block"] == "lstm")
    cfg = lstm["config"]
    runs = -(-res["sequences"] // plan["batch"])
    measured = res["measured_cycles"].get(lstm["name"])
    body = plan_table(plan).split("\n", 2)[2]
    direct = res["direct_path"].get("accuracy") or {}
    fmts = res["direct_path"].get("formats") or {}
    gemm = next((e for e in plan["layers"] if e["op"] == "gemm"), None)
    pct = lambda v: "not run" if v is None else f"{v / 100:.4f}"    # noqa: E731
    lines = [
        f"Digits LSTM (`scripts/train_lstm_digits.py`: `nn.LSTM(8, {cfg['max_hidden']})` "
        f"{1 - lstm['density']:.0%} pruned, {lstm['nnz']} non-zeros, + `nn.Linear` on the last "
        f"step), exported as an ONNX `LSTM`, `python -m scripts.bench_model`: "
        f"{res['sequences']} test sequences of 8 steps, batch {plan['batch']}, LSTM engine "
        f"P = {cfg['pes']}.", "",
        "| path | accuracy |", "|---|---|",
        f"| float model (onnxruntime) | {res['accuracy_float']:.4f} |",
        f"| plan on the golden models | {res['accuracy_golden']:.4f} |",
        f"| plan on the RTL (Verilator, native engine) | {res['accuracy_rtl']:.4f} |",
        f"| direct path (`train_lstm_digits.py`: `gen.lstm` golden, read-out in float) | "
        f"{pct(direct.get('fixed_golden'))} (RTL {pct(direct.get('rtl'))}) |", "",
        f"RTL == golden on every output: {res['rtl_equals_golden']} "
        f"({res['rtl_layer_runs']} block-layer runs checked, {res['rtl_seconds']:.0f} s). "
        f"Max |golden - float| = {res['max_abs_error']:.4f} (output range "
        f"{res['output_range']:.2f}). LSTM formats (calibrated): x and h {lstm['x_format']}, "
        f"w {lstm['w_format']}, b {lstm['b_format']}; fixed: pre-activations "
        f"{cfg['pre_fmt']}, gates {cfg['act_fmt']}, cell {cfg['c_fmt']}"
        + (f" (the direct path: the engine's defaults x and h {fmts['x_h']}, w "
           f"{fmts['weights']}, b {fmts['bias']}, and the read-out in float; here the read-out "
           f"Gemm runs on the {gemm['block']} block, x {gemm['in_format']}, w "
           f"{gemm['w_format']})" if fmts and gemm else "") + "."
        + (f" LSTM layer on the RTL: {measured:,} cycles over {runs} jobs through the "
           f"LSTM shell (first weight beat to last `h` beat, `h` requantised in the "
           f"shell's stage; predicted {lstm['cycles']:,} per job of {plan['batch']} "
           f"calibration sequences for the engine alone, + 3 for the shell's adapters and "
           f"+ {REQUANT_LATENCY} for the stage)." if measured else ""), "", body.rstrip(), ""]
    return "\n".join(lines)


# ---- pruned VGG16- and ResNet-18-shaped networks through the cycle models ----------------

# weight densities after pruning (Han et al., Deep Compression: VGG16 conv ~ 1/3, fc6/fc7
# 4 %, fc8 23 %; ResNet-18 at ~ 1/2)
DENSITY = {"vgg16": {"conv": 0.33, "fc6": 0.04, "fc7": 0.04, "fc8": 0.23},
           "resnet18": {"conv": 0.5, "fc": 0.5}}


def _onnx_net(name, seed=0):
    """A ``name``-shaped ONNX model (``gen.conv.networks`` convolutions with their pooling,
    residual adds and classifier) with random weights pruned to :data:`DENSITY`."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from gen.conv.networks import NETWORKS
    rng = np.random.default_rng(seed)
    dens = DENSITY[name]
    nodes, inits = [], []

    def weight(tag, shape, density):
        fan = int(np.prod(shape[1:]))
        w = rng.normal(0, np.sqrt(2 / (fan * density)), shape) * (rng.random(shape) < density)
        inits.append(numpy_helper.from_array(w.astype(np.float32), tag))
        return tag

    def node(op, ins, out, **attrs):
        nodes.append(helper.make_node(op, ins, [out], name=out, **attrs))
        return out

    def conv(x, spec):
        tag, oc, ic, _, _, k, s, p = spec
        w = weight(f"{tag}.w", (oc, ic, k, k), dens["conv"])
        return node("Conv", [x, w], tag, kernel_shape=[k, k], strides=[s, s], pads=[p] * 4)

    layers = {spec[0]: spec for spec in NETWORKS[name]}
    t = "x"
    if name == "vgg16":
        for spec in NETWORKS[name]:
            t = node("Relu", [conv(t, spec)], spec[0] + ".relu")
            if spec[0] in ("conv1_2", "conv2_2", "conv3_3", "conv4_3", "conv5_3"):
                t = node("MaxPool", [t], spec[0] + ".pool", kernel_shape=[2, 2], strides=[2, 2])
        t = node("Flatten", [t], "flatten")
        for tag, (out, inp) in (("fc6", (4096, 25088)), ("fc7", (4096, 4096)),
                                ("fc8", (1000, 4096))):
            t = node("Gemm", [t, weight(f"{tag}.w", (out, inp), dens[tag])], tag, transB=1)
            if tag != "fc8":
                t = node("Relu", [t], tag + ".relu")
    else:
        t = node("Relu", [conv(t, layers["conv1"])], "conv1.relu")
        t = node("MaxPool", [t], "pool", kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4)
        for stage in range(1, 5):
            for block in range(2):
                pre = f"layer{stage}.{block}"
                h = node("Relu", [conv(t, layers[pre + ".conv1"])], pre + ".relu1")
                h = conv(h, layers[pre + ".conv2"])
                short = conv(t, layers[pre + ".downsample"]) if pre + ".downsample" in layers \
                    else t
                t = node("Relu", [node("Add", [h, short], pre + ".add")], pre + ".relu2")
        t = node("Flatten", [node("GlobalAveragePool", [t], "gap")], "flatten")
        t = node("Gemm", [t, weight("fc.w", (1000, 512), dens["fc"])], "fc", transB=1)
    graph = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 224, 224])],
        [helper.make_tensor_value_info(t, TensorProto.FLOAT, ["N", 1000])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


# The conv shell's ECP5 Fmax, default configuration (BankedConfig(): 16 x 4, 2 copies,
# bus_words 4), median of seeds 1-3 at a387dff (docs/conv.md "Synthesis"; one place and
# route takes 7-15 minutes): the networks' layers run through the shell.  The networks'
# 128 x 16 array is 32 times that array and fits no device the open flow places (ECP5-85F at
# most; Vivado is not run here), so its own Fmax is not measured.
CONV_FMAX_MHZ = 154.1


def network_rows(names=("resnet18", "vgg16"), batches=(1,), fmax=CONV_FMAX_MHZ):
    """Each network compiled on the 128 x 16 array with the seed's buffers (16-bit words,
    16 words per beat, up to 4 copies): per batch the predicted cycles, latency and images/s at ``fmax``."""
    from gen.conv.banked import seed_banked
    from gen.model import compile_model
    from gen.model.graph import graph_of
    from gen.spmv import SpmvConfig
    conv = seed_banked(128, 16, 16, copies=4, data_width=16, weight_width=16, acc_width=48)
    spmv = SpmvConfig(pes=32, rows_per_pe=32, max_cols=256, mem_depth=1024, w_lanes=16,
                      drain_lanes=16, acc_width=32)
    rows = []
    for name in names:
        graph = graph_of(_onnx_net(name), path=name)
        calib = np.random.default_rng(1).normal(0, 1, (2, 3, 224, 224))
        for batch in batches:
            t0 = time.perf_counter()
            plan = compile_model(graph, calib, batch=batch, cfgs={"conv": conv, "spmv": spmv},
                                 name=name)
            cycles = plan["total_cycles"]
            by = {}
            for e in plan["layers"]:
                by[e["block"]] = by.get(e["block"], 0) + e["cycles"]
            macs = sum(e["macs"] for e in plan["layers"] if e["block"] == "conv")
            rows.append({"network": name, "batch": batch, "cycles": cycles,
                         "cycles_by_block": by, "latency_ms": cycles / fmax / 1e3,
                         "images_per_second": batch * fmax * 1e6 / cycles,
                         "conv_utilisation": macs / (conv.rows * conv.cols * by["conv"]),
                         "fmax_mhz": fmax, "compile_seconds": time.perf_counter() - t0})
            r = rows[-1]
            print(f"[model] {name} batch {batch}: {cycles:,} cycles, {r['latency_ms']:.1f} ms, "
                  f"{r['images_per_second']:.1f} images/s ({r['compile_seconds']:.0f} s)",
                  flush=True)
    return rows


def networks_markdown(rows) -> str:
    lines = ["Pruned VGG16- and ResNet-18-shaped networks (random weights; conv density 0.33 / "
             "0.5, VGG16 fc6/fc7 0.04, fc8 0.23), 224 x 224, compiled by `spnn compile` on the "
             "128 x 16 array with the seed's buffer sizes, 16-bit words, 16 words per beat, "
             "up to 4 copies; cycles predicted by the exact models, end to end per layer "
             "(conv: every job of the layer's plan through the shell, one AXI job each), "
             "layers in sequence "
             f"(host pooling not counted), at {rows[0]['fmax_mhz']:g} MHz"
             + (" (the conv shell's measured ECP5 Fmax, median of seeds 1-3, default 16 x 4 "
                "configuration: "
                "a 128 x 16 array fits no device the open flow places, so its own is not "
                "measured)" if rows[0]["fmax_mhz"] == CONV_FMAX_MHZ else "")
             + ":", "",
             "| network | batch | cycles | conv / spmv / fc cycles | conv utilisation (end to "
             "end) | latency per batch | images/s |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        by = r["cycles_by_block"]
        lines.append(f"| {r['network']} | {r['batch']} | {r['cycles']:,} | "
                     f"{by.get('conv', 0):,} / {by.get('spmv', 0):,} / {by.get('fc', 0):,} | "
                     f"{r['conv_utilisation']:.3f} | {r['latency_ms']:.1f} ms | "
                     f"{r['images_per_second']:.1f} |")
    lines += ["", "The seed (002) reports its VC709 design's throughput only as 4x a reference "
              "VC709 design (no images/s), so no absolute comparison is possible.", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
