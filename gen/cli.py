# SPDX-License-Identifier: Apache-2.0
"""spnn: generate and run verified RTL for sparse neural-network accelerators.

Commands:
  spnn verilog   emit Verilog + JSON manifests (``--all`` = every block's defaults)
  spnn run       run your data through a block's RTL (cycle-accurate) and report
                 (blocks: pwl, spmv, lstm, conv, fc)
  spnn info      list blocks, or show one block's ports, parameters and timing
  spnn synth     Yosys/nextpnr: xc7 resources, ECP5/iCE40 Fmax
  spnn vivado    Vivado batch TCL, XDC and a FuseSoC core for a block
  spnn encode / spnn decode   FD-CSR weight files
  spnn explore   sparse convolution dataflow explorer (unrolling and load imbalance)
  spnn compile   plan a whole ONNX network onto the blocks (formats, mapping, cycles)
  spnn sweep     design-space sweeps of a block over workloads, on Dask

Examples:
  spnn verilog --all
  spnn verilog pwl --set func=tanh --set segments=16 -o build/verilog
  spnn run pwl --func sigmoid --input x.npy --out y.npy --report r.json
  spnn info pwl --set func=tanh

Invalid values print one line naming the parameter, the value and what is allowed,
exit with code 2 and write nothing.
"""

import argparse
import json
import sys

from gen import synth
from gen.core.config import SpnnError
from gen.core.outputs import output_flag
from gen.explore import cli as explore_cli
from gen.model import cli as model_cli
from gen.model import run_cli as model_run_cli
from gen.registry import BLOCKS, configs_for
from gen.sweep import cli as sweep_cli

__all__ = ["main", "RUN_COMMANDS", "EXTRA_COMMANDS", "build_parser"]

# `spnn run <name>`: each block's `cli` module provides HELP, DESCRIPTION,
# add_arguments(parser) and run(args) -> int.
RUN_COMMANDS = {name: block.cli for name, block in BLOCKS.items()} | {"model": model_run_cli}
# Further top-level commands: each module provides register(subparsers), which adds its
# parser (parser_class=_Parser is inherited) and sets `handler` to a function(args) -> int.
EXTRA_COMMANDS = (synth, *(cmd for block in BLOCKS.values() for cmd in block.commands),
                  explore_cli, model_cli, sweep_cli)


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line and exit code 2."""

    def error(self, message):
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        sys.exit(2)


def _cmd_verilog(args):
    from gen.core.emit import emit
    from gen.core.outputs import Outputs
    jobs = configs_for(args)   # validates everything before anything is written
    outputs = Outputs()
    outputs.folder(args.output, output_flag(args))
    paths = [path for block, cfg in jobs for path in emit(block, cfg, args.output, outputs)]
    outputs.commit()
    for path in paths:
        print(path)
    return 0


def _cmd_info(args):
    if not args.block:
        for name, block in sorted(BLOCKS.items()):
            print(f"{name:10s} {block.summary}")
        return 0
    from gen.core.emit import manifest
    (block, cfg), = configs_for(args)
    info = manifest(block, cfg, block.build(cfg))
    if args.json:
        print(json.dumps(info, indent=2, sort_keys=True))
        return 0
    print(f"block {info['block']}  module {info['module']}  latency {info['latency']}  "
          f"throughput {info['throughput']}")
    print("parameters:")
    for key, value in info["parameters"].items():
        print(f"  {key} = {value}")
    print("ports:")
    for port in info["ports"]:
        fmt = f" {port['format']}" if port["format"] else ""
        print(f"  {port['direction']:6s} {port['name']:24s} {port['width']:3d}{fmt}  "
              f"{port['protocol']}")
    return 0


def build_parser():
    parser = _Parser(prog="spnn", description=__doc__,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    p = sub.add_parser("verilog", help="emit Verilog and manifests",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Emit <module>.v, <module>.json (manifest) and memory images.\n\n"
                       "Examples:\n  spnn verilog --all\n"
                       "  spnn verilog pwl --set func=tanh --set segments=16 -o out/")
    p.add_argument("block", nargs="?", help="block name (see 'spnn info')")
    p.add_argument("--all", action="store_true", help="every block's default configurations")
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="set a config parameter (repeatable), e.g. --set in_fmt=Q4.12")
    p.add_argument("-o", "--output", default="build/verilog", help="output folder")
    p.set_defaults(handler=_cmd_verilog)

    p = sub.add_parser("info", help="list blocks or describe one",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="List blocks, or show a block's parameters, ports and timing."
                       "\n\nExamples:\n  spnn info\n  spnn info pwl --set func=tanh --json")
    p.add_argument("block", nargs="?")
    p.add_argument("--set", action="append", metavar="KEY=VALUE")
    p.add_argument("--json", action="store_true", help="print the manifest as JSON")
    p.set_defaults(handler=_cmd_info, all=False)

    p = sub.add_parser("run", help="run data through a block's RTL",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Run your data through the cycle-accurate RTL of a block;"
                       " 'spnn run BLOCK --help' shows each block's options.\n\nExamples:\n"
                       "  spnn run pwl --func tanh --input x.npy --out y.npy --report r.json\n"
                       "  spnn run pwl --help")
    runs = p.add_subparsers(dest="block", metavar="BLOCK", parser_class=_Parser)
    runs.required = True
    for name, module in RUN_COMMANDS.items():
        rp = runs.add_parser(name, help=module.HELP, description=module.DESCRIPTION,
                             formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(rp)
        rp.set_defaults(handler=_runner(module.run))
    for module in EXTRA_COMMANDS:
        module.register(sub)
    return parser


def _runner(run):
    """``spnn run BLOCK``: the block's ``run(args)`` with the chosen ``--engine`` and the
    simulation cost collected for the report (:func:`gen.core.sim.measuring`)."""
    def handler(args):
        from gen.core.sim import measuring, showing_progress, using_engine
        engine = getattr(args, "sim_engine", None) or args.engine   # spnn run model: --sim-engine
        with using_engine(engine), measuring(), showing_progress(sys.stderr.isatty()):
            return run(args)
    return handler


def main(argv=None) -> int:
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    args.argv = argv
    try:
        return args.handler(args)
    except SpnnError as exc:
        sys.stderr.write(f"spnn: error: {exc}\n")
        return 2


if __name__ == "__main__":
    sys.exit(main())
