# SPDX-License-Identifier: Apache-2.0
"""The MAC array for convolution.

``GATEWARE`` builds the array (:mod:`hdl.conv.banked`: non-replicated feature banks, loads
``bus_words`` words a clock into one buffer set while the other computes) from a
:class:`gen.conv.banked.BankedConfig`, ``SHELL`` its accelerator shell (AXI4-Stream,
AXI4-Lite control); both :class:`gen.core.block.Gateware`.  ``IM2COL`` and
``IM2COL_SHELL`` build the previous array (:class:`ConvArray`, one feature-bank copy per
column) that the whole-model flow (:mod:`gen.model`) still runs until it moves to this one.
"""

from gen.core.block import Gateware
from hdl.conv.array import ConvArray
from hdl.conv.banked import BankedArray
from hdl.conv.banked.shell import BankedShell
from hdl.conv.shell import ConvShell

__all__ = ["BankedArray", "BankedShell", "ConvArray", "ConvShell", "GATEWARE", "SHELL",
           "BANKED", "BANKED_SHELL", "IM2COL", "IM2COL_SHELL"]

GATEWARE = Gateware("conv", BankedArray)
SHELL = Gateware("conv_axi", BankedShell, lambda cfg: cfg.shell_name)
BANKED, BANKED_SHELL = GATEWARE, SHELL          # the names the twins and tests use
IM2COL = Gateware("conv_im2col", ConvArray)
IM2COL_SHELL = Gateware("conv_im2col_axi", ConvShell, lambda cfg: cfg.shell_name)
