# SPDX-License-Identifier: Apache-2.0
"""Fitting the segment table: boundary placement and quantised slope/intercept search.

Fitting (``boundaries``): ``uniform`` splits ``[0, a_max]`` into equal parts;
``optimal`` places boundaries so every segment has the same minimax error
(greedy extension with a bisection on the error target); ``auto`` (default) fits
both and keeps the one with the smaller maximum error.  In every case the
slope/intercept codes of each segment are chosen by searching the quantised
neighbourhood of the float minimax line with the bit-exact model, i.e. the
fit minimises the maximum error *after* quantisation.
"""

import dataclasses
import math

import numpy as np

from gen.core.fixed import decode
from gen.pwl.config import PwlConfig, float_func
from gen.pwl.golden import PwlTable, _eval_positive, ref_pwl

__all__ = ["fit_table"]


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
    if cfg.bus_words != 1:                 # the shell's width does not change the table
        table = fit_table(dataclasses.replace(cfg, bus_words=1))
        return dataclasses.replace(table, config=cfg)
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
