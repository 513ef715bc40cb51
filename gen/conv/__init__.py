# SPDX-License-Identifier: Apache-2.0
"""The remainder-aware MAC array: config, planner, golden and cycle models, layer descriptor.

The package re-exports the numpy-only layer (``model``); the RTL twin is ``twin``, the
``spnn`` command ``cli``, the block contract ``block``.
"""

from gen.conv.model import *  # noqa: F401,F403
from gen.conv.model import __all__  # noqa: F401
