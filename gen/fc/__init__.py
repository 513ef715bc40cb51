# SPDX-License-Identifier: Apache-2.0
"""The FC engine on FD-CSR weights: the FD-CSR format, config, schedule, golden and cycle models.

The package re-exports the numpy-only layer: ``fdcsr`` (the format, ``.npz`` files,
storage and bandwidth model), ``config`` (:class:`FcConfig`), ``golden`` (:func:`ref_fc`,
exact integer ``W @ X``), ``schedule`` (:func:`decode_walk` and :func:`fc_schedule`, the
closed form, exact when every stream is always valid / ready), ``cycles``
(:func:`fc_cycle_model`, clock by clock, exact under any per-port stimulus of
:mod:`gen.core.stimulus`) and ``job`` (:func:`fc_job`, the stream job, and its unpacking).
The RTL twin is ``twin`` (:func:`rtl_fc`), the ``spnn`` command ``cli``, the block
contract ``block``.
"""

from gen.fc import config, cycles, fdcsr, golden, job, schedule
from gen.fc.config import *  # noqa: F401,F403
from gen.fc.cycles import *  # noqa: F401,F403
from gen.fc.fdcsr import *  # noqa: F401,F403
from gen.fc.golden import *  # noqa: F401,F403
from gen.fc.job import *  # noqa: F401,F403
from gen.fc.schedule import *  # noqa: F401,F403

__all__ = (fdcsr.__all__ + config.__all__ + golden.__all__ + schedule.__all__ + cycles.__all__
           + job.__all__)
