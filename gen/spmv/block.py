# SPDX-License-Identifier: Apache-2.0
"""The SpMV engine's block contract (:class:`gen.core.block.Block`)."""

import numpy as np

from gen.core.block import Block, WaveCase
from gen.spmv import SpmvConfig, cycle_model, ref_spmv
from gen.spmv import cli
from gen.spmv.twin import rtl_spmv
from hdl.spmv import GATEWARE, SHELL

__all__ = ["BLOCK"]


def _wave_small(sim):
    """13 x 20 at 30 % density on 3 PEs, output back-pressure 0.7."""
    cfg = SpmvConfig(pes=3, fifo_depth=2, rows_per_pe=8, max_cols=32, mem_depth=256, w_lanes=2)
    rng = np.random.default_rng(21)
    w = rng.integers(-128, 128, (13, 20)) * (rng.random((13, 20)) < 0.3)
    x = rng.integers(-100, 100, 20) * (rng.random(20) < 0.7)
    return rtl_spmv(w, x, cfg, sim, o_ready_prob=0.7, name="waves-spmv")[1]


BLOCK = Block(
    name="spmv",
    summary="load-balanced sparse matrix-vector engine (seed 000)",
    config_cls=SpmvConfig,
    gateware=GATEWARE,
    defaults=lambda: [SpmvConfig()],
    golden=ref_spmv,
    cycle_model=cycle_model,
    twin=rtl_spmv,
    cli=cli,
    waves=(WaveCase("spmv_small", _wave_small, ("state",)),),
    shell=SHELL,
    placer="static",
)
