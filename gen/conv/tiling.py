# SPDX-License-Identifier: Apache-2.0
"""Host-side tiling: a layer too large for the array's buffers as a sequence of jobs.

:func:`plan` splits a layer's input channels into chunks inside one job (the array adds the
chunks' partial sums on chip).  A layer whose padded maps, output buffer, position slots or
``max_dim`` still do not fit is cut here, on the host, into *tiles*: groups of images,
groups of output channels and rectangles of output positions.  Each tile is one job of the
unchanged array (:class:`TilePlan`):

* a tile covering the whole output map keeps the layer's padding (the array pads);
* a spatial tile computes output rows ``y0 .. y1-1`` and columns ``x0 .. x1-1`` from the
  input window they read (its halo included), cut from the host-padded input, as a layer
  with ``pad = 0``: the zero borders cross the bus as feature words;
* every tile loads the weights of its output channels again (weight traffic grows with the
  number of spatial tiles and image groups).

Tiles of equal size form a *run*: one job of the accelerator shell (``LAYERS`` = the run's
length, one descriptor), whose tiles the array runs back to back, each tile's loads and
compute overlapping the previous tile's output stream (:func:`gen.conv.layers_timeline`).
The tile shape minimises the layer's end-to-end cycles, estimated per run as its tiles'
compute cycles plus weight transfers (:func:`gen.conv.chunk_weight_beats`) and feature words,
or their output words where those take longer, plus one tile's output words (the exact
model differs from this by a few clocks per tile); :attr:`TilePlan.cycles` gives the exact
figure, the sum over the runs of the last tile's ``last_out`` in
:func:`gen.conv.layers_timeline` (first input word to last output word of each job; the
host's register writes between jobs not counted).
"""

from dataclasses import dataclass
from functools import cached_property, lru_cache

import numpy as np

from gen.conv.config import ConvConfig, ConvLayer
from gen.conv.cycles import SHELL_EXTRA_CYCLES, layers_timeline
from gen.core.fixed import REQUANT_LATENCY
from gen.conv.descriptor import check_fits
from gen.conv.schedule import Schedule, plan
from gen.conv.wstream import chunk_weight_beats
from gen.core.config import SpnnError

__all__ = ["Tile", "TilePlan", "plan_tiles", "best_tiling", "tile_input", "run_tiles",
           "run_runs"]


@dataclass(frozen=True)
class Tile:
    """One job: images ``b``, output channels ``o``, output rows ``y`` and columns ``x``
    (half-open ranges) and the schedule of its sub-layer."""

    b: tuple
    o: tuple
    y: tuple
    x: tuple
    sched: Schedule


@dataclass(frozen=True)
class TilePlan:
    """A layer as jobs of ``shape`` = (images, channels, rows, columns) per tile."""

    layer: ConvLayer
    cfg: ConvConfig
    mapping: str
    shape: tuple
    tiles: tuple

    @cached_property
    def runs(self) -> tuple:
        """The tiles as runs: consecutive tiles of one sub-layer and one channel group (so
        one bias packet serves a run), each run one job of the shell (``LAYERS`` = its
        length)."""
        out = []
        for t in self.tiles:
            if out and _run_key(out[-1][0]) == _run_key(t):
                out[-1].append(t)
            else:
                out.append([t])
        return tuple(tuple(run) for run in out)

    @property
    def jobs(self) -> int:
        """Shell jobs: one per run."""
        return len(self.runs)

    @cached_property
    def cycles(self) -> int:
        """Exact end-to-end cycles: per run the last tile's ``last_out`` of
        :func:`gen.conv.layers_timeline`, summed."""
        return sum(layers_timeline([run[0].sched] * len(run))[-1]["last_out"]
                   for run in self.runs)

    @property
    def shell_cycles(self) -> int:
        """The same through the accelerator shell at full rate
        (:func:`gen.conv.shell_cycles` per run)."""
        rq = REQUANT_LATENCY if self.cfg.rq_width else 0
        return self.cycles + (SHELL_EXTRA_CYCLES + rq) * self.jobs

    @property
    def words(self) -> dict:
        """Words crossing the bus: weights, features (padding of cut tiles included) and
        outputs, summed over the jobs."""
        out = {"weights": 0, "features": 0, "outputs": 0}
        for t in self.tiles:
            sub = t.sched.layer
            out["weights"] += sub.oc * sub.ic * sub.kh * sub.kw
            out["features"] += sub.batch * sub.ic * sub.h * sub.w
            out["outputs"] += sub.positions * sub.oc
        return out

    @property
    def macs(self) -> int:
        L = self.layer
        return L.batch * L.oc * L.ho * L.wo * L.ic * L.kh * L.kw

    def utilisation(self) -> float:
        """End to end: MACs / (rows x cols x :attr:`cycles`)."""
        return self.macs / (self.cfg.rows * self.cfg.cols * self.cycles)


def _run_key(tile):
    return tile.sched.layer, tile.o


def _sizes(n: int) -> list:
    """The distinct tile sizes ``ceil(n / k)``, largest first."""
    return sorted({-(-n // k) for k in range(1, n + 1)}, reverse=True)


def _ranges(n: int, size: int) -> list:
    return [(a, min(a + size, n)) for a in range(0, n, size)]


def _sub_layer(layer: ConvLayer, nb: int, no: int, ny: int, nx: int, whole: bool):
    if whole:
        return ConvLayer(no, layer.ic, layer.h, layer.w, layer.kh, layer.kw, layer.stride,
                         layer.pad, batch=nb)
    s = layer.stride
    return ConvLayer(no, layer.ic, (ny - 1) * s + layer.kh, (nx - 1) * s + layer.kw,
                     layer.kh, layer.kw, s, 0, batch=nb)


@lru_cache(maxsize=1 << 16)
def _fit(layer, cfg, mapping, nb, no, ny, nx, whole):
    """The sub-layer's schedule, or None when it does not fit the array."""
    try:
        sched = plan(_sub_layer(layer, nb, no, ny, nx, whole), cfg, mapping)
        check_fits(sched)
    except (SpnnError, ValueError):
        return None
    return sched


def _estimate(sched: Schedule, count: int) -> int:
    """Cycles of a run of ``count`` tiles of ``sched``: each tile's loads and compute or
    the previous tile's outputs, whichever is longer, then the last tile's outputs."""
    sub = sched.layer
    weights = sum(chunk_weight_beats(sched, q) for q in sched.chunk_sizes)
    work = sched.compute_cycles + weights + sub.batch * sub.ic * sub.h * sub.w
    out = sub.positions * sub.oc
    return work + (count - 1) * max(work, out) + out


def _cost(layer, cfg, mapping, shape, whole):
    """Estimated cycles of the tiling ``shape`` (None if a tile does not fit): the tiles
    of each distinct size planned once."""
    total = 0
    dims = (layer.batch, layer.oc, layer.ho, layer.wo)
    parts = [_ranges(n, size) for n, size in zip(dims, shape)]
    counts = [{} for _ in parts]
    for i, ranges in enumerate(parts):
        for a, b in ranges:
            counts[i][b - a] = counts[i].get(b - a, 0) + 1
    for nb, cb in counts[0].items():
        for no, co in counts[1].items():
            for ny, cy in counts[2].items():
                for nx, cx in counts[3].items():
                    sched = _fit(layer, cfg, mapping, nb, no, ny, nx, whole)
                    if sched is None:
                        return None
                    # one run per channel group
                    total += co * _estimate(sched, cb * cy * cx)
    return total


def plan_tiles(layer: ConvLayer, cfg: ConvConfig, mapping: str = "remainder") -> TilePlan:
    """The tiling of ``layer`` on ``cfg`` with the fewest estimated end-to-end cycles (a
    layer that fits stays one tile unless cutting it is faster by the exact model: its
    tiles' output streams then overlap the next tiles' loads); a one-line
    :class:`SpnnError` when not even one output position of one channel fits."""
    best = None
    # a cut tile's input window must fit max_dim
    span = lambda n, k: (n - 1) * layer.stride + k <= cfg.max_dim   # noqa: E731
    rows = [n for n in _sizes(layer.ho) if span(n, layer.kh)]
    cols = [n for n in _sizes(layer.wo) if span(n, layer.kw)]
    # channel groups: the whole layer, halves to quarters, and multiples of the array's rows
    groups = sorted({n for n in _sizes(layer.oc) if n % cfg.rows == 0 or n * 4 >= layer.oc}
                    | {min(layer.oc, cfg.rows)}, reverse=True)
    for nb in _sizes(layer.batch):
        for no in groups:
            # the whole map first (the array pads), then spatial tiles, largest first
            candidates = [(layer.ho, layer.wo, True)] + [
                (ny, nx, False) for ny in rows for nx in cols]
            for ny, nx, whole in candidates:
                if best is not None and _lower_bound(layer, cfg, nb, no, ny, nx) >= best[0]:
                    continue
                cost = _cost(layer, cfg, mapping, (nb, no, ny, nx), whole)
                if cost is not None and (best is None or cost < best[0]):
                    best = (cost, (nb, no, ny, nx), whole)
    if best is None:
        raise SpnnError(f"layer {layer.oc}x{layer.ic}x{layer.kh}x{layer.kw} on "
                        f"{layer.h}x{layer.w} does not fit the array even one output "
                        f"position and channel at a time")
    _, shape, whole = best
    chosen = _ordered(layer, cfg, mapping, shape, whole)
    one = (layer.batch, layer.oc, layer.ho, layer.wo)
    if shape != one and _fit(layer, cfg, mapping, *one, True) is not None:
        # the whole layer fits: cut it only when the exact model says that is faster
        single = _ordered(layer, cfg, mapping, one, True)
        if single.cycles <= chosen.cycles:
            return single
    return chosen


def _ordered(layer, cfg, mapping, shape, whole) -> TilePlan:
    tiles = list(_tiles(layer, cfg, mapping, shape, whole))
    # equal tiles of a channel group next to each other: each one run (one shell job)
    first = {}
    for i, t in enumerate(tiles):
        first.setdefault(_run_key(t), i)
    tiles.sort(key=lambda t: first[_run_key(t)])
    return TilePlan(layer, cfg, mapping, shape, tuple(tiles))


def best_tiling(layer: ConvLayer, cfg: ConvConfig, mappings) -> tuple:
    """``(TilePlan or None, reason)``: of ``mappings``, the one whose :func:`plan_tiles`
    has the fewest end-to-end cycles; None and the first mapping's one-line reason when
    none fits."""
    best, why = None, None
    for mapping in mappings:
        try:
            tp = plan_tiles(layer, cfg, mapping)
        except SpnnError as exc:
            why = why or str(exc)
            continue
        if best is None or tp.cycles < best.cycles:
            best = tp
    return best, why


def _lower_bound(layer, cfg, nb, no, ny, nx) -> int:
    """Weight transfers every tiling of this shape takes at least (its weights per tile,
    ``w_lanes`` a clock): a cheap bound that skips shapes already worse than the best
    found."""
    tiles = (-(-layer.batch // nb)) * (-(-layer.ho // ny)) * (-(-layer.wo // nx))
    return tiles * layer.oc * layer.ic * layer.kh * layer.kw // cfg.w_lanes


def _tiles(layer, cfg, mapping, shape, whole):
    dims = (layer.batch, layer.oc, layer.ho, layer.wo)
    parts = [_ranges(n, size) for n, size in zip(dims, shape)]
    for b in parts[0]:
        for o in parts[1]:
            for y in parts[2]:
                for x in parts[3]:
                    sched = _fit(layer, cfg, mapping, b[1] - b[0], o[1] - o[0], y[1] - y[0],
                                 x[1] - x[0], whole)
                    yield Tile(b, o, y, x, sched)


def tile_input(x, layer: ConvLayer, tile: Tile):
    """The features of ``tile``'s job, ``(B', Ic, h', w')``: the whole maps of its images
    (the array pads), or the window its output rectangle reads from the zero-padded input."""
    x = np.asarray(x)
    x = x[tile.b[0]:tile.b[1]]
    sub = tile.sched.layer
    if sub.pad == layer.pad and sub.h == layer.h and sub.w == layer.w:
        return x
    p, s = layer.pad, layer.stride
    padded = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
    r0, c0 = tile.y[0] * s, tile.x[0] * s
    return padded[:, :, r0:r0 + sub.h, c0:c0 + sub.w]


def run_runs(x, w, tplan: TilePlan, conv):
    """Run ``tplan``'s runs with ``conv(xs, ws, sched, tiles) -> [(B', O', Ho', Wo'), ...]``
    (e.g. one shell job of ``LAYERS`` = ``len(tiles)``) and assemble the layer's
    ``(B, Oc, Ho, Wo)`` output."""
    L = tplan.layer
    y = np.zeros((L.batch, L.oc, L.ho, L.wo), dtype=np.int64)
    w = np.asarray(w)
    for run in tplan.runs:
        parts = conv([tile_input(x, L, t) for t in run], [w[t.o[0]:t.o[1]] for t in run],
                     run[0].sched, run)
        for t, part in zip(run, parts):
            y[t.b[0]:t.b[1], t.o[0]:t.o[1], t.y[0]:t.y[1], t.x[0]:t.x[1]] = part
    return y


def run_tiles(x, w, tplan: TilePlan, conv, with_tile: bool = False):
    """Run ``tplan``'s jobs with ``conv(x_tile, w_tile, sched) -> (B', O', Ho', Wo')`` (the
    golden model or an RTL twin; ``conv(x_tile, w_tile, sched, tile)`` with ``with_tile``,
    e.g. to pick the tile's channels of a bias) and assemble the layer's ``(B, Oc, Ho, Wo)``
    output."""
    L = tplan.layer
    y = np.zeros((L.batch, L.oc, L.ho, L.wo), dtype=np.int64)
    w = np.asarray(w)
    for t in tplan.tiles:
        args = (tile_input(x, L, t), w[t.o[0]:t.o[1]], t.sched) + ((t,) if with_tile else ())
        part = conv(*args)
        y[t.b[0]:t.b[1], t.o[0]:t.o[1], t.y[0]:t.y[1], t.x[0]:t.x[1]] = part
    return y
