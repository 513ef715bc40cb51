# SPDX-License-Identifier: Apache-2.0
"""The LSTM engine: sparse PE array with PWL gates (``pe``, ``pwl``), its top level
(``engine``) and its accelerator shell (``shell``).

``GATEWARE`` builds the engine from a config, ``SHELL`` its accelerator shell (AXI4-Stream,
AXI4-Lite control); both :class:`gen.core.block.Gateware`.
"""

from gen.core.block import Gateware
from hdl.lstm.engine import LstmEngine
from hdl.lstm.shell import LstmShell

__all__ = ["LstmEngine", "LstmShell", "GATEWARE", "SHELL"]

GATEWARE = Gateware("lstm", LstmEngine)
SHELL = Gateware("lstm_axi", LstmShell, lambda cfg: cfg.shell_name)
