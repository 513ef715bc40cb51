# SPDX-License-Identifier: Apache-2.0
"""The sparse-CNN dataflow explorer (unrolling and load imbalance).

The package re-exports the model (``model``); ``spnn explore`` is ``cli``.
"""

from gen.explore.model import *  # noqa: F401,F403
from gen.explore.model import __all__  # noqa: F401
