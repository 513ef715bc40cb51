# SPDX-License-Identifier: Apache-2.0
"""``spnn run conv``: one convolution layer, any size, through the MAC array's accelerator
shell (:class:`hdl.conv.banked.shell.BankedShell`), planned by
:func:`gen.conv.banked.plan_layer` on buffers of the seed's size scaled to the array."""

import numpy as np

from gen.conv.banked import COPIES, BankedConfig, plan_layer, run_plan, seed_banked
from gen.conv.banked.shell_cycles import banked_shell_cycle_model
from gen.conv.cli_common import array_arg, check_codes, load_layer_arrays
from gen.conv.config import ConvLayer
from gen.conv.golden import ref_conv
from gen.conv.twin import rtl_banked_axi
from gen.core.config import SpnnError
from gen.core.fixed import requant_sums
from gen.core.runutil import (add_common_arguments, add_requant_arguments, check_common,
                              int_arg, make_report, requant_args, roofline_fields,
                              run_outputs)

__all__ = ["HELP", "DESCRIPTION", "add_arguments", "run", "MAPPINGS"]

HELP = "MAC array for convolution (seed 002): any layer, AXI shell, loads overlapped"
DESCRIPTION = """\
Run one convolution layer (integers), any size, through the cycle-accurate RTL of the
ROWSxCOLS MAC array's accelerator shell and write the exact integer result.

--weights holds (Oc, Ic, kh, kw) integers, --input (Ic, H, W) integers or a batch
(B, Ic, H, W) of B images run with the same weights; the output .npy holds the (Oc, Ho, Wo)
(or (B, Oc, Ho, Wo)) int64 sums (cross-correlation, as in CNNs).  The host planner
(gen.conv.banked.plan_layer) cuts the layer into jobs (output-channel parts of R channels
computed by n copies, strips of output rows, input-channel chunks) on buffers of the seed's
size scaled to --array; each job is one descriptor in the AXI4-Lite registers, its weights
and features enter over AXI4-Stream --bus-words words per beat (default 4) into one buffer
set while the other computes, and the sums leave bus_words per beat.  The report gives the
end-to-end cycles (each job from its first input beat to its last output beat, checked
against the exact shell model), the roofline bound, the utilisation end to end and
compute-only, the copies n per job and the plan.

--requant BITS builds the shell's requantisation stage: the sums plus --bias (one per
output channel), times --mult, shifted right by --shift (round half up), saturated to
BITS-bit codes, clamped at 0 with --relu (docs/axi.md); each job then starts every
channel's sums on a new beat.

--mapping remainder (default) lets a part use up to --copies copies of its channels on the
array's rows (the remainder mapping); naive uses one copy (rows = output channels, the
remainder rows idle).  --banked is accepted for scripts written when this array was an
alternative; it changes nothing.

Examples:
  spnn run conv --weights w.npy --input x.npy --out y.npy --report r.json
  spnn run conv --weights w.npy --input x.npy --array 128x16 --bus-words 16
  spnn run conv --weights w.npy --input x.npy --stride 2 --pad 0 --array 8x4 \\
      --mapping naive --sim icarus
  spnn run conv --weights w.npy --input batch.npy --array 16x4 --out y.npy   # (B,Ic,H,W)
  spnn run conv --weights w.npy --input x.npy --requant 8 --bias b.npy --shift 9 --relu \\
      --out y8.npy       # bias, shift, ReLU, 8-bit results in the shell
"""

MAPPINGS = ("naive", "remainder")


def add_arguments(parser):
    parser.add_argument("--weights", required=True, metavar="W.npy",
                        help="weights, integers, shape (Oc, Ic, kh, kw), kernel at most 15x15")
    parser.add_argument("--input", required=True, metavar="X.npy",
                        help="input features, integers, shape (Ic, H, W) or (B, Ic, H, W)")
    parser.add_argument("--out", metavar="Y.npy",
                        help="write the (Oc, Ho, Wo) or (B, Oc, Ho, Wo) result here")
    parser.add_argument("--stride", default="1", help="stride 1..7 (default 1)")
    parser.add_argument("--pad", default="1", help="zero padding on every side (default 1)")
    parser.add_argument("--array", default="16x4",
                        help="MAC array ROWSxCOLS, COLS a power of two (default 16x4)")
    parser.add_argument("--mapping", default="remainder",
                        help="remainder | naive (default remainder: up to --copies copies "
                        "of a part's channels on the rows; naive: one copy)")
    parser.add_argument("--copies", default="2", metavar="N",
                        help="the most copies a part may use, 1, 2, 4 or 8 (default 2)")
    parser.add_argument("--data-width", default="8", help="feature bits, signed (default 8)")
    parser.add_argument("--weight-width", default="8", help="weight bits, signed (default 8)")
    parser.add_argument("--bus-words", default=None, metavar="N",
                        help="words per AXI4-Stream beat on every stream, 1..32 (default 4)")
    parser.add_argument("--w-lanes", default=None, metavar="L",
                        help="weights per clock: equal to --bus-words (the weight loader "
                        "takes a whole beat a clock); kept for older scripts")
    parser.add_argument("--skip-pad", action="store_true",
                        help="not available: the array reads each strip's padded window")
    parser.add_argument("--banked", action="store_true",
                        help="accepted for older scripts; the array is always the banked one")
    add_requant_arguments(parser, "output channel")
    add_common_arguments(parser)


def _options(args) -> dict:
    """The array and run options, checked (one-line errors naming the flag)."""
    rows, cols = array_arg(args.array)
    if args.mapping not in MAPPINGS:
        raise SpnnError(f"--mapping must be one of {', '.join(MAPPINGS)}, not "
                        f"{args.mapping!r}")
    copies = int_arg(args.copies, "--copies", 1, 8)
    if copies not in COPIES:
        raise SpnnError(f"--copies must be 1, 2, 4 or 8, not {args.copies}")
    bus = 4 if args.bus_words is None else int_arg(args.bus_words, "--bus-words", 1, 32)
    if args.w_lanes is not None and int_arg(args.w_lanes, "--w-lanes", 1, 32) != bus:
        raise SpnnError(f"--w-lanes must equal --bus-words ({bus}): the weight loader takes "
                        f"one whole beat per clock, not {args.w_lanes}")
    if args.skip_pad:
        raise SpnnError("--skip-pad does not apply: the array reads each strip's padded "
                        "window, so padding beats cost no extra round")
    return {"rows": rows, "cols": cols, "bus": bus,
            "copies": 1 if args.mapping == "naive" else copies,
            "stride": int_arg(args.stride, "--stride", 1, 7),
            "pad": int_arg(args.pad, "--pad", 0),
            "dw": int_arg(args.data_width, "--data-width", 2, 18),
            "ww": int_arg(args.weight_width, "--weight-width", 2, 18)}


def _setup(args):
    o = _options(args)
    check_common(args)
    outputs = run_outputs(args)
    w, x = load_layer_arrays(args)
    if max(w.shape[2:]) > 15:
        raise SpnnError(f"--weights kernel must be at most 15x15, not "
                        f"{w.shape[2]}x{w.shape[3]}")
    w = check_codes(w, "--weights", o["ww"], "--weight-width")
    x = check_codes(x, "--input", o["dw"], "--data-width")
    oc, ic, kh, kw = w.shape
    worst = (ic * kh * kw) << (o["dw"] + o["ww"] - 2)
    if worst > (1 << 47) - 1:
        raise SpnnError(f"--weights: a sum of {ic * kh * kw} products of --data-width "
                        f"{o['dw']} and --weight-width {o['ww']} codes can reach {worst}, "
                        f"beyond the 48-bit sums; use narrower widths or fewer input channels")
    if args.bus_words is None and args.requant is not None:
        args.bus_words = str(o["bus"])         # the stage is in the shell, always built here
    rq_width, rq = requant_args(args, oc, 48)
    rq_cfg = dict(rq_width=rq_width, rq_depth=1 << max(1, (oc - 1).bit_length())) \
        if rq_width else {}
    batch = x.shape[0] if x.ndim == 4 else 1
    try:
        layer = ConvLayer(oc, ic, x.shape[-2], x.shape[-1], kh, kw, o["stride"], o["pad"],
                          batch)
        cfg = seed_banked(o["rows"], o["cols"], o["bus"], copies=o["copies"],
                          data_width=o["dw"], weight_width=o["ww"], acc_width=48, **rq_cfg)
        plan = plan_layer(layer, cfg)
    except ValueError as exc:
        raise SpnnError(str(exc)) from None
    return cfg, layer, plan, x, w, outputs, rq


def _model_cycles(records, plan, cfg: BankedConfig, seed: int) -> int:
    """The jobs' end-to-end cycles by the exact shell model (:func:`banked_shell_cycle_model`)
    at full rate (with the stage, every job loads its channels' biases); exits with an
    internal error unless every job's bench record (start, first input beat, last output
    beat) equals the model's."""
    from gen.core.sim import axi_ports
    from hdl.conv.banked.shell import banked_shell_ports
    sources, sinks = axi_ports(*banked_shell_ports(cfg), seed=seed)
    model = banked_shell_cycle_model(plan.jobs, cfg, {p: pat for p, _, pat in sources + sinks},
                                     bias_loads=[bool(cfg.rq_width)] * len(plan.jobs))
    keys = ("start_ack", "first_in", "end")
    if not all(all(rec[k] == pred[k] for k in keys) for (_st, rec), pred in zip(records, model)):
        raise SystemExit("spnn: internal error: the shell's cycles differ from the exact "
                         "shell model (gen.conv.banked.shell_cycles)")
    return sum(pred["end"] - pred["first_in"] + 1 for pred in model)


def run(args) -> int:
    """Plan the layer, run every job through the shell, check the result against the golden
    model and the cycles against the exact shell model, write the output and the report."""
    cfg, layer, plan, x, w, outputs, rq = _setup(args)
    records = []

    def conv(items):
        if rq is not None:
            items = [item + (rq,) for item in items]
        outs, stats, recs = rtl_banked_axi(items, cfg, args.sim, seed=args.seed,
                                           name="spnn-run")
        records.extend(zip(stats, recs))
        return outs
    y = run_plan(x, w, plan, conv)
    golden = np.stack([ref_conv(xi, w, layer.stride, layer.pad)
                       for xi in (x if x.ndim == 4 else x[None])])
    if rq is not None:
        bias = np.asarray(rq.bias, dtype=np.int64)[None, :, None, None]
        golden = requant_sums(golden, bias, mult=rq.mult, shift=rq.shift,
                              width=cfg.rq_width, relu=rq.relu)
    if not np.array_equal(y, golden):
        bad = np.argwhere(y != golden)[0]
        raise SystemExit(f"spnn: internal error: RTL differs from the golden model at "
                         f"{tuple(int(i) for i in bad)}")
    model_cycles = _model_cycles(records, plan, cfg, args.seed)
    y = y if x.ndim == 4 else y[0]
    report = _report(args, cfg, layer, plan, records, y, rq, model_cycles)
    outputs.npy(args.out, y)
    outputs.json(args.report, report)
    outputs.commit()
    print(f"conv {layer.oc}x{layer.ic}x{layer.kh}x{layer.kw} ({cfg.rows}x{cfg.cols}, "
          f"{len(plan.jobs)} job(s), n per job {report['n_per_pass']}), AXI shell at "
          f"{cfg.bus_words} words per beat: {report['cycles']} cycles end to end (roofline "
          f"{report['roofline_cycles']}, efficiency {report['efficiency_vs_roofline']:.3f}), "
          f"utilisation {report['utilisation']:.3f} end to end, "
          f"{report['compute_utilisation']:.3f} compute-only")
    return 0


def _report(args, cfg, layer, plan, records, y, rq, model_cycles) -> dict:
    cycles = sum(rec["end"] - rec["first_in"] + 1 for _st, rec in records)
    busy = sum(st[0] for st, _rec in records)
    issued = sum(st[1] for st, _rec in records)
    cells = cfg.rows * cfg.cols
    beats = {"s_axis_w": plan.beats["w"], "s_axis_x": plan.beats["x"],
             "m_axis_o": sum(job.G * job.S * job.obeats for job in plan.jobs)}
    roof = roofline_fields(cycles, plan.compute_bound, beats)
    extra = ({"requant": {"bits": cfg.rq_width, "mult": rq.mult, "shift": rq.shift,
                          "relu": rq.relu, "bias": args.bias is not None}}
             if rq is not None else {})
    return make_report(
        "conv", cfg, {"input": f"int{cfg.data_width}", "weights": f"int{cfg.weight_width}",
                      "output": f"int{cfg.rq_width or cfg.acc_width}"},
        args.sim, cycles, roof["roofline_cycles"], int(y.size), 0.0, **extra,
        utilisation=layer.macs / (cells * cycles), interface="axi", array_kind="banked",
        bus_words=cfg.bus_words, w_lanes=cfg.bus_words, copies=cfg.copies,
        mapping=args.mapping, **roof, roofline_efficiency=roof["efficiency_vs_roofline"],
        array=f"{cfg.rows}x{cfg.cols}",
        layer={"oc": layer.oc, "ic": layer.ic, "h": layer.h, "w": layer.w, "kh": layer.kh,
               "kw": layer.kw, "stride": layer.stride, "pad": layer.pad, "ho": layer.ho,
               "wo": layer.wo},
        batch=layer.batch, macs=layer.macs,
        busy_mac_cycles=busy, compute_cycles=issued, compute_utilisation=busy / (cells * issued),
        jobs=len(plan.jobs), n_per_pass=[j.n for j in plan.jobs],
        model_cycles_back_to_back=plan.cycles,
        end_to_end_model_cycles=model_cycles,
        job_cycles=[rec["end"] - rec["first_in"] + 1 for _st, rec in records],
        buffers={"feat_depth": cfg.feat_depth, "weight_depth": cfg.weight_depth,
                 "out_depth": cfg.out_depth, "banks": cfg.nb},
        plan=[{"oc0": j.oc0, "channels": j.G * j.R, "n": j.n, "R": j.R, "strips": j.S,
               "strip": [j.rs, j.segw], "fold": j.fold, "icq": j.icq, "resident": j.resident,
               "span": j.span, "pack": j.pack}
              for j in plan.jobs],
        rtl_matches_golden=True, rtl_matches_model=True,
        utilisation_counts="MACs / (rows x cols x end-to-end cycles): each job from its "
                           "first input beat to its last output beat, summed (the register "
                           "writes between jobs not counted); compute_utilisation counts the "
                           "clocks with a beat issued",
        roofline_counts="the larger of ceil(MACs / (rows x cols)) and the busiest port's "
                        "beats as the plan sends them; bandwidth_bound in plan_bounds is the "
                        "least traffic the buffer sizes force over the planner's tilings",
        plan_bounds={"compute_bound_cycles": plan.compute_bound,
                     "bandwidth_bound_cycles": plan.bandwidth_bound,
                     "roofline_cycles": plan.roofline})
