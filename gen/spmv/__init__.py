# SPDX-License-Identifier: Apache-2.0
"""The sparse matrix-vector engine: config, load-balancing compiler, golden and cycle models.

The package re-exports the numpy-only layer (``model``); the RTL twin is ``twin``, the
``spnn`` command ``cli``, the block contract ``block``.
"""

from gen.spmv.model import *  # noqa: F401,F403
from gen.spmv.model import __all__  # noqa: F401
