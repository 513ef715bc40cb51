# SPDX-License-Identifier: Apache-2.0
"""Helpers shared by the banked array's components."""

from amaranth.hdl import Const, Mux, Signal

__all__ = ["_wrapped", "late_mux"]


def late_mux(m, sel, a, b, name):
    """``Mux(sel, a, b)`` for a ``sel`` that arrives late (the sequencer's ``go`` and the
    enables built beside it, a loader's block end): ``a`` and ``b`` are kept nets, so the
    choice is one LUT after ``sel``.  Without them ABC, for which ``sel`` is an input that
    arrives at 0, may put it under the cones of ``a`` and ``b`` (compares, a few LUTs
    deep).  Clock rate only: the value is ``Mux(sel, a, b)``."""
    ka, kb = (Signal(name=f"{name}_{n}", attrs={"keep": 1}) for n in ("if", "else"))
    m.d.comb += [ka.eq(a), kb.eq(b)]
    return Mux(sel, ka, kb)


def _wrapped(b: int, first, nb: int):
    """Whether bank ``b`` holds the word one address further on in a window of ``nb``
    consecutive words starting at bank ``first``: ``b < first`` (never for the last bank;
    written out so that no comparison is constant)."""
    return first > b if b < nb - 1 else Const(0, 1)
