# SPDX-License-Identifier: Apache-2.0
"""The remainder-aware im2col MAC array.

``GATEWARE`` builds the array from a config, ``SHELL`` its accelerator shell (AXI4-Stream,
AXI4-Lite control, ``shell``); both :class:`gen.core.block.Gateware`.  ``BANKED`` builds
the banked array (:mod:`hdl.conv.banked`), the array's successor for data movement, and
``BANKED_SHELL`` its accelerator shell.
"""

from gen.core.block import Gateware
from hdl.conv.array import ConvArray
from hdl.conv.banked import BankedArray
from hdl.conv.banked.shell import BankedShell
from hdl.conv.shell import ConvShell

__all__ = ["ConvArray", "ConvShell", "BankedArray", "BankedShell", "GATEWARE", "SHELL",
           "BANKED", "BANKED_SHELL"]

GATEWARE = Gateware("conv", ConvArray)
SHELL = Gateware("conv_axi", ConvShell, lambda cfg: cfg.shell_name)
BANKED = Gateware("conv_banked", BankedArray)
BANKED_SHELL = Gateware("conv_banked_axi", BankedShell, lambda cfg: cfg.shell_name)
