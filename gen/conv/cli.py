# SPDX-License-Identifier: Apache-2.0
"""``spnn run conv``: one convolution layer through the remainder-aware MAC array RTL."""

import dataclasses

import numpy as np

from gen.core.config import SpnnError
from gen.conv import (ConvConfig, ConvLayer, MAPPINGS, check_fits, chunk_weight_beats,
                      layer_cycles, plan, ref_conv, shell_cycles)
from gen.conv.cli_banked import run_banked
from gen.conv.cli_common import array_arg, check_codes, load_layer_arrays
from gen.conv.twin import layer_data, requant_conv, rtl_conv, rtl_conv_axi
from gen.core.runutil import (add_common_arguments, add_requant_arguments, check_common,
                              config_or_error, int_arg, make_report, requant_args,
                              roofline_fields, run_outputs)

HELP = "remainder-aware im2col MAC array (convolution, seed 002)"
DESCRIPTION = """\
Run one convolution layer (integers) through the cycle-accurate RTL of an ROWSxCOLS
output-stationary MAC array and write the exact integer result.

--weights holds (Oc, Ic, kh, kw) integers, --input (Ic, H, W) integers or a batch
(B, Ic, H, W) of B images run with the same weights (loaded once per input-channel chunk);
the output .npy holds the (Oc, Ho, Wo) (or (B, Oc, Ho, Wo)) int64 sums (cross-correlation,
as in CNNs).  The mapper chooses the
passes, the copies n per pass and the input-channel chunks; the report gives cycles, the
utilisation counted in the RTL (busy MAC-cycles / (rows x cols x compute cycles)) next to
the model's, and n per pass.

--bus-words N runs the accelerator shell instead of the bare array (docs/conv.md,
"Accelerator shell"): the layer descriptor in AXI4-Lite registers, weights, features and
sums over AXI4-Stream beats of N words; --w-lanes (default: the largest power of two up to
N) weights enter the array per clock.  The report then gives end-to-end cycles (first input
beat to last output beat, checked against gen.conv.shell_cycles), the shell's counters and
the roofline bound.  --requant BITS builds the shell's requantisation stage: the sums plus
--bias (one per output channel), times --mult, shifted right by --shift (round half up),
saturated to BITS-bit codes, clamped at 0 with --relu (docs/axi.md).

--banked runs the banked array's accelerator shell instead (docs/conv.md, "The banked
array"): any layer size, planned into jobs (channel parts, strips, input-channel chunks) on
buffers of the seed's size scaled to --array, --bus-words words per beat (default 4),
up to --copies copies; the report gives the end-to-end cycles summed over the jobs, the
roofline bound and the plan.

Examples:
  spnn run conv --weights w.npy --input x.npy --out y.npy --report r.json
  spnn run conv --weights w.npy --input x.npy --banked --array 16x4 --bus-words 4
  spnn run conv --weights w.npy --input x.npy --bus-words 16 --report r.json
  spnn run conv --weights w.npy --input x.npy --stride 2 --pad 0 --array 8x4 \\
      --mapping naive --sim icarus
  spnn run conv --weights w.npy --input batch.npy --array 16x4 --out y.npy   # (B,Ic,H,W)
  spnn run conv --weights w.npy --input x.npy --bus-words 4 --requant 8 --bias b.npy \\
      --shift 9 --relu --out y8.npy       # bias, shift, ReLU, 8-bit results in the shell
"""

def add_arguments(parser):
    parser.add_argument("--weights", required=True, metavar="W.npy",
                        help="weights, integers, shape (Oc, Ic, kh, kw)")
    parser.add_argument("--input", required=True, metavar="X.npy",
                        help="input features, integers, shape (Ic, H, W) or (B, Ic, H, W)")
    parser.add_argument("--out", metavar="Y.npy",
                        help="write the (Oc, Ho, Wo) or (B, Oc, Ho, Wo) result here")
    parser.add_argument("--stride", default="1", help="stride (default 1)")
    parser.add_argument("--pad", default="1", help="zero padding on every side (default 1)")
    parser.add_argument("--array", default="16x4",
                        help="MAC array ROWSxCOLS, COLS a power of two (default 16x4)")
    parser.add_argument("--mapping", default="remainder",
                        help=f"{' | '.join(reversed(MAPPINGS))} (default remainder)")
    parser.add_argument("--skip-pad", action="store_true",
                        help="skip beats whose features are all zero padding (needs pad < kernel)")
    parser.add_argument("--data-width", default="8", help="feature bits, signed (default 8)")
    parser.add_argument("--weight-width", default="8", help="weight bits, signed (default 8)")
    parser.add_argument("--bus-words", default=None, metavar="N",
                        help="run the AXI accelerator shell with N words per beat (1..32)")
    parser.add_argument("--w-lanes", default=None, metavar="L",
                        help="weights per clock, a power of two 1..32 (default 1, with "
                        "--bus-words N: the largest power of two up to N)")
    parser.add_argument("--banked", action="store_true",
                        help="run the banked array's accelerator shell instead (any layer "
                        "size: planned into jobs on the seed's buffer sizes scaled to "
                        "--array; --bus-words default 4; docs/conv.md 'The banked array')")
    parser.add_argument("--copies", default="2", metavar="N",
                        help="with --banked: the most copies a round may use, 1, 2 or 4 "
                        "(default 2)")
    add_requant_arguments(parser, "output channel")
    add_common_arguments(parser)


def _pow2(n, lo):
    return max(lo, 1 << max(0, int(n) - 1).bit_length())


_FLAGS = {"rows": "--array rows", "cols": "--array cols", "data_width": "--data-width",
          "weight_width": "--weight-width", "w_lanes": "--w-lanes"}


def _setup(args):
    rows, cols = array_arg(args.array)
    if args.mapping not in MAPPINGS:
        raise SpnnError(f"--mapping must be one of {', '.join(MAPPINGS)}, not {args.mapping!r}")
    stride = int_arg(args.stride, "--stride", 1)
    pad = int_arg(args.pad, "--pad", 0)
    dw = int_arg(args.data_width, "--data-width", 2, 18)
    ww = int_arg(args.weight_width, "--weight-width", 2, 18)
    bus = 1 if args.bus_words is None else int_arg(args.bus_words, "--bus-words", 1, 32)
    lanes = (int_arg(args.w_lanes, "--w-lanes", 1, 32) if args.w_lanes is not None
             else 1 << (bus.bit_length() - 1))
    check_common(args)
    outputs = run_outputs(args)
    w, x = load_layer_arrays(args)
    w = check_codes(w, "--weights", ww, "--weight-width")
    x = check_codes(x, "--input", dw, "--data-width")
    oc, ic, kh, kw = w.shape
    rq_width, rq = requant_args(args, oc, 48)
    batch = x.shape[0] if x.ndim == 4 else 1
    h, wd = x.shape[-2:]
    if batch >= 1 << 16:
        raise SpnnError(f"--input batch must be below 65536, not {batch}")
    try:
        layer = ConvLayer(oc, ic, h, wd, kh, kw, stride, pad, batch)
    except ValueError as exc:
        raise SpnnError(str(exc)) from None
    if layer.positions > 4096:
        what = f"the output map {layer.ho}x{layer.wo} is" if batch == 1 else \
            f"the output maps {batch}x{layer.ho}x{layer.wo} are"
        raise SpnnError(f"{what} too large for an RTL run (at most 4096 positions)")
    hp, wp = h + 2 * pad, wd + 2 * pad
    slots = layer.out_rows * -(-layer.wo // cols) * cols
    cfg = config_or_error(ConvConfig, _FLAGS, rows=rows, cols=cols, max_groups=min(4, rows),
                          data_width=dw, weight_width=ww, acc_width=48,
                          feat_depth=min(8192, _pow2(batch * ic * hp * wp, 256)),
                          weight_depth=min(8192, _pow2(oc * ic * kh * kw, 256)),
                          out_depth=_pow2(oc * -(-slots // cols), 64),
                          max_slots=_pow2(slots, 64), max_dim=_pow2(max(h, wd), 16),
                          bus_words=bus, w_lanes=lanes, rq_width=rq_width,
                          rq_depth=_pow2(oc, 2))
    sched = plan(layer, cfg, args.mapping, skip_pad=args.skip_pad)
    # output banks: (tiles x copies) slot rows of every channel (the staggered layout)
    srows = max(p.tiles * p.n for p in sched.passes)
    cfg = dataclasses.replace(cfg, out_depth=_pow2(oc * srows, 64))
    sched = plan(layer, cfg, args.mapping, skip_pad=args.skip_pad)
    check_fits(sched)
    return cfg, layer, sched, x, w, outputs, rq


def run(args) -> int:
    if args.banked:
        return run_banked(args)
    if args.copies != "2":
        raise SpnnError("--copies needs --banked")
    cfg, layer, sched, x, w, outputs, rq = _setup(args)
    if args.bus_words is not None:
        return _run_axi(args, cfg, layer, sched, x, w, outputs, rq)
    outs, stats, result = rtl_conv([(x, w, sched)], cfg, args.sim, seed=args.seed,
                                   waves=args.waves)
    y = outs[0]
    golden = ref_conv(x, w, layer.stride, layer.pad)
    if not np.array_equal(y, golden):
        bad = np.argwhere(y != golden)[0]
        raise SystemExit(f"spnn: internal error: RTL differs from the golden model at "
                         f"{tuple(int(i) for i in bad)}")
    st = stats[0]
    cycles = result["sinks"]["o"]["cycles"][-1] - result["sources"]["c"]["cycles"][0] + 1
    model = layer_cycles(sched)
    util = st["busy"] / (cfg.rows * cfg.cols * st["cycles"])
    outputs.npy(args.out, y)
    report = make_report(
        "conv", cfg, {"input": f"int{cfg.data_width}", "weights": f"int{cfg.weight_width}",
                      "output": f"int{cfg.acc_width}"},
        args.sim, cycles, sched.ideal_cycles, int(y.size), 0.0, utilisation=util,
        array=f"{cfg.rows}x{cfg.cols}", layer={"oc": layer.oc, "ic": layer.ic, "h": layer.h,
                                               "w": layer.w, "kh": layer.kh, "kw": layer.kw,
                                               "stride": layer.stride, "pad": layer.pad,
                                               "ho": layer.ho, "wo": layer.wo},
        batch=layer.batch,
        macs=layer.macs, busy_mac_cycles=st["busy"], compute_cycles=st["cycles"],
        model_utilisation=sched.utilisation, model_compute_cycles=sched.compute_cycles,
        cycles_to_stats=model["stat"], schedule=sched.to_dict(),
        n_per_pass=sched.to_dict()["n_per_pass"], rtl_matches_golden=True,
        rtl_matches_model=(st["busy"] == sched.busy_mac_cycles
                           and st["cycles"] == sched.compute_cycles),
    )
    outputs.json(args.report, report)
    outputs.commit()
    images = f"{layer.batch}x" if x.ndim == 4 else ""
    print(f"conv {layer.oc}x{layer.ic}x{layer.kh}x{layer.kw} on "
          f"{images}{layer.ic}x{layer.h}x{layer.w} "
          f"({cfg.rows}x{cfg.cols}, {sched.mapping}): {cycles} cycles, compute {st['cycles']}, "
          f"utilisation {util:.3f} (model {sched.utilisation:.3f}), "
          f"n per pass {sched.to_dict()['n_per_pass']}")
    return 0


def _run_axi(args, cfg, layer, sched, x, w, outputs, rq=None) -> int:
    """``--bus-words``: the layer as one job through the accelerator shell (with
    ``--requant``, its output stage built and loaded)."""
    job = (x, w, sched) + ((rq,) if rq is not None else ())
    outs, stats, records = rtl_conv_axi([job], cfg, args.sim, seed=args.seed)
    y, st, job = outs[0], stats[0], records[0]
    golden = ref_conv(x, w, layer.stride, layer.pad)
    if rq is not None:
        golden = requant_conv(golden, rq, rq.bias, cfg.rq_width)
    if not np.array_equal(y, golden):
        bad = np.argwhere(y != golden)[0]
        raise SystemExit(f"spnn: internal error: RTL differs from the golden model at "
                         f"{tuple(int(i) for i in bad)}")
    outputs.npy(args.out, y)
    cycles = job["end"] - job["first_in"] + 1
    if cycles != shell_cycles(sched):
        raise SystemExit(f"spnn: internal error: the shell took {cycles} cycles, the model "
                         f"{shell_cycles(sched)}")
    _, _, xdata = layer_data(x, w, sched)
    n, lanes = cfg.bus_words, cfg.w_lanes
    beats = {"s_axis_w": -(-int(w.size) // (lanes if lanes > 1 else n)),
             "s_axis_x": -(-len(xdata) // n), "m_axis_o": -(-int(y.size) // n)}
    roof = roofline_fields(cycles, -(-layer.macs // (cfg.rows * cfg.cols)), beats)
    extra = ({"requant": {"bits": cfg.rq_width, "mult": rq.mult, "shift": rq.shift,
                          "relu": rq.relu, "bias": args.bias is not None}}
             if rq is not None else {})
    report = make_report(
        "conv", cfg, {"input": f"int{cfg.data_width}", "weights": f"int{cfg.weight_width}",
                      "output": f"int{cfg.rq_width or cfg.acc_width}"},
        args.sim, cycles, roof["roofline_cycles"], int(y.size), 0.0, **extra,
        utilisation=layer.macs / (cfg.rows * cfg.cols * cycles), interface="axi",
        bus_words=n, w_lanes=lanes, end_to_end_model_cycles=shell_cycles(sched),
        weight_beats=sum(chunk_weight_beats(sched, q) for q in sched.chunk_sizes),
        counters=job["counters"], **roof,
        roofline_efficiency=roof["efficiency_vs_roofline"],
        array=f"{cfg.rows}x{cfg.cols}", batch=layer.batch, macs=layer.macs,
        busy_mac_cycles=st["busy"], compute_cycles=st["cycles"],
        compute_utilisation=st["busy"] / (cfg.rows * cfg.cols * st["cycles"]),
        model_compute_cycles=sched.compute_cycles, schedule=sched.to_dict(),
        rtl_matches_golden=True,
        rtl_matches_model=(st["busy"] == sched.busy_mac_cycles
                           and st["cycles"] == sched.compute_cycles),
        utilisation_counts="MACs / (rows x cols x end-to-end cycles): loads and output "
                           "stream included; compute_utilisation counts compute cycles only",
        roofline_counts="the larger of ceil(MACs / (rows x cols)) and the busiest port's "
                        "beats: the layer's weights / w_lanes (/ bus_words at one lane), its "
                        "features and outputs / bus_words")
    outputs.json(args.report, report)
    outputs.commit()
    print(f"conv {layer.oc}x{layer.ic}x{layer.kh}x{layer.kw} ({cfg.rows}x{cfg.cols}), AXI "
          f"shell at {n} words per beat: {cycles} cycles end to end (roofline "
          f"{roof['roofline_cycles']}, efficiency {roof['efficiency_vs_roofline']:.3f}), "
          f"compute {st['cycles']}")
    return 0
