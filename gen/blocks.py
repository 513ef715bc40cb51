# SPDX-License-Identifier: Apache-2.0
"""The block registry: how each block's config becomes a component and a manifest.

Adding a block = a config dataclass and golden model in ``gen/<block>.py``, a
component in ``hdl/<block>.py`` and one :class:`Block` entry in :data:`BLOCKS`.
"""

from dataclasses import dataclass
from typing import Callable

__all__ = ["Block", "BLOCKS", "get_block"]


@dataclass(frozen=True)
class Block:
    """How to build one kind of block.

    ``build(cfg)`` returns the Amaranth component; it must have ``latency``,
    ``ii`` and ``port_info()`` (format and protocol per top-level member) and may
    have ``manifest_extra()`` (block-specific manifest fields, e.g. memory layouts).
    """

    name: str
    summary: str
    config_cls: type
    build: Callable
    defaults: Callable   # () -> list of configs emitted by `spnn verilog --all`
    module_name: Callable


def _pwl_build(cfg):
    from hdl.pwl import PwlUnit
    from .pwl import fit_table
    return PwlUnit(fit_table(cfg))


def _pwl_defaults():
    from .pwl import PwlConfig
    return [PwlConfig(func="sigmoid"), PwlConfig(func="tanh")]


def _registry():
    from .pwl import PwlConfig
    from .spmv import SpmvConfig
    return {
        "spmv": Block("spmv", "load-balanced sparse matrix-vector engine (seed 000)",
                      SpmvConfig, lambda cfg: __import__("hdl.spmv").spmv.SpmvEngine(cfg),
                      lambda: [SpmvConfig()], lambda cfg: cfg.module_name),
        "pwl": Block("pwl", "piecewise-linear sigmoid/tanh unit", PwlConfig, _pwl_build,
                     _pwl_defaults, lambda cfg: cfg.module_name),
        "conv": Block("conv", "remainder-aware im2col MAC array for convolution (seed 002)",
                      __import__("gen.conv").conv.ConvConfig,
                      lambda cfg: __import__("hdl.conv").conv.ConvArray(cfg),
                      lambda: [__import__("gen.conv").conv.ConvConfig()],
                      lambda cfg: cfg.module_name),
        "fc": Block("fc", "batched FC engine on FD-CSR weights, skips zeros (seed 001)",
                    __import__("gen.fdcsr").fdcsr.FcConfig,
                    lambda cfg: __import__("hdl.fc").fc.FcEngine(cfg),
                    lambda: [__import__("gen.fdcsr").fdcsr.FcConfig()],
                    lambda cfg: cfg.module_name),
        "lstm": Block("lstm", "LSTM layer on the sparse PE array with PWL gates (seed 000)",
                      __import__("gen.lstm").lstm.LstmConfig,
                      lambda cfg: __import__("hdl.lstm").lstm.LstmEngine(cfg),
                      lambda: [__import__("gen.lstm").lstm.LstmConfig()],
                      lambda cfg: cfg.module_name),
    }


BLOCKS = _registry()


def get_block(name: str) -> Block:
    from .config import SpnnError
    if name not in BLOCKS:
        raise SpnnError(f"block must be one of {', '.join(sorted(BLOCKS))}, not {name!r}")
    return BLOCKS[name]
