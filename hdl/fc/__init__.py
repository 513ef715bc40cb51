# SPDX-License-Identifier: Apache-2.0
"""The batched FC engine on FD-CSR weights: the FD-CSR decoder (``decoder``) and the engine (``engine``).

``GATEWARE`` builds the top-level component from a config (:class:`gen.core.block.Gateware`).
"""

from gen.core.block import Gateware
from hdl.fc.engine import FcEngine
from hdl.fc.shell import FcShell

__all__ = ["FcEngine", "FcShell", "GATEWARE", "SHELL"]

GATEWARE = Gateware("fc", FcEngine)
SHELL = Gateware("fc_axi", FcShell, lambda cfg: cfg.shell_name)
