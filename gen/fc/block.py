# SPDX-License-Identifier: Apache-2.0
"""The FC engine's block contract (:class:`gen.core.block.Block`)."""

import numpy as np

from gen.core.block import Block, WaveCase
from gen.fc import FcConfig, fc_cycle_model, prune_random, ref_fc
from gen.fc import cli, codec_cli
from gen.fc.twin import rtl_fc
from hdl.fc import GATEWARE, SHELL

__all__ = ["BLOCK"]


def _wave_one(sim):
    """6 x 40 at 30 % density, batch 3, one non-zero per clock, back-pressure 0.7."""
    cfg = FcConfig(batch=3, nz_per_clock=1, segs_per_beat=2, max_cols=128, max_rows=64,
                   addr_width=12)
    rng = np.random.default_rng(23)
    w = prune_random((6, 40), 0.3, rng, cfg.w_fmt.width)
    x = rng.integers(-100, 100, (40, 3))
    return rtl_fc(w, x, cfg, sim, ready_prob=0.7, seed=23, name="waves-fc")[1]


BLOCK = Block(
    name="fc",
    summary="batched FC engine on FD-CSR weights, skips zeros (seed 001)",
    config_cls=FcConfig,
    gateware=GATEWARE,
    defaults=lambda: [FcConfig()],
    golden=ref_fc,
    cycle_model=fc_cycle_model,
    twin=rtl_fc,
    cli=cli,
    commands=(codec_cli,),
    waves=(WaveCase("fc_one", _wave_one, ()),),
    shell=SHELL,
)
