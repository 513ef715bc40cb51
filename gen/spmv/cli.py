# SPDX-License-Identifier: Apache-2.0
"""``spnn run spmv``: compile a sparse matrix, run ``y = W @ x`` through the engine's RTL."""

import dataclasses
import math

import numpy as np

from gen.core.config import SpnnError
from gen.core.fixed import QFormat, decode
from gen.core.runutil import (add_common_arguments, check_common, check_finite, check_not_empty,
                              codes_of, config_or_error, flag_message, float_arg, format_arg,
                              int_arg, load_npy, make_report, roofline_fields, run_outputs,
                              signed_bits)
from gen.spmv import (ALLOCATORS, SpmvConfig, beat_count, compile_tiled, cycle_model,
                      gather_tiled, order_free, plan_blocks, prune, ref_spmv, roofline_beats,
                      shell_cycles, tile_jobs)
from gen.spmv.twin import rtl_spmv_axi, run_jobs

HELP = "load-balanced sparse matrix-vector engine (seed 000)"
DESCRIPTION = """\
Compile a weight matrix for P processing elements, load it into the RTL of the sparse
matrix-vector engine through its weight stream, stream x in and write y = W @ x.

Integer arrays are taken as codes: by default as plain integers (formats sized to the
data, accumulator sized so that no sum can overflow), which gives the exact integer
W @ x.  Float arrays are quantised (round half up) to --w-fmt (default Q1.7) and
--x-fmt (default Q4.12); values outside the format are an error.  Float weights may be
pruned first with --density.  The output .npy holds integers for integer inputs and
real values (float64) otherwise.

Matrices larger than the memories (--rows-per-pe x P rows, --max-cols columns,
--mem-depth entries per PE) run as a checkerboard of blocks: the next block's weights
load into the second bank while the current one computes; partial sums stay in the
accumulators across a block row.  The weight stream carries --w-lanes words per beat;
--w-valid-prob < 1 inserts random gaps (bandwidth = lanes x prob words per clock).

--bus-words N runs the accelerator shell instead of the bare engine (docs/spmv.md,
"Accelerator shell"): weights, activations and results over AXI4-Stream (N activation /
result words per beat; --w-lanes defaults to min(N, P) weight words per beat and
--drain-lanes to the same when it divides P: that many results per clock and per beat),
the job started over AXI4-Lite.  A matrix that fits one block is cut into the blocks
with the fewest end-to-end cycles by the cycle model (gen.spmv.plan_blocks: the next block
loads while one computes; the columns reordered when no partial sum can saturate, the
ROW words spread over the blocks).  The report then gives end-to-end cycles (first
input beat to last result beat, loads included), the shell's counters and the roofline
bound.

The report's `cycles` run from the first activation accepted to the last accumulator
write of the last block (one block: its compute time incl. the fill and drain of the
PE pipelines; weight loading before it and the one-per-clock result stream after it
are reported as `load_cycles` and `total_cycles`).  `ideal_cycles` = ceil(nnz / P).

Examples:
  spnn run spmv --weights W.npy --x x.npy --out y.npy --report r.json
  spnn run spmv --weights W.npy --x x.npy --pes 8 --alloc zigzag --fifo-depth 4 --sim icarus
  spnn run spmv --weights Wf.npy --x xf.npy --density 0.117 --w-fmt Q1.7 --x-fmt Q4.12
  spnn run spmv --weights W.npy --x x.npy --pes 4 --rows-per-pe 8 --max-cols 16 --sim icarus
  spnn run spmv --weights W.npy --x x.npy --pes 8 --w-lanes 4 --w-valid-prob 0.5
  spnn run spmv --weights W.npy --x x.npy --bus-words 16 --report r.json
"""


def add_arguments(parser):
    parser.add_argument("--weights", required=True, metavar="W.npy",
                        help="weight matrix, rows x cols (integer codes or floats)")
    parser.add_argument("--x", required=True, metavar="x.npy",
                        help="activation vector, length cols (integer codes or floats)")
    parser.add_argument("--pes", default="32", help="processing elements P (default 32)")
    parser.add_argument("--alloc", default="balanced", choices=ALLOCATORS,
                        help="row allocator (default balanced)")
    parser.add_argument("--fifo-depth", default="16",
                        help="activation FIFO items per PE before the broadcaster stalls "
                             "(default 16)")
    parser.add_argument("--density", default=None,
                        help="prune float weights to this density first (0..1)")
    parser.add_argument("--w-fmt", default=None, help="weight format, e.g. Q1.7 or int8")
    parser.add_argument("--x-fmt", default=None, help="activation format, e.g. Q4.12")
    parser.add_argument("--acc-width", default=None,
                        help="accumulator bits (default: sized so no sum overflows)")
    parser.add_argument("--out-fmt", default=None,
                        help="result format (default: the accumulator format, exact)")
    parser.add_argument("--rows-per-pe", default=None,
                        help="accumulators per PE (default: sized so all rows fit)")
    parser.add_argument("--max-cols", default=None,
                        help="columns per block (default: all columns)")
    parser.add_argument("--mem-depth", default=None,
                        help="weight entries per PE and bank (default: sized to the data); "
                        "smaller memories run the matrix as a checkerboard of blocks")
    parser.add_argument("--w-lanes", default=None,
                        help="weight words per stream beat (1..min(P, 64); default 1, "
                        "with --bus-words N: min(N, P))")
    parser.add_argument("--drain-lanes", default=None, metavar="D",
                        help="results per clock: 1 or --w-lanes when it divides P (default "
                        "1, with --bus-words: --w-lanes when it divides P)")
    parser.add_argument("--bus-words", default=None, metavar="N",
                        help="run the AXI accelerator shell with N activation/result words "
                        "per beat (1..32)")
    parser.add_argument("--w-valid-prob", default="1.0",
                        help="weight-stream bandwidth: probability of a word per clock "
                        "(random gaps; default 1.0)")
    parser.add_argument("--out", metavar="y.npy", help="write y here")
    add_common_arguments(parser)


def _codes(arr, fmt, name, fmt_name, default):
    """Integer array -> codes (format sized to them unless given); float -> quantised to
    ``fmt`` (``default`` if not given), refused where a value would saturate."""
    if arr.dtype.kind in "biu" and fmt is None:
        bits = signed_bits(arr)
        if bits > 32:
            raise SpnnError(f"{name}: integer values need {bits} bits; at most 32 are "
                            f"supported")
        return arr.astype(np.int64), QFormat(bits, 0), True
    fmt = fmt or default
    return codes_of(arr, fmt, name, fmt_name), fmt, arr.dtype.kind in "biu"


_FLAGS = {"acc_width": "--acc-width", "out_fmt": "--out-fmt", "rows_per_pe": "--rows-per-pe",
          "max_cols": "--max-cols", "mem_depth": "--mem-depth", "w_lanes": "--w-lanes",
          "pes": "--pes", "fifo_depth": "--fifo-depth", "w_fmt": "--w-fmt", "x_fmt": "--x-fmt",
          "bus_words": "--bus-words", "drain_lanes": "--drain-lanes"}


def _options(args) -> dict:
    """Every numeric option checked and converted, before any file is read."""
    opts = {
        "pes": int_arg(args.pes, "--pes", 1, 256),
        "fifo_depth": int_arg(args.fifo_depth, "--fifo-depth", 1, 64),
        "density": None if args.density is None else
        float_arg(args.density, "--density", 0.0, 1.0),
        "w_fmt": format_arg(args.w_fmt, "--w-fmt", 2, 32) if args.w_fmt is not None else None,
        "x_fmt": format_arg(args.x_fmt, "--x-fmt", 2, 32) if args.x_fmt is not None else None,
        "acc_width": None if args.acc_width is None else
        int_arg(args.acc_width, "--acc-width", 2, 64),
        "out_fmt": format_arg(args.out_fmt, "--out-fmt", 2, 64) if args.out_fmt is not None else None,
        "rows_per_pe": None if args.rows_per_pe is None else
        int_arg(args.rows_per_pe, "--rows-per-pe", 2, 4096),
        "max_cols": None if args.max_cols is None else
        int_arg(args.max_cols, "--max-cols", 2, 65536),
        "mem_depth": None if args.mem_depth is None else
        int_arg(args.mem_depth, "--mem-depth", 2, 65536),
        "bus_words": None if args.bus_words is None else
        int_arg(args.bus_words, "--bus-words", 1, 32),
        "bandwidth": float_arg(args.w_valid_prob, "--w-valid-prob", 0.01, 1.0),
    }
    if args.w_lanes is not None:
        opts["lanes"] = int_arg(args.w_lanes, "--w-lanes", 1, 64)
    else:
        opts["lanes"] = 1 if opts["bus_words"] is None else min(opts["bus_words"], opts["pes"])
    if args.drain_lanes is not None:
        opts["drain"] = int_arg(args.drain_lanes, "--drain-lanes", 1, 64)
    else:
        wide = opts["bus_words"] is not None and opts["pes"] % opts["lanes"] == 0
        opts["drain"] = opts["lanes"] if wide else 1
    check_common(args)
    return opts


def _load(args, opts):
    w = load_npy(args.weights, "--weights")
    x = load_npy(args.x, "--x")
    if w.ndim != 2:
        raise SpnnError(f"--weights must be a 2-D matrix, not {w.ndim}-D (shape {w.shape})")
    if x.ndim != 1:
        raise SpnnError(f"--x must be a 1-D vector, not {x.ndim}-D (shape {x.shape})")
    check_not_empty(w, "--weights")
    if w.shape[1] != x.shape[0]:
        raise SpnnError(f"--x must have one value per weight column: weights are "
                        f"{w.shape[0]} x {w.shape[1]}, x has {x.shape[0]} values")
    check_finite(w, "--weights")
    check_finite(x, "--x")
    if opts["density"] is not None:
        if w.dtype.kind != "f":
            raise SpnnError("--density prunes float weights; integer codes are used as given")
        w = prune(w, opts["density"])
    return w, x


def _prepare(args):
    opts = _options(args)
    outputs = run_outputs(args)
    w, x = _load(args, opts)
    pes = opts["pes"]
    w_codes, w_fmt, w_int = _codes(w, opts["w_fmt"], "--weights", "--w-fmt", QFormat(1, 7))
    x_codes, x_fmt, x_int = _codes(x, opts["x_fmt"], "--x", "--x-fmt", QFormat(4, 12))
    bound = int((np.abs(w_codes).astype(object) @ np.abs(x_codes).astype(object)).max())
    need = max(w_fmt.width + x_fmt.width, bound.bit_length() + 1)
    if opts["acc_width"] is None:
        if need > 64:
            raise SpnnError(f"W @ x needs a {need}-bit accumulator to be exact; at most 64 "
                            f"bits are supported (give a smaller --acc-width to saturate)")
        acc_width = need
    else:
        acc_width = opts["acc_width"]
    acc_frac = w_fmt.frac_bits + x_fmt.frac_bits
    out_fmt = opts["out_fmt"] or QFormat(max(1, acc_width - acc_frac), acc_frac)
    rows, cols = w.shape
    per_pe = max(2, math.ceil(rows / pes))
    rows_per_pe = min(4096, 1 << (per_pe + per_pe // 4 - 1).bit_length())
    if opts["rows_per_pe"] is not None:
        rows_per_pe = opts["rows_per_pe"]
    max_cols = max(2, cols) if opts["max_cols"] is None else opts["max_cols"]
    mem_depth = 65536 if opts["mem_depth"] is None else opts["mem_depth"]
    cfg = config_or_error(SpmvConfig, _FLAGS, pes=pes, fifo_depth=opts["fifo_depth"],
                          rows_per_pe=rows_per_pe, max_cols=max_cols, mem_depth=mem_depth,
                          w_fmt=w_fmt, x_fmt=x_fmt, acc_width=acc_width, out_fmt=out_fmt,
                          w_lanes=opts["lanes"], drain_lanes=opts["drain"],
                          bus_words=opts["bus_words"] or 1)
    try:
        blocks = compile_tiled(w_codes, cfg, args.alloc)
        if opts["mem_depth"] is None:
            mem = max([2] + [int(b.loads.max(initial=0)) for b in blocks])
            cfg = dataclasses.replace(cfg, mem_depth=1 << (mem - 1).bit_length())
            blocks = compile_tiled(w_codes, cfg, args.alloc)
    except (TypeError, ValueError) as exc:
        raise SpnnError(flag_message(str(exc), _FLAGS)) from None
    return (cfg, blocks, opts["bandwidth"], w, x, w_codes, x_codes, w_int and x_int,
            outputs)


def run(args) -> int:
    cfg, blocks, bandwidth, w, x, w_codes, x_codes, exact_ints, outputs = _prepare(args)
    if args.bus_words is not None:
        return _run_axi(args, cfg, blocks, bandwidth, w, w_codes, x_codes, exact_ints, outputs)
    jobs = tile_jobs(blocks, x_codes)
    knobs = {"w_valid_prob": bandwidth, "seed": args.seed}
    ys, result = run_jobs(jobs, cfg, args.sim, waves=args.waves, **knobs)
    y = gather_tiled(blocks, ys)
    golden = ref_spmv(w_codes, x_codes, cfg)
    if not np.array_equal(y, golden):
        bad = int(np.flatnonzero(y != golden)[0])
        raise SystemExit(f"spnn: internal error: RTL differs from the golden model at "
                         f"row {bad} ({y[bad]} != {golden[bad]})")
    model = cycle_model(jobs, cfg, **knobs)
    if result["sinks"]["o"]["cycles"] != model["o"] or \
            result["sources"]["x"]["cycles"] != model["x"]:
        raise SystemExit("spnn: internal error: RTL cycle counts differ from the cycle model")
    info = model["jobs"]
    nnz = int(np.count_nonzero(w_codes))
    pe_loads = np.sum([b.loads for b in blocks], axis=0)
    mean = pe_loads.mean()
    real_y = decode(y, cfg.out_fmt)
    # Integer arrays are codes: their real values are code x lsb of their format.
    w_real = decode(w_codes, cfg.w_fmt) if w.dtype.kind in "biu" else w.astype(np.float64)
    x_real = decode(x_codes, cfg.x_fmt) if x.dtype.kind in "biu" else x.astype(np.float64)
    truth = w_real @ x_real if not exact_ints else None
    exact = w_codes.astype(object) @ x_codes.astype(object) if w_codes.size else \
        np.zeros(w.shape[0], dtype=object)
    exact_real = np.array([float(v) for v in exact]) * 2.0 ** -cfg.acc_frac
    err_vs_exact = float(np.max(np.abs(real_y - exact_real))) if len(y) else 0.0
    err = err_vs_exact if truth is None else \
        (float(np.max(np.abs(real_y - truth))) if len(y) else 0.0)
    outputs.npy(args.out, y if exact_ints else real_y)
    # first activation accepted .. last busy clock of the last block (one block: its
    # compute cycles; tiled: includes waits for weight loads and earlier drains)
    starts = [d["compute_start"] for d in info if d["compute_start"] is not None]
    cycles = info[-1]["done"] - starts[0] if starts else 0
    ideal = math.ceil(nnz / cfg.pes)
    formats = {"weights": cfg.w_fmt.to_dict(), "x": cfg.x_fmt.to_dict(),
               "accumulator": cfg.acc_fmt.to_dict(), "output": cfg.out_fmt.to_dict()}
    report = make_report(
        "spmv", cfg, formats, args.sim, cycles, ideal, int(w.shape[0]), err,
        utilisation=(nnz / (cfg.pes * cycles)) if cycles else None,
        allocator=args.alloc, pes=cfg.pes, fifo_depth=cfg.fifo_depth,
        shape=list(w.shape), nnz=nnz, density=nnz / max(1, w.size),
        loads=[int(v) for v in pe_loads], max_load=int(pe_loads.max(initial=0)),
        mean_load=float(mean), max_over_mean=float(pe_loads.max() / mean) if mean else 1.0,
        nonzero_activations=int(np.count_nonzero(x_codes)),
        blocks=[{"row_offset": b.row_offset, "col_offset": b.col_offset,
                 "shape": list(b.shape), "nnz": b.nnz, "max_load": int(b.loads.max()),
                 "load_cycles": d["load_end"] - d["load_start"] + 1,
                 "compute_cycles": d["compute_cycles"]} for b, d in zip(blocks, info)],
        weight_beats=len(result["sources"]["w"]["cycles"]),
        load_cycles=info[0]["load_end"] - info[0]["load_start"] + 1,
        w_valid_prob=bandwidth, w_lanes=cfg.w_lanes,
        weight_bandwidth_words_per_clock=cfg.w_lanes * bandwidth,
        total_cycles=result["sinks"]["o"]["cycles"][-1] - starts[0] + 1
        if starts and result["sinks"]["o"]["cycles"] else None,
        model_cycles=cycles,
        time_us_at_100mhz=cycles * 0.01,
        rtl_matches_golden=True, rtl_cycles_match_model=True,
        exact_integer_result=bool(exact_ints and err_vs_exact == 0.0),
        max_abs_error_vs_quantised_product=err_vs_exact,
    )
    outputs.json(args.report, report)
    outputs.commit()
    eff = f"{ideal / cycles:.3f}" if cycles else "n/a"
    tiles = f", {len(blocks)} blocks" if len(blocks) > 1 else ""
    print(f"spmv {w.shape[0]}x{w.shape[1]}, nnz {nnz}, P={cfg.pes} {args.alloc}{tiles}: "
          f"{cycles} cycles (ideal {ideal}, efficiency {eff}), max/mean load "
          f"{pe_loads.max() / mean if mean else 1.0:.3f}, max |error| {err:.3g}")
    return 0


def _run_axi(args, cfg, blocks, bandwidth, w, w_codes, x_codes, exact_ints, outputs) -> int:
    """``--bus-words``: one job through the accelerator shell."""
    # this job's x: the columns may be reordered when no partial sum can saturate for it
    blocks = plan_blocks(w_codes, x_codes, cfg, args.alloc,
                         reorder=order_free(w_codes, cfg, x_codes))
    y, job = rtl_spmv_axi(w_codes, x_codes, cfg, args.sim, alloc=args.alloc,
                          w_valid_prob=bandwidth, seed=args.seed, blocks=blocks)
    golden = ref_spmv(w_codes, x_codes, cfg)
    if not np.array_equal(y, golden):
        bad = int(np.flatnonzero(y != golden)[0])
        raise SystemExit(f"spnn: internal error: RTL differs from the golden model at "
                         f"row {bad} ({y[bad]} != {golden[bad]})")
    nnz = int(np.count_nonzero(w_codes))
    rows, cols = w.shape
    real_y = decode(y, cfg.out_fmt)
    exact = w_codes.astype(object) @ x_codes.astype(object)
    exact_real = np.array([float(v) for v in exact]) * 2.0 ** -cfg.acc_frac
    err = float(np.max(np.abs(real_y - exact_real))) if len(y) else 0.0
    outputs.npy(args.out, y if exact_ints else real_y)
    cycles = job["end"] - job["first_in"] + 1
    model = shell_cycles(tile_jobs(blocks, x_codes), cfg)
    if bandwidth == 1.0 and cycles != model:
        raise SystemExit(f"spnn: internal error: the shell took {cycles} cycles, the model "
                         f"{model}")
    roof = roofline_fields(cycles, math.ceil(nnz / cfg.pes),
                           roofline_beats(w_codes, cfg, args.alloc))
    formats = {"weights": cfg.w_fmt.to_dict(), "x": cfg.x_fmt.to_dict(),
               "accumulator": cfg.acc_fmt.to_dict(), "output": cfg.out_fmt.to_dict()}
    report = make_report(
        "spmv", cfg, formats, args.sim, cycles, roof["roofline_cycles"], int(rows), err,
        utilisation=nnz / (cfg.pes * cycles) if cycles else None,
        interface="axi", bus_words=cfg.bus_words, w_lanes=cfg.w_lanes,
        end_to_end_model_cycles=model if bandwidth == 1.0 else None,
        drain_lanes=cfg.drain_lanes, col_starts=[b.col_offset for b in blocks
                                                 if b.row_offset == 0],
        col_order=[int(c) for b in blocks if b.row_offset == 0 for c in b.columns],
        row_words=[[int(v) for v in b.row_words] for b in blocks],
        weight_beats=sum(beat_count(b) for b in blocks),
        counters=job["counters"], **roof, roofline_efficiency=roof["efficiency_vs_roofline"],
        allocator=args.alloc, pes=cfg.pes, shape=[int(rows), int(cols)], nnz=nnz,
        blocks=len(blocks), w_valid_prob=bandwidth, rtl_matches_golden=True,
        max_abs_error_vs_quantised_product=err,
        utilisation_counts="nnz / (P x end-to-end cycles): loads and result stream included",
        roofline_counts="the larger of ceil(nnz / P) and the busiest port's beats: weight "
                        "words (non-zeros, ROW and SKIP words of the matrix as one block) / "
                        "w_lanes, activations / bus_words, results / result words per beat")
    outputs.json(args.report, report)
    outputs.commit()
    print(f"spmv {rows}x{cols}, nnz {nnz}, P={cfg.pes}, AXI shell at {cfg.bus_words} words "
          f"per beat: {cycles} cycles end to end (roofline {roof['roofline_cycles']}, "
          f"{roof['roofline_bound']}-bound; efficiency {roof['efficiency_vs_roofline']:.3f}),"
          f" max |error| {err:.3g}")
    return 0
