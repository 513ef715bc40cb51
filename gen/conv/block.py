# SPDX-License-Identifier: Apache-2.0
"""The MAC array's block contract (:class:`gen.core.block.Block`)."""

import numpy as np

from gen.conv import ConvConfig, ConvLayer, layer_cycles, plan, ref_conv
from gen.conv import cli
from gen.conv.twin import rtl_conv
from gen.core.block import Block, WaveCase
from hdl.conv import GATEWARE, SHELL

__all__ = ["BLOCK"]


def _wave_8x4_n2(sim):
    """An 8 x 4 array, one 3 x 3 layer (Oc = 3 < rows, two output rows per pass),
    output back-pressure 0.8."""
    cfg = ConvConfig(rows=8, cols=4, max_groups=4, feat_depth=512, weight_depth=512,
                     out_depth=128, max_slots=64, max_dim=16)
    rng = np.random.default_rng(22)
    layer = ConvLayer(3, 2, 6, 5, 3, 3, 1, 1)
    sched = plan(layer, cfg, "remainder")
    x = rng.integers(-128, 128, (layer.ic, layer.h, layer.w))
    w = rng.integers(-128, 128, (layer.oc, layer.ic, layer.kh, layer.kw))
    return rtl_conv([(x, w, sched)], cfg, sim, ready_prob=0.8, name="waves-conv")[2]


BLOCK = Block(
    name="conv",
    summary="remainder-aware im2col MAC array for convolution (seed 002)",
    config_cls=ConvConfig,
    gateware=GATEWARE,
    defaults=lambda: [ConvConfig()],
    golden=ref_conv,
    cycle_model=layer_cycles,
    twin=rtl_conv,
    cli=cli,
    commands=(),
    waves=(WaveCase("conv_8x4_n2", _wave_8x4_n2, ("ctl_state",)),),
    shell=SHELL,
    placer="static",
    heap_timing=(30, 4),
)
