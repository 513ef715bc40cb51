# SPDX-License-Identifier: Apache-2.0
"""The remainder-aware MAC array: config, planner, golden and cycle models, layer descriptor.

The package re-exports the numpy-only layer: ``config`` (:class:`ConvConfig`,
:class:`ConvLayer`), ``golden`` (the exact integer model and a float reference),
``layout`` (the n rule, staggered copies, tile lanes, padding boxes, bounds), ``cycles``
(the exact cycle model), ``schedule`` (the mapper: :class:`Schedule`, :func:`plan`, network
tables) ``descriptor`` (the run-time layer descriptor and the fit check) and ``wstream`` (the weight
stream, one weight or ``w_lanes`` per transfer).  The RTL
twin is ``twin``, the ``spnn`` command ``cli``, the block contract ``block``.
"""

from gen.conv import banked, config, cycles, descriptor, golden, layout, schedule, wstream
from gen.conv.config import *  # noqa: F401,F403
from gen.conv.cycles import *  # noqa: F401,F403
from gen.conv.descriptor import *  # noqa: F401,F403
from gen.conv.golden import *  # noqa: F401,F403
from gen.conv.layout import *  # noqa: F401,F403
from gen.conv.schedule import *  # noqa: F401,F403
from gen.conv.wstream import *  # noqa: F401,F403

__all__ = (config.__all__ + golden.__all__ + layout.__all__ + cycles.__all__ + schedule.__all__
           + descriptor.__all__ + wstream.__all__)
