# SPDX-License-Identifier: Apache-2.0
"""The LSTM engine's block contract (:class:`gen.core.block.Block`)."""

import numpy as np

from gen.core.block import Block, WaveCase
from gen.core.fixed import quantise
from gen.lstm import (LstmConfig, LstmFloat, compile_lstm, cycle_model, prune_lstm,
                      quantise_lstm, ref_lstm)
from gen.lstm import cli
from gen.lstm.twin import rtl_lstm
from hdl.lstm import GATEWARE, SHELL

__all__ = ["BLOCK"]


def _wave_small(sim):
    """H = 7, X = 3, two steps at 50 % density on 3 PEs, output back-pressure 0.7."""
    cfg = LstmConfig(pes=3, max_inputs=8, max_hidden=16, fifo_depth=4, mem_depth=256,
                     segments=8)
    rng = np.random.default_rng(24)
    hidden, inputs, steps = 7, 3, 2
    model = LstmFloat(rng.uniform(-1, 1, (4 * hidden, inputs)),
                      rng.uniform(-1, 1, (4 * hidden, hidden)), rng.uniform(-1, 1, 4 * hidden))
    q = quantise_lstm(prune_lstm(model, 0.5), cfg)
    xs = quantise(rng.uniform(-2, 2, (steps, inputs)), cfg.x_fmt)
    h0 = quantise(rng.uniform(-1, 1, hidden), cfg.x_fmt)
    c0 = quantise(rng.uniform(-3, 3, hidden), cfg.c_fmt)
    return rtl_lstm(compile_lstm(q, cfg), [(xs, h0, c0)], sim, o_ready_prob=0.7, seed=24,
                    name="waves-lstm")[1]


BLOCK = Block(
    name="lstm",
    summary="LSTM layer on the sparse PE array with PWL gates (seed 000)",
    config_cls=LstmConfig,
    gateware=GATEWARE,
    defaults=lambda: [LstmConfig()],
    golden=ref_lstm,
    cycle_model=cycle_model,
    twin=rtl_lstm,
    cli=cli,
    waves=(WaveCase("lstm_small", _wave_small, ("state",)),),
    shell=SHELL,
    # the shell's worst paths are the engine's stall logic; static places them closer
    # (docs/synth.md, "Seeds and placers")
    shell_placer="static",
)
