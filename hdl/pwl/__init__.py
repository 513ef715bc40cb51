# SPDX-License-Identifier: Apache-2.0
"""The piecewise-linear sigmoid/tanh unit.

``GATEWARE`` builds the unit from a config, ``SHELL`` its accelerator shell (AXI4-Stream
at ``bus_words``, AXI4-Lite control); both :class:`gen.core.block.Gateware`.
"""

from gen.core.block import Gateware
from gen.pwl import fit_table
from hdl.pwl.shell import PwlShell
from hdl.pwl.unit import PwlUnit

__all__ = ["PwlUnit", "PwlShell", "GATEWARE", "SHELL"]

GATEWARE = Gateware("pwl", lambda cfg: PwlUnit(fit_table(cfg)))
SHELL = Gateware("pwl_axi", PwlShell, lambda cfg: cfg.shell_name)
