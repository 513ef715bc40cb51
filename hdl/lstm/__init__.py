# SPDX-License-Identifier: Apache-2.0
"""The LSTM engine: sparse PE array with PWL gates (``pe``, ``pwl``) and its top level (``engine``).

``GATEWARE`` builds the top-level component from a config (:class:`gen.core.block.Gateware`).
"""

from gen.core.block import Gateware
from hdl.lstm.engine import LstmEngine

__all__ = ["LstmEngine", "GATEWARE"]

GATEWARE = Gateware("lstm", LstmEngine)
