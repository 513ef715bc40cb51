# SPDX-License-Identifier: Apache-2.0
"""``spnn run conv --banked``: one convolution layer, any size, through the banked array's
accelerator shell (:class:`hdl.conv.banked.shell.BankedShell`), planned by
:func:`gen.conv.banked.plan_layer` on buffers of the seed's size scaled to the array."""

import numpy as np

from gen.conv.banked import plan_layer, run_plan, seed_banked
from gen.conv.config import ConvLayer
from gen.conv.golden import ref_conv
from gen.conv.twin import rtl_banked_axi
from gen.core.config import SpnnError
from gen.conv.cli_common import array_arg, check_codes, load_layer_arrays
from gen.core.runutil import check_common, int_arg, make_report, roofline_fields, run_outputs

__all__ = ["run_banked"]

# options of the previous array that the banked one does not take, with their defaults
_NOT_BANKED = {"mapping": ("--mapping", "remainder"), "skip_pad": ("--skip-pad", False),
               "w_lanes": ("--w-lanes", None), "requant": ("--requant", None),
               "bias": ("--bias", None), "mult": ("--mult", "1"), "shift": ("--shift", "0"),
               "relu": ("--relu", False)}


def _setup(args):
    for attr, (flag, default) in _NOT_BANKED.items():
        if getattr(args, attr, default) != default:
            raise SpnnError(f"{flag} does not apply to --banked (the banked array plans its "
                            f"own rounds and has no requantisation stage yet)")
    rows, cols = array_arg(args.array)
    stride = int_arg(args.stride, "--stride", 1, 7)
    pad = int_arg(args.pad, "--pad", 0)
    dw = int_arg(args.data_width, "--data-width", 2, 18)
    ww = int_arg(args.weight_width, "--weight-width", 2, 18)
    bus = 4 if args.bus_words is None else int_arg(args.bus_words, "--bus-words", 1, 32)
    copies = int_arg(args.copies, "--copies", 1, 4)
    if copies == 3:
        raise SpnnError("--copies must be 1, 2 or 4, not 3")
    check_common(args)
    outputs = run_outputs(args)
    w, x = load_layer_arrays(args)
    if max(w.shape[2:]) > 15:
        raise SpnnError(f"--weights kernel must be at most 15x15 for --banked, not "
                        f"{w.shape[2]}x{w.shape[3]}")
    w = check_codes(w, "--weights", ww, "--weight-width")
    x = check_codes(x, "--input", dw, "--data-width")
    oc, ic, kh, kw = w.shape
    batch = x.shape[0] if x.ndim == 4 else 1
    try:
        layer = ConvLayer(oc, ic, x.shape[-2], x.shape[-1], kh, kw, stride, pad, batch)
        cfg = seed_banked(rows, cols, bus, copies=copies, data_width=dw, weight_width=ww,
                          acc_width=48)
        plan = plan_layer(layer, cfg)
    except ValueError as exc:
        raise SpnnError(str(exc)) from None
    return cfg, layer, plan, x, w, outputs


def run_banked(args) -> int:
    """``spnn run conv --banked``: plan, run every job through the shell, check the result
    against the golden model, write the output and the report."""
    cfg, layer, plan, x, w, outputs = _setup(args)
    records = []

    def conv(items):
        outs, stats, recs = rtl_banked_axi(items, cfg, args.sim, seed=args.seed,
                                           name="spnn-run")
        records.extend(zip(stats, recs))
        return outs
    y = run_plan(x, w, plan, conv)
    golden = np.stack([ref_conv(xi, w, layer.stride, layer.pad)
                       for xi in (x if x.ndim == 4 else x[None])])
    if not np.array_equal(y, golden):
        bad = np.argwhere(y != golden)[0]
        raise SystemExit(f"spnn: internal error: RTL differs from the golden model at "
                         f"{tuple(int(i) for i in bad)}")
    y = y if x.ndim == 4 else y[0]
    outputs.npy(args.out, y)
    cycles = sum(rec["end"] - rec["first_in"] + 1 for _st, rec in records)
    busy = sum(st[0] for st, _rec in records)
    issued = sum(st[1] for st, _rec in records)
    cells = cfg.rows * cfg.cols
    beats = {"s_axis_w": plan.beats["w"], "s_axis_x": plan.beats["x"],
             "m_axis_o": sum(job.G * job.S * -(-job.E // cfg.bus_words) for job in plan.jobs)}
    roof = roofline_fields(cycles, plan.compute_bound, beats)
    report = make_report(
        "conv", cfg, {"input": f"int{cfg.data_width}", "weights": f"int{cfg.weight_width}",
                      "output": f"int{cfg.acc_width}"},
        args.sim, cycles, roof["roofline_cycles"], int(y.size), 0.0,
        utilisation=layer.macs / (cells * cycles), interface="axi", array_kind="banked",
        bus_words=cfg.bus_words, copies=cfg.copies, **roof,
        roofline_efficiency=roof["efficiency_vs_roofline"],
        array=f"{cfg.rows}x{cfg.cols}", batch=layer.batch, macs=layer.macs,
        busy_mac_cycles=busy, compute_cycles=issued, compute_utilisation=busy / (cells * issued),
        jobs=len(plan.jobs), model_cycles_back_to_back=plan.cycles,
        buffers={"feat_depth": cfg.feat_depth, "weight_depth": cfg.weight_depth,
                 "out_depth": cfg.out_depth, "banks": cfg.nb},
        plan=[{"oc0": j.oc0, "channels": j.G * j.R, "n": j.n, "R": j.R, "strips": j.S,
               "strip": [j.rs, j.segw], "icq": j.icq, "resident": j.resident}
              for j in plan.jobs],
        rtl_matches_golden=True,
        utilisation_counts="MACs / (rows x cols x end-to-end cycles): each job from its "
                           "first input beat to its last output beat, summed (the register "
                           "writes between jobs not counted); compute_utilisation counts the "
                           "clocks with a beat issued",
        roofline_counts="the larger of ceil(MACs / (rows x cols)) and the busiest port's "
                        "beats as the plan sends them")
    outputs.json(args.report, report)
    outputs.commit()
    print(f"conv {layer.oc}x{layer.ic}x{layer.kh}x{layer.kw} ({cfg.rows}x{cfg.cols}, banked, "
          f"{len(plan.jobs)} job(s)), AXI shell at {cfg.bus_words} words per beat: {cycles} "
          f"cycles end to end (roofline {roof['roofline_cycles']}, efficiency "
          f"{roof['efficiency_vs_roofline']:.3f}), compute-only utilisation "
          f"{busy / (cells * issued):.3f}")
    return 0
