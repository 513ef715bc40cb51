# SPDX-License-Identifier: Apache-2.0
"""The PWL unit's block contract (:class:`gen.core.block.Block`)."""

import numpy as np

from gen.core.block import Block, WaveCase
from gen.core.fixed import to_unsigned
from gen.core.sim import run_job
from gen.core.stimulus import make_job
from gen.pwl import PwlConfig, cycle_model, ref_pwl
from gen.pwl import cli
from gen.pwl.twin import rtl_pwl
from hdl.pwl import GATEWARE, SHELL

__all__ = ["BLOCK"]


def _wave(name, func, n, seed, valid_prob, ready_prob, reset_at=None):
    """A raw stream job on the default unit: ``n`` random codes, idle inputs and
    back-pressure at the given rates, optionally a reset."""
    def run(sim):
        x = np.random.default_rng(seed).integers(-32768, 32768, n)
        job = make_job([("i", to_unsigned(x, 16), valid_prob)], [("o", n, ready_prob)],
                       seed=seed, reset_at=reset_at, max_cycles=20 * n + 100)
        return run_job(GATEWARE, PwlConfig(func=func), job, sim=sim, name=f"waves-{name}")
    return WaveCase(name, run, ("advance",))


BLOCK = Block(
    name="pwl",
    summary="piecewise-linear sigmoid/tanh unit",
    config_cls=PwlConfig,
    gateware=GATEWARE,
    defaults=lambda: [PwlConfig(func="sigmoid"), PwlConfig(func="tanh")],
    golden=ref_pwl,
    cycle_model=cycle_model,
    twin=rtl_pwl,
    cli=cli,
    waves=(_wave("pwl_sigmoid_backpressure", "sigmoid", 48, 11, 0.7, 0.6),
           _wave("pwl_tanh_reset", "tanh", 40, 12, 0.9, 0.8, reset_at=25)),
    shell=SHELL,
)
