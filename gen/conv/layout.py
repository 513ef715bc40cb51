# SPDX-License-Identifier: Apache-2.0
"""The geometry of a pass on the conv array: the n rule, the staggered copies, the lanes
of each tile, padding boxes, coverage and utilisation bounds.

Convolution as a GEMM: output channel ``o`` x output position ``p`` accumulates
``K = Ic * kh * kw`` products.  The array has ``rows x cols`` output-stationary MACs; a
MAC ``(r, c)`` multiplies the weight of row ``r`` by the feature of column ``c`` every
beat.  Rows are split at run time into ``n`` *groups* (copies) of ``R`` rows
(``n * R <= rows``).  All copies hold the same ``R`` output channels; copy ``g`` of a
column computes the window one stride right of copy ``g - 1`` and runs
``min(stride, kw) * Ic * kh`` beats behind it (beats in <kernel column, input channel,
kernel row> order), so the copies of one tile read the same feature word each beat (the
seed's staggered "n copies of the R-row job"); see :func:`pass_layout`.

The n rule:  ``n = min(floor(rows / R), max(2, floor(kw / stride) + 1), Wo, max_groups)``.
``floor(rows / R)`` is the array; the second term is how many windows can share one feature
stream per column when the copies are staggered by ``stride * Ic * kh`` beats and the column
FIFO has two read pointers (:func:`stagger_words`: the copies in one tile read one word,
so the words per clock are ``min(n, 1 + ceil((n - 1) * stride / kw))``); ``Wo`` because the
shared windows lie in one output row; ``max_groups`` is the hardware's lane count.
``ConvConfig(shared_stream=False)`` keeps only the first and last terms.
"""

from dataclasses import dataclass

import numpy as np

from gen.conv.config import ConvConfig, ConvLayer

__all__ = ["Pass", "n_rule", "n_limit", "stagger_reads", "stagger_words", "READ_POINTERS",
           "stagger_delay", "pass_layout", "pass_lanes", "tile_boxes", "skipped_beats",
           "schedule_cover", "column_bound", "tile_bound"]


@dataclass(frozen=True)
class Pass:
    """``count`` consecutive blocks of ``r`` output channels, each run as ``n`` copies."""

    r: int
    n: int
    count: int
    tiles: int          # tiles per block = ceil(slots / (n * cols))


def n_limit(layer: ConvLayer, cfg: ConvConfig) -> int:
    """Largest ``n`` any pass of this layer may use, before the row limit."""
    if not cfg.shared_stream:
        return cfg.max_groups
    share = max(READ_POINTERS,
                (READ_POINTERS - 1) * layer.kw // layer.stride + 1)
    return max(1, min(cfg.max_groups, share, layer.wo))


# Read pointers per column feature FIFO in the seed's staggered schedule: the groups still
# in tile i read one word, the groups already in tile i + 1 another (see stagger_reads).
READ_POINTERS = 2


def stagger_words(n: int, kw: int, stride: int) -> int:
    """Closed form of :func:`stagger_reads`: ``min(n, 1 + ceil((n - 1) * stride / kw))``."""
    return min(n, 1 + -(-(n - 1) * stride // kw))


def stagger_reads(n: int, kw: int, stride: int, ic: int = 2, kh: int = 2,
                  tiles: int | None = None, continuous: bool = False) -> int:
    """Feature words one column must deliver per cycle in the seed's staggered schedule.

    ``n`` groups; group ``g`` computes window ``i * n + g`` of tile ``i`` (windows along x,
    ``stride`` apart), beats in <kernel column, input channel, kernel row> order, group ``g``
    delayed by ``g * stride * ic * kh`` beats, every group busy back to back.  Returns the
    largest number of distinct words ``(input column, channel, row)`` read in one cycle.
    With ``continuous`` the tiles are consecutive windows (a whole output row); otherwise
    each tile's windows are unrelated to the next tile's (offset by ``1000`` columns).
    """
    if tiles is None:
        tiles = 4 + n * stride
    inner = ic * kh
    big_k = kw * inner
    d = stride * inner
    worst = 0
    for t in range(tiles * big_k + n * d):
        words = set()
        for g in range(n):
            j = t - g * d
            if j < 0:
                continue
            i, jj = divmod(j, big_k)
            if i >= tiles:
                continue
            base = i * n * stride if continuous else i * 1000
            words.add((base + g * stride + jj // inner, jj % inner))
        worst = max(worst, len(words))
    return worst


def n_rule(r: int, layer: ConvLayer, cfg: ConvConfig) -> int:
    """Copies of an ``r``-channel job: ``min(floor(rows / r), ceil(kw / s), Wo, max_groups)``."""
    if not 1 <= r <= cfg.rows:
        raise ValueError(f"r must be between 1 and {cfg.rows}, not {r}")
    return max(1, min(cfg.rows // r, n_limit(layer, cfg)))


def _slots(layer, cfg, flat):
    if flat:
        return layer.positions
    return layer.out_rows * (-(-layer.wo // cfg.cols)) * cfg.cols


def _tiles(slots, n, cols):
    return -(-slots // (n * cols))


def pass_layout(layer: ConvLayer, cols: int, n: int, flat: bool):
    """``(G, wv, tiles)`` of a pass with ``n`` copies: window groups per output row
    ``G = ceil(Wo / n)`` (copy ``g`` of a group takes output column ``j * n + g``), groups per
    row in the column mapping ``wv`` (``G``, or padded to a multiple of ``cols`` for row
    strips) and tiles per block ``ceil(B * Ho * wv / cols)`` (column ``c`` of tile ``t`` takes
    group ``t * cols + c``; the ``B * Ho`` output rows of a batch follow each other)."""
    g = -(-layer.wo // n)
    wv = g if flat else -(-g // cols) * cols
    return g, wv, -(-(layer.out_rows * wv) // cols)


def stagger_delay(layer: ConvLayer, q: int) -> int:
    """Beats copy ``g`` runs behind copy ``g - 1`` in a chunk of ``q`` input channels:
    ``min(stride, kw) * q * kh`` (``stride * q * kh`` makes the copies read one word; when
    ``stride > kw`` only ``n = 2`` is allowed and the copies simply follow each other)."""
    return min(layer.stride, layer.kw) * q * layer.kh


def pass_lanes(sched, p, images=False):
    """Output position of every lane of one block of pass ``p``: ``(oy, ox, valid)``,
    arrays of shape ``(tiles, n, cols)``.  Column ``c`` of tile ``t`` takes window group
    ``u = t * cols + c`` (``row, j = divmod(u, wv)``) and copy ``g`` its window ``j * n + g``:
    the copies of one column are adjacent windows of one output row (the shared stream).
    With a batch the output rows of all images follow each other: ``image, oy =
    divmod(row, Ho)``; ``images=True`` returns ``(image, oy, ox, valid)``."""
    layer, cols = sched.layer, sched.cfg.cols
    _, wv, tiles = pass_layout(layer, cols, p.n, sched.flat)
    u = np.arange(tiles)[:, None, None] * cols + np.arange(cols)[None, None, :]
    row, j = u // wv, u % wv
    ox = j * p.n + np.arange(p.n)[None, :, None]
    valid = (row < layer.out_rows) & (ox < layer.wo)
    img, oy = np.divmod(row, layer.ho)
    oy = np.broadcast_to(oy, valid.shape)
    if images:
        return np.broadcast_to(img, valid.shape), oy, ox, valid
    return oy, ox, valid


# A padding box of fewer kernel positions runs the whole kernel instead: the array computes
# the next tile's box in a 5-stage pipeline, so a tile of a skipping pass lasts >= 6 beats.
MIN_BOX = 6


def _tile_list(sched):
    """``(pass, (ky0, nky, kx0, nkx, valid lanes))`` per tile in issue order.

    Padding-beat skipping (``skip_pad``) applies to the tiles of ``n = 1`` passes only: a
    tile of staggered copies keeps the whole kernel (the copies share one feature stream)."""
    layer = sched.layer
    out = []
    for p in sched.passes:
        oy, ox, valid = pass_lanes(sched, p)
        boxes = []
        for t in range(valid.shape[0]):
            v = valid[t]
            lanes = int(v.sum())
            if not sched.skip_pad or p.n != 1:
                boxes.append((0, layer.kh, 0, layer.kw, lanes))
                continue
            y, x = oy[t][v] * layer.stride, ox[t][v] * layer.stride
            ky0 = int(np.maximum(0, layer.pad - y).min())
            ky1 = int(np.minimum(layer.kh, layer.pad + layer.h - y).max())
            kx0 = int(np.maximum(0, layer.pad - x).min())
            kx1 = int(np.minimum(layer.kw, layer.pad + layer.w - x).max())
            if (ky1 - ky0) * (kx1 - kx0) < MIN_BOX:
                boxes.append((0, layer.kh, 0, layer.kw, lanes))   # too short: whole kernel
            else:
                boxes.append((ky0, ky1 - ky0, kx0, kx1 - kx0, lanes))
        out += [(p, b) for _ in range(p.count) for b in boxes]
    return out


def tile_boxes(sched):
    """Kernel box of each tile in issue order: ``(ky0, nky, kx0, nkx)``.

    Without ``skip_pad`` every tile runs the whole ``kh x kw`` kernel.  With it, a tile of
    an ``n = 1`` pass runs only kernel rows ``ky0 .. ky0 + nky - 1`` and columns
    ``kx0 .. kx0 + nkx - 1``: the bounding box, over the tile's valid lanes (output
    positions ``oy, ox``), of the kernel offsets that land inside the unpadded input
    (``pad <= oy * stride + ky < pad + H``, same for x).  Every beat outside the box reads
    zero padding in every lane, so dropping it leaves the sums unchanged.  Per chunk of
    ``q`` input channels a tile takes ``q * nky * nkx`` beats.  Tiles of staggered passes
    (``n > 1``) keep the whole kernel.
    """
    return [b[:4] for _, b in _tile_list(sched)]


def skipped_beats(sched) -> int:
    """Beats of the whole layer (all chunks) dropped by ``skip_pad`` (0 without it)."""
    kk = sched.layer.kh * sched.layer.kw
    saved = sum(kk - nky * nkx for ky0, nky, kx0, nkx in tile_boxes(sched))
    return saved * sched.layer.ic


def schedule_cover(sched) -> np.ndarray:
    """How often each (output channel, output position) is computed, enumerated as the RTL
    does (pass entries in order, blocks of ``R`` consecutive channels, the lanes of
    :func:`pass_lanes`).  A correct schedule gives 1 everywhere; shape ``(Oc, B * Ho * Wo)``
    (positions in raster order over ``(image, oy, ox)``)."""
    layer = sched.layer
    count = np.zeros((layer.oc, layer.positions), dtype=np.int64)
    cb = 0
    for p in sched.passes:
        img, oy, ox, valid = pass_lanes(sched, p, images=True)
        pos = ((img * layer.ho + oy) * layer.wo + ox)[valid]
        hits = np.bincount(pos, minlength=layer.positions)
        for _ in range(p.count):
            count[cb:cb + p.r] += hits[None, :]
            cb += p.r
    return count


def column_bound(layer: ConvLayer, cfg: ConvConfig) -> float:
    """Upper bound of the utilisation of *any* mapping on this array: ``P / (ceil(P/cols) cols)``.

    Every row's weight is shared by all columns, so the rows of one group hold the same
    channels in every column; each channel therefore needs ``ceil(P / cols)`` group-tiles
    of ``cols`` positions, whatever the grouping or the chunking of K.
    """
    p = layer.positions
    return p / (-(-p // cfg.cols) * cfg.cols)


def tile_bound(layer: ConvLayer, cfg: ConvConfig) -> float:
    """Upper bound of the utilisation of any output-stationary mapping:
    ``Oc P / (ceil(Oc P / (rows cols)) rows cols)``.

    Each MAC accumulates one (channel, position) over all its ``K`` beats, so in ``C``
    cycles it finishes at most ``floor(C / K)`` of the ``Oc P`` results: ``C >= K *
    ceil(Oc P / (rows cols))`` ("tile bound": the last round of tiles is partly empty).
    Independent of :func:`column_bound`; a layer's bound is the smaller of the two.
    Both grow towards 1 with the batch (``P = B Ho Wo``).
    """
    pairs, macs = layer.oc * layer.positions, cfg.rows * cfg.cols
    return pairs / (-(-pairs // macs) * macs)


def _slot_valid(sched):
    """Valid slots of the ``n = 1`` column mapping (flat or strips), for reference."""
    cols = sched.cfg.cols
    total = -(-sched.slots // cols) * cols
    layer = sched.layer
    valid = np.zeros(total, dtype=bool)
    if sched.flat:
        valid[:sched.slots] = True
    else:
        wv = sched.slots // layer.out_rows
        for oy in range(layer.out_rows):
            valid[oy * wv: oy * wv + layer.wo] = True
    return valid
