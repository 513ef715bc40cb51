# SPDX-License-Identifier: Apache-2.0
"""The PWL unit's exact cycle model: transfer clocks under any handshake patterns."""

from gen.pwl.config import PwlConfig

__all__ = ["cycle_model"]


def cycle_model(n: int, cfg: PwlConfig, *, valid=None, ready=None, seed=0) -> dict:
    """Transfer cycles of ``n`` samples through the unit under any handshake patterns.

    The unit (:class:`hdl.pwl.PwlUnit`) is a pipeline of :attr:`PwlConfig.latency`
    registers that stalls as a whole while its output register is full and not accepted
    (``advance = ~o.valid | o.ready``, also ``i.ready``).  ``valid`` / ``ready`` are the
    patterns of ports ``i`` and ``o`` (:mod:`gen.core.stimulus`: a probability gives the port's
    own seeded pattern, as :func:`rtl_pwl` does; ``None`` every clock).  Returns
    ``{"i": [...], "o": [...]}``, the clock of every transfer, exactly as the RTL.
    """
    from gen.core.stimulus import ModelSource, pattern_for
    src = ModelSource(n, pattern_for(valid, seed, "i"))
    o_pat = pattern_for(ready, seed, "o")
    pipe = [False] * cfg.latency        # valid bit of each register; pipe[-1] is o.valid
    out, cycle = [], 0
    while len(out) < n:
        src.drive(cycle)
        o_ready = o_pat.at(cycle)
        if pipe[-1] and o_ready:
            out.append(cycle)
        advance = not pipe[-1] or o_ready
        took = src.take(advance, cycle)
        if advance:
            pipe = [took] + pipe[:-1]
        cycle += 1
    return {"i": src.cycles, "o": out}
