# SPDX-License-Identifier: Apache-2.0
"""The banked MAC array (:class:`BankedArray`; model and layouts in :mod:`gen.conv.banked`).

Its feature buffer holds each strip's maps once (``nb`` banks, the columns read a rotated
window of consecutive words), weights and features arrive ``bus_words`` per clock into the
second of two buffer sets while the first computes, and results leave ``bus_words`` per
clock from ping-pong output banks.
"""

from hdl.conv.banked.array import BankedArray

__all__ = ["BankedArray"]
