# SPDX-License-Identifier: Apache-2.0
"""``spnn run lstm``: import an LSTM layer, prune, quantise, compile and run a sequence on the RTL."""

import numpy as np

from gen.core.config import SpnnError
from gen.core.fixed import decode
from gen.lstm import (LstmConfig, compile_lstm, cycle_model, float_lstm, load_model, prune_lstm,
                      quantise_lstm, ref_lstm, roofline_beats, shell_cycles, step_cycles,
                      weight_words)
from gen.lstm.twin import JOB_INPUTS, axi_jobs, rtl_lstm, rtl_lstm_axi
from gen.core.runutil import (add_common_arguments, check_common, codes_of, config_or_error,
                              flag_message, float_arg, format_arg, int_arg, load_npy, make_report,
                              roofline_fields,
                              quantise_checked, run_outputs)
from gen.spmv import ALLOCATORS

HELP = "LSTM layer on the sparse PE array (seed 000)"
DESCRIPTION = """\
Import one nn.LSTM layer (a PyTorch state_dict .pt, loaded with weights_only=True, or an
.npz with the keys weight_ih_l0, weight_hh_l0, bias_ih_l0, bias_hh_l0; the keys may sit
under one prefix such as "lstm."), optionally prune it by magnitude to --density,
quantise it (round half up; a weight or bias outside --w-fmt / --b-fmt is an error,
never clipped), compile it for P PEs (one unit permutation for all four gates) and run
the input sequence (T x X) through the engine's RTL.  Integer --input / --h0 arrays hold
codes of --x-fmt and an integer --c0 codes of --c-fmt; float arrays hold real values
(quantised; a value outside the format is an error).

Writes the hidden-state sequence h_1..h_T (real values, float64, T x H, original unit
order; the weights are real, so the output is too) and a
report: cycles per step (measured and cycle model, which must agree), efficiency =
ceil(nnz / P) / step cycles, formats, and the max deviation of h from the float model
(the float weights after pruning, unquantised).  The RTL must equal the bit-exact golden
model; any difference is an internal error.

--bus-words N runs the accelerator shell instead of the bare engine (docs/lstm.md,
"Accelerator shell"): the weights and the sequence in one job over AXI4-Stream beats of N
words, started over AXI4-Lite; --w-lanes then defaults to min(N, P) weight words per beat
(and per clock into the engine).  The report then gives end-to-end cycles (first weight beat
to the last h beat, the one-time weight load included), the shell's counters and the
roofline bound.

Examples:
  spnn run lstm --model m.pt --input seq.npy --out h.npy --report r.json
  spnn run lstm --model m.pt --input seq.npy --bus-words 8 --report r.json
  spnn run lstm --model m.npz --input seq.npy --density 0.2 --pes 8 --sim icarus
  spnn run lstm --model m.pt --input seq.npy --h0 h0.npy --c0 c0.npy --w-fmt Q2.10
"""


def add_arguments(parser):
    parser.add_argument("--model", required=True, metavar="M.pt|M.npz",
                        help="nn.LSTM state dict (.pt/.pth) or .npz with the same keys")
    parser.add_argument("--input", required=True, metavar="SEQ.npy",
                        help="input sequence, T x X (float, or integer codes of --x-fmt)")
    parser.add_argument("--density", default=None,
                        help="prune [W_ih W_hh] by magnitude to this density first (0..1)")
    parser.add_argument("--pes", default="32", help="processing elements P (default 32)")
    parser.add_argument("--out", metavar="H.npy", help="write h_1..h_T (float, T x H) here")
    parser.add_argument("--h0", metavar="H0.npy", help="initial hidden state (H,), default 0")
    parser.add_argument("--c0", metavar="C0.npy", help="initial cell state (H,), default 0")
    parser.add_argument("--alloc", default="balanced", choices=ALLOCATORS,
                        help="unit allocator (default balanced)")
    parser.add_argument("--fifo-depth", default="16", help="activation FIFO depth (default 16)")
    parser.add_argument("--mem-depth", default=None,
                        help="weight entries per PE (default: the largest PE load, rounded up "
                             "to a power of two)")
    parser.add_argument("--segments", default="32", help="PWL segments (default 32)")
    parser.add_argument("--bus-words", default=None, metavar="N",
                        help="run the AXI accelerator shell with N words per beat (1..32)")
    parser.add_argument("--w-lanes", default=None,
                        help="weight words per beat and clock (1..min(P, 64); default 1, "
                        "with --bus-words N: min(N, P))")
    for name, default in (("w-fmt", "Q3.9"), ("x-fmt", "Q4.12"), ("c-fmt", "Q5.11"),
                          ("b-fmt", "Q4.12"), ("pre-fmt", "Q4.12"), ("act-fmt", "Q2.14")):
        parser.add_argument(f"--{name}", default=default, help=f"format (default {default})")
    add_common_arguments(parser)


def _real_and_codes(arr, fmt, name, fmt_name):
    """(real values, codes of ``fmt``): an integer array holds codes, a float array real
    values (quantised, refused where a value would saturate)."""
    codes = codes_of(arr, fmt, name, fmt_name)
    real = decode(codes, fmt) if arr.dtype.kind in "biu" else arr.astype(np.float64)
    return real, codes


def _vector(path, name, hid, fmt, fmt_name):
    """An initial state (real values, codes of ``fmt``), or (None, None) if not given."""
    if path is None:
        return None, None
    v = load_npy(path, name)
    if v.shape not in ((hid,), (1, hid)):
        raise SpnnError(f"{name} must have shape ({hid},), not {v.shape}")
    return _real_and_codes(v.ravel(), fmt, name, fmt_name)


_FMT_FLAGS = {k: "--" + k.replace("_", "-")
              for k in ("w_fmt", "x_fmt", "c_fmt", "b_fmt", "pre_fmt", "act_fmt")}
_FLAGS = {"pes": "--pes", "fifo_depth": "--fifo-depth", "mem_depth": "--mem-depth",
          "segments": "--segments", "max_inputs": "--model's input size",
          "max_hidden": "--model's hidden size", "bus_words": "--bus-words", "w_lanes": "--w-lanes", **_FMT_FLAGS}


def _options(args) -> dict:
    """Every numeric option checked and converted, before any file is read."""
    opts = {
        "pes": int_arg(args.pes, "--pes", 1, 256),
        "fifo_depth": int_arg(args.fifo_depth, "--fifo-depth", 2, 256),
        "segments": int_arg(args.segments, "--segments", 2, 256),
        "mem_depth": None if args.mem_depth is None else
        int_arg(args.mem_depth, "--mem-depth", 2, 1 << 20),
        "density": None if args.density is None else
        float_arg(args.density, "--density", 0.0, 1.0, lo_open=True),
        "bus_words": 1 if args.bus_words is None else
        int_arg(args.bus_words, "--bus-words", 1, 32),
    }
    if args.w_lanes is not None:
        opts["w_lanes"] = int_arg(args.w_lanes, "--w-lanes", 1, 64)
    else:
        opts["w_lanes"] = 1 if args.bus_words is None else min(opts["bus_words"], opts["pes"])
    opts["fmts"] = {k: format_arg(getattr(args, k), flag) for k, flag in _FMT_FLAGS.items()}
    # The config's own checks (widths, fraction bits, segments a power of two) on a probe.
    config_or_error(LstmConfig, _FLAGS, pes=opts["pes"], fifo_depth=opts["fifo_depth"],
                    segments=opts["segments"], w_lanes=opts["w_lanes"], **opts["fmts"])
    check_common(args)
    return opts


def _check_weights(model, cfg):
    """Quantising the weights or the bias must not saturate: refuse, naming the tensor."""
    for arr, what, fmt, flag in ((model.w_ih, "weight_ih_l0", cfg.w_fmt, "--w-fmt"),
                                 (model.w_hh, "weight_hh_l0", cfg.w_fmt, "--w-fmt"),
                                 (model.b, "bias_ih_l0 + bias_hh_l0", cfg.b_fmt, "--b-fmt")):
        quantise_checked(arr, fmt, f"--model: {what}", flag)


def _setup(args):
    opts = _options(args)
    outputs = run_outputs(args)
    model = load_model(args.model, "--model")
    H, X = model.hidden, model.inputs
    fmts = opts["fmts"]
    xs = load_npy(args.input, "--input")
    if xs.ndim == 1 and X == 1:
        xs = xs[:, None]
    if xs.ndim != 2 or xs.shape[1] != X or xs.shape[0] == 0:
        raise SpnnError(f"--input must have shape (T, X) = (T, {X}) with T >= 1, "
                        f"not {xs.shape}")
    xs, xq = _real_and_codes(xs, fmts["x_fmt"], "--input", "--x-fmt")
    h0, h0q = _vector(args.h0, "--h0", H, fmts["x_fmt"], "--x-fmt")
    c0, c0q = _vector(args.c0, "--c0", H, fmts["c_fmt"], "--c-fmt")
    if opts["density"] is not None:
        model = prune_lstm(model, opts["density"])
    common = dict(pes=opts["pes"], max_inputs=X, max_hidden=H, fifo_depth=opts["fifo_depth"],
                  segments=opts["segments"], bus_words=opts["bus_words"],
                  w_lanes=opts["w_lanes"], **fmts)
    probe = config_or_error(LstmConfig, _FLAGS, mem_depth=1 << 20, **common)
    _check_weights(model, probe)
    q = quantise_lstm(model, probe)
    try:
        plan = compile_lstm(q, probe, args.alloc)
        mem = opts["mem_depth"]
        if mem is None:
            mem = max(2, 1 << max(1, int(plan.loads.max(initial=1) - 1).bit_length()))
        cfg = config_or_error(LstmConfig, _FLAGS, mem_depth=mem, **common)
        plan = compile_lstm(q, cfg, args.alloc)
    except (TypeError, ValueError) as exc:
        raise SpnnError(flag_message(str(exc), _FLAGS)) from None
    return model, q, cfg, plan, (xs, h0, c0), (xq, h0q, c0q), outputs


def run(args) -> int:
    model, q, cfg, plan, (xs, h0, c0), (xq, h0q, c0q), outputs = _setup(args)
    H, X = model.hidden, model.inputs
    seqs = [(xq, h0q, c0q)]
    if args.bus_words is not None:
        return _run_axi(args, model, q, cfg, plan, (xs, h0, c0), seqs, outputs)
    outs, result = rtl_lstm(plan, seqs, args.sim, seed=args.seed, waves=args.waves)
    golden, _ = ref_lstm(q, xq, cfg, h0q, c0q)
    if not np.array_equal(outs[0], golden):
        bad = np.argwhere(outs[0] != golden)[0]
        raise SystemExit(f"spnn: internal error: RTL differs from the golden model at step "
                         f"{bad[0]}, unit {bad[1]}")
    model_c = cycle_model(plan, seqs)
    if result["sinks"]["o"]["cycles"] != model_c["o"]:
        raise SystemExit("spnn: internal error: RTL output cycles differ from the cycle model")
    h = decode(outs[0], cfg.x_fmt)
    hf, _ = float_lstm(model, xs, h0, c0)
    err = float(np.max(np.abs(h - hf)))
    outputs.npy(args.out, h)
    T = len(xs)
    per_step = step_cycles(model_c)
    ideal_step = plan.ideal_cycles
    first = result["sources"]["x"]["cycles"][2 * H]
    cycles = result["sinks"]["o"]["cycles"][-1] - first + 1
    mean_step = float(np.mean(per_step))
    report = make_report(
        "lstm", cfg, cfg.formats(), args.sim, cycles, ideal_step * T, T * H, err,
        utilisation=ideal_step / mean_step,
        hidden=H, inputs=X, steps=T, density=model.density, nnz=plan.nnz,
        pes=cfg.pes, cycles_per_step=per_step, ideal_cycles_per_step=ideal_step,
        step_efficiency=ideal_step / mean_step, load=plan.load_report(),
        ew_latency=cfg.ew_latency, rtl_matches_golden=True, cycles_match_model=True,
        max_abs_error_vs_quantised_float=float(np.max(np.abs(
            h - float_lstm(_dequant(q, cfg), decode(xq, cfg.x_fmt),
                           None if h0q is None else decode(h0q, cfg.x_fmt),
                           None if c0q is None else decode(c0q, cfg.c_fmt))[0]))),
        saturated_weights=int(np.sum(np.abs(q.w_ih) == -cfg.w_fmt.min_code)
                              + np.sum(q.w_ih == cfg.w_fmt.max_code)
                              + np.sum(np.abs(q.w_hh) == -cfg.w_fmt.min_code)
                              + np.sum(q.w_hh == cfg.w_fmt.max_code)),
    )
    outputs.json(args.report, report)
    outputs.commit()
    print(f"lstm H={H} X={X} T={T}: {mean_step:.0f} cycles/step (ideal {ideal_step}, "
          f"efficiency {ideal_step / mean_step:.3f}), max |h - float| {err:.3g}")
    return 0


def _dequant(q, cfg):
    from gen.lstm import LstmFloat
    return LstmFloat(decode(q.w_ih, cfg.w_fmt), decode(q.w_hh, cfg.w_fmt),
                     decode(q.b, cfg.b_fmt))


def _run_axi(args, model, q, cfg, plan, real, seqs, outputs) -> int:
    """``--bus-words``: the weights and the sequence in one job through the shell."""
    (xs, h0, c0), (xq, h0q, c0q) = real, seqs[0]
    jobs = axi_jobs(plan, seqs, with_weights=False)
    jobs[0]["regs"][0] = [JOB_INPUTS, 3]                   # weights and sequence together
    jobs[0]["packets"]["s_axis_w"] = weight_words(plan)
    outs, records = rtl_lstm_axi(plan, seqs, args.sim, seed=args.seed, jobs=jobs)
    golden, _ = ref_lstm(q, xq, cfg, h0q, c0q)
    if not np.array_equal(outs[0], golden):
        bad = np.argwhere(outs[0] != golden)[0]
        raise SystemExit(f"spnn: internal error: RTL differs from the golden model at step "
                         f"{bad[0]}, unit {bad[1]}")
    job = records[0]
    h = decode(outs[0], cfg.x_fmt)
    err = float(np.max(np.abs(h - float_lstm(model, xs, h0, c0)[0])))
    outputs.npy(args.out, h)
    T, H = len(xs), model.hidden
    cycles = job["end"] - job["first_in"] + 1
    if cycles != shell_cycles(plan, seqs):
        raise SystemExit(f"spnn: internal error: the shell took {cycles} cycles, the model "
                         f"{shell_cycles(plan, seqs)}")
    n = cfg.bus_words
    roof = roofline_fields(cycles, plan.ideal_cycles * T, roofline_beats(plan, T))
    report = make_report(
        "lstm", cfg, cfg.formats(), args.sim, cycles, roof["roofline_cycles"], T * H, err,
        utilisation=plan.nnz * T / (cfg.pes * cycles), interface="axi", bus_words=n,
        w_lanes=cfg.w_lanes, end_to_end_model_cycles=shell_cycles(plan, seqs),
        weight_beats=len(jobs[0]["packets"]["s_axis_w"]) // cfg.w_lanes
        if cfg.w_lanes > 1 else -(-len(jobs[0]["packets"]["s_axis_w"]) // n),
        counters=job["counters"], **roof, roofline_efficiency=roof["efficiency_vs_roofline"],
        hidden=H, inputs=model.inputs, steps=T, density=model.density, nnz=plan.nnz,
        pes=cfg.pes, ideal_cycles_per_step=plan.ideal_cycles, rtl_matches_golden=True,
        utilisation_counts="nnz x steps / (P x end-to-end cycles): weight load included",
        roofline_counts="the larger of ceil(nnz / P) x steps and the busiest port's beats: "
                        "the one-lane weight words (ROW, BIAS, ENTRY, COL, END) / w_lanes "
                        "(/ bus_words for one lane), the sequence words and T x H results / "
                        "bus_words")
    outputs.json(args.report, report)
    outputs.commit()
    print(f"lstm H={H} X={model.inputs} T={T}, AXI shell at {n} words per beat: {cycles} "
          f"cycles end to end incl. the weight load (roofline {roof['roofline_cycles']}, "
          f"efficiency {roof['efficiency_vs_roofline']:.3f}), max |h - float| {err:.3g}")
    return 0
