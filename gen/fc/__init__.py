# SPDX-License-Identifier: Apache-2.0
"""The FC engine on FD-CSR weights: the FD-CSR format, config, schedule, golden and cycle models.

The package re-exports the numpy-only layer (``model``); the RTL twin is ``twin``, the
``spnn`` command ``cli``, the block contract ``block``.
"""

from gen.fc.model import *  # noqa: F401,F403
from gen.fc.model import __all__  # noqa: F401
