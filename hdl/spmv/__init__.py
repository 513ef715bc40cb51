# SPDX-License-Identifier: Apache-2.0
"""The load-balanced sparse matrix-vector engine: PE array (``pe``) and its top level (``engine``).

``GATEWARE`` builds the top-level component from a config (:class:`gen.core.block.Gateware`).
"""

from gen.core.block import Gateware
from hdl.spmv.engine import SpmvEngine

__all__ = ["SpmvEngine", "GATEWARE"]

GATEWARE = Gateware("spmv", SpmvEngine)
