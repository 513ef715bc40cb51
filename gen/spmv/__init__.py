# SPDX-License-Identifier: Apache-2.0
"""The sparse matrix-vector engine: config, load-balancing compiler, golden and cycle models.

The package re-exports the numpy-only layer: ``config`` (:class:`SpmvConfig`, allocator
names, weight-word kinds), ``golden`` (the bit-exact golden model), ``compile`` (pruning,
row allocation, memory images, checkerboard tiling), ``beats`` (the weight stream) and
``cycles`` (the exact cycle model) and ``planner`` (column blocks and block plans for
end-to-end time, the roofline).  The RTL twin is ``twin``, the ``spnn`` command ``cli``,
the block contract ``block``.
"""

from gen.spmv import beats, compile, config, cycles, golden, planner
from gen.spmv.beats import *  # noqa: F401,F403
from gen.spmv.compile import *  # noqa: F401,F403
from gen.spmv.config import *  # noqa: F401,F403
from gen.spmv.cycles import *  # noqa: F401,F403
from gen.spmv.golden import *  # noqa: F401,F403
from gen.spmv.planner import *  # noqa: F401,F403

__all__ = (config.__all__ + golden.__all__ + compile.__all__ + beats.__all__ + cycles.__all__
           + planner.__all__)
