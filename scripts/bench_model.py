# SPDX-License-Identifier: Apache-2.0
"""The digits CNN from ONNX to RTL: ``spnn compile`` + ``spnn run model`` on the whole test
split.

The network of ``scripts/train_cnn_digits.py`` (conv 1->8, conv 8->16 + max-pool, conv
16->32, FC 512->10 on 8x8 digits), pruned to 70 % conv-weight sparsity and exported to ONNX by
that script (run first when ``build/explore`` lacks it; needs the ml extra), is compiled with
256 training images as calibration (batch 16; the conv array with 16-bit words), then the
450 test images run three ways: onnxruntime on the float model, the plan on the golden
models, the plan on the RTL (Verilator, native engine; every layer's result checked equal to
the golden one).  Writes ``build/bench/model.json`` and ``build/bench/model.md`` (``--docs``:
the table into README.md and docs/model.md).

Usage: ``python -m scripts.bench_model [--level s70] [--limit N] [--docs]``.
"""

import argparse
from dataclasses import replace
import json
from pathlib import Path
import subprocess
import sys
import time

import numpy as np

from scripts import docs

EXPLORE = Path("build/explore")
DOC_FILES = ("README.md", "docs/model.md")


def _ensure_trained(level):
    if not (EXPLORE / level / "cnn.onnx").exists() or not (EXPLORE / "test_x.npy").exists():
        print("[model] training the digits CNN (scripts/train_cnn_digits.py)", flush=True)
        subprocess.run([sys.executable, "-m", "scripts.train_cnn_digits", "--out",
                        str(EXPLORE)], check=True)


def _ort(path, x):
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x.astype(np.float32)})[0]


def markdown(res) -> str:
    from gen.model import plan_table
    body = plan_table(res["plan"]).split("\n", 2)[2]          # without the title line
    return "\n".join([
        f"Digits CNN ({res['level']}: conv weights {res['sparsity']:.0%} pruned), "
        f"`python -m scripts.bench_model`: {res['images']} test images, batch "
        f"{res['plan']['batch']}, conv array {res['array']} with 16-bit words.", "",
        "| path | accuracy |", "|---|---|",
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
    args = ap.parse_args(argv)
    from gen.conv import ConvConfig
    from gen.core.sim import using_engine
    from gen.model import compile_model, load_onnx
    from gen.model.run import run_plan
    _ensure_trained(args.level)
    manifest = json.loads((EXPLORE / "manifest.json").read_text())
    level = next(v for v in manifest["levels"] if v["folder"] == args.level)
    onnx_path = EXPLORE / args.level / "cnn.onnx"
    x = np.load(EXPLORE / "test_x.npy", allow_pickle=False)[:args.limit]
    y = np.load(EXPLORE / "test_y.npy", allow_pickle=False)[:args.limit]
    calib = np.load(EXPLORE / "calib_x.npy", allow_pickle=False)
    graph = load_onnx(onnx_path)
    conv = replace(ConvConfig(), data_width=16, weight_width=16, acc_width=48)
    plan = compile_model(graph, calib, batch=16, cfgs={"conv": conv}, name="digits-cnn")
    ref = _ort(onnx_path, x)
    gold, _ = run_plan(graph, plan, x, engine="golden")
    t0 = time.perf_counter()
    with using_engine("native"):
        rtl, info = run_plan(graph, plan, x, engine="rtl")
    rtl_seconds = time.perf_counter() - t0
    acc = lambda out: float(np.mean(np.argmax(out, axis=1) == y))   # noqa: E731
    res = {"level": args.level, "sparsity": level["sparsity"], "images": int(len(x)),
           "array": f"{conv.rows}x{conv.cols}", "plan": plan,
           "accuracy_float": acc(ref), "accuracy_golden": acc(gold), "accuracy_rtl": acc(rtl),
           "rtl_equals_golden": bool(np.array_equal(rtl, gold)),
           "rtl_layer_runs": info["rtl_runs"], "rtl_seconds": rtl_seconds,
           "max_abs_error": float(np.max(np.abs(gold - ref))),
           "output_range": float(np.max(np.abs(ref)))}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "model.json").write_text(json.dumps(res, indent=2) + "\n")
    table = markdown(res)
    (out / "model.md").write_text(table)
    print(table)
    if args.docs:
        docs.write_docs(table, "model table", "scripts/bench_model.py", DOC_FILES)
    ok = res["rtl_equals_golden"] and abs(res["accuracy_golden"] - res["accuracy_float"]) <= 0.01
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
