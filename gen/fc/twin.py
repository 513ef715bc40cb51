# SPDX-License-Identifier: Apache-2.0
"""RTL twin of the FC engine: ``W @ X`` through the generated Verilog (:func:`rtl_fc`)."""

import numpy as np

from gen.core.sim import run_job
from hdl.fc import GATEWARE

from gen.fc import FcConfig, fc_cycle_model, fc_job, unpack_requests, unpack_y

__all__ = ["rtl_fc"]


def rtl_fc(w, x, cfg: FcConfig, sim="verilator", *, valid_prob=1.0, ready_prob=1.0, seed=0,
           reset_at=None, patterns=None, name="run", waves=False):
    """Run ``W @ X`` (integer codes; ``x`` at most ``batch`` columns) on the RTL; return
    ``(y, result)`` with ``y`` shaped like :func:`ref_fc`'s output.  The stimulus
    arguments are :func:`fc_job`'s.  ``result`` is the raw :func:`gen.core.sim.run_job` result
    plus ``schedule`` (:func:`fc_schedule`, the unstalled timing), ``model``
    (:func:`fc_cycle_model` with the job's own patterns: every port's transfer cycles) and
    ``requests`` (the memory requests the RTL issued)."""
    x = np.asarray(x)
    job, sched, fd = fc_job(w, x, cfg, valid_prob=valid_prob, ready_prob=ready_prob,
                            seed=seed, reset_at=reset_at, patterns=patterns)
    result = run_job(GATEWARE, cfg, job, sim=sim, name=name, waves=waves)
    y = unpack_y(result["sinks"]["y"]["data"], cfg)[:, :x.shape[1]]
    result["schedule"] = sched
    result["model"] = fc_cycle_model(fd, cfg, job, reset_at=reset_at)
    result["requests"] = unpack_requests(result["sinks"]["vaddr"]["data"], cfg)
    return y, result
