# SPDX-License-Identifier: Apache-2.0
"""The batched FC engine on FD-CSR weights: the FD-CSR decoder (``decoder``) and the engine (``engine``).

``GATEWARE`` builds the top-level component from a config (:class:`gen.core.block.Gateware`).
"""

from gen.core.block import Gateware
from hdl.fc.engine import FcEngine

__all__ = ["FcEngine", "GATEWARE"]

GATEWARE = Gateware("fc", FcEngine)
