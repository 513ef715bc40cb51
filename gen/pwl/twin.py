# SPDX-License-Identifier: Apache-2.0
"""RTL twin of the PWL unit: input codes through the generated Verilog (:func:`rtl_pwl`)."""

import numpy as np

from gen.core.sim import run_job
from gen.core.stimulus import make_job, rate_of
from gen.core.fixed import to_signed, to_unsigned
from hdl.pwl import GATEWARE

from gen.pwl.config import PwlConfig

__all__ = ["rtl_pwl"]


def rtl_pwl(x, cfg: PwlConfig, sim="verilator", *, valid_prob=1.0, ready_prob=1.0, seed=0,
            reset_at=None, name="run", waves=False):
    """Run input codes ``x`` through the generated RTL; return ``(y_codes, result)``.

    Same contract as :func:`ref_pwl` (codes in, codes out).  ``valid_prob`` /
    ``ready_prob`` are the patterns of ``i`` / ``o``: a probability (the port's own seeded
    pattern) or a :class:`gen.core.stimulus.Pattern`.  ``result`` is the raw
    :func:`gen.core.sim.run_job` result (cycle numbers of every transfer, ...).
    """
    x = np.asarray(x, dtype=np.int64).ravel()
    slow = max(min(rate_of(valid_prob), rate_of(ready_prob)), 0.05)
    job = make_job([("i", to_unsigned(x, cfg.in_fmt.width), valid_prob)],
                   [("o", len(x), ready_prob)], seed=seed, reset_at=reset_at,
                   max_cycles=int(50 + 20 * len(x) / slow))
    result = run_job(GATEWARE, cfg, job, sim=sim, name=name, waves=waves)
    return to_signed(result["sinks"]["o"]["data"], cfg.out_fmt.width), result
