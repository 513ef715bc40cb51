# SPDX-License-Identifier: Apache-2.0
"""``spnn run fc``: Y = W @ X on the RTL of the FD-CSR FC engine (zeros of W skipped)."""

import math

import numpy as np

from .config import SpnnError
from .fdcsr import (FcConfig, dense_cycles, encode, fc_schedule, ref_fc, rtl_fc,
                    storage_bits)
from .fixed import decode, parse_format, quantise
from .runutil import add_common_arguments, check_finite, int_arg, load_npy, make_report, \
    write_npy, write_report

HELP = "batched FC engine on FD-CSR weights (seed 001)"
DESCRIPTION = """\
Compute Y = W @ X with the RTL of the FD-CSR FC engine: W (rows x cols) is encoded as
FD-CSR and only its non-zeros are issued; X (cols x N) is a batch of N activation
vectors held on chip.  The engine has LANES multipliers: with LANES = N, 2N or 4N it
issues LANES / N non-zeros per clock; with LANES < N the batch runs in ceil(N / LANES)
passes of LANES columns (the weights are streamed once per pass).

Float input is quantised (round half up, saturate) to --w-fmt / --x-fmt and the output
holds real values; with --raw both inputs must hold integer codes and the output holds
the exact integer sums (format Q(w.int + x.int + log2 cols, w.frac + x.frac)).

Examples:
  spnn run fc --weights W.npy --x X.npy --out Y.npy --report r.json
  spnn run fc --weights W.npy --x X.npy --lanes 8 --raw --sim icarus
"""


def add_arguments(parser):
    parser.add_argument("--weights", required=True, metavar="W.npy",
                        help="weights, rows x cols")
    parser.add_argument("--x", required=True, metavar="X.npy", help="activations, cols x N")
    parser.add_argument("--lanes", help="multipliers: N (default), 2N, 4N, or fewer than N "
                        "(the batch then runs in passes)")
    parser.add_argument("--out", metavar="Y.npy", help="write Y (rows x N) here")
    parser.add_argument("--w-fmt", default="Q2.14", help="weight format (default Q2.14)")
    parser.add_argument("--x-fmt", default="Q4.12", help="activation format (default Q4.12)")
    parser.add_argument("--segs-per-beat", default="4", help="FD-CSR segments per meta "
                        "transfer: 1, 2, 4 (default) or 8")
    parser.add_argument("--raw", action="store_true", help="integer codes in and out")
    add_common_arguments(parser)


def _codes(arr, fmt, name, raw):
    if raw:
        if arr.dtype.kind not in "iub":
            raise SpnnError(f"{name} with --raw must hold integer codes, not {arr.dtype}")
        a = arr.astype(np.int64)
        if a.min() < fmt.min_code or a.max() > fmt.max_code:
            raise SpnnError(f"{name} codes must lie in [{fmt.min_code}, {fmt.max_code}] for "
                            f"{fmt}, found {a.min()}..{a.max()}")
        return a
    check_finite(arr, name)
    return quantise(arr.astype(np.float64), fmt)


def _plan(lanes, n):
    """(hardware batch, non-zeros per clock, passes) for LANES multipliers and N inputs."""
    if lanes < 1:
        raise SpnnError(f"--lanes must be at least 1, not {lanes}")
    if lanes >= n:
        if lanes % n or lanes // n not in (1, 2, 4):
            raise SpnnError(f"--lanes must be N={n}, 2N={2 * n}, 4N={4 * n} or below N, "
                            f"not {lanes}")
        return n, lanes // n, 1
    return lanes, 1, math.ceil(n / lanes)


def run(args) -> int:
    w_fmt = parse_format(args.w_fmt, "--w-fmt")
    x_fmt = parse_format(args.x_fmt, "--x-fmt")
    w = load_npy(args.weights, "--weights")
    x = load_npy(args.x, "--x")
    if w.ndim != 2:
        raise SpnnError(f"--weights must be a 2-D array (rows x cols), not {w.ndim}-D {w.shape}")
    if x.ndim == 1:
        x = x.reshape(-1, 1)
    if x.ndim != 2:
        raise SpnnError(f"--x must be a 2-D array (cols x N), not {x.ndim}-D {x.shape}")
    if w.size == 0 or x.size == 0:
        raise SpnnError("--weights and --x must not be empty")
    rows, cols = w.shape
    if x.shape[0] != cols:
        raise SpnnError(f"--x must have {cols} rows (the columns of --weights), "
                        f"not {x.shape[0]}")
    if cols > 65536 or rows > 65535:
        raise SpnnError(f"--weights must be at most 65535 x 65536, not {rows} x {cols}")
    n = x.shape[1]
    lanes = n if args.lanes is None else int_arg(args.lanes, "--lanes")
    batch, k, passes = _plan(lanes, n)
    segs = int_arg(args.segs_per_beat, "--segs-per-beat")
    wc = _codes(w, w_fmt, "--weights", args.raw)
    xc = _codes(x, x_fmt, "--x", args.raw)
    fd = encode(wc)
    beat_cols = 16 * segs
    try:
        cfg = FcConfig(batch=batch, nz_per_clock=k, segs_per_beat=segs, w_fmt=w_fmt,
                       x_fmt=x_fmt, max_cols=max(beat_cols, -(-cols // beat_cols) * beat_cols),
                       max_rows=rows, addr_width=max(4, fd.nnz.bit_length()))
    except (TypeError, ValueError) as exc:
        msg = str(exc)
        for field, flag in (("batch", "--lanes"), ("segs_per_beat", "--segs-per-beat"),
                            ("w_fmt", "--w-fmt"), ("x_fmt", "--x-fmt"),
                            ("max_cols", "cols")):
            msg = msg.replace(field, flag, 1) if msg.startswith(field) else msg
        raise SpnnError(msg) from None

    sched = fc_schedule(fd, cfg)
    ys, cycles = [], 0
    for p in range(passes):
        part = xc[:, p * batch:(p + 1) * batch]
        y, result = rtl_fc(wc, part, cfg, args.sim, seed=args.seed, waves=args.waves,
                           name=f"cli{p}")
        golden = ref_fc(wc, part, cfg)
        if not np.array_equal(y, golden):
            bad = np.argwhere(y != golden)[0]
            raise SystemExit(f"spnn: internal error: RTL differs from the golden model at "
                             f"{tuple(int(i) for i in bad)}")
        took = result["sinks"]["y"]["cycles"][-1] - result["sources"]["cmd"]["cycles"][0] + 1
        if took != sched["cycles"]:
            raise SystemExit(f"spnn: internal error: RTL took {took} cycles, model "
                             f"{sched['cycles']}")
        cycles += took
        ys.append(y)
    yc = np.concatenate(ys, axis=1)
    y_real = decode(yc, cfg.y_fmt)
    bound = 0.0
    if args.raw:
        err = 0.0
    else:
        exact = w.astype(np.float64) @ x.astype(np.float64)
        err = float(np.max(np.abs(y_real - exact)))
        # The sums are exact; only input quantisation errs (when nothing saturated):
        # |Wq Xq - W X| <= |Wq| |Xq - X| + |Wq - W| |X| <= lsb_x/2 sum|Wq| + lsb_w/2 sum|X|.
        wq = decode(wc, w_fmt)
        bound = float(np.max(np.abs(wq).sum(axis=1, keepdims=True) * x_fmt.lsb / 2
                             + w_fmt.lsb / 2 * np.abs(x).sum(axis=0, keepdims=True)))
    if args.out:
        write_npy(args.out, yc if args.raw else y_real)
    ideal = passes * sched["ideal_cycles"]
    bits = storage_bits((rows, cols), fd.nnz, w_fmt.width)
    dense = passes * dense_cycles(rows, cols, cfg)
    report = make_report(
        "fc", cfg, {"weights": w_fmt.to_dict(), "activations": x_fmt.to_dict(),
                    "output": cfg.y_fmt.to_dict()},
        args.sim, cycles, ideal, n, err,
        utilisation=fd.nnz * n / (cfg.lanes * cycles),
        rows=rows, cols=cols, batch=n, lanes=cfg.lanes, passes=passes, nnz=fd.nnz,
        density=fd.nnz / (rows * cols), model_cycles=passes * sched["cycles"],
        fixed_overhead=passes * sched["fixed_overhead"], dense_engine_cycles=dense,
        speedup_vs_dense=dense / cycles,
        weight_bytes={key: bits[key] / 8 for key in ("dense", "csr", "fdcsr", "fdcsr32")},
        error_bound_if_unsaturated=bound,
        rtl_matches_golden=True, rtl_cycles_match_model=True,
    )
    if args.report:
        write_report(args.report, report)
    model = passes * sched["cycles"]
    print(f"fc: {rows}x{cols} @ {cols}x{n}, {fd.nnz} non-zeros "
          f"({100 * fd.nnz / (rows * cols):.1f} %), {cfg.lanes} lanes x {passes} pass(es): "
          f"{cycles} cycles (model {model}, ideal {ideal} + overhead, dense engine {dense}); "
          f"max |error| vs float {err:.3g}")
    return 0
