# SPDX-License-Identifier: Apache-2.0
"""The load-balanced sparse matrix-vector engine: PE array (``pe``), its top level
(``engine``) and its accelerator shell (``shell``).

``GATEWARE`` builds the engine from a config, ``SHELL`` its accelerator shell (AXI4-Stream,
AXI4-Lite control); both :class:`gen.core.block.Gateware`.
"""

from gen.core.block import Gateware
from hdl.spmv.engine import SpmvEngine
from hdl.spmv.shell import SpmvShell

__all__ = ["SpmvEngine", "SpmvShell", "GATEWARE", "SHELL"]

GATEWARE = Gateware("spmv", SpmvEngine)
SHELL = Gateware("spmv_axi", SpmvShell, lambda cfg: cfg.shell_name)
