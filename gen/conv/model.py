# SPDX-License-Identifier: Apache-2.0
"""Remainder-aware im2col MAC array (seed 002): config, mapper, cycle model, golden model.

Convolution as a GEMM: output channel ``o`` x output position ``p`` accumulates
``K = Ic * kh * kw`` products.  The array has ``rows x cols`` output-stationary MACs; a
MAC ``(r, c)`` multiplies the weight of row ``r`` by the feature of column ``c`` every
beat.  Rows are split at run time into ``n`` *groups* (copies) of ``R`` rows
(``n * R <= rows``).  All copies hold the same ``R`` output channels; copy ``g`` of a
column computes the window one stride right of copy ``g - 1`` and runs
``min(stride, kw) * Ic * kh`` beats behind it (beats in <kernel column, input channel,
kernel row> order), so the copies of one tile read the same feature word each beat (the
seed's staggered "n copies of the R-row job"); see :func:`pass_layout`.

Mappings (see ``docs/conv.md`` for the derivations):

``naive``
    Rows = output channels, ``n = 1`` always (the last pass leaves ``rows - R`` rows
    idle); columns = output positions in *row strips* (each output row is padded to a
    multiple of ``cols``, so the last strip of every row leaves columns idle).
``seed``
    The seed's channel rule: as ``naive``, but the last pass (``R = Oc mod rows``
    channels) runs ``n = min(floor(rows / R), ceil(kw / stride))`` copies (the seed's
    reading).  Columns still in row strips.
``remainder`` (default)
    The remainder channels may be split into up to ``max_passes - 1`` sub-passes, each
    with its own ``(R_j, n_j)``, chosen to minimise the tiles (e.g. 96 channels on 128
    rows with ``n <= 3``: 64 channels x 2 copies, then 32 channels x 3 copies); columns
    take the output positions in raster order across output rows ("flat"), so only the
    very last tile of a pass has idle columns.

The n rule:  ``n = min(floor(rows / R), max(2, floor(kw / stride) + 1), Wo, max_groups)``.
``floor(rows / R)`` is the array; the second term is how many windows can share one feature
stream per column when the copies are staggered by ``stride * Ic * kh`` beats and the column
FIFO has two read pointers (:func:`stagger_words`: the copies in one tile read one word,
so the words per clock are ``min(n, 1 + ceil((n - 1) * stride / kw))``); ``Wo`` because the
shared windows lie in one output row; ``max_groups`` is the hardware's lane count.
``ConvConfig(shared_stream=False)`` keeps only the first and last terms.

Input channels are split into chunks of ``icq`` when the feature buffer (``icq`` padded
channel maps) or the weight buffer (``Oc * icq * kh * kw`` words) would overflow; the
partial sums of later chunks are added element-wise into the output buffer.
"""

from dataclasses import dataclass, field

import numpy as np

from gen.core.config import SpnnError, check_int
from gen.core.fixed import to_signed, to_unsigned  # noqa: F401 - re-exported for callers

__all__ = ["ConvConfig", "ConvLayer", "Schedule", "Pass", "MAPPINGS", "n_rule", "n_limit",
           "stagger_reads", "stagger_words", "READ_POINTERS", "schedule_cover", "column_bound",
           "tile_bound", "check_fits", "tile_boxes", "skipped_beats", "stall_free_cycles", "stagger_cycles",
           "stagger_delay", "pass_layout", "pass_lanes", "pass_setup_cycles",
           "plan", "ref_conv", "direct_conv", "compute_cycles", "layer_cycles",
           "network_table", "descriptor_fields", "pack_descriptor", "to_signed",
           "to_unsigned"]

MAPPINGS = ("naive", "seed", "remainder")


def _pow2(v):
    return isinstance(v, int) and v > 0 and v & (v - 1) == 0


@dataclass(frozen=True)
class ConvConfig:
    """Parameters of the generated MAC array (one array runs any layer that fits).

    Parameters
    ----------
    rows : int
        MAC rows ``mr`` (output channels), 1..512.
    cols : int
        MAC columns ``mc`` (output positions), a power of two 1..64.
    max_groups : int
        Feature lanes per column = the largest ``n``, 1..8 and at most ``rows``.
    max_passes : int
        Pass entries in a layer descriptor (1 for the full blocks + remainder sub-passes), 2..8.
    drain_rows : int
        Accumulator rows written to the output buffer per clock, 1..rows.
    data_width, weight_width : int
        Signed feature and weight widths, 2..18.
    acc_width : int
        Signed accumulator / output width, 8..64.
    feat_depth, weight_depth, out_depth, max_slots : int
        Words per feature bank (one chunk of padded maps; ``2 * cols`` banks), words per
        weight bank (one bank per row: ``blocks x K_q`` of its channels), words per output
        bank (``cols`` banks, two sets for ping-pong), most output positions of a layer.
    max_dim : int
        Largest input height/width (before padding), 1..4096.
    shared_stream : bool
        Keep the shared-stream limit ``n <= max(2, floor(kw / stride) + 1)`` (and
        ``n <= Wo``): the staggered copies of a column share one feature stream read at two
        tile positions (the RTL keeps two single-read-port copies of the bank per column).
        ``False`` is for what-if mapper tables only; :func:`check_fits` rejects such
        schedules for the RTL.
    """

    rows: int = 16
    cols: int = 4
    max_groups: int = 4
    max_passes: int = 4
    drain_rows: int = 1
    data_width: int = 8
    weight_width: int = 8
    acc_width: int = 32
    feat_depth: int = 1024
    weight_depth: int = 1024
    out_depth: int = 256
    max_slots: int = 256
    max_dim: int = 64
    shared_stream: bool = True

    def __post_init__(self):
        for name in ("rows", "cols", "max_groups", "max_passes", "drain_rows", "data_width",
                     "weight_width", "acc_width", "feat_depth", "weight_depth", "out_depth",
                     "max_slots", "max_dim"):
            check_int(self, name)
        if not 1 <= self.rows <= 512:
            raise ValueError(f"rows must be between 1 and 512, not {self.rows}")
        if not (_pow2(self.cols) and self.cols <= 64):
            raise ValueError(f"cols must be a power of two between 1 and 64, not {self.cols}")
        if not 1 <= self.max_groups <= min(8, self.rows):
            raise ValueError(f"max_groups must be between 1 and {min(8, self.rows)}, "
                             f"not {self.max_groups}")
        if not 2 <= self.max_passes <= 8:
            raise ValueError(f"max_passes must be between 2 and 8, not {self.max_passes}")
        if not 1 <= self.drain_rows <= self.rows:
            raise ValueError(f"drain_rows must be between 1 and {self.rows}, "
                             f"not {self.drain_rows}")
        for name in ("data_width", "weight_width"):
            if not 2 <= getattr(self, name) <= 18:
                raise ValueError(f"{name} must be between 2 and 18, not {getattr(self, name)}")
        if not 8 <= self.acc_width <= 64:
            raise ValueError(f"acc_width must be between 8 and 64, not {self.acc_width}")
        for name in ("feat_depth", "weight_depth", "out_depth", "max_slots"):
            if not 1 <= getattr(self, name) <= 1 << 20:
                raise ValueError(f"{name} must be between 1 and {1 << 20}, "
                                 f"not {getattr(self, name)}")
        if not isinstance(self.shared_stream, bool):
            raise TypeError(f"shared_stream must be a bool, not {self.shared_stream!r}")
        if not 1 <= self.max_dim <= 4096:
            raise ValueError(f"max_dim must be between 1 and 4096, not {self.max_dim}")

    @property
    def module_name(self) -> str:
        return f"conv_{self.rows}x{self.cols}"


@dataclass(frozen=True)
class ConvLayer:
    """One convolution: ``Oc`` filters of ``Ic x kh x kw`` over ``batch`` inputs of
    ``Ic x H x W``.

    With ``batch = B > 1`` the layer runs ``B`` images with the same weights: the output
    positions are ``B * Ho * Wo``, in raster order over ``(image, oy, ox)`` (slot ``s`` ->
    image ``s // (Ho Wo)``), so each weight is loaded once per chunk and reused ``B`` times.
    """

    oc: int
    ic: int
    h: int
    w: int
    kh: int
    kw: int
    stride: int = 1
    pad: int = 0
    batch: int = 1

    def __post_init__(self):
        for name in ("oc", "ic", "h", "w", "kh", "kw", "stride", "batch"):
            v = getattr(self, name)
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{name} must be a positive integer, not {v!r}")
        if not isinstance(self.pad, (int, np.integer)) or self.pad < 0:
            raise ValueError(f"pad must be a non-negative integer, not {self.pad!r}")
        if self.kh > self.h + 2 * self.pad or self.kw > self.w + 2 * self.pad:
            raise ValueError(f"kernel {self.kh}x{self.kw} is larger than the padded input "
                             f"{self.h + 2 * self.pad}x{self.w + 2 * self.pad}")

    @property
    def ho(self):
        return (self.h + 2 * self.pad - self.kh) // self.stride + 1

    @property
    def wo(self):
        return (self.w + 2 * self.pad - self.kw) // self.stride + 1

    @property
    def positions(self):
        """Output positions of the whole batch: ``batch * Ho * Wo``."""
        return self.batch * self.ho * self.wo

    @property
    def out_rows(self):
        """Output rows of the whole batch in raster order: ``batch * Ho``."""
        return self.batch * self.ho

    @property
    def k(self):
        return self.ic * self.kh * self.kw

    @property
    def macs(self):
        return self.oc * self.positions * self.k


@dataclass(frozen=True)
class Pass:
    """``count`` consecutive blocks of ``r`` output channels, each run as ``n`` copies."""

    r: int
    n: int
    count: int
    tiles: int          # tiles per block = ceil(slots / (n * cols))


@dataclass(frozen=True)
class Schedule:
    layer: ConvLayer
    cfg: ConvConfig
    mapping: str
    flat: bool          # columns: raster order across rows (True) or row strips (False)
    passes: tuple
    icq: int            # input channels per chunk
    slots: int          # position slots (strips: Ho * ceil(Wo/cols) * cols; flat: Ho * Wo)
    nlim: int = field(default=0)
    skip_pad: bool = field(default=False)   # drop kernel rows/cols that are padding for the tile

    @property
    def chunks(self):
        return -(-self.layer.ic // self.icq)

    @property
    def chunk_sizes(self):
        last = self.layer.ic - (self.chunks - 1) * self.icq
        return [self.icq] * (self.chunks - 1) + [last]

    @property
    def tiles(self):
        return sum(p.count * p.tiles for p in self.passes)

    @property
    def busy_mac_cycles(self):
        if not self.skip_pad:
            return self.layer.macs
        kk = sum(self.chunk_sizes)
        return sum(p.r * lanes * nky * nkx * kk
                   for p, (ky0, nky, kx0, nkx, lanes) in _tile_list(self))

    @property
    def compute_cycles(self):
        return compute_cycles(self)

    @property
    def utilisation(self):
        return self.busy_mac_cycles / (self.cfg.rows * self.cfg.cols * self.compute_cycles)

    @property
    def ideal_cycles(self):
        return -(-self.layer.macs // (self.cfg.rows * self.cfg.cols))

    def to_dict(self):
        return {"mapping": self.mapping, "columns": "flat" if self.flat else "strips",
                "passes": [{"channels_per_block": p.r, "n": p.n, "blocks": p.count,
                            "tiles_per_block": p.tiles} for p in self.passes],
                "n_per_pass": [p.n for p in self.passes for _ in range(p.count)],
                "n_limit": self.nlim, "input_channel_chunks": self.chunk_sizes,
                "slots": self.slots, "tiles": self.tiles, "skip_pad": self.skip_pad,
                "skipped_beats": skipped_beats(self),
                "busy_mac_cycles": self.busy_mac_cycles, "compute_cycles": self.compute_cycles,
                "utilisation": self.utilisation}


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


def _split_remainder(rem, layer, cfg, flat, entries):
    """Best split of ``rem`` channels into <= ``entries`` sub-passes (fewest beats)."""
    nlim = n_limit(layer, cfg)
    best = None

    def drain(r, n):
        return -(-(r * n) // cfg.drain_rows)

    def search(left, depth, acc, cost):
        nonlocal best
        if left == 0:
            key = (cost, len(acc))
            if best is None or key < best[0]:
                best = (key, list(acc))
            return
        if depth == entries:
            return
        for n in range(1, nlim + 1):
            r = min(left, cfg.rows // n)
            if r < 1:
                continue
            n_eff = n_rule(r, layer, cfg)
            t = pass_layout(layer, cfg.cols, n_eff, flat)[2]
            c = (t * max(layer.k, n_eff * drain(r, 1)) + (n_eff - 1) * stagger_delay(layer, layer.ic)
                 + cfg.cols + 1)
            search(left - r, depth + 1, acc + [Pass(r, n_eff, 1, t)], cost + c)

    search(rem, 0, [], 0)
    return best[1]


def _icq(layer, cfg, limit_buffers, blocks):
    if not limit_buffers:
        return layer.ic
    hp, wp = layer.h + 2 * layer.pad, layer.w + 2 * layer.pad
    per_ch_feat = layer.batch * hp * wp          # one padded map per image
    per_ch_w = blocks * layer.kh * layer.kw      # words per row bank and input channel
    icq = min(layer.ic, cfg.feat_depth // per_ch_feat, cfg.weight_depth // per_ch_w)
    if icq < 1:
        maps = "one padded map needs" if layer.batch == 1 else \
            f"{layer.batch} padded maps (one per image) need"
        raise SpnnError(
            f"layer does not fit the buffers even with one input channel per chunk: "
            f"{maps} {per_ch_feat} of {cfg.feat_depth} feature words and "
            f"{per_ch_w} of {cfg.weight_depth} words of each row's weight bank")
    return icq


def plan(layer: ConvLayer, cfg: ConvConfig, mapping: str = "remainder", *,
         limit_buffers: bool = True, icq: int | None = None,
         skip_pad: bool = False) -> Schedule:
    """The schedule of ``layer`` on ``cfg`` under ``mapping``.

    ``limit_buffers=False`` ignores the buffer depths (no input-channel split) - used for
    the network tables, whose arrays would be built with buffers sized for them.
    ``icq`` forces a chunk size (tests of the split).  ``skip_pad`` drops, per tile, the
    kernel rows and columns whose features are zero padding for every active lane (see
    :func:`tile_boxes`); it needs ``pad < min(kh, kw)`` so that every window keeps a beat.
    """
    if mapping not in MAPPINGS:
        raise SpnnError(f"mapping must be one of {', '.join(MAPPINGS)}, not {mapping!r}")
    flat = mapping == "remainder"
    slots = _slots(layer, cfg, flat)
    mr, mc = cfg.rows, cfg.cols
    full, rem = divmod(layer.oc, mr)
    passes = []
    if full:
        passes.append(Pass(mr, 1, full, pass_layout(layer, mc, 1, flat)[2]))
    if rem:
        if mapping == "naive":
            passes.append(Pass(rem, 1, 1, pass_layout(layer, mc, 1, flat)[2]))
        elif mapping == "seed":
            # the seed's reading: n = min(floor(rows / R), ceil(kw / stride))
            n = max(1, min(mr // rem, -(-layer.kw // layer.stride), cfg.max_groups))
            passes.append(Pass(rem, n, 1, pass_layout(layer, mc, n, flat)[2]))
        else:
            passes += _split_remainder(rem, layer, cfg, flat, cfg.max_passes - len(passes))
    if icq is None:
        icq = _icq(layer, cfg, limit_buffers, sum(p.count for p in passes))
    elif not 1 <= icq <= layer.ic:
        raise SpnnError(f"icq must be between 1 and {layer.ic}, not {icq}")
    if not isinstance(skip_pad, bool):
        raise TypeError(f"skip_pad must be a bool, not {skip_pad!r}")
    if skip_pad and layer.pad >= min(layer.kh, layer.kw):
        raise SpnnError(f"skip_pad needs pad < min(kh, kw), not pad {layer.pad} with a "
                        f"{layer.kh}x{layer.kw} kernel")
    return Schedule(layer, cfg, mapping, flat, tuple(passes), icq, slots, n_limit(layer, cfg),
                    skip_pad)


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


# ------------------------------------------------------------------ cycle model

# Pipeline of the array (hdl/conv.py, "pipeline"): a beat issued in cycle t registers its
# copy's offsets (t+1), the read-port offsets (t+2), the bank addresses (t+3: the banks
# are read), the bank data next to the banks (t+5), the selected feature and the weight
# multiples (t+6), the multiplier's partial products (t+7) and the product (t+8), which
# reaches the accumulators, where a tile's last beat is captured.
ISSUE_TO_ACC = 8
# Pass set-up: the controller walks the window groups of the pass's first tile (one column
# per clock) and loads the pass registers before the first beat.
def pass_setup_cycles(cfg) -> int:
    return cfg.cols + 6


# Clocks from the last drain step of a chunk (its shadow rows read) to the end of its
# compute phase (the rows selected in two steps, the bank read, the add and write, the
# registered end flag).
_DRAIN_TO_END = 6


def _chunk_events(sched, q):
    """Nominal (stall-free) capture clock of every (tile, copy) of one chunk, in order:
    ``(clock, group, pass index, first of pass, drain clocks)``, and the issue length."""
    layer, cfg = sched.layer, sched.cfg
    kk = layer.kh * layer.kw
    dly = stagger_delay(layer, q)
    tiles = _tile_list(sched)
    events = []
    clk, at = 0, 0
    for pi, p in enumerate(sched.passes):
        m = p.count * p.tiles
        ks = [q * b[1] * b[3] for _, b in tiles[at:at + m]]
        at += m
        p0 = clk + pass_setup_cycles(cfg)
        cum = np.cumsum(ks)
        dg = -(-p.r // cfg.drain_rows)
        for t in range(m):
            for g in range(p.n):
                events.append((p0 + g * dly + int(cum[t]) - 1 + ISSUE_TO_ACC, g, pi,
                               t == 0 and g == 0, dg))
        clk = p0 + (p.n - 1) * dly + int(cum[-1])
    return events


def _chunk_compute_cycles(sched, q):
    """Cycles of one chunk's compute phase, exact for the RTL.

    The copies of a pass are staggered by :func:`stagger_delay` beats; each (tile, copy)
    ends with a *capture* of the copy's ``R`` accumulator rows into their shadow registers,
    which the drain writes out ``drain_rows`` per clock (``ceil(R / drain_rows)`` clocks),
    one capture after the other in capture order.  A capture waits (the whole array stalls)
    while the same copy's previous capture is not yet drained; the first capture of a pass
    waits until everything before it is drained (the rows change groups between passes).
    """
    events = _chunk_events(sched, q)
    shift, df_last = 0, -1
    df_group = {}                     # (pass, group) -> last drain clock of its latest capture
    i = 0
    while i < len(events):
        j = i
        while j < len(events) and events[j][0] == events[i][0]:
            j += 1
        clock = events[i][0] + shift
        for nominal, g, pi, first, dg in events[i:j]:
            need = df_last if first else df_group.get((pi, g), -1)
            clock = max(clock, need)
        shift = clock - events[i][0]
        for nominal, g, pi, first, dg in events[i:j]:
            start = max(clock + 1, df_last + 1)
            df_last = start + dg - 1
            df_group[(pi, g)] = df_last
        i = j
    return df_last + _DRAIN_TO_END


def compute_cycles(sched) -> int:
    """Compute-phase cycles of the whole layer (all chunks), as counted by the RTL."""
    return sum(_chunk_compute_cycles(sched, q) for q in sched.chunk_sizes)


def stall_free_cycles(sched) -> int:
    """Closed form of :func:`compute_cycles` when no capture ever waits for the drain:
    per chunk, per pass ``set-up + (n - 1) D_q + sum of the tiles' beats``, plus the
    pipeline, the last copy's drain and the end of the phase.  Equal to
    :func:`compute_cycles` unless a tile is shorter than the drain of its copies."""
    layer, cfg = sched.layer, sched.cfg
    tiles = _tile_list(sched)
    total = 0
    for q in sched.chunk_sizes:
        total += sum(q * b[1] * b[3] for _, b in tiles)
        total += sum(pass_setup_cycles(cfg) + (p.n - 1) * stagger_delay(layer, q)
                     for p in sched.passes)
        total += -(-sched.passes[-1].r // cfg.drain_rows) + ISSUE_TO_ACC - 1 + _DRAIN_TO_END
    return total


def stagger_cycles(sched) -> int:
    """Issue clocks the stagger adds to the layer: ``(n - 1) * D`` per pass and chunk."""
    return sum((p.n - 1) * stagger_delay(sched.layer, q)
               for q in sched.chunk_sizes for p in sched.passes)


# FSM overheads in cycles (measured once, then pinned by tests): see hdl/conv.py.
_CFG_TO_CHUNK = 1
_STAT_TO_OUT = 5   # stats -> handoff -> first step, then 3 clocks through the output FIFO


def layer_cycles(sched) -> dict:
    """Exact RTL timeline with streams that are never idle and never back-pressured
    (per chunk: weights once, then the ``B x q`` padded maps of the batch).

    Returns cycle offsets relative to the config transfer: ``stat`` (the stats transfer),
    ``first_out`` (first output transfer) and ``last_out``.
    """
    layer = sched.layer
    hp, wp = layer.h + 2 * layer.pad, layer.w + 2 * layer.pad
    t = _CFG_TO_CHUNK
    kk = layer.kh * layer.kw
    for q in sched.chunk_sizes:
        t += 1                                 # chunk set-up state
        t += layer.oc * q * kk                 # weight load
        t += layer.batch * q * hp * wp         # feature load (padding written as zeros)
        t += _chunk_compute_cycles(sched, q)
    stat = t
    first_out = stat + _STAT_TO_OUT
    last_out = first_out + layer.oc * layer.positions - 1
    return {"stat": stat, "first_out": first_out, "last_out": last_out}


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


# ------------------------------------------------------------------ network tables

def network_table(layers, cfg: ConvConfig, mappings=MAPPINGS, batch: int = 1) -> dict:
    """Per-layer and network-level utilisation (MACs / (rows x cols x compute cycles)).

    ``batch`` images per layer (weights loaded once, reused over the batch).  Bounds per
    layer and network-level: ``bound`` (:func:`column_bound`), ``tile_bound``
    (:func:`tile_bound`) and ``bound_min`` (the smaller of the two per layer)."""
    rows, totals = [], {m: 0 for m in mappings}
    macs, bound_cycles = 0, 0.0
    tile_cycles = min_cycles = 0.0
    for name, oc, ic, h, w, k, s, p in layers:
        layer = ConvLayer(oc, ic, h, w, k, k, s, p, batch)
        entry = {"layer": name, "oc": oc, "ic": ic, "h": h, "w": w, "k": k, "stride": s,
                 "pad": p, "ho": layer.ho, "wo": layer.wo, "macs": layer.macs}
        if batch != 1:
            entry["batch"] = batch
        for m in mappings:
            sched = plan(layer, cfg, m, limit_buffers=False)
            cyc = sched.compute_cycles
            totals[m] += cyc
            entry[m] = {"cycles": cyc, "utilisation": sched.utilisation,
                        "passes": [[pp.r, pp.n, pp.count] for pp in sched.passes]}
        entry["bound"] = column_bound(layer, cfg)
        entry["tile_bound"] = tile_bound(layer, cfg)
        entry["bound_min"] = min(entry["bound"], entry["tile_bound"])
        bound_cycles += layer.macs / entry["bound"] / (cfg.rows * cfg.cols)
        tile_cycles += layer.macs / entry["tile_bound"] / (cfg.rows * cfg.cols)
        min_cycles += layer.macs / entry["bound_min"] / (cfg.rows * cfg.cols)
        macs += layer.macs
        rows.append(entry)
    net = {m: macs / (cfg.rows * cfg.cols * totals[m]) for m in mappings}
    net["bound"] = macs / (cfg.rows * cfg.cols * bound_cycles)
    net["tile_bound"] = macs / (cfg.rows * cfg.cols * tile_cycles)
    net["bound_min"] = macs / (cfg.rows * cfg.cols * min_cycles)
    return {"layers": rows, "network": net, "macs": macs,
            "cycles": totals}


# ------------------------------------------------------------------ golden models

def ref_conv(x, w, stride=1, pad=0):
    """Golden model: exact integer convolution (cross-correlation, as in CNNs).

    ``x`` is ``(Ic, H, W)`` or a batch ``(B, Ic, H, W)``, ``w`` is ``(Oc, Ic, kh, kw)``,
    integers; returns the ``(Oc, Ho, Wo)`` (or ``(B, Oc, Ho, Wo)``) int64 result.  Computed
    as im2col x GEMM in int64 over all images at once (exact while ``|sum| < 2**63``).
    """
    x = np.asarray(x, dtype=np.int64)
    w = np.asarray(w, dtype=np.int64)
    if x.ndim not in (3, 4) or w.ndim != 4:
        raise ValueError(f"x must be (Ic, H, W) or (B, Ic, H, W) and w (Oc, Ic, kh, kw), "
                         f"not {x.shape} and {w.shape}")
    batched = x.ndim == 4
    if not batched:
        x = x[None]
    b, ic, h, wd = x.shape
    oc, ic2, kh, kw = w.shape
    if ic != ic2:
        raise ValueError(f"weights have {ic2} input channels but the input has {ic}")
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    ho = (h + 2 * pad - kh) // stride + 1
    wo = (wd + 2 * pad - kw) // stride + 1
    cols = np.empty((ic, kh, kw, b, ho, wo), dtype=np.int64)
    for ky in range(kh):
        for kx in range(kw):
            cols[:, ky, kx] = xp[:, :, ky: ky + stride * (ho - 1) + 1: stride,
                                 kx: kx + stride * (wo - 1) + 1: stride].transpose(1, 0, 2, 3)
    y = (w.reshape(oc, -1) @ cols.reshape(-1, b * ho * wo)).reshape(oc, b, ho, wo)
    y = np.ascontiguousarray(y.transpose(1, 0, 2, 3))
    return y if batched else y[0]


def direct_conv(x, w, stride=1, pad=0):
    """Independent float reference: ``scipy.signal.correlate`` per (Oc, Ic) pair (and per
    image for a ``(B, Ic, H, W)`` batch)."""
    from scipy.signal import correlate
    x = np.asarray(x, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    if x.ndim == 4:
        return np.stack([direct_conv(xi, w, stride, pad) for xi in x])
    xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad)))
    out = []
    for o in range(w.shape[0]):
        acc = sum(correlate(xp[i], w[o, i], mode="valid", method="direct")
                  for i in range(x.shape[0]))
        out.append(acc[::stride, ::stride])
    return np.array(out)


# ------------------------------------------------------------------ RTL twin

def descriptor_fields(cfg: ConvConfig):
    """``(name, width)`` of the layer descriptor (the ``c`` stream payload), LSB first."""
    dim = (cfg.max_dim + 64).bit_length() + 1
    f = [("oc", 16), ("h", dim), ("w", dim), ("kh", 8), ("kw", 8), ("stride", 8),
         ("ho", dim), ("wo", dim), ("hp", dim), ("wp", dim),
         ("hwp", cfg.feat_depth.bit_length() + 1),
         ("icq", 16), ("icq_last", 16), ("chunks", 16), ("pad", 8),
         ("kq", 24), ("kq_last", 24), ("dq", 24), ("dq_last", 24),
         ("qkh", 24), ("qkh_last", 24), ("swp", 24),
         ("batch", 16), ("imgw", 24), ("iwrap", cfg.feat_depth.bit_length() + 1),
         ("hos", 16)]
    for i in range(cfg.max_passes):
        f += [(f"p{i}_r", 16), (f"p{i}_n", 4), (f"p{i}_count", 16), (f"p{i}_tiles", 24),
              (f"p{i}_cend", 17), (f"p{i}_noc", 24), (f"p{i}_ns", 16), (f"p{i}_wvn", 16),
              (f"p{i}_wvns", 24), (f"p{i}_a", 16), (f"p{i}_as", 24), (f"p{i}_aswp", 24),
              (f"p{i}_bn", 16), (f"p{i}_bns", 24), (f"p{i}_ai", 16), (f"p{i}_aiis", 24),
              (f"p{i}_sib", 8), (f"p{i}_sia", 24)]
    f += [("npasses", 4), ("flat", 1), ("skip", 1)]
    return f


def descriptor(sched) -> dict:
    layer, cfg = sched.layer, sched.cfg
    if len(sched.passes) > cfg.max_passes:
        raise SpnnError(f"schedule needs {len(sched.passes)} passes, the array holds "
                        f"{cfg.max_passes}")
    hp, wp = layer.h + 2 * layer.pad, layer.w + 2 * layer.pad
    s, kk = layer.stride, layer.kh * layer.kw
    last = sched.chunk_sizes[-1]
    # Feature banks hold [input channel][image][Hp][Wp]: image stride imgw = Hp*Wp, channel
    # stride hwp = B*Hp*Wp; a wrap from the last output row of an image to the first of the
    # next moves the window base by iwrap = Hp*Wp - Ho*s*Wp (modulo the bank offset width).
    fwid = cfg.feat_depth.bit_length() + 1
    d = {"oc": layer.oc, "h": layer.h, "w": layer.w, "kh": layer.kh, "kw": layer.kw,
         "stride": s, "ho": layer.ho, "wo": layer.wo, "hp": hp, "wp": wp,
         "hwp": layer.batch * hp * wp, "batch": layer.batch, "imgw": hp * wp,
         "iwrap": (hp * wp - layer.ho * s * wp) % (1 << fwid),
         "hos": (layer.ho * s) % (1 << 16),
         "icq": sched.icq, "icq_last": last, "chunks": sched.chunks, "pad": layer.pad,
         "npasses": len(sched.passes), "kq": sched.icq * kk, "kq_last": last * kk,
         "dq": stagger_delay(layer, sched.icq), "dq_last": stagger_delay(layer, last),
         "qkh": sched.icq * layer.kh, "qkh_last": last * layer.kh,
         "swp": s * wp, "flat": int(sched.flat), "skip": int(sched.skip_pad)}
    cend = 0
    for i in range(cfg.max_passes):
        if i < len(sched.passes):
            p = sched.passes[i]
            _, wv, _ = pass_layout(layer, cfg.cols, p.n, sched.flat)
            a, b = divmod(cfg.cols, wv)
            # a tile advances a column by `a` output rows (+ b groups): ai whole images and
            # `a mod Ho` rows; an image of the output stream is Ho*wv groups = sia slot
            # rows (tiles * n * Oc words) + sib columns
            ai, a = divmod(a, layer.ho)
            sit, sib = divmod(layer.ho * wv, cfg.cols)
            cend += p.r * p.count
            d.update({f"p{i}_r": p.r, f"p{i}_n": p.n, f"p{i}_count": p.count,
                      f"p{i}_tiles": p.tiles, f"p{i}_cend": cend, f"p{i}_noc": p.n * layer.oc,
                      f"p{i}_ns": p.n * s, f"p{i}_wvn": wv * p.n, f"p{i}_wvns": wv * p.n * s,
                      f"p{i}_a": a, f"p{i}_as": a * s, f"p{i}_aswp": a * s * wp,
                      f"p{i}_bn": b * p.n, f"p{i}_bns": b * p.n * s,
                      f"p{i}_ai": ai, f"p{i}_aiis": ai * hp * wp,
                      f"p{i}_sib": sib, f"p{i}_sia": sit * p.n * layer.oc})
        else:
            d.update({f"{k}": 0 for k, _ in descriptor_fields(cfg) if k.startswith(f"p{i}_")})
    return d


def pack_descriptor(sched) -> int:
    d = descriptor(sched)
    word, shift = 0, 0
    for name, width in descriptor_fields(sched.cfg):
        v = int(d[name])
        if not 0 <= v < 1 << width:
            raise SpnnError(f"descriptor field {name}={v} does not fit {width} bits")
        word |= v << shift
        shift += width
    return word


def check_fits(sched):
    """One-line SpnnError when a layer does not fit the generated array."""
    layer, cfg = sched.layer, sched.cfg
    hp, wp = layer.h + 2 * layer.pad, layer.w + 2 * layer.pad
    if max(layer.h, layer.w) > cfg.max_dim:
        raise SpnnError(f"input {layer.h}x{layer.w} exceeds max_dim {cfg.max_dim}")
    if max(layer.kh, layer.kw) > 64 or layer.stride > 64 or layer.pad > 64:
        raise SpnnError("kernel, stride and pad must be at most 64")
    if sched.slots > cfg.max_slots:
        raise SpnnError(f"{sched.slots} output position slots exceed max_slots "
                        f"{cfg.max_slots}")
    if layer.batch >= 1 << 16:
        raise SpnnError(f"batch must be below 65536, not {layer.batch}")
    if sched.skip_pad and layer.pad > 7:
        raise SpnnError(f"skip_pad in the generated array needs pad <= 7, not {layer.pad}")
    maps = layer.batch * sched.icq
    if maps * hp * wp > cfg.feat_depth:
        raise SpnnError(f"{maps} padded input maps ({maps * hp * wp} words) exceed "
                        f"feat_depth {cfg.feat_depth}")
    blocks = sum(p.count for p in sched.passes)
    if blocks * sched.icq * layer.kh * layer.kw > cfg.weight_depth:
        raise SpnnError(f"weights of one chunk ({blocks} blocks x "
                        f"{sched.icq * layer.kh * layer.kw} words per row) exceed weight_depth "
                        f"{cfg.weight_depth}")
    srows = max(p.tiles * p.n for p in sched.passes)
    if srows * layer.oc > cfg.out_depth:
        raise SpnnError(f"{layer.oc} channels x {srows} slot rows exceed out_depth "
                        f"{cfg.out_depth}")
    share = max(READ_POINTERS, (READ_POINTERS - 1) * layer.kw // layer.stride + 1)
    for p in sched.passes:
        if p.n > min(share, cfg.max_groups):
            raise SpnnError(f"n = {p.n} copies cannot share the staggered feature stream of a "
                            f"{layer.kw}-wide kernel at stride {layer.stride} (at most "
                            f"{min(share, cfg.max_groups)}; plan with shared_stream=True)")
    if layer.oc >= 1 << 16:
        raise SpnnError(f"oc must be below 65536, not {layer.oc}")
    bound = layer.k * (1 << (cfg.data_width - 1)) * (1 << (cfg.weight_width - 1))
    if bound >= 1 << (cfg.acc_width - 1):
        raise SpnnError(f"K = {layer.k} products of {cfg.data_width}x{cfg.weight_width} bits "
                        f"may overflow the {cfg.acc_width}-bit accumulators")
