# SPDX-License-Identifier: Apache-2.0
"""The PWL sigmoid/tanh unit: config, table fit, golden and cycle models.

The package re-exports the numpy-only layer: ``config`` (:class:`PwlConfig`, the float
references), ``golden`` (the segment table and the bit-exact golden model), ``fit`` (the
table fit) and ``cycles`` (the exact cycle model).  The RTL twin is ``twin``, the ``spnn``
command ``cli``, the block contract ``block``.
"""

from gen.pwl import config, cycles, fit, golden
from gen.pwl.config import *  # noqa: F401,F403
from gen.pwl.cycles import *  # noqa: F401,F403
from gen.pwl.fit import *  # noqa: F401,F403
from gen.pwl.golden import *  # noqa: F401,F403

__all__ = config.__all__ + golden.__all__ + fit.__all__ + cycles.__all__
