# SPDX-License-Identifier: Apache-2.0
"""The block registry: how each block's config becomes a component and a manifest.

Adding a block = a config dataclass and golden model in ``gen/<block>.py``, a
component in ``hdl/<block>.py`` and one :class:`Block` entry in :data:`BLOCKS`.
"""

from dataclasses import dataclass
from typing import Callable

from .config import SpnnError, config_from_strings

__all__ = ["Block", "BLOCKS", "get_block", "configs_for", "HEAP_TIMING_DEFAULT"]

# nextpnr's own heap-placer timing settings: --placer-heap-timingweight, --placer-heap-critexp
HEAP_TIMING_DEFAULT = (10, 2)


@dataclass(frozen=True)
class Block:
    """How to build one kind of block.

    ``build(cfg)`` returns the Amaranth component; it must have ``latency``,
    ``ii`` and ``port_info()`` (format and protocol per top-level member) and may
    have ``manifest_extra()`` (block-specific manifest fields, e.g. memory layouts).
    ``placer`` is the nextpnr placer ``spnn synth`` uses for the block unless told
    otherwise (chosen by measurement, see docs/synth.md); ``heap_timing`` the heap
    placer's ``(timing weight, criticality exponent)`` for the block when it is placed
    with ``heap`` (nextpnr's own defaults are ``(10, 2)``; conv, placed with ``static``,
    keeps the ones measured best for ``heap`` for ``--placer heap``).
    """

    name: str
    summary: str
    config_cls: type
    build: Callable
    defaults: Callable   # () -> list of configs emitted by `spnn verilog --all`
    module_name: Callable
    placer: str = "heap"
    heap_timing: tuple = HEAP_TIMING_DEFAULT


def _attr(module: str, name: str):
    """``module.name``, imported on first use (keeps ``import gen.blocks`` light)."""
    import importlib
    return getattr(importlib.import_module(module), name)


def _block(name, summary, config, component, defaults=None, placer="heap",
           heap_timing=HEAP_TIMING_DEFAULT):
    """A Block whose config class lives in ``gen.<config[0]>`` and gateware in ``hdl.<...>``."""
    config_cls = _attr(f"gen.{config[0]}", config[1])
    return Block(
        name, summary, config_cls,
        build=lambda cfg: _attr(f"hdl.{component[0]}", component[1])(cfg),
        defaults=defaults or (lambda: [config_cls()]),
        module_name=lambda cfg: cfg.module_name,
        placer=placer,
        heap_timing=heap_timing,
    )


def _pwl_build(cfg):
    from hdl.pwl import PwlUnit
    from .pwl import fit_table
    return PwlUnit(fit_table(cfg))


def _registry():
    from .pwl import PwlConfig
    pwl = Block("pwl", "piecewise-linear sigmoid/tanh unit", PwlConfig, _pwl_build,
                lambda: [PwlConfig(func="sigmoid"), PwlConfig(func="tanh")],
                lambda cfg: cfg.module_name)
    blocks = [
        pwl,
        _block("spmv", "load-balanced sparse matrix-vector engine (seed 000)",
               ("spmv", "SpmvConfig"), ("spmv", "SpmvEngine"), placer="static"),
        _block("lstm", "LSTM layer on the sparse PE array with PWL gates (seed 000)",
               ("lstm", "LstmConfig"), ("lstm", "LstmEngine")),
        _block("conv", "remainder-aware im2col MAC array for convolution (seed 002)",
               ("conv", "ConvConfig"), ("conv", "ConvArray"), placer="static",
               heap_timing=(30, 4)),
        _block("fc", "batched FC engine on FD-CSR weights, skips zeros (seed 001)",
               ("fdcsr", "FcConfig"), ("fc", "FcEngine")),
    ]
    return {block.name: block for block in blocks}


BLOCKS = _registry()


def get_block(name: str) -> Block:
    if name not in BLOCKS:
        raise SpnnError(f"block must be one of {', '.join(sorted(BLOCKS))}, not {name!r}")
    return BLOCKS[name]


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
