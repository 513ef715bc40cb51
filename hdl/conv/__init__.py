# SPDX-License-Identifier: Apache-2.0
"""The remainder-aware im2col MAC array.

``GATEWARE`` builds the top-level component from a config (:class:`gen.core.block.Gateware`).
"""

from gen.core.block import Gateware
from hdl.conv.array import ConvArray

__all__ = ["ConvArray", "GATEWARE"]

GATEWARE = Gateware("conv", ConvArray)
