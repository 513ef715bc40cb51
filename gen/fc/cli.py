# SPDX-License-Identifier: Apache-2.0
"""``spnn run fc``: Y = W @ X on the RTL of the FD-CSR FC engine (zeros of W skipped)."""

import math

import numpy as np

from gen.core.config import SpnnError
from gen.fc import FcConfig, dense_cycles, encode, fc_schedule, ref_fc, storage_bits
from gen.fc.twin import axi_job, rtl_fc, rtl_fc_axi
from gen.core.fixed import QFormat, decode
from gen.core.runutil import (add_common_arguments, check_common, check_not_empty, codes_of,
                              config_or_error, format_arg, int_arg, load_npy, make_report,
                              roofline_fields, run_outputs, signed_bits)

HELP = "batched FC engine on FD-CSR weights (seed 001)"
DESCRIPTION = """\
Compute Y = W @ X with the RTL of the FD-CSR FC engine: W (rows x cols) is encoded as
FD-CSR and only its non-zeros are issued; X (cols x N) is a batch of N activation
vectors held on chip.  The engine has LANES multipliers: with LANES = N, 2N or 4N it
issues LANES / N non-zeros per clock; with LANES < N the batch runs in ceil(N / LANES)
passes of LANES columns (the weights are streamed once per pass).

Integer arrays hold codes: of --w-fmt / --x-fmt when given, otherwise of the narrowest
integer format that holds them (QN.0), so integer W and X give the exact integer W @ X.
Float arrays hold real values, quantised (round half up) to --w-fmt (default Q2.14) /
--x-fmt (default Q4.12); a value outside the format's range is an error, never clipped.
The output holds the exact integer sums (codes of Q(w.int + x.int + log2 cols,
w.frac + x.frac)) when both inputs are integer codes, real values (float64) otherwise.
--raw insists on integer codes in and out (float input is then an error).

--bus-words N runs the accelerator shell instead of the bare engine (docs/fc.md,
"Accelerator shell"): X, the FD-CSR metadata, the weight values and Y over AXI4-Stream,
N / batch rows of X and of Y per beat (N = 1 or a multiple of the hardware batch), each
pass a job started over AXI4-Lite.  The report then gives end-to-end cycles (first input
beat to last result beat of each pass, loads included), the shell's counters and the
roofline bound.

Examples:
  spnn run fc --weights W.npy --x X.npy --out Y.npy --report r.json
  spnn run fc --weights W.npy --x X.npy --lanes 8 --raw --sim icarus
  spnn run fc --weights W.npy --x X.npy --bus-words 8 --report r.json
"""


def add_arguments(parser):
    parser.add_argument("--weights", required=True, metavar="W.npy",
                        help="weights, rows x cols")
    parser.add_argument("--x", required=True, metavar="X.npy", help="activations, cols x N")
    parser.add_argument("--lanes", help="multipliers: N (default), 2N, 4N, or fewer than N "
                        "(the batch then runs in passes)")
    parser.add_argument("--out", metavar="Y.npy", help="write Y (rows x N) here")
    parser.add_argument("--w-fmt", default=None, help="weight format (default: Q2.14 for "
                        "float weights, sized to the codes for integer weights)")
    parser.add_argument("--x-fmt", default=None, help="activation format (default: Q4.12 "
                        "for float activations, sized to the codes for integers)")
    parser.add_argument("--segs-per-beat", default="4", help="FD-CSR segments per meta "
                        "transfer: 1, 2, 4 (default) or 8")
    parser.add_argument("--raw", action="store_true", help="integer codes in and out")
    parser.add_argument("--bus-words", default=None, metavar="N",
                        help="run through the AXI accelerator shell, N words per beat (1, or "
                        "a multiple of the batch: N / batch rows per beat; 1..32)")
    add_common_arguments(parser)


def _codes(arr, fmt, name, fmt_name, raw):
    """The input rule of every ``spnn run``: integer codes (of ``fmt`` when given, else of
    the narrowest QN.0 holding them) or real values quantised to ``fmt`` (the default when
    not given).  Returns (codes, format, is_integer)."""
    if arr.dtype.kind in "biu":
        if fmt is None:
            bits = signed_bits(arr)
            if bits > 24:
                raise SpnnError(f"{name}: integer values need {bits} bits; the FC engine "
                                f"takes at most 24")
            fmt = QFormat(bits, 0)
        return codes_of(arr, fmt, name, fmt_name), fmt, True
    if raw:
        raise SpnnError(f"{name} with --raw must hold integer codes, not {arr.dtype}")
    fmt = fmt or _DEFAULT_FMT[fmt_name]
    return codes_of(arr, fmt, name, fmt_name), fmt, False


_DEFAULT_FMT = {"--w-fmt": QFormat(2, 14), "--x-fmt": QFormat(4, 12)}
_FLAGS = {"batch": "--lanes", "segs_per_beat": "--segs-per-beat", "w_fmt": "--w-fmt",
          "x_fmt": "--x-fmt", "max_cols": "the number of --weights columns",
          "max_rows": "the number of --weights rows", "bus_words": "--bus-words"}


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


def _prepare(args):
    """Everything checked and converted before any work: (w, x, codes, formats, cfg, fd,
    plan, outputs)."""
    w_fmt = format_arg(args.w_fmt, "--w-fmt", 2, 24) if args.w_fmt is not None else None
    x_fmt = format_arg(args.x_fmt, "--x-fmt", 2, 24) if args.x_fmt is not None else None
    segs = int_arg(args.segs_per_beat, "--segs-per-beat")
    if segs not in (1, 2, 4, 8):
        raise SpnnError(f"--segs-per-beat must be 1, 2, 4 or 8, not {segs}")
    lanes = None if args.lanes is None else int_arg(args.lanes, "--lanes", 1, 256)
    bus_words = None if args.bus_words is None else int_arg(args.bus_words, "--bus-words",
                                                            1, 32)
    check_common(args)
    outputs = run_outputs(args)
    w = load_npy(args.weights, "--weights")
    x = load_npy(args.x, "--x")
    if w.ndim != 2:
        raise SpnnError(f"--weights must be a 2-D array (rows x cols), not {w.ndim}-D {w.shape}")
    if x.ndim == 1:
        x = x.reshape(-1, 1)
    if x.ndim != 2:
        raise SpnnError(f"--x must be a 2-D array (cols x N), not {x.ndim}-D {x.shape}")
    check_not_empty(w, "--weights")
    check_not_empty(x, "--x")
    rows, cols = w.shape
    if x.shape[0] != cols:
        raise SpnnError(f"--x must have {cols} rows (the columns of --weights), "
                        f"not {x.shape[0]}")
    if cols > 65536 or rows > 65535:
        raise SpnnError(f"--weights must be at most 65535 x 65536, not {rows} x {cols}")
    n = x.shape[1]
    batch, k, passes = _plan(n if lanes is None else lanes, n)
    if bus_words not in (None, 1) and bus_words % batch:
        raise SpnnError(f"--bus-words must be 1 or a multiple of the hardware batch "
                        f"{batch} (whole rows of X per beat), not {bus_words}")
    wc, w_fmt, w_int = _codes(w, w_fmt, "--weights", "--w-fmt", args.raw)
    xc, x_fmt, x_int = _codes(x, x_fmt, "--x", "--x-fmt", args.raw)
    fd = encode(wc)
    beat_cols = 16 * segs
    cfg = config_or_error(FcConfig, _FLAGS, batch=batch, nz_per_clock=k, segs_per_beat=segs,
                          w_fmt=w_fmt, x_fmt=x_fmt,
                          max_cols=max(beat_cols, -(-cols // beat_cols) * beat_cols),
                          max_rows=rows, addr_width=max(4, fd.nnz.bit_length()),
                          bus_words=bus_words or 1)
    return w, x, wc, xc, w_int and x_int, cfg, fd, (batch, passes), outputs


def _rtl_passes(args, wc, xc, cfg, sched, batch, passes):
    """The bare engine, one run per pass: (Y codes, cycles), RTL == golden and RTL cycles
    == model checked."""
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
    return np.concatenate(ys, axis=1), cycles


def _axi_passes(args, wc, xc, cfg, sched, batch, passes):
    """Through the accelerator shell, one job per pass: (Y codes, cycles end to end, the
    report's shell fields), RTL == golden checked."""
    parts = [xc[:, p * batch:(p + 1) * batch] for p in range(passes)]
    ys, records = rtl_fc_axi([wc] * passes, parts, cfg, args.sim, seed=args.seed,
                             name="cli-axi")
    for part, y in zip(parts, ys):
        golden = ref_fc(wc, part, cfg)
        if not np.array_equal(y, golden):
            bad = np.argwhere(y != golden)[0]
            raise SystemExit(f"spnn: internal error: RTL differs from the golden model at "
                             f"{tuple(int(i) for i in bad)}")
    cycles = sum(r["end"] - r["first_in"] + 1 for r in records)
    job = axi_job(wc, parts[0], cfg)
    per_row = cfg.rows_per_beat
    rows, cols = wc.shape
    beats = {"s_axis_x": passes * -(-cols // per_row),
             "s_axis_meta": passes * len(job["packets"]["s_axis_meta"]),
             "s_axis_vdata": passes * len(job["packets"]["s_axis_vdata"]) // cfg.nz_per_clock,
             "m_axis_y": passes * -(-rows // per_row)}
    counters = {k: sum(r["counters"][k] for r in records) for k in records[0]["counters"]}
    roof = roofline_fields(cycles, passes * sched["ideal_cycles"], beats)
    return np.concatenate(ys, axis=1), cycles, dict(
        interface="axi", bus_words=cfg.bus_words, rows_per_beat=per_row, counters=counters,
        **roof, utilisation_counts="nnz x N / (lanes x end-to-end cycles): loads and "
        "result stream included")


def run(args) -> int:
    w, x, wc, xc, codes_out, cfg, fd, (batch, passes), outputs = _prepare(args)
    rows, cols = w.shape
    n = x.shape[1]
    w_fmt, x_fmt = cfg.w_fmt, cfg.x_fmt
    sched = fc_schedule(fd, cfg)
    shell = {}
    if args.bus_words is None:
        yc, cycles = _rtl_passes(args, wc, xc, cfg, sched, batch, passes)
    else:
        yc, cycles, shell = _axi_passes(args, wc, xc, cfg, sched, batch, passes)
    y_real = decode(yc, cfg.y_fmt)
    bound = 0.0
    if codes_out:
        exact = wc.astype(object) @ xc.astype(object)
        err = float(np.max(np.abs(yc.astype(object) - exact)))
    else:
        # Integer arrays are codes: their real values are code x lsb of their format.
        w_real = decode(wc, w_fmt) if w.dtype.kind in "biu" else w.astype(np.float64)
        x_real = decode(xc, x_fmt) if x.dtype.kind in "biu" else x.astype(np.float64)
        err = float(np.max(np.abs(y_real - w_real @ x_real)))
        # The sums are exact; only input quantisation errs (nothing saturates: refused):
        # |Wq Xq - W X| <= |Wq| |Xq - X| + |Wq - W| |X| <= lsb_x/2 sum|Wq| + lsb_w/2 sum|X|,
        # where an integer (code) input contributes no quantisation error.
        wq = decode(wc, w_fmt)
        dx = 0.0 if x.dtype.kind in "biu" else x_fmt.lsb / 2
        dw = 0.0 if w.dtype.kind in "biu" else w_fmt.lsb / 2
        bound = float(np.max(np.abs(wq).sum(axis=1, keepdims=True) * dx
                             + dw * np.abs(x_real).sum(axis=0, keepdims=True)))
    outputs.npy(args.out, yc if codes_out else y_real)
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
        rtl_matches_golden=True, **({"rtl_cycles_match_model": True} if not shell else {}),
        **shell,
    )
    outputs.json(args.report, report)
    outputs.commit()
    model = passes * sched["cycles"]
    if shell:
        print(f"fc: {rows}x{cols} @ {cols}x{n}, {fd.nnz} non-zeros, AXI shell at "
              f"{cfg.bus_words} words per beat, {cfg.lanes} lanes x {passes} pass(es): "
              f"{cycles} cycles end to end (roofline {shell['roofline_cycles']}, "
              f"{shell['roofline_bound']}-bound; efficiency "
              f"{shell['efficiency_vs_roofline']:.3f}); max |error| vs float {err:.3g}")
        return 0
    print(f"fc: {rows}x{cols} @ {cols}x{n}, {fd.nnz} non-zeros "
          f"({100 * fd.nnz / (rows * cols):.1f} %), {cfg.lanes} lanes x {passes} pass(es): "
          f"{cycles} cycles (model {model}, ideal {ideal} + overhead, dense engine {dense}); "
          f"max |error| vs float {err:.3g}")
    return 0
