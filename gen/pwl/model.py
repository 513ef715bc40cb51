# SPDX-License-Identifier: Apache-2.0
"""Piecewise-linear sigmoid/tanh: config, segment-table fitting and the golden model.

The unit evaluates ``f(x)`` for ``x >= 0`` only and mirrors the result
(``tanh(-x) = -tanh(x)``, ``sigmoid(-x) = 1 - sigmoid(x)``), so the table
covers the magnitude ``a = min(|x|, a_max)`` where ``a_max`` is the last input
code inside the fitted range (inputs beyond it saturate).

For segment ``s`` (found by a binary search over ``segments - 1`` boundary
codes, i.e. ``s = #{boundaries <= a}``) the datapath computes, in integers::

    F   = max(slope_frac + in_frac, icpt_frac)
    acc = (slope[s] * a << (F - slope_frac - in_frac)) + (intercept[s] << (F - icpt_frac))
    y+  = min(saturate(round_shift(acc, F - out_frac), out_fmt), one)
    y   = y+              if x >= 0
          one - y+        if x < 0 and f = sigmoid    (one = 2**out_frac, i.e. 1.0)
          -y+             if x < 0 and f = tanh
    y   = saturate(y, out_fmt)

with the project's one rounding rule (round half up, :mod:`gen.core.fixed`).  ``F`` is the
product's fraction count except when the intercept has more fraction bits (a pure-integer
or coarse input format): then the product is shifted up instead of the intercept.

Fitting (``boundaries``): ``uniform`` splits ``[0, a_max]`` into equal parts;
``optimal`` places boundaries so every segment has the same minimax error
(greedy extension with a bisection on the error target); ``auto`` (default) fits
both and keeps the one with the smaller maximum error.  In every case the
slope/intercept codes of each segment are chosen by searching the quantised
neighbourhood of the float minimax line with the bit-exact model, i.e. the
fit minimises the maximum error *after* quantisation.
"""

from dataclasses import dataclass
import math

import numpy as np

from gen.core.fixed import QFormat, decode, round_shift, saturate, to_signed, to_unsigned

__all__ = ["PwlConfig", "PwlTable", "fit_table", "ref_pwl", "cycle_model",
           "float_func", "FUNCS", "to_signed", "to_unsigned"]

FUNCS = ("sigmoid", "tanh")


def float_func(func: str):
    """The float reference: ``scipy.special.expit`` for sigmoid, ``numpy.tanh`` for tanh."""
    if func == "sigmoid":
        from scipy.special import expit
        return expit
    return np.tanh


@dataclass(frozen=True)
class PwlConfig:
    """Parameters of a piecewise-linear activation unit.

    Parameters
    ----------
    func : str
        ``sigmoid`` or ``tanh``.
    in_fmt : QFormat
        Input format (default Q4.12: 16 bits, range [-8, 8)).
    out_fmt : QFormat
        Output format (default Q2.14, which holds both functions' whole range [-1, 1]).
    segments : int
        Segments over ``x >= 0``; a power of two between 2 and 256, and at most
        ``2**(in_fmt.width - 1)`` (every segment holds at least one input code).
    x_max : float or None
        End of the fitted input range; ``|x| >= x_max`` saturates.  ``None`` = the
        whole input range.
    boundaries : str
        ``auto``, ``uniform`` or ``optimal`` (see module docstring).
    slope_width : int
        Width of the stored slope codes (signed), 8..27 (18 fits one DSP input).
    guard_bits : int
        Extra fraction bits of the stored intercepts below the output LSB, 0..8.
    """

    func: str = "sigmoid"
    in_fmt: QFormat = QFormat(4, 12)
    out_fmt: QFormat = QFormat(2, 14)
    segments: int = 32
    x_max: float | None = None
    boundaries: str = "auto"
    slope_width: int = 18
    guard_bits: int = 4

    def __post_init__(self):
        if self.func not in FUNCS:
            raise ValueError(f"func must be one of {', '.join(FUNCS)}, not {self.func!r}")
        for name in ("in_fmt", "out_fmt"):
            if not isinstance(getattr(self, name), QFormat):
                raise TypeError(f"{name} must be a QFormat, not {getattr(self, name)!r}")
        if not 4 <= self.in_fmt.width <= 24:
            raise ValueError(f"in_fmt must be 4 to 24 bits wide, not {self.in_fmt.width} "
                             f"({self.in_fmt})")
        if not 4 <= self.out_fmt.width <= 24 or self.out_fmt.frac_bits < 2:
            raise ValueError(f"out_fmt must be 4 to 24 bits wide with at least 2 fraction "
                             f"bits, not {self.out_fmt}")
        # Each segment needs an input code of its own: at most 2**(width - 1) magnitudes.
        most = min(256, 1 << (self.in_fmt.width - 1))
        if (not isinstance(self.segments, int) or self.segments < 2 or self.segments > most
                or self.segments & (self.segments - 1)):
            where = f" for {self.in_fmt}" if most < 256 else ""
            raise ValueError(f"segments must be a power of two between 2 and {most}{where}, "
                             f"not {self.segments}")
        full = -self.in_fmt.min_value
        if self.x_max is not None and not (self.in_fmt.lsb * self.segments <= self.x_max <= full):
            raise ValueError(f"x_max must be between {self.in_fmt.lsb * self.segments:g} and "
                             f"{full:g} for {self.in_fmt} with {self.segments} segments, "
                             f"not {self.x_max}")
        if self.boundaries not in ("auto", "uniform", "optimal"):
            raise ValueError(f"boundaries must be auto, uniform or optimal, "
                             f"not {self.boundaries!r}")
        if not 8 <= self.slope_width <= 27:
            raise ValueError(f"slope_width must be between 8 and 27, not {self.slope_width}")
        if not 0 <= self.guard_bits <= 8:
            raise ValueError(f"guard_bits must be between 0 and 8, not {self.guard_bits}")

    @property
    def a_max(self) -> int:
        """Largest magnitude code inside the fitted range."""
        if self.x_max is None:
            return self.in_fmt.max_code
        return min(self.in_fmt.max_code, round(self.x_max * 2 ** self.in_fmt.frac_bits) - 1)

    @property
    def module_name(self) -> str:
        return f"pwl_{self.func}"

    @property
    def latency(self) -> int:
        """Clocks from an input transfer to its result (magnitude, log2(segments) search
        stages, ROM read, multiply, add, round/clamp, mirror)."""
        return self.segments.bit_length() - 1 + 6


@dataclass(frozen=True)
class PwlTable:
    """A fitted, quantised segment table (what the ROM holds) plus its measured error."""

    config: PwlConfig
    boundaries: tuple      # segments - 1 magnitude codes; segment s starts at boundaries[s-1]
    slopes: tuple          # signed codes, slope_frac fraction bits
    intercepts: tuple      # signed codes, icpt_frac fraction bits
    slope_frac: int
    icpt_frac: int
    icpt_width: int
    placement: str         # "uniform" or "optimal"
    max_abs_error: float
    mean_abs_error: float

    @property
    def product_frac(self) -> int:
        return self.slope_frac + self.config.in_fmt.frac_bits

    @property
    def acc_frac(self) -> int:
        """Fraction bits of ``slope * a + intercept``: the product's, or the intercept's
        when those are more (then the product is shifted up, not the intercept)."""
        return max(self.product_frac, self.icpt_frac)

    def to_dict(self) -> dict:
        return {"placement": self.placement, "boundaries": list(self.boundaries),
                "slopes": list(self.slopes), "intercepts": list(self.intercepts),
                "slope_width": self.config.slope_width, "slope_frac": self.slope_frac,
                "intercept_width": self.icpt_width, "intercept_frac": self.icpt_frac,
                "max_abs_error": self.max_abs_error, "mean_abs_error": self.mean_abs_error}


def _eval_positive(a, seg, slopes, icpts, cfg, slope_frac, icpt_frac):
    """Bit-exact ``y+`` for magnitudes ``a`` in segments ``seg``."""
    pf = slope_frac + cfg.in_fmt.frac_bits
    af = max(pf, icpt_frac)     # PwlTable.acc_frac
    acc = ((np.asarray(slopes)[seg] * a) << (af - pf)) \
        + (np.asarray(icpts)[seg] << (af - icpt_frac))
    y = saturate(round_shift(acc, af - cfg.out_fmt.frac_bits), cfg.out_fmt)
    return np.minimum(y, 1 << cfg.out_fmt.frac_bits)   # never above 1.0: both functions <= 1


def ref_pwl(x, table: PwlTable):
    """Golden model: input codes (any integer array) -> output codes, bit-exact with the RTL."""
    cfg = table.config
    x = np.asarray(x, dtype=np.int64)
    neg = x < 0
    a = np.minimum(np.abs(x), cfg.a_max)
    seg = np.searchsorted(np.asarray(table.boundaries, dtype=np.int64), a, side="right")
    y = _eval_positive(a, seg, table.slopes, table.intercepts, cfg, table.slope_frac,
                       table.icpt_frac)
    if cfg.func == "sigmoid":
        y = np.where(neg, (1 << cfg.out_fmt.frac_bits) - y, y)
    else:
        y = np.where(neg, -y, y)
    return saturate(y, cfg.out_fmt)


# ---------------------------------------------------------------------------- fitting

def _line_error(xs, ys):
    """Minimax error of the chord-slope line through a concave/convex run of samples."""
    if len(xs) < 2:
        return 0.0
    m = (ys[-1] - ys[0]) / (xs[-1] - xs[0])
    r = ys - m * xs
    return (r.max() - r.min()) / 2


def _greedy(xs, ys, target, limit):
    """Starts of segments covering all samples with minimax error <= target (None if > limit)."""
    starts, lo, n = [], 0, len(xs)
    while lo < n:
        starts.append(lo)
        if len(starts) > limit:
            return None
        step, hi = 1, lo  # exponential then binary search for the last good end
        while hi + step < n and _line_error(xs[lo:hi + step + 1], ys[lo:hi + step + 1]) <= target:
            hi += step
            step *= 2
        while step > 1:
            step //= 2
            if hi + step < n and _line_error(xs[lo:hi + step + 1], ys[lo:hi + step + 1]) <= target:
                hi += step
        lo = hi + 1
    return starts


def _optimal_starts(xs, ys, segments):
    lo_err, hi_err = 0.0, _line_error(xs, ys)
    best = [0]
    for _ in range(40):
        mid = (lo_err + hi_err) / 2
        starts = _greedy(xs, ys, mid, segments)
        if starts is None:
            lo_err = mid
        else:
            hi_err, best = mid, starts
    # Pad to exactly `segments` (extra segments split the longest ones).
    starts = list(best)
    while len(starts) < segments:
        bounds = starts + [len(xs)]
        lengths = [bounds[i + 1] - bounds[i] for i in range(len(starts))]
        i = int(np.argmax(lengths))
        starts.insert(i + 1, starts[i] + lengths[i] // 2)
    return starts


def _fit_segment(a, truth, cfg, slope_frac, icpt_frac):
    """Best (slope, intercept) codes for the magnitudes ``a`` after quantisation."""
    pf = slope_frac + cfg.in_fmt.frac_bits
    xs = a / 2.0 ** cfg.in_fmt.frac_bits
    m = (truth[-1] - truth[0]) / (xs[-1] - xs[0]) if len(a) > 1 else 0.0
    smax = (1 << (cfg.slope_width - 1)) - 1
    m_code = int(np.clip(round(m * 2 ** slope_frac), -smax - 1, smax))
    best = None
    seg = np.zeros(len(a), dtype=np.int64)
    for sq in range(max(-smax - 1, m_code - 2), min(smax, m_code + 2) + 1):
        resid = truth * 2.0 ** pf - sq * a.astype(np.float64)
        centre = (resid.max() + resid.min()) / 2 / 2.0 ** (pf - icpt_frac)
        for bq in range(math.floor(centre) - 2, math.floor(centre) + 3):
            y = _eval_positive(a, seg, [sq], [bq], cfg, slope_frac, icpt_frac)
            err = np.max(np.abs(decode(y, cfg.out_fmt) - truth))
            if best is None or err < best[0]:
                best = (err, sq, bq)
    return best[1], best[2]


def _fit_with_starts(starts, cfg, f, slope_frac, icpt_frac, placement):
    a_all = np.arange(cfg.a_max + 1, dtype=np.int64)
    truth_all = f(a_all / 2.0 ** cfg.in_fmt.frac_bits)
    bounds = starts[1:]
    edges = list(starts) + [len(a_all)]
    slopes, icpts = [], []
    for s in range(len(starts)):
        lo, hi = edges[s], edges[s + 1]
        sq, bq = _fit_segment(a_all[lo:hi], truth_all[lo:hi], cfg, slope_frac, icpt_frac)
        slopes.append(sq)
        icpts.append(bq)
    icpt_width = max(int(abs(b)).bit_length() for b in icpts) + 1
    table = PwlTable(cfg, tuple(int(b) for b in bounds), tuple(slopes), tuple(icpts),
                     slope_frac, icpt_frac, icpt_width, placement, 0.0, 0.0)
    codes = np.arange(cfg.in_fmt.min_code, cfg.in_fmt.max_code + 1, dtype=np.int64)
    err = np.abs(decode(ref_pwl(codes, table), cfg.out_fmt)
                 - f(decode(codes, cfg.in_fmt)))
    return PwlTable(cfg, table.boundaries, table.slopes, table.intercepts, slope_frac,
                    icpt_frac, icpt_width, placement, float(err.max()), float(err.mean()))


_CACHE = {}


def fit_table(cfg: PwlConfig) -> PwlTable:
    """Fit (and cache) the segment table for ``cfg``; deterministic."""
    if cfg in _CACHE:
        return _CACHE[cfg]
    f = float_func(cfg.func)
    n = cfg.a_max + 1
    xs = np.arange(n) / 2.0 ** cfg.in_fmt.frac_bits
    ys = f(xs)
    # Slope format: as many fraction bits as the steepest chord allows.  Both functions
    # have their steepest slope at 0 (1/4 for sigmoid, 1 for tanh).
    steepest = 0.25 if cfg.func == "sigmoid" else 1.0
    slope_frac = cfg.slope_width - 2 - math.ceil(math.log2(steepest))
    icpt_frac = cfg.out_fmt.frac_bits + cfg.guard_bits
    candidates = []
    if cfg.boundaries in ("auto", "uniform"):
        starts = [round(k * n / cfg.segments) for k in range(cfg.segments)]
        candidates.append(_fit_with_starts(starts, cfg, f, slope_frac, icpt_frac, "uniform"))
    if cfg.boundaries in ("auto", "optimal"):
        starts = _optimal_starts(xs, ys, cfg.segments)
        candidates.append(_fit_with_starts(starts, cfg, f, slope_frac, icpt_frac, "optimal"))
    table = min(candidates, key=lambda t: (t.max_abs_error, t.mean_abs_error))
    _CACHE[cfg] = table
    return table


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
