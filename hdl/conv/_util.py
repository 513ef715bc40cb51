# SPDX-License-Identifier: Apache-2.0
"""Small helpers shared by the conv array's components: register constructors, select
trees, fan-out replicas (see :mod:`hdl.conv.array`)."""

from amaranth.hdl import Cat, Const, Mux, ResetSignal, Signal, unsigned

from gen.core.fixed import index_bits

__all__ = ["_bits", "_index", "_depth", "_sel", "_S", "_replicate", "_Only", "_any"]


def _bits(n):
    return max(1, int(n).bit_length())


def _index(n):
    """Shape of an index over ``n`` items, at least 1 bit: ``range(1)`` would be a 0-bit
    signal, which Verilog declares as ``[-1:0]`` (e.g. the copy index of a 1-row array)."""
    return unsigned(index_bits(n))


def _depth(n):
    """Words of a memory holding ``n``: at least 2, since a one-word memory has a 0-bit
    address port (``[-1:0]`` in Verilog); the spare word is never addressed."""
    return max(2, n)


def _sel(items, idx):
    """``items[idx]`` as a tree of 2-way multiplexers (continuous assignments in Verilog,
    which Icarus evaluates at time 0; out-of-range indices give the last item)."""
    items = list(items)
    if len(items) == 1:
        return items[0]
    nbits = (len(items) - 1).bit_length()
    items = items + [items[-1]] * ((1 << nbits) - len(items))
    level = items
    for b in range(nbits):
        level = [Mux(idx[b], level[2 * i + 1], level[2 * i]) for i in range(len(level) // 2)]
    out = level[0]
    if len(idx) > nbits:
        out = Mux(idx[nbits:].any(), items[len(list(items)) - 1], out)
    return out


def _S(*args, **kwargs):
    """A register (or wire) WITHOUT synchronous reset unless ``reset_less=False`` is given.

    Only the control state that decides what the array does after a reset (FSM, valid and
    enable bits of the pipeline, the drain's pending flags, the stall) keeps the reset;
    counters, addresses, descriptor copies and the whole datapath are (re)loaded before they
    are used, so the reset net reaches a few hundred flip-flops instead of all of them."""
    kwargs.setdefault("reset_less", True)
    return Signal(*args, src_loc_at=1, **kwargs)   # named after the caller's variable


def _replicate(value, replicas):
    """Statements that load every register of ``replicas`` with ``value``: copies of one
    register for fan-out.  While the reset is high each copy loads its neighbour in a ring
    instead (the copies are unused then), so no two have the same input and Yosys's
    ``opt_merge`` keeps them apart (a ``keep`` attribute does not stop it)."""
    return [r.eq(Mux(ResetSignal(), replicas[i - 1], value)) for i, r in enumerate(replicas)]


class _Only:
    """``m.d.sync`` restricted to the statements that assign one of ``signals`` (the same
    if-tree written once, its registers split between several enables)."""

    def __init__(self, m, signals):
        self.m, self.keep = m, {id(x) for x in signals}

    def __iadd__(self, stmts):
        stmts = stmts if isinstance(stmts, (list, tuple)) else [stmts]
        self.m.d.sync += [st for st in stmts if id(st.lhs) in self.keep]
        return self


def _any(sigs):
    sigs = list(sigs)
    return Cat(*sigs).any() if sigs else Const(0, 1)
