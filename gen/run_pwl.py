# SPDX-License-Identifier: Apache-2.0
"""``spnn run pwl``: run inputs through the piecewise-linear sigmoid/tanh RTL."""

import numpy as np

from .config import SpnnError
from .fixed import decode, parse_format, quantise
from .pwl import PwlConfig, fit_table, float_func, ref_pwl, rtl_pwl
from .runutil import add_common_arguments, check_finite, int_arg, load_npy, make_report, \
    write_npy, write_report

HELP = "piecewise-linear sigmoid/tanh unit"
DESCRIPTION = """\
Run the values in a .npy file through the RTL of the PWL unit and write the results.

Float input is quantised to the input format (round half up, saturate); the output
.npy holds real values (float64).  With --raw the input must hold integer codes of
the input format and the output holds integer codes of the output format.

Examples:
  spnn run pwl --func sigmoid --input x.npy --out y.npy --report r.json
  spnn run pwl --func tanh --segments 16 --input codes.npy --raw --out y.npy --sim icarus
"""


def add_arguments(parser):
    parser.add_argument("--func", required=True, help="sigmoid or tanh")
    parser.add_argument("--input", required=True, metavar="X.npy", help="input values (any shape)")
    parser.add_argument("--out", metavar="Y.npy", help="write the results here (same shape)")
    parser.add_argument("--segments", default="32", help="segments, power of two 2..256 "
                        "(default 32)")
    parser.add_argument("--in-fmt", default="Q4.12", help="input format (default Q4.12)")
    parser.add_argument("--out-fmt", default="Q2.14", help="output format (default Q2.14)")
    parser.add_argument("--raw", action="store_true", help="integer codes in and out")
    add_common_arguments(parser)


def _config(args) -> PwlConfig:
    segments = int_arg(args.segments, "--segments")
    try:
        return PwlConfig(func=args.func, segments=segments,
                         in_fmt=parse_format(args.in_fmt, "--in-fmt"),
                         out_fmt=parse_format(args.out_fmt, "--out-fmt"))
    except (TypeError, ValueError) as exc:
        raise SpnnError(str(exc).replace("func ", "--func ", 1)
                        .replace("segments ", "--segments ", 1)) from None


def run(args) -> int:
    cfg = _config(args)
    x = load_npy(args.input, "--input")
    if x.size == 0:
        raise SpnnError("--input must hold at least one value, not an empty array")
    if args.raw:
        if x.dtype.kind not in "iu":
            raise SpnnError(f"--input with --raw must hold integer codes, not {x.dtype}")
        lo, hi = cfg.in_fmt.min_code, cfg.in_fmt.max_code
        if x.min() < lo or x.max() > hi:
            raise SpnnError(f"--input codes must lie in [{lo}, {hi}] for {cfg.in_fmt}, "
                            f"found {x.min()}..{x.max()}")
        codes = x.astype(np.int64)
    else:
        check_finite(x, "--input")
        codes = quantise(x.astype(np.float64), cfg.in_fmt)
    table = fit_table(cfg)
    flat = codes.ravel()
    y, result = rtl_pwl(flat, cfg, args.sim, seed=args.seed, waves=args.waves)
    golden = ref_pwl(flat, table)
    if not np.array_equal(y, golden):
        bad = int(np.flatnonzero(y != golden)[0])
        raise SystemExit(f"spnn: internal error: RTL differs from the golden model at "
                         f"sample {bad} ({y[bad]} != {golden[bad]})")
    real_out = decode(y, cfg.out_fmt)
    truth = float_func(cfg.func)(decode(flat, cfg.in_fmt))
    err = float(np.max(np.abs(real_out - truth)))
    if args.out:
        out = y.reshape(codes.shape) if args.raw else real_out.reshape(codes.shape)
        write_npy(args.out, out)
    first = result["sources"]["i"]["cycles"][0]
    cycles = result["sinks"]["o"]["cycles"][-1] - first + 1
    latency = cfg.latency
    report = make_report(
        "pwl", cfg, {"input": cfg.in_fmt.to_dict(), "output": cfg.out_fmt.to_dict()},
        args.sim, cycles, len(flat) + latency, len(flat), err,
        utilisation=len(flat) / cycles, func=cfg.func, segments=cfg.segments,
        latency=latency, placement=table.placement,
        saturated_inputs=int(np.sum((flat == cfg.in_fmt.min_code)
                                    | (flat == cfg.in_fmt.max_code))),
        table_max_abs_error=table.max_abs_error, rtl_matches_golden=True,
    )
    if args.report:
        write_report(args.report, report)
    print(f"pwl {cfg.func}: {len(flat)} samples, {cycles} cycles (ideal {len(flat) + latency}), "
          f"max |error| vs float {err:.3g}")
    return 0
