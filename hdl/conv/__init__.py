# SPDX-License-Identifier: Apache-2.0
"""The remainder-aware im2col MAC array.

``GATEWARE`` builds the array from a config, ``SHELL`` its accelerator shell (AXI4-Stream,
AXI4-Lite control, ``shell``); both :class:`gen.core.block.Gateware`.  ``BANKED`` builds
the banked array (:mod:`hdl.conv.banked`), the array's successor for data movement.
"""

from gen.core.block import Gateware
from hdl.conv.array import ConvArray
from hdl.conv.banked import BankedArray
from hdl.conv.shell import ConvShell

__all__ = ["ConvArray", "ConvShell", "BankedArray", "GATEWARE", "SHELL", "BANKED"]

GATEWARE = Gateware("conv", ConvArray)
SHELL = Gateware("conv_axi", ConvShell, lambda cfg: cfg.shell_name)
BANKED = Gateware("conv_banked", BankedArray)
