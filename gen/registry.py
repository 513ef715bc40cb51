# SPDX-License-Identifier: Apache-2.0
"""The block registry: every block's contract (:class:`gen.core.block.Block`), in one place.

The CLI (``spnn verilog|info|run|synth|vivado``), ``make verilog``, synthesis, the
waveform regressions and the tests read :data:`BLOCKS`.  Adding a block = its packages
(``hdl/<name>/``, ``gen/<name>/`` with ``block.py``, ``tb/<name>/``, ``docs/<name>.md``)
and one line below (see README, "How to add a block").
"""

from gen.conv.block import BLOCK as CONV
from gen.core.block import HEAP_TIMING_DEFAULT, Block
from gen.core.config import SpnnError, config_from_strings
from gen.fc.block import BLOCK as FC
from gen.lstm.block import BLOCK as LSTM
from gen.pwl.block import BLOCK as PWL
from gen.spmv.block import BLOCK as SPMV

__all__ = ["Block", "BLOCKS", "get_block", "configs_for", "wave_cases", "HEAP_TIMING_DEFAULT"]

BLOCKS = {block.name: block for block in (PWL, SPMV, LSTM, CONV, FC)}


def get_block(name: str) -> Block:
    if name not in BLOCKS:
        raise SpnnError(f"block must be one of {', '.join(sorted(BLOCKS))}, not {name!r}")
    return BLOCKS[name]


def wave_cases() -> dict:
    """``{case name: (block, WaveCase)}`` over every block."""
    return {case.name: (block, case) for block in BLOCKS.values() for case in block.waves}


def _parse_sets(pairs):
    out = {}
    for pair in pairs or []:
        if "=" not in pair:
            raise SpnnError(f"--set must be KEY=VALUE, not {pair!r}")
        key, value = pair.split("=", 1)
        out[key.strip()] = value.strip()
    return out


def configs_for(args):
    """The (block, config) pairs a ``verilog`` / ``info`` / ``synth`` / ``vivado`` command
    names (BLOCK with ``--set``s, or ``--all``); every value checked, errors name the flag."""
    if args.all:
        if args.block or args.set:
            raise SpnnError("--all takes no BLOCK and no --set")
        return [(block, cfg) for block in BLOCKS.values() for cfg in block.defaults()]
    if not args.block:
        raise SpnnError("name a BLOCK or give --all; blocks: " + ", ".join(sorted(BLOCKS)))
    block = get_block(args.block)
    return [(block, config_from_strings(block.config_cls, _parse_sets(args.set),
                                        flag="--set"))]
