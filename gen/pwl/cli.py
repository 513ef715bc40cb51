# SPDX-License-Identifier: Apache-2.0
"""``spnn run pwl``: run inputs through the piecewise-linear sigmoid/tanh RTL."""

import numpy as np

from gen.core.config import SpnnError
from gen.core.fixed import decode
from gen.pwl import PwlConfig, fit_table, float_func, ref_pwl
from gen.pwl.twin import rtl_pwl, rtl_pwl_axi
from gen.core.runutil import (add_common_arguments, check_common, check_not_empty, codes_of,
                              config_or_error, format_arg, int_arg, load_npy, make_report,
                              roofline_fields, run_outputs)

HELP = "piecewise-linear sigmoid/tanh unit"
DESCRIPTION = """\
Run the values in a .npy file through the RTL of the PWL unit and write the results.

Integer input holds codes of --in-fmt (every code must lie in its range) and the output
.npy then holds integer codes of --out-fmt.  Float input holds real values: they are
quantised to --in-fmt (round half up; a value outside the format's range is an error,
never clipped) and the output holds real values (float64).  --raw insists on integer
codes in and out (float input is then an error).

--bus-words N runs the accelerator shell instead of the bare unit: N units behind
AXI4-Stream beats of N words and AXI4-Lite control (docs/pwl.md, "Accelerator shell"); the
report then gives end-to-end cycles (first input beat to last output beat), the shell's
performance counters and the roofline bound (one beat per clock).

Examples:
  spnn run pwl --func sigmoid --input x.npy --out y.npy --report r.json
  spnn run pwl --func tanh --bus-words 8 --input x.npy --report r.json
  spnn run pwl --func tanh --segments 16 --input codes.npy --raw --out y.npy --sim icarus
"""

_FLAGS = {"func": "--func", "segments": "--segments", "in_fmt": "--in-fmt",
          "out_fmt": "--out-fmt", "bus_words": "--bus-words"}


def add_arguments(parser):
    parser.add_argument("--func", required=True, help="sigmoid or tanh")
    parser.add_argument("--input", required=True, metavar="X.npy", help="input values (any shape)")
    parser.add_argument("--out", metavar="Y.npy", help="write the results here (same shape)")
    parser.add_argument("--segments", default="32", help="segments, power of two 2..256 "
                        "(default 32)")
    parser.add_argument("--in-fmt", default="Q4.12", help="input format (default Q4.12)")
    parser.add_argument("--out-fmt", default="Q2.14", help="output format (default Q2.14)")
    parser.add_argument("--raw", action="store_true", help="integer codes in and out")
    parser.add_argument("--bus-words", default=None, metavar="N",
                        help="run the AXI accelerator shell with N words per beat (1..32)")
    add_common_arguments(parser)


def _config(args) -> PwlConfig:
    segments = int_arg(args.segments, "--segments")
    in_fmt = format_arg(args.in_fmt, "--in-fmt")
    out_fmt = format_arg(args.out_fmt, "--out-fmt")
    bus_words = 1 if args.bus_words is None else int_arg(args.bus_words, "--bus-words")
    return config_or_error(PwlConfig, _FLAGS, func=args.func, segments=segments,
                           in_fmt=in_fmt, out_fmt=out_fmt, bus_words=bus_words)


def _prepare(args):
    """Everything checked and converted before any work: (cfg, codes, codes_out, outputs)."""
    cfg = _config(args)
    check_common(args)
    outputs = run_outputs(args)
    x = load_npy(args.input, "--input")
    check_not_empty(x, "--input")
    if args.raw and x.dtype.kind not in "biu":
        raise SpnnError(f"--input with --raw must hold integer codes, not {x.dtype}")
    codes = codes_of(x, cfg.in_fmt, "--input", "--in-fmt")
    return cfg, codes, x.dtype.kind in "biu", outputs


def run(args) -> int:
    cfg, codes, codes_out, outputs = _prepare(args)
    table = fit_table(cfg)
    flat = codes.ravel()
    if args.bus_words is not None:
        y, shell = rtl_pwl_axi(flat, cfg, args.sim, seed=args.seed)
    else:
        y, result = rtl_pwl(flat, cfg, args.sim, seed=args.seed, waves=args.waves)
    golden = ref_pwl(flat, table)
    if not np.array_equal(y, golden):
        bad = int(np.flatnonzero(y != golden)[0])
        raise SystemExit(f"spnn: internal error: RTL differs from the golden model at "
                         f"sample {bad} ({y[bad]} != {golden[bad]})")
    real_out = decode(y, cfg.out_fmt)
    truth = float_func(cfg.func)(decode(flat, cfg.in_fmt))
    err = float(np.max(np.abs(real_out - truth)))
    outputs.npy(args.out, (y if codes_out else real_out).reshape(codes.shape))
    latency = cfg.latency
    if args.bus_words is not None:
        cycles = shell["end"] - shell["first_in"] + 1
        beats = -(-len(flat) // cfg.bus_words)
        roof = roofline_fields(cycles, beats, {"s_axis_x": beats, "m_axis_y": beats}, latency)
        ideal = roof["roofline_cycles"]
        extra = {"interface": "axi", "bus_words": cfg.bus_words, "counters": shell["counters"],
                 **roof, "roofline_efficiency": roof["efficiency_vs_roofline"]}
    else:
        first = result["sources"]["i"]["cycles"][0]
        cycles = result["sinks"]["o"]["cycles"][-1] - first + 1
        ideal, extra = len(flat) + latency, {"interface": "stream"}
    report = make_report(
        "pwl", cfg, {"input": cfg.in_fmt.to_dict(), "output": cfg.out_fmt.to_dict()},
        args.sim, cycles, ideal, len(flat), err, **extra,
        utilisation=len(flat) / (cycles * cfg.bus_words), func=cfg.func, segments=cfg.segments,
        latency=latency, placement=table.placement,
        input_kind="codes" if codes_out else "real", output_kind="codes" if codes_out
        else "real",
        saturated_inputs=int(np.sum((flat == cfg.in_fmt.min_code)
                                    | (flat == cfg.in_fmt.max_code))),
        table_max_abs_error=table.max_abs_error, rtl_matches_golden=True,
    )
    outputs.json(args.report, report)
    outputs.commit()
    print(f"pwl {cfg.func}: {len(flat)} samples, {cycles} cycles (ideal {ideal}), "
          f"max |error| vs float {err:.3g}")
    return 0
