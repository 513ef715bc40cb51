# SPDX-License-Identifier: Apache-2.0
"""The banked MAC array (``hdl.conv.banked``): config, jobs, host layouts and cycle model.

The banked array is the conv block's successor array, built for data movement: its feature
buffer is not replicated per column (``nb`` banks hold a strip's maps once, the columns read
a rotated window of consecutive words), loads arrive ``bus_words`` words per clock into the
second of two buffer sets while the first computes, and results leave ``bus_words`` per
clock.  ``job`` holds the config, the job (one descriptor: channel groups x strips x
input-channel chunks) and the host's stream layouts; ``cycles`` the exact cycle model;
``plan`` the host planner (a whole layer as jobs) and its roofline figures; ``requant`` the
shell's requantisation of a job (register values, golden).
"""

from gen.conv.banked import cycles, job, plan, requant
from gen.conv.banked.cycles import *  # noqa: F401,F403
from gen.conv.banked.job import *  # noqa: F401,F403
from gen.conv.banked.plan import *  # noqa: F401,F403
from gen.conv.banked.requant import *  # noqa: F401,F403

__all__ = job.__all__ + cycles.__all__ + plan.__all__ + requant.__all__
