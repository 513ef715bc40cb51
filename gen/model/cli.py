# SPDX-License-Identifier: Apache-2.0
"""``spnn compile MODEL.onnx --calib X.npy -o PLAN/``: the plan of a whole network."""

import argparse
from pathlib import Path

import numpy as np

from gen.core.config import SpnnError, config_from_strings
from gen.core.outputs import Outputs
from gen.core.runutil import int_arg, load_npy

__all__ = ["register"]

DESCRIPTION = """\
Compile an ONNX model (float, or QDQ-quantised weights) for spnn's blocks: every Conv goes to
the MAC array (best mapping and host tiling), every Gemm/MatMul to the sparse PE array
(batch 1, density <= 0.5) or the FD-CSR FC engine, every LSTM (forward, default
activations, zero initial state) to the LSTM engine, ReLU/pooling/flatten/residual Add and
the selection of one LSTM step to the host; BatchNormalization is folded into its Conv. Fixed-point formats are calibrated on the
sample inputs (--calib, batch first, the model's input shape). Writes PLAN/plan.json (per
layer: block, config, formats, mapping, weight footprint, predicted cycles from the exact
cycle models), PLAN/plan.md (the same as a table) and PLAN/model.onnx (a copy of the model,
read by 'spnn run model --plan PLAN/').

Examples:
  spnn compile cnn.onnx --calib x.npy -o plan/
  spnn compile cnn.onnx --calib x.npy --batch 16 --set conv.rows=128 --set conv.cols=16 -o plan/
  spnn compile lstm.onnx --calib seqs.npy --batch 16 --set lstm.pes=8 -o plan/
"""

BLOCK_CONFIGS = ("conv", "spmv", "fc", "lstm")


def _config_sets(pairs):
    """``--set BLOCK.KEY=VALUE`` -> ``{block: {key: value}}``, checked."""
    out = {}
    for pair in pairs or []:
        if "=" not in pair or "." not in pair.split("=", 1)[0]:
            raise SpnnError(f"--set must be BLOCK.KEY=VALUE (BLOCK one of "
                            f"{', '.join(BLOCK_CONFIGS)}), not {pair!r}")
        key, value = pair.split("=", 1)
        block, field = key.strip().split(".", 1)
        if block not in BLOCK_CONFIGS:
            raise SpnnError(f"--set {key}: block must be one of {', '.join(BLOCK_CONFIGS)}, "
                            f"not {block!r}")
        out.setdefault(block, {})[field] = value.strip()
    return out


def _configs(pairs):
    from gen.model.compile import config_classes
    classes = config_classes()
    out = {}
    for block, fields in _config_sets(pairs).items():
        try:
            out[block] = config_from_strings(classes[block], fields)
        except SpnnError as exc:
            msg = str(exc)
            sep = "." if any(msg.startswith(f + " ") for f in fields) else ": "
            raise SpnnError(f"--set {block}{sep}{msg}") from None
    return out


def _compile(args):
    from gen.model.compile import compile_model, plan_table
    from gen.model.graph import load_onnx
    batch = int_arg(args.batch, "--batch", 1, 4096)
    cfgs = _configs(args.set)
    outputs = Outputs()
    folder = outputs.folder(args.output, "-o")
    graph = load_onnx(args.model, flag="MODEL")
    calib = load_npy(args.calib, "--calib")
    if calib.ndim < 2 or tuple(calib.shape[1:]) != tuple(graph.input_shape):
        raise SpnnError(f"--calib {args.calib}: shape {calib.shape} does not match the model "
                        f"input (batch, {', '.join(map(str, graph.input_shape))})")
    if calib.shape[0] == 0 or not np.all(np.isfinite(calib)):
        raise SpnnError(f"--calib {args.calib}: needs at least one sample and finite values")
    plan = compile_model(graph, calib, batch=batch, cfgs=cfgs, name=Path(args.model).name)
    outputs.json(folder / "plan.json", plan)
    outputs.text(folder / "plan.md", plan_table(plan))
    # the plan folder is self-contained: `spnn run model --plan PLAN/` reads the weights here
    outputs.data(folder / "model.onnx", Path(args.model).read_bytes())
    outputs.commit()
    print(plan_table(plan), end="")
    print(f"wrote {folder / 'plan.json'}, {folder / 'plan.md'} and {folder / 'model.onnx'}")
    return 0


def register(subparsers):
    """Add the top-level ``compile`` command."""
    p = subparsers.add_parser("compile", help="plan a whole ONNX network onto the blocks",
                              description=DESCRIPTION,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", metavar="MODEL.onnx", help="the network (ONNX)")
    p.add_argument("--calib", required=True, metavar="X.npy",
                   help="sample inputs, batch first, for the fixed-point formats")
    p.add_argument("--batch", default="1", help="inputs per run, 1..4096 (default 1)")
    p.add_argument("--set", action="append", metavar="BLOCK.KEY=VALUE",
                   help="a block config parameter (repeatable), e.g. conv.rows=128")
    p.add_argument("-o", "--output", required=True, metavar="PLAN/", help="output folder")
    p.set_defaults(handler=_compile)
