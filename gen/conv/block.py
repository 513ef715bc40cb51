# SPDX-License-Identifier: Apache-2.0
"""The MAC array's block contract (:class:`gen.core.block.Block`)."""

import numpy as np

from gen.conv import cli
from gen.conv.banked import BankedConfig, make_job, run_cycles
from gen.conv.config import ConvLayer
from gen.conv.golden import ref_conv
from gen.conv.twin import rtl_banked
from gen.core.block import Block, WaveCase
from hdl.conv import GATEWARE, SHELL

__all__ = ["BLOCK"]

WAVE_CFG = BankedConfig(rows=8, cols=4, bus_words=4, copies=2, feat_depth=64,
                        weight_depth=64, out_depth=32)


def _wave_8x4(sim):
    """An 8 x 4 array, bus_words 4: one 3 x 3 layer of 3 output channels on two copies, two
    strips of two output rows, two input-channel chunks (resident weights), then a second
    job back to back; sums back-pressured 0.8, inputs idle 10 %."""
    rng = np.random.default_rng(22)
    layer = ConvLayer(3, 2, 4, 5, 3, 3, 1, 1)
    job = make_job(layer, WAVE_CFG, rs=2, segw=5, icq=1, n=2)
    x = rng.integers(-128, 128, (layer.ic, layer.h, layer.w))
    w = rng.integers(-128, 128, (layer.oc, layer.ic, layer.kh, layer.kw))
    return rtl_banked([(x, w, job), (x, w, job)], WAVE_CFG, sim, valid=0.9, ready=0.8,
                      seed=3, name="waves-conv")[2]


BLOCK = Block(
    name="conv",
    summary="MAC array for convolution (seed 002): banked features, loads overlapped",
    config_cls=BankedConfig,
    gateware=GATEWARE,
    defaults=lambda: [BankedConfig()],
    golden=ref_conv,
    cycle_model=run_cycles,
    twin=rtl_banked,
    cli=cli,
    commands=(),
    waves=(WaveCase("conv_8x4_banked", _wave_8x4, ("drained_job",)),),
    shell=SHELL,
    placer="static",
    heap_timing=(10, 2),
)
