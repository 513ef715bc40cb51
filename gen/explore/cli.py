# SPDX-License-Identifier: Apache-2.0
"""``spnn explore conv``: cycles, efficiency and load-imbalance loss of a sparse convolution."""

import argparse

from gen.explore import SKIPS, UNROLLS, ExploreConfig, explore, parse_pe
from gen.core.outputs import Outputs
from gen.core.runutil import config_or_error, int_arg, load_npy

__all__ = ["register"]

DESCRIPTION = """\
Model one convolution layer on one unrolling of P multipliers (seed 003) with zero
skipping, on your real weights and activations, and report cycles, useful MACs, parallel
efficiency and the loss caused by load imbalance, against dense execution and the ideal
(every zero skipped, perfectly balanced).  See docs/explore.md for the exact models.

Unrollings (--pe AxB):
  synapse  Kx x Ky weight-stationary systolic array, activations broadcast
  neuron   Tr x Tc output neurons, weights broadcast
  fmap     Tn input x Tm output maps, one adder tree per output map
  array    rows x cols im2col MAC array of gen/conv.py (rows = output channels)

Inputs: --weights (M, N, Kh, Kw), --input (N, H, W) or a batch (B, N, H, W), .npy,
integer or float; only exact zeros matter.

Examples:
  spnn explore conv --weights W.npy --input X.npy --unroll fmap --pe 4x8 --skip both
  spnn explore conv --weights W.npy --input X.npy --unroll synapse --pe 3x3 --pad 1
  spnn explore conv --weights W.npy --input X.npy --unroll array --pe 16x4 \\
      --skip acts --lockstep --report r.json
"""


def _fmt(v):
    return "-" if v is None else f"{v:.4f}"


def _print(rep):
    lay = rep["layer"]
    na, nb = rep["pe_names"]
    print(f"layer   M={lay['m']} N={lay['n']} kernel {lay['kh']}x{lay['kw']} input "
          f"{lay['h']}x{lay['w']} stride {lay['stride']} pad {lay['pad']} -> "
          f"{lay['ho']}x{lay['wo']}, {lay['images']} image(s)")
    print(f"unroll  {rep['unroll']} {na} x {nb} = {rep['pe'][0]} x {rep['pe'][1]} "
          f"({rep['pes']} PEs), "
          f"skip {rep['skip']}{' lockstep' if rep['lockstep'] else ''}, "
          f"degree of freedom {rep['dof_seed']}")
    print(f"density weights {rep['weight_density']:.4f}  activations "
          f"{rep['activation_density']:.4f}")
    print(f"MACs    dense {rep['dense_macs']}  useful {rep['useful_macs']}  performed "
          f"{rep['performed_macs']}")
    print(f"cycles  {rep['cycles']}  dense {rep['dense_cycles']}  ideal {rep['ideal_cycles']}  "
          f"speedup vs dense {_fmt(rep['speedup_vs_dense'])}  efficiency (ideal/cycles) "
          f"{_fmt(rep['efficiency'])}")
    print(f"PE-cycles: busy {_fmt(rep['parallel_efficiency'])} (useful "
          f"{_fmt(rep['utilisation'])})  imbalance loss {_fmt(rep['imbalance_loss'])}  "
          f"mapping loss {_fmt(rep['mapping_loss'])}  drain loss {_fmt(rep['drain_loss'])}")


_FLAGS = {"max_groups": "--groups", "drain_rows": "--drain-rows", "stride": "--stride",
          "pad": "--pad", "unroll": "--unroll", "mapping": "--mapping", "a": "--pe",
          "b": "--pe"}


def _conv(args) -> int:
    a, b = parse_pe(args.pe)
    stride = int_arg(args.stride, "--stride", 1, 64)
    pad = int_arg(args.pad, "--pad", 0, 64)
    drain = int_arg(args.drain_rows, "--drain-rows", 0, 1024)
    groups = int_arg(args.groups, "--groups", 1, 8)
    cfg = config_or_error(ExploreConfig, _FLAGS, unroll=args.unroll, a=a, b=b, stride=stride,
                          pad=pad, mapping=args.mapping, max_groups=groups, drain_rows=drain)
    outputs = Outputs()
    outputs.file(args.report, "--report")
    w = load_npy(args.weights, "--weights")
    x = load_npy(args.input, "--input")
    rep = explore(w, x, cfg, args.skip, lockstep=args.lockstep)
    rep["weights_file"], rep["input_file"] = str(args.weights), str(args.input)
    outputs.json(args.report, rep)
    outputs.commit()
    _print(rep)
    if args.report:
        print(f"report  {args.report}")
    return 0


def register(subparsers):
    """Add the top-level ``explore`` command with its ``conv`` subcommand."""
    p = subparsers.add_parser("explore", help="sparse dataflow explorer (seed 003)",
                              description="Sparse dataflow explorer.\n\nExamples:\n"
                              "  spnn explore conv --weights W.npy --input X.npy "
                              "--unroll fmap --pe 4x8",
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="what", metavar="WHAT")
    sub.required = True
    c = sub.add_parser("conv", help="one convolution layer on one unrolling",
                       description=DESCRIPTION,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    c.add_argument("--weights", required=True, metavar="W.npy", help="weights (M, N, Kh, Kw)")
    c.add_argument("--input", required=True, metavar="X.npy",
                   help="activations (N, H, W) or (B, N, H, W)")
    c.add_argument("--unroll", required=True, choices=UNROLLS, help="unrolling")
    c.add_argument("--pe", required=True, metavar="AxB",
                   help="parallel degrees: KxxKy, TrxTc, TnxTm or ROWSxCOLS")
    c.add_argument("--skip", default="both", choices=SKIPS,
                   help="zeros skipped (default both)")
    c.add_argument("--lockstep", action="store_true",
                   help="skip a slot only when no PE of the step needs it (no imbalance)")
    c.add_argument("--stride", default="1", help="stride (default 1)")
    c.add_argument("--pad", default="0", help="zero padding (default 0)")
    c.add_argument("--mapping", default="naive", choices=["naive", "seed", "remainder"],
                   help="array only: gen.conv mapping (default naive)")
    c.add_argument("--groups", default="4", help="array only: max groups n (default 4)")
    c.add_argument("--drain-rows", default="0",
                   help="array only: accumulator rows drained per clock (0 = rows)")
    c.add_argument("--report", metavar="R.json", help="write the JSON report here")
    c.set_defaults(handler=_conv)
    return p
