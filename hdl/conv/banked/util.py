# SPDX-License-Identifier: Apache-2.0
"""Helpers shared by the banked array's components."""

from amaranth.hdl import Const

__all__ = ["_wrapped"]


def _wrapped(b: int, first, nb: int):
    """Whether bank ``b`` holds the word one address further on in a window of ``nb``
    consecutive words starting at bank ``first``: ``b < first`` (never for the last bank;
    written out so that no comparison is constant)."""
    return first > b if b < nb - 1 else Const(0, 1)
