# SPDX-License-Identifier: Apache-2.0
"""The piecewise-linear sigmoid/tanh unit.

``GATEWARE`` builds the top-level component from a config (:class:`gen.core.block.Gateware`).
"""

from gen.core.block import Gateware
from gen.pwl import fit_table
from hdl.pwl.unit import PwlUnit

__all__ = ["PwlUnit", "GATEWARE"]

GATEWARE = Gateware("pwl", lambda cfg: PwlUnit(fit_table(cfg)))
