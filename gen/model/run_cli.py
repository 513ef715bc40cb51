# SPDX-License-Identifier: Apache-2.0
"""``spnn run model --plan PLAN/ --input X.npy``: a compiled network through the blocks."""

import json
from pathlib import Path

import numpy as np

from gen.core.config import SpnnError
from gen.core.runutil import int_arg, load_npy, run_outputs

__all__ = ["HELP", "DESCRIPTION", "add_arguments", "run"]

HELP = "run a compiled network (spnn compile) through the blocks"
DESCRIPTION = """\
Run inputs through a network compiled by 'spnn compile': every block layer on its RTL
(--engine rtl, the native simulation engine; each layer's result must equal the golden
model's bit for bit) or on its golden model (--engine golden), the host operators in numpy,
each layer's output feeding the next. Y.npy holds the model's output as real values, one row
per input (like onnxruntime's). The report gives per-layer and total predicted cycles, the
end-to-end utilisation, the latency per input and inputs per second at --fmax (or at the
slowest block's measured Fmax, --fmax-from a 'spnn synth -o DIR' folder), the max |error|
against onnxruntime on the float model, and the accuracy with --labels.

Examples:
  spnn run model --plan plan/ --input x.npy --out y.npy --report r.json
  spnn run model --plan plan/ --input x.npy --labels l.npy --engine golden --limit 100
  spnn synth conv --shell --target ecp5 -o fmax/ ; spnn synth fc --shell --target ecp5 -o fmax/
  spnn run model --plan plan/ --input x.npy --fmax-from fmax/ --report r.json
"""


def add_arguments(parser):
    parser.add_argument("--plan", required=True, metavar="PLAN/", help="spnn compile's folder")
    parser.add_argument("--input", required=True, metavar="X.npy",
                        help="inputs, batch first, the model's input shape")
    parser.add_argument("--out", metavar="Y.npy", help="write the outputs here")
    parser.add_argument("--report", metavar="R.json", help="write the JSON report here")
    parser.add_argument("--labels", metavar="L.npy", help="class labels, one per input")
    parser.add_argument("--plot", metavar="P.png",
                        help="write a bar chart of the predicted cycles per layer here (PNG; "
                        "needs matplotlib, the ml extra)")
    parser.add_argument("--engine", default="rtl", choices=["rtl", "golden"],
                        help="block layers on the RTL (default) or on the golden models")
    parser.add_argument("--sim", default="verilator", choices=["verilator", "icarus"])
    parser.add_argument("--sim-engine", default="native", choices=["native", "cocotb"],
                        help="how the RTL is driven (default native)")
    parser.add_argument("--limit", default=None, help="run the first N inputs only")
    parser.add_argument("--fmax", default=None, help="clock in MHz for the latency figures "
                        "(default 150, the shells' Fmax goal)")
    parser.add_argument("--fmax-from", default=None, metavar="REPORTS",
                        help="take the clock from place-and-route reports instead: a "
                        "'spnn synth ... -o DIR' folder (or one report .json); the slowest "
                        "block's median Fmax over its seeds")


def _load_plan(folder):
    folder = Path(folder)
    if not (folder / "plan.json").is_file() or not (folder / "model.onnx").is_file():
        raise SpnnError(f"--plan {folder}: not a plan folder (needs plan.json and model.onnx "
                        f"from 'spnn compile')")
    try:
        plan = json.loads((folder / "plan.json").read_text())
    except ValueError as exc:
        raise SpnnError(f"--plan {folder}: plan.json is not JSON ({exc})") from None
    from gen.model.compile import PLAN_VERSION
    if not isinstance(plan, dict) or plan.get("version") != PLAN_VERSION:
        raise SpnnError(f"--plan {folder}: plan.json is not a version-{PLAN_VERSION} plan; "
                        f"compile the model again")
    return plan, folder / "model.onnx"


def _inputs(args, graph):
    x = load_npy(args.input, "--input")
    if x.ndim < 2 or tuple(x.shape[1:]) != tuple(graph.input_shape) or not len(x):
        raise SpnnError(f"--input {args.input}: shape {x.shape} does not match the model "
                        f"input (batch, {', '.join(map(str, graph.input_shape))})")
    if not np.all(np.isfinite(x)):
        raise SpnnError(f"--input {args.input}: holds NaN or infinite values")
    if args.limit is not None:
        x = x[:int_arg(args.limit, "--limit", 1)]
    labels = None
    if args.labels:
        labels = load_npy(args.labels, "--labels")
        if labels.ndim != 1 or len(labels) < len(x) or labels.dtype.kind not in "iu":
            raise SpnnError(f"--labels {args.labels}: needs one integer label per input "
                            f"({len(x)}), not shape {labels.shape} of {labels.dtype}")
        labels = labels[:len(x)]
    return x, labels


def _report(plan, args, x, y, ref, labels, engine, info, fmax, fmax_source):
    measured = info["measured_cycles"]
    layers = [{k: e[k] for k in ("name", "op", "block", "cycles", "utilisation",
                                 "roofline_cycles", "efficiency_vs_roofline") if k in e}
              | ({"measured_cycles": measured[e["name"]]} if e["name"] in measured else {})
              for e in plan["layers"]]
    rtl_runs = info["rtl_runs"]
    runs = -(-len(x) // plan["batch"])
    per_run = plan["total_cycles"]
    blocks = [e for e in plan["layers"] if e["block"] != "host"]
    # the roofline summed over the block layers that have one (layers run one after another)
    roof = (sum(e["roofline_cycles"] for e in blocks)
            if blocks and all("roofline_cycles" in e for e in blocks) else None)
    report = {"block": "model", "model": plan["model"], "engine": engine,
              "rtl_layer_runs": rtl_runs, "inputs": int(len(x)), "batch": plan["batch"],
              "layers": layers, "cycles_per_batch": per_run, "cycles": per_run * runs,
              "cycles_kind": "predicted by the exact cycle models, end to end per block "
                             "layer, layers in sequence; host operators not counted",
              "roofline_cycles_per_batch": roof,
              "efficiency_vs_roofline": (roof / per_run if roof is not None and per_run
                                         else None),
              "fmax_mhz": fmax, "latency_us_per_batch": per_run / fmax,
              "inputs_per_second": plan["batch"] * fmax * 1e6 / per_run if per_run else None,
              "fmax_source": fmax_source,
              "measured_cycles": sum(measured.values()) if measured else None,
              "measured_latency_us_per_batch": (sum(measured.values()) / runs / fmax
                                                if measured else None),
              "measured_inputs_per_second": (len(x) * fmax * 1e6 / sum(measured.values())
                                             if measured else None),
              "measured_cycles_kind": "RTL, per block-layer run from its first input to its "
                                      "last output transfer, summed over all inputs",
              "max_abs_error_vs_onnxruntime": float(np.max(np.abs(y - ref))),
              "output_range": float(np.max(np.abs(ref)))}
    if labels is not None:
        report["accuracy"] = float(np.mean(np.argmax(y, axis=1) == labels))
        report["accuracy_onnxruntime"] = float(np.mean(np.argmax(ref, axis=1) == labels))
    return report


def _plot(report) -> bytes:
    """PNG of the block layers' predicted cycles (one bar each, coloured by block)."""
    import io
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    layers = [e for e in report["layers"] if e["block"] != "host"]
    colours = {"conv": "#6a9fd4", "spmv": "#d9822b", "fc": "#7fb069", "lstm": "#a26bb3"}
    fig, ax = plt.subplots(figsize=(max(5, 0.6 * len(layers) + 2), 3.4))
    ax.bar(range(len(layers)), [e["cycles"] for e in layers],
           color=[colours[e["block"]] for e in layers])
    ax.set_xticks(range(len(layers)), [f"{e['name']}\n({e['block']})" for e in layers],
                  fontsize=7, rotation=45, ha="right")
    ax.set_ylabel("cycles per batch (predicted)")
    ax.set_title(f"{report['model']}: {report['cycles_per_batch']:,} cycles per batch of "
                 f"{report['batch']}", fontsize=9)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


def run(args) -> int:
    from gen.model.graph import load_onnx
    from gen.model.reference import run_onnxruntime
    from gen.model.run import run_plan
    if args.fmax is not None and args.fmax_from is not None:
        raise SpnnError("give --fmax or --fmax-from, not both")
    fmax = float(int_arg(args.fmax if args.fmax is not None else 150, "--fmax", 1, 2000))
    fmax_source = "--fmax" if args.fmax is not None else "default (the shells' Fmax goal)"
    outputs = run_outputs(args)
    outputs.file(args.plot, "--plot", suffix=".png")
    if args.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise SpnnError("--plot needs matplotlib (pip install 'spnn[ml]')") from None
    plan, model_path = _load_plan(args.plan)
    if args.fmax_from is not None:
        from gen.model.fmax import fmax_from_reports
        fmax, fmax_source = fmax_from_reports(
            args.fmax_from, {e["block"] for e in plan["layers"] if e["block"] != "host"})
    graph = load_onnx(model_path, flag="--plan")
    x, labels = _inputs(args, graph)
    y, info = run_plan(graph, plan, x, engine=args.engine, sim=args.sim)
    y = y.reshape(len(x), -1)
    ref = run_onnxruntime(model_path, graph.input, x).reshape(len(x), -1)
    report = _report(plan, args, x, y, ref, labels, args.engine, info, fmax, fmax_source)
    outputs.npy(args.out, y)
    outputs.json(args.report, report)
    if args.plot:
        outputs.data(args.plot, _plot(report))
    outputs.commit()
    print(f"{plan['model']}: {len(x)} inputs, {report['cycles_per_batch']:,} cycles per batch "
          f"of {plan['batch']} (predicted), max |error| vs onnxruntime "
          f"{report['max_abs_error_vs_onnxruntime']:.4g} (output range "
          f"{report['output_range']:.4g})"
          + (f", accuracy {report['accuracy']:.4f}" if labels is not None else ""))
    return 0
