# SPDX-License-Identifier: Apache-2.0
"""The host planner of the banked array: a whole layer (any size, any batch) as jobs.

:func:`plan_layer` splits the output channels into **parts** (groups of ``R`` channels
run with ``n`` copies, then the remainder channels, with two copies when they fill at
most half the rows: the remainder mapping), the output maps into **strips** of ``rs``
rows x ``segw`` columns of ``fold`` images that fit the output set (a strip of a part
holds ``R fold rs segw`` sums), the input channels into **chunks** that fit a feature set
and a weight set (or, ``resident``, all of a group's weights in both sets), with the
chunk's channels side by side in the feature rows (``pack``) or not, and turns every
(part, strip shape) into one job.  Among the candidate shapes it keeps, per part, the one the exact cycle
model (:func:`gen.conv.banked.run_cycles`, full rate) finds fastest, then among the
channel splittings the fastest whole plan.

Figures (:class:`BankedPlan`): end to end = clocks from the first input beat to the last
output beat of the layer's jobs run back to back; ``compute_bound`` = MACs / MAC cells;
``bandwidth_bound`` = the busiest port's beats (each of ``w``, ``x``, ``o`` is its own
``bus_words``-wide stream), minimised over every candidate tiling the planner evaluated:
the traffic that the buffer sizes force on this array (weights again for every strip when a
group's weights do not fit both weight sets, features again for every channel group, halo
rows again for every strip); ``roofline`` = the larger bound.
"""

from dataclasses import dataclass

from gen.conv.banked.cycles import run_cycles
from gen.conv.banked.job import (COPIES, BankedConfig, feature_set_words, make_job,
                                  window_row_words)
from gen.conv.config import ConvLayer

__all__ = ["BankedPlan", "plan_layer", "run_plan", "seed_banked"]

SEED_WORDS = {"features": 20 * 2048, "weights": 128 * 2048, "outputs": 2 * 32 * 512}


def seed_banked(rows: int = 128, cols: int = 16, bus_words: int = 16, **kw) -> BankedConfig:
    """A banked array whose buffers are the largest powers of two within the seed's (20 x
    2048 feature, 128 x 2048 weight, 2 x 32 x 512 output words for 128 x 16, scaled by
    ``rows x cols``), two sets each."""
    scale = rows * cols / (128 * 16)
    probe = BankedConfig(rows=rows, cols=cols, bus_words=bus_words, **kw)

    def pow2(words):
        d = 1
        while 2 * d <= words:
            d *= 2
        return d
    return BankedConfig(rows=rows, cols=cols, bus_words=bus_words,
                        feat_depth=pow2(SEED_WORDS["features"] * scale / (2 * probe.nb)),
                        weight_depth=pow2(SEED_WORDS["weights"] * scale / (2 * rows)),
                        out_depth=pow2(SEED_WORDS["outputs"] * scale / (2 * probe.nb)), **kw)


@dataclass(frozen=True)
class BankedPlan:
    """A layer's jobs and their exact full-rate figures (see the module docstring):
    ``cycles`` end to end, ``beats`` per port, ``bandwidth_bound`` the busiest port's
    beats with each part's least traffic per port over the candidate tilings."""

    layer: ConvLayer
    cfg: BankedConfig
    jobs: tuple
    cycles: int
    beats: dict
    bandwidth_bound: int
    subsample: int = 1

    @property
    def macs(self) -> int:
        L = self.layer
        return L.batch * L.oc * L.ho * L.wo * L.ic * L.kh * L.kw

    @property
    def compute_bound(self) -> int:
        return -(-self.macs // (self.cfg.rows * self.cfg.cols))

    @property
    def roofline(self) -> int:
        return max(self.compute_bound, self.bandwidth_bound)

    @property
    def utilisation(self) -> float:
        """End to end: MACs / (MAC cells x cycles)."""
        return self.macs / (self.cfg.rows * self.cfg.cols * self.cycles)

    @property
    def efficiency(self) -> float:
        """Roofline cycles / end-to-end cycles."""
        return self.roofline / self.cycles


def _timing(jobs, cfg):
    """End-to-end clocks and per-port traffic of ``jobs`` back to back; the ``x`` traffic of
    the bound counts the input words the strips need (no padding)."""
    t = run_cycles(jobs, cfg, record=False)
    return t["last_out"] - t["first_in"] + 1, t["beats"], _traffic(jobs, cfg)[1]


def _traffic(jobs, cfg):
    """``(beats, least, floor)`` of ``jobs`` back to back without running them: each
    port's beats, the least traffic of the bound (``x``: the input words the strips need,
    no padding) and a floor under their end-to-end clocks (a port moves, and the sequencer
    issues, at most one beat a clock)."""
    beats = {"w": sum(j.weight_beat_count for j in jobs),
             "x": sum(j.feature_beat_count for j in jobs),
             "o": sum(j.G * j.S * j.obeats for j in jobs)}
    least = dict(beats, x=-(-sum(j.feature_words for j in jobs) // cfg.bus_words))
    issued = sum(j.G * j.S * j.rounds * sum(j.k_of(q) for q in range(j.Q)) for j in jobs)
    return beats, least, max(issued, *beats.values())


def _parts(layer, cfg):
    """Channel splittings: ``[(oc0, oc, n, R)]`` each."""
    out = []
    ns = [k for k in COPIES if k <= cfg.copies]
    for n in ns:
        R = min(layer.oc, cfg.rows // n)
        main = layer.oc // R * R
        parts = [(0, main, n, R)]
        rem = layer.oc - main
        if rem:
            n2 = max(k for k in ns if k * rem <= cfg.rows)
            parts.append((main, rem, n2, rem))
        if parts not in out:
            out.append(parts)
    return out


def _strips(layer, rs, segw, fold=1):
    """Strip shapes covering the output maps: ``{(rs, segw, fold): [(image, oy0, ox0)]}``
    (the batch in ``ceil(B / fold)`` groups of images as even as can be: the first ones
    one image more than the last ones)."""
    m = -(-layer.batch // fold)
    big, more = divmod(layer.batch, m)          # `more` groups of big + 1 images first
    sizes = [big + 1] * more + [big] * (m - more)
    shapes, b = {}, 0
    for f in sizes:
        for y in range(0, layer.ho, rs):
            for x in range(0, layer.wo, segw):
                shape = (min(rs, layer.ho - y), min(segw, layer.wo - x), f)
                shapes.setdefault(shape, []).append((b, y, x))
        b += f
    return shapes


def _folds(layer, cfg, n, R, rs, segw, cap_o, cap_f):
    """Candidate image counts of an ``rs x segw`` strip: for a strip of at most ``8 W``
    positions that leave columns idle in its last round, 1, the most that fit the output and
    feature sets, the two whose positions fill the rounds best (``W = n cols``) and the
    best of those that divide the batch (no job of the remaining images); else 1."""
    W, pi = n * cfg.cols, rs * segw
    if pi % W == 0 or pi > 8 * W:
        return [1]                  # the rounds are full, or nearly
    fits = [f for f in range(2, layer.batch + 1)
            if R * f * pi <= cap_o and feature_set_words(layer, cfg, rs, segw, 1, f) <= cap_f]
    if not fits:
        return [1]

    def rank(f):
        return (-f * pi / (-(-f * pi // W) * W), -f)
    divisors = sorted((f for f in fits if layer.batch % f == 0), key=rank)[:1]
    return sorted({1, max(fits), *sorted(fits, key=rank)[:2], *divisors})


def _rounds(layer, rs, segw, W):
    """Rounds of one image's strips of ``rs`` rows (the last ``Ho mod rs``) by ``segw``
    columns, ``W`` positions a round."""
    full, rest = divmod(layer.ho, rs)
    return (full * -(-rs * segw // W) + (-(-rest * segw // W) if rest else 0))


def _shapes(layer, cfg, n, R):
    """Candidate ``(rs, segw, icq, resident, fold, pack, span)`` of a part with ``R``
    channels per group run by ``n`` copies: per output row segment the tallest strip that
    fits, its fractions, and the two heights with the fewest rounds, each also with the
    chunk's channels side by side in the bank rows (``pack``) where a window row leaves a
    beat partly empty; then the same for strips whose sums fill both output sets
    (``span``), those only that one set cannot hold."""
    # a strip's R P sums and its padding: the last beat's, or (requantising: the
    # channel-aligned layout) every channel's last beat's
    pad = R * (cfg.bus_words - 1) if cfg.rq_width else cfg.bus_words
    one = cfg.nb * cfg.out_depth - pad
    out = [(*shape, False) for shape in _shapes_within(layer, cfg, n, R, one)]
    return out + [(*shape, True) for shape in _shapes_within(layer, cfg, n, R, 2 * one + pad)
                  if R * shape[4] * shape[0] * shape[1] > one]


def _shapes_within(layer, cfg, n, R, cap_o):
    """:func:`_shapes`' ``(rs, segw, icq, resident, fold, pack)`` for strips of at most
    ``cap_o`` sums."""
    kk = layer.kh * layer.kw
    W = n * cfg.cols
    cap_f = cfg.nb * cfg.feat_depth
    resident = layer.ic * kk <= 2 * cfg.weight_depth
    wmax = layer.ic if resident else cfg.weight_depth // kk
    if wmax < 1:
        return []
    segws = [layer.wo] if R * layer.wo <= cap_o else []     # whole output rows
    seg = cap_o // R // cfg.cols * cfg.cols
    if seg >= 1 and seg < layer.wo:
        segws.append(seg)
    elif 1 <= cap_o // R < layer.wo:
        segws.append(cap_o // R)
    out = []
    for segw in segws:
        rmax = min(layer.ho, cap_o // (R * segw))
        while rmax >= 1 and feature_set_words(layer, cfg, rmax, segw, 1) > cap_f:
            rmax -= 1
        if rmax < 1:
            continue
        cands = {rmax, -(-layer.ho // -(-layer.ho // rmax))}
        cands |= {max(1, rmax // d) for d in (2, 3, 4, 6, 8, 12, 16)}
        cands |= set(sorted(range(1, rmax + 1), key=lambda r: (_rounds(layer, r, segw, W), -r))[:2])
        for rs in sorted(cands):
            for fold in _folds(layer, cfg, n, R, rs, segw, cap_o, cap_f):
                for pack in _packs(layer, cfg, segw):
                    icq = min(layer.ic, wmax)
                    while icq > 1 and feature_set_words(layer, cfg, rs, segw, icq, fold,
                                                        pack) > cap_f:
                        icq -= 1
                    q = -(-layer.ic // icq)
                    for qq in _chunk_counts(layer, q, R, rs, segw, fold):
                        out.append((rs, segw, -(-layer.ic // qq), resident, fold, pack))
    return out


def _packs(layer, cfg, segw):
    """``pack`` candidates: without, and with where a window row (``s Ws`` words) leaves
    its last beat partly empty and there is more than one input channel."""
    wr = window_row_words(layer, segw)
    return [False, True] if layer.ic > 1 and wr % cfg.bus_words else [False]


def _chunk_counts(layer, q, R, rs, segw, fold):
    """Chunk counts to try: the fewest that fit (``q``), twice as many (smaller chunks: a
    step's loads against its compute, the drain against short rounds) and, for a layer of
    few steps (where the first step's loads and the last one's drain are not hidden behind
    other steps), four times as many."""
    strips = (-(-layer.batch // fold) * -(-layer.ho // rs) * -(-layer.wo // segw))
    more = -(-layer.oc // R) * strips * q < 32
    return sorted({q, min(layer.ic, 2 * q)} | ({min(layer.ic, 4 * q)} if more else set()))


def _part_jobs(layer, cfg, part, shape):
    """A part's jobs for one strip shape; requantising, at most ``rq_depth`` channels (the
    stage's biases) a job."""
    oc0, oc, n, R = part
    rs, segw, icq, resident, fold, pack, span = shape
    step = max(R, cfg.rq_depth // R * R) if cfg.rq_width else oc
    return [make_job(layer, cfg, rs=r, segw=s, icq=icq, n=n, R=R, resident=resident,
                     strips=strips, oc0=c0, oc=min(step, oc0 + oc - c0), fold=f, span=span,
                     pack=pack)
            for c0 in range(oc0, oc0 + oc, step)
            for (r, s, f), strips in _strips(layer, rs, segw, fold).items()]


def _fastest(cands, cfg):
    """The jobs of the candidate with the fewest end-to-end clocks (the first of equals),
    running the exact model only on candidates whose floor (:func:`_traffic`) could still
    beat the best so far."""
    best = None                          # (cycles, index, jobs)
    for k in sorted(range(len(cands)), key=lambda k: (cands[k][1], k)):
        _least, floor, pj = cands[k]
        if best is not None and (floor, k) > best[:2]:
            break
        cycles = _timing(pj, cfg)[0]
        if best is None or (cycles, k) < best[:2]:
            best = (cycles, k, pj)
    return best[2]


def plan_layer(layer: ConvLayer, cfg: BankedConfig) -> BankedPlan:
    """The fastest plan the planner finds for ``layer`` (module docstring); raises
    ``ValueError`` when no strip of one output row segment fits the buffers.  A 1 x 1
    kernel at stride ``s`` without padding reads only every ``s``-th input row and
    column: the host sends just those (``subsample``) and the jobs run at stride 1."""
    if layer.kh == layer.kw == 1 and layer.stride > 1 and layer.pad == 0:
        sub = ConvLayer(layer.oc, layer.ic, layer.ho, layer.wo, 1, 1, 1, 0, layer.batch)
        p = plan_layer(sub, cfg)
        return BankedPlan(layer, cfg, p.jobs, p.cycles, p.beats, p.bandwidth_bound,
                          layer.stride)
    best, bound = None, None
    for parts in _parts(layer, cfg):
        jobs, least = [], {"w": 0, "x": 0, "o": 0}
        for part in parts:
            cands = []
            for shape in _shapes(layer, cfg, part[2], part[3]):
                try:
                    pj = _part_jobs(layer, cfg, part, shape)
                except ValueError:
                    continue
                cands.append((*_traffic(pj, cfg)[1:], pj))
            if not cands:
                raise ValueError(f"no strip of {layer} fits the buffers of {cfg.module_name}")
            for port in least:
                least[port] += min(bound[port] for bound, _f, _j in cands)
            jobs += _fastest(cands, cfg)
        cycles, beats, _bound = _timing(jobs, cfg)
        if best is None or cycles < best[0]:
            best = (cycles, tuple(jobs), beats)
        traffic = max(least.values())
        bound = traffic if bound is None else min(bound, traffic)
    return BankedPlan(layer, cfg, best[1], best[0], best[2], bound)


def run_plan(x, w, plan: BankedPlan, conv):
    """Run ``plan``'s jobs with ``conv(items)`` (a list of ``(x, w, job)`` -> their outputs,
    e.g. :func:`gen.conv.twin.rtl_banked`'s first item) and return the layer's ``(B, Oc,
    Ho, Wo)`` sums assembled (``x``: ``(Ic, H, W)`` or ``(B, Ic, H, W)``)."""
    import numpy as np
    L = plan.layer
    y = np.zeros((L.batch, L.oc, L.ho, L.wo), dtype=np.int64)
    x = np.asarray(x)
    if x.ndim == 3:
        x = x[None]
    if plan.subsample > 1:
        x = x[:, :, ::plan.subsample, ::plan.subsample]
    outs = conv([(x, w, job) for job in plan.jobs])
    for job, part in zip(plan.jobs, outs):
        c0, c1 = job.oc0, job.oc0 + job.G * job.R
        for im, ys, xs in job.regions():
            y[im, c0:c1, ys, xs] = part[im, c0:c1, ys, xs]
    return y

