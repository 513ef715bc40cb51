# SPDX-License-Identifier: Apache-2.0
"""Config, jobs and stream layouts of the banked MAC array.

A **job** is one descriptor: ``G`` channel groups x ``S`` strips x ``Q`` input-channel
chunks, run as steps in that order (:func:`steps`). A group is ``R`` output channels,
computed by ``n`` copies (1, 2, 4 or 8; ``n R`` array rows, physical row ``r n + g``
computes channel ``r`` for copy ``g``). A strip is ``rs`` output rows x ``segw`` output
columns of each of ``fold`` consecutive images (the host cuts the input windows with their
halo); its ``P = fold rs segw`` positions, in raster order image by image, run ``n cols`` at
a time (a **round**: copy ``g`` takes the positions ``p0 + g cols .. p0 + g cols + cols -
1``; only the strip's last round has idle columns). A chunk is ``icq`` input channels (the
last ``icl``), ``K = icq kh kw`` beats per round in ``(ic, ky, kx)`` order.

Feature layout (per step, the stream ``x``): the strip's input windows, ``icq`` channels of
``fold`` images of ``s Hs`` rows, each row ``bpr = ceil(s Ws / bw)`` beats (a beat never
spans two rows); in the banks a row takes ``D`` words. Rows and columns are *phase-ordered*:
window row ``y`` is row ``(y mod s) Hs + y div s`` (``Hs = ceil(rin / s)``, ``rin = (rs - 1)
s + kh``), window column ``x`` is word ``(x mod s) Ws + x div s`` of its row (``Ws =
ceil(segin / s)``, ``segin = (segw - 1) s + kw``), and the row pitch ``D >= s Ws`` is the
smallest with ``D = segw (mod nb)``; image ``b`` of a channel starts ``b IP`` words in, ``IP
= rs D (mod nb)`` (:func:`_image_pitch`), channel ``c`` of the step ``c CP`` words in (any
residue: :func:`_channel_pitch`; the images' and the channels' rows may interleave in the
row pitch's padding). A job with ``pack`` puts the step's channels side by side in each
bank row instead: the stream's row ``r`` of image ``b`` holds the ``icq`` channels' window
rows one after the other (``s Ws`` words each, the last chunk's missing channels zero),
``ceil(icq s Ws / bw)`` beats, so rows shorter than a beat share beats; then ``CP = s Ws``
and ``D >= icq s Ws``. Then position ``p = (b, oy, ox)`` at beat ``(ic,
ky, kx)`` reads flat word ``f(p) + off(ic, ky, kx)`` with ``f(p) = b IP + oy D + ox``, which
lies in bank ``(p + off) mod nb``: the ``n cols`` positions of a round always read ``n
cols`` different banks. Flat word ``f`` sits in bank ``f mod nb`` at address ``f div nb``.

Weight layout (the stream ``w``): per step (with ``resident``, only in a group's first
strip: the group's chunks stay in the banks, chunk ``q`` at ``q K_q``), per beat address
``a`` of the chunk (``(ic, ky, kx)`` order), ``ceil(R / bw)`` beats whose lane ``k`` of beat
``j`` is the weight of the group's channel ``j bw + k``; the loader writes it into the rows
of all ``n`` copies of that channel.

Output layout (the stream ``o``): per strip, ``R x P`` sums in ``(channel, position)``
order, ``bw`` per beat, the strip's last beat padded.  A strip's sums fill one of the two
output sets, so that the next strip computes while it streams out; a job with ``span``
lets each strip's sums fill both sets (twice the positions or channels a strip, as many
weight loads fewer when the weights do not stay resident), and a strip then starts only
once the strip before it has streamed out.  A job with ``align`` (forced when the
config has a requantisation stage, ``rq_width`` > 0) starts every channel on a new beat
instead: the output banks' channel pitch is ``cp = cb bw`` with ``cb = ceil(P / bw)`` beats
per channel, a strip is ``obeats = R cb`` beats and each channel's last beat holds
``P - (cb - 1) bw`` sums (the rest padding), so every beat belongs to one channel, as the
requantisation stage (:class:`hdl.lib.requant.RequantStage`) needs.  The cost is up to
``R (cb bw - P) / bw`` extra beats per strip on ``o`` (none when ``bw`` divides ``P``).
"""

from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from gen.conv.config import ConvLayer

__all__ = ["COPIES", "BankedConfig", "BankedJob", "make_job", "feature_set_words", "steps", "descriptor_fields",
           "descriptor_widths",
           "descriptor_value", "weight_beats", "feature_beats", "assemble", "strip_origins"]


#: The copy counts the array supports (``n = 2^nl``, ``nl`` a 2-bit descriptor field).
COPIES = (1, 2, 4, 8)


def _pow2(v: int) -> bool:
    return v >= 1 and v & (v - 1) == 0


@dataclass(frozen=True)
class BankedConfig:
    """Generator parameters of the banked array.

    ``bus_words`` words enter per clock on ``w`` and ``x`` and leave per clock on ``o``;
    ``nb`` (the smallest power of two >= ``copies x cols`` and ``bus_words``) feature banks
    and output banks per set; ``feat_depth`` / ``out_depth`` words per bank and set,
    ``weight_depth`` words per row and set (two sets each: one computes while the other
    loads); ``copies`` (1, 2, 4 or 8) the most copies a job may use.

    ``rq_width``: 0 (default) the shell's ``m_axis_o`` carries the exact sums; 2..32 the
    shell requantises them (:class:`hdl.lib.requant.RequantStage`: bias, multiply-shift
    with round half up, saturation to ``rq_width`` signed bits, optional ReLU; registers
    ``RQ_*``, biases on ``s_axis_b``) and every job uses the channel-aligned output layout
    (``align``, see the module docstring).  ``rq_depth``: biases the stage holds (a job's
    ``G R`` channels at most), a power of two 1..65536.  Neither changes the array itself.
    """

    rows: int = 16
    cols: int = 4
    bus_words: int = 4
    copies: int = 2
    data_width: int = 8
    weight_width: int = 8
    acc_width: int = 32
    feat_depth: int = 256
    weight_depth: int = 256
    out_depth: int = 256
    count_width: int = 16
    rq_width: int = 0
    rq_depth: int = 512

    def __post_init__(self):
        for name in ("rows", "cols", "bus_words", "feat_depth", "weight_depth", "out_depth"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive integer, not {v!r}")
        for name in ("feat_depth", "weight_depth", "out_depth"):
            if not _pow2(getattr(self, name)) or getattr(self, name) < 2:
                raise ValueError(f"{name} must be a power of two >= 2, not "
                                 f"{getattr(self, name)}")
        if self.copies not in COPIES:
            raise ValueError(f"copies must be 1, 2, 4 or 8, not {self.copies}")
        if self.copies > self.rows:
            raise ValueError(f"copies must be at most rows ({self.rows}), not {self.copies}")
        for name, lo, hi in (("data_width", 2, 18), ("weight_width", 2, 18),
                             ("acc_width", 8, 64), ("count_width", 8, 32)):
            v = getattr(self, name)
            if not isinstance(v, int) or not lo <= v <= hi:
                raise ValueError(f"{name} must be {lo}..{hi}, not {v!r}")
        if self.rows > 512 or self.cols > 64:
            raise ValueError(f"the array is at most 512 x 64, not {self.rows} x {self.cols}")
        if not 1 <= self.bus_words <= 32:
            raise ValueError(f"bus_words must be 1..32, not {self.bus_words}")
        if not isinstance(self.rq_width, int) or not (self.rq_width == 0
                                                       or 2 <= self.rq_width <= 32):
            raise ValueError(f"rq_width must be 0 (no requantisation stage) or 2..32, "
                             f"not {self.rq_width!r}")
        if (not isinstance(self.rq_depth, int) or not _pow2(self.rq_depth)
                or self.rq_depth > 65536):
            raise ValueError(f"rq_depth must be a power of two 1..65536, not {self.rq_depth!r}")

    @property
    def nb(self) -> int:
        """Banks per feature / output set: a power of two >= ``copies x cols`` and
        ``bus_words``, at least 2 (so that a bank index has a bit)."""
        n = 2
        while n < max(self.copies * self.cols, self.bus_words):
            n *= 2
        return n

    @property
    def busy_bits(self) -> int:
        """Bits of the MAC cells busy in one beat."""
        return (self.rows * self.cols).bit_length()

    @property
    def rbits(self) -> int:
        """Bits of a row count (``R``, ``n R``, rows to drain)."""
        return self.rows.bit_length()

    @property
    def fbits(self) -> int:
        """Bits of a flat word index within one feature set."""
        return (self.nb * self.feat_depth - 1).bit_length()

    @property
    def obits(self) -> int:
        """Bits of a flat word index within the two output sets (a ``span`` strip's sums
        fill both)."""
        return (2 * self.nb * self.out_depth - 1).bit_length()

    @property
    def wbits(self) -> int:
        """Bits of a weight-bank address (both sets)."""
        return (2 * self.weight_depth - 1).bit_length()

    @property
    def window(self) -> int:
        """Positions a round reads at most: ``copies x cols``."""
        return self.copies * self.cols

    @property
    def shell_name(self) -> str:
        """Verilog module name of the accelerator shell."""
        return self.module_name.replace("conv_banked_", "conv_banked_axi_", 1)

    @property
    def module_name(self) -> str:
        return (f"conv_banked_{self.rows}x{self.cols}_b{self.bus_words}_c{self.copies}"
                f"_d{self.data_width}w{self.weight_width}a{self.acc_width}"
                f"_f{self.feat_depth}w{self.weight_depth}o{self.out_depth}"
                + (f"_rq{self.rq_width}d{self.rq_depth}" if self.rq_width else ""))


@dataclass(frozen=True)
class BankedJob:
    """One descriptor of the banked array (see the module docstring); build with
    :func:`make_job`.  ``strips`` lists each strip's ``(image, oy0, ox0)``; ``align``:
    the channel-aligned output layout (every channel's sums from a new beat); ``span``: a
    strip's sums may fill both output sets (the next strip waits for its stream)."""

    layer: ConvLayer
    n: int
    R: int
    G: int
    rs: int
    segw: int
    icq: int
    resident: bool
    strips: tuple
    oc0: int = 0

    @property
    def S(self):
        return len(self.strips)

    @property
    def Q(self):
        return -(-self.layer.ic // self.icq)

    @property
    def icl(self):
        return self.layer.ic - (self.Q - 1) * self.icq

    cols_: int = 0
    bw_: int = 0
    nb_: int = 0
    align: bool = False
    fold: int = 1
    span: bool = False
    pack: bool = False

    @property
    def chans(self):
        """Channels per bank row: ``icq`` with ``pack`` (a row holds the chunk's channels'
        window rows side by side), else 1."""
        return self.icq if self.pack else 1

    @property
    def PI(self):
        """Output positions of one image's part of a strip."""
        return self.rs * self.segw

    @property
    def P(self):
        """Output positions of one strip (``fold`` images)."""
        return self.fold * self.PI

    @property
    def W(self):
        """Positions per round."""
        return self.n * self.cols_

    @property
    def rounds(self):
        return -(-self.P // self.W)

    @property
    def lastw(self):
        """Positions of a strip's last round."""
        return self.P - (self.rounds - 1) * self.W

    @property
    def rin(self):
        return (self.rs - 1) * self.layer.stride + self.layer.kh

    @property
    def segin(self):
        return (self.segw - 1) * self.layer.stride + self.layer.kw

    @property
    def Ws(self):
        return -(-self.segin // self.layer.stride)

    @property
    def Hs(self):
        return -(-self.rin // self.layer.stride)

    @property
    def D(self):
        """Row pitch: the smallest ``>= s Ws`` (with ``pack`` ``>= icq s Ws``) that equals
        ``segw`` modulo ``nb``."""
        return self._pitches()[0]

    @property
    def IP(self):
        """Image pitch within a channel (:func:`_pitches`)."""
        return self._pitches()[1]

    @property
    def CPf(self):
        """Channel pitch in a feature set (:func:`_channel_pitch`): channel ``c`` starts
        ``c CPf`` words in; its rows may interleave with the channel before's.  With
        ``pack`` a channel's row follows the one before's in the same bank row: ``CPf = s
        Ws``."""
        return self._pitches()[4]

    def _pitches(self):
        return _pitches(self.layer, self.nb_, self.bw_, self.rs, self.segw, self.fold,
                        self.chans)

    def k_of(self, q: int) -> int:
        """Beats per tile of chunk ``q``."""
        ic = self.icq if q < self.Q - 1 else self.icl
        return ic * self.layer.kh * self.layer.kw

    @property
    def bpr(self):
        """Beats per bank row on ``x`` (a beat never spans two rows; with ``pack`` a row
        holds ``icq`` channels' window rows)."""
        return -(-self.chans * self.layer.stride * self.Ws // self.bw_)

    def xbeats(self, q: int) -> int:
        """Feature beats of one step of chunk ``q`` (with ``pack`` the last chunk's rows
        are as long as the others', the missing channels' words zero)."""
        ic = 1 if self.pack else self.icq if q < self.Q - 1 else self.icl
        return ic * self.fold * self.layer.stride * self.Hs * self.bpr

    @property
    def wgroup(self):
        """Weight beats per beat address (``R`` channels in ``bus_words`` lanes)."""
        return -(-self.R // self.bw_)

    def wbeats(self, q: int) -> int:
        """Weight beats of one step of chunk ``q`` (not resident)."""
        return self.k_of(q) * self.wgroup

    @property
    def E(self):
        """Output words of one strip."""
        return self.R * self.P

    @property
    def cb(self):
        """Beats per channel of a strip on ``o`` (``align``)."""
        return -(-self.P // self.bw_)

    @property
    def cp(self):
        """Channel pitch in the output banks: ``P``, with ``align`` ``cb bw``."""
        return self.cb * self.bw_ if self.align else self.P

    @property
    def obeats(self):
        """Beats of a strip on ``o``."""
        return self.R * self.cb if self.align else -(-self.E // self.bw_)

    @property
    def olast(self):
        """Sums in a strip's last beat; with ``align`` in every channel's last beat."""
        if self.align:
            return self.P - (self.cb - 1) * self.bw_
        return self.E - (self.obeats - 1) * self.bw_

    def regions(self):
        """Per strip, in order, the ``(images, rows, columns)`` slices of the output maps
        ``(B, Oc, Ho, Wo)`` it computes."""
        return [(slice(b, b + self.fold), slice(y, y + self.rs), slice(x, x + self.segw))
                for b, y, x in self.strips]

    def beat_words(self) -> list:
        """Sums of each beat of one strip on ``o``."""
        bw = self.bw_
        if self.align:
            return ([bw] * (self.cb - 1) + [self.olast]) * self.R
        return [bw] * (self.obeats - 1) + [self.olast]

    @property
    def weight_beat_count(self):
        """Beats on ``w`` of the whole job."""
        per_group = sum(self.wbeats(q) for q in range(self.Q))
        return self.G * per_group * (1 if self.resident else self.S)

    @property
    def feature_beat_count(self):
        """Beats on ``x`` of the whole job."""
        return self.G * self.S * sum(self.xbeats(q) for q in range(self.Q))

    @property
    def feature_words(self):
        """Input words the job's strips need (every group again, each strip's halo rows
        again), without the phase order's and the beats' padding."""
        return self.G * self.S * self.fold * self.layer.ic * self.rin * self.segin

    @property
    def macs(self):
        """Multiply-accumulates of the job's outputs."""
        L = self.layer
        return self.G * self.R * self.S * self.P * L.ic * L.kh * L.kw

    @property
    def ho(self):
        return self.layer.ho

    @property
    def wo(self):
        return self.layer.wo


def window_row_words(layer: ConvLayer, segw: int) -> int:
    """Words of one channel's window row of a ``segw``-wide strip: ``s Ws`` (phase-ordered
    columns, ``Ws = ceil(segin / s)``)."""
    s = layer.stride
    return s * -(-((segw - 1) * s + layer.kw) // s)


def _pitches(layer: ConvLayer, nb: int, bw: int, rs: int, segw: int, fold: int,
             chans: int = 1) -> tuple:
    """``(D, IP, hr, wr, CP)`` of an ``rs x segw`` strip of ``fold`` images whose bank rows
    hold ``chans`` channels' window rows side by side (``pack``; 1 without): ``wr = s Ws``
    words a window row; the row pitch ``D``, the smallest ``>= chans wr`` that equals
    ``segw`` modulo ``nb``; ``hr = s Hs`` rows an image; the image pitch ``IP``
    (:func:`_image_pitch`); the channel pitch ``CP``: ``wr`` with ``chans > 1``, else
    :func:`_channel_pitch`."""
    s = layer.stride
    rin = (rs - 1) * s + layer.kh
    wr = window_row_words(layer, segw)
    hr = s * -(-rin // s)
    row = chans * wr
    D = row + (segw - row) % nb
    wbeat = -(-row // bw) * bw
    ip = _image_pitch(D, hr, row, wbeat, rs * D % nb, nb, fold)
    cp = wr if chans > 1 else _channel_pitch(D, hr, wr, wbeat, ip, fold)
    return D, ip, hr, wr, cp


@lru_cache(maxsize=4096)
def _image_pitch(D: int, hr: int, wr: int, wbeat: int, res: int, nb: int, fold: int) -> int:
    """The image pitch: the smallest ``IP >= wr`` with ``IP = rs D (mod nb)`` (``res``) at
    which the ``fold`` images, each ``hr`` rows of ``wr`` words ``D`` apart and written
    image after image in whole beats (``wbeat`` words a row), never write over a word of an
    image written before (their rows may interleave); at most the smallest ``>= hr D``
    (image after image, nothing shared).  Image ``b`` starts at ``b IP``."""
    big = hr * D + (res - hr * D) % nb
    ip = wr + (res - wr) % nb
    while ip < big:
        # image b's row r against image b - d's row r - k: the distance d IP + k D must
        # not make the row's written words [x, x + wbeat) meet the data [y, y + wr)
        # (k only near -d IP / D: the distance must lie within (-wbeat, wr))
        if all(not -wbeat < d * ip + k * D < wr
               for d in range(1, fold)
               for k in {max(-(hr - 1), min(hr - 1, -(d * ip) // D + j))
                         for j in range(-(wbeat // D) - 1, 2)}):
            return ip
        ip += nb
    return big


@lru_cache(maxsize=4096)
def _channel_pitch(D: int, hr: int, wr: int, wbeat: int, ip: int, fold: int) -> int:
    """The channel pitch: the smallest ``CP >= 1`` at which channels of ``fold`` images
    (rows at ``b IP + r D``, ``wr`` words of data, written in whole beats of ``wbeat``
    words a row), written channel after channel, never write over a word of a channel
    written before; at most ``(fold - 1) IP + hr D`` (channel after channel, nothing
    shared).  Unlike the image pitch it needs no residue modulo ``nb``: a beat reads the
    same channel offset at every position of a round."""
    starts = np.unique([b * ip + r * D for b in range(fold) for r in range(hr)])
    delta = np.unique(starts[:, None] - starts[None, :])
    # channel c's row L over channel c - d's row E: d CP must avoid (E - L - wbeat,
    # E - L + wr) for every pair (the written words [L, L + wbeat) against the data)
    hi = int(delta.max()) + wr
    marks = np.zeros(hi + 1, np.int64)
    lo_ = np.clip(delta - wbeat + 1, 0, hi)
    up_ = np.clip(delta + wr, 0, hi)
    np.add.at(marks, lo_, 1)
    np.add.at(marks, up_, -1)
    bad = np.cumsum(marks)[:hi] > 0
    big = (fold - 1) * ip + hr * D
    for cp in range(1, big):
        if not bad[cp:hi:cp].any():
            return cp
    return big


def feature_set_words(layer: ConvLayer, cfg: BankedConfig, rs: int, segw: int,
                      icq: int, fold: int = 1, pack: bool = False) -> int:
    """Words of a feature set that a step of ``icq`` channels of an ``rs x segw`` strip
    of ``fold`` images occupies: channels ``CP`` apart, per channel ``fold`` images at a
    pitch of ``IP``, each ``s Hs`` rows at a pitch of ``D`` words (:func:`_pitches`), the
    last row whole beats; with ``pack`` the channels side by side in each row."""
    chans = icq if pack else 1
    D, ip, hr, wr, cp = _pitches(layer, cfg.nb, cfg.bus_words, rs, segw, fold, chans)
    last = -(-chans * wr // cfg.bus_words) * cfg.bus_words
    return (icq - chans) * cp + (fold - 1) * ip + (hr - 1) * D + last


def strip_origins(layer: ConvLayer, rs: int, segw: int, fold: int = 1) -> tuple:
    """The strips of a whole layer, in ``(image, oy0, ox0)`` raster order (``rs`` must divide
    ``Ho``, ``segw`` divide ``Wo`` and ``fold`` the batch; a strip holds the images
    ``image .. image + fold - 1``)."""
    return tuple((b, y, x) for b in range(0, layer.batch, fold)
                 for y in range(0, layer.ho, rs) for x in range(0, layer.wo, segw))


def make_job(layer: ConvLayer, cfg: BankedConfig, *, rs: int, segw: int, icq: int | None = None,
             n: int | None = None, R: int | None = None, resident: bool | None = None,
             strips=None, oc0: int = 0, oc: int | None = None,
             align: bool | None = None, fold: int = 1, span: bool = False,
             pack: bool = False) -> BankedJob:
    """A job of ``layer`` on ``cfg``: output channels ``oc0 .. oc0 + oc - 1`` (default all)
    in groups of ``R``, the strips ``strips`` (``(image, oy0, ox0)``: ``rs x segw`` output
    positions of each of the images ``image .. image + fold - 1``; default: the whole
    layer, :func:`strip_origins`); ``span`` lets a strip's sums fill both output sets
    (module docstring); ``pack`` puts the chunk's channels side by side in each bank row
    (module docstring); ``align`` the
    channel-aligned output layout (default and required with ``cfg.rq_width`` > 0, whose
    stage then needs the job's ``G R`` biases within ``rq_depth``).  Raises ``ValueError``
    naming the limit a choice breaks."""
    align = bool(cfg.rq_width) if align is None else bool(align)
    if cfg.rq_width and not align:
        raise ValueError("a config with rq_width > 0 needs the channel-aligned output layout "
                         "(align)")
    oc = layer.oc - oc0 if oc is None else oc
    if not (0 <= oc0 and 1 <= oc and oc0 + oc <= layer.oc):
        raise ValueError(f"channels {oc0} .. {oc0 + oc - 1} are not within Oc={layer.oc}")
    if n is None:
        n = max(k for k in COPIES if k <= cfg.copies and (k == 1 or k * oc <= cfg.rows))
    if n not in COPIES or n > cfg.copies:
        raise ValueError(f"n must be one of 1, 2, 4, 8 and at most {cfg.copies}, not {n}")
    if R is None:
        R = min(oc, cfg.rows // n)
    if not 1 <= R <= cfg.rows // n or oc % R:
        raise ValueError(f"R={R} must divide Oc={oc} and fit {cfg.rows} rows {n} times")
    if not isinstance(fold, int) or not 1 <= fold <= layer.batch:
        raise ValueError(f"fold must be 1..{layer.batch} (the batch), not {fold!r}")
    if strips is None:
        if layer.ho % rs or layer.wo % segw:
            raise ValueError(f"strips {rs}x{segw} must divide the output map "
                             f"{layer.ho}x{layer.wo}")
        if layer.batch % fold:
            raise ValueError(f"fold {fold} must divide the batch {layer.batch}")
        strips = strip_origins(layer, rs, segw, fold)
    strips = tuple(tuple(int(v) for v in t) for t in strips)
    for b, y, x in strips:
        if not (0 <= b and b + fold <= layer.batch and 0 <= y and y + rs <= layer.ho
                and 0 <= x and x + segw <= layer.wo):
            raise ValueError(f"strip {(b, y, x)} of {rs}x{segw} x {fold} images is outside "
                             f"the output maps")
    if not strips:
        raise ValueError("a job needs at least one strip")
    icq = layer.ic if icq is None else icq
    if not 1 <= icq <= layer.ic:
        raise ValueError(f"icq must be 1..{layer.ic}, not {icq}")
    kk = layer.kh * layer.kw
    job = BankedJob(layer, n, R, oc // R, rs, segw, icq, False, strips, oc0=oc0,
                    cols_=cfg.cols, bw_=cfg.bus_words, nb_=cfg.nb, align=align, fold=fold,
                    span=bool(span), pack=bool(pack))
    if cfg.rq_width and oc > cfg.rq_depth:
        raise ValueError(f"the requantisation stage holds {cfg.rq_depth} biases (rq_depth), "
                         f"not the job's {oc} channels")
    if cfg.rq_width and len(strips) > 0xFFFF:
        raise ValueError(f"the requantisation stage counts at most 65535 strips "
                         f"(RQ_STRIPS), not {len(strips)}")
    if resident is None:
        resident = layer.ic * kk <= 2 * cfg.weight_depth and job.G * job.S * job.Q > 1
    job = replace(job, resident=bool(resident))
    if resident and layer.ic * kk > 2 * cfg.weight_depth:
        raise ValueError(f"resident weights need {layer.ic * kk} words per row, "
                         f"more than 2 x weight_depth = {2 * cfg.weight_depth}")
    if not resident and icq * kk > cfg.weight_depth:
        raise ValueError(f"a chunk of {icq} channels needs {icq * kk} weight words per row, "
                         f"more than weight_depth = {cfg.weight_depth}")
    fw = feature_set_words(layer, cfg, rs, segw, icq, fold, pack)
    if fw > cfg.nb * cfg.feat_depth:
        raise ValueError(f"a step's features need {fw} words, more than one set's "
                         f"{cfg.nb} x {cfg.feat_depth}")
    ow = job.obeats * cfg.bus_words             # with align: R cp
    if ow > (2 if span else 1) * cfg.nb * cfg.out_depth:
        sets = "both sets'" if span else "one set's"
        raise ValueError(f"a strip's outputs need {ow} words, more than {sets} "
                         f"{cfg.nb} x {cfg.out_depth}" + ("" if span else "; span allows both sets"))
    for name, v in descriptor_fields(job, cfg).items():
        if v[0] >= 1 << v[1]:
            raise ValueError(f"descriptor field {name} = {v[0]} needs more than {v[1]} bits")
    return job


def steps(job: BankedJob):
    """The job's steps in order: ``(i, g, t, q)``."""
    i = 0
    for g in range(job.G):
        for t in range(job.S):
            for q in range(job.Q):
                yield i, g, t, q
                i += 1


def _offsets(job):
    """``(offx(kx) for kx, offy(ky) for ky)``: a beat's feature offset within its channel
    is ``offy(ky) + offx(kx)``."""
    s, D = job.layer.stride, job.D
    offx = [(kx % s) * job.Ws + kx // s for kx in range(job.layer.kw)]
    offy = [((ky % s) * job.Hs + ky // s) * D for ky in range(job.layer.kh)]
    return offx, offy


def descriptor_fields(job: BankedJob, cfg: BankedConfig) -> dict:
    """``name -> (value, width)`` of the descriptor, in payload order (first field in the
    LSBs).  Address deltas are modulo the address width (a negative delta wraps)."""
    L = job.layer
    s, D = L.stride, job.D
    offx, offy = _offsets(job)
    xl = offx[-1]
    widths = descriptor_widths(cfg)
    # a round advances W = A PI + a segw + r positions: A images, a rows, r columns (then a
    # column carry into the row, a row carry into the image)
    A, rem = divmod(job.W, job.PI)
    a, r = divmod(rem, job.segw)
    fstep = A * job.IP + a * D + r
    ximg = job.IP - job.rs * D                  # an image carry's words beyond a row carry
    hr = s * job.Hs
    vals = {
        "nl": job.n.bit_length() - 1, "R": job.R, "nR": job.n * job.R, "W": job.W,
        "G": job.G, "S": job.S, "Q": job.Q, "rounds": job.rounds, "lastw": job.lastw,
        "kq": job.k_of(0), "kl": job.k_of(job.Q - 1), "kh": L.kh, "kw": L.kw, "s": s,
        "d_xin": job.Ws, "d_xwrap": 1 - (s - 1) * job.Ws,
        "d_yin": job.Hs * D - xl, "d_ywrap": D - (s - 1) * job.Hs * D - xl,
        "d_ic": job.CPf - offy[-1] - xl,
        "segw": job.segw, "thr": job.segw - r, "rstep": r, "rwrap": r - job.segw,
        "fstep": fstep, "fwrap": fstep + D - job.segw, "mx": (D - job.segw) // cfg.nb,
        "rs": job.rs, "ythr": job.rs - a, "ystep": a, "ywrap": a - job.rs,
        "fimg": fstep + ximg, "fimgw": fstep + D - job.segw + ximg, "ex": ximg // cfg.nb,
        "hrows": hr, "fold": job.fold, "ipj": job.IP - (hr - 1) * D,
        # with pack a step is one channel of bank rows: the loader never jumps channels
        "cpj": 0 if job.pack else job.CPf - (job.fold - 1) * job.IP - (hr - 1) * D,
        "cp": job.cp,
        "xbq": job.xbeats(0), "xbl": job.xbeats(job.Q - 1), "wg": job.wgroup,
        "wbq": job.wbeats(0), "wbl": job.wbeats(job.Q - 1), "bpr": job.bpr, "D": job.D,
        "res": int(job.resident), "obeats": job.obeats, "span": int(job.span),
        "gs": job.G * job.S, "nsteps": job.G * job.S * job.Q, "sq": job.S * job.Q,
        "gq": job.G * job.Q, "olast": job.olast,
    }
    wrap = ("d_xin", "d_xwrap", "d_yin", "d_ywrap", "d_ic", "fstep", "fwrap", "rwrap",
            "ywrap", "fimg", "fimgw", "ex", "ipj", "cpj")
    return {k: (vals[k] & ((1 << widths[k]) - 1) if k in wrap else vals[k], widths[k])
            for k in widths}


def descriptor_widths(cfg: BankedConfig) -> dict:
    """``name -> width`` of the descriptor fields (the config alone fixes them)."""
    cw, fb, ob, rb = cfg.count_width, cfg.fbits, cfg.obits, cfg.rbits
    fab = (cfg.feat_depth - 1).bit_length()
    widths = {"nl": 2, "R": rb, "nR": rb, "W": cw, "G": cw, "S": cw, "Q": cw, "rounds": cw,
              "lastw": cw, "kq": cw, "kl": cw, "kh": 4, "kw": 4, "s": 3}
    widths.update({k: fb for k in ("d_xin", "d_xwrap", "d_yin", "d_ywrap", "d_ic")})
    widths.update({"segw": cw, "thr": cw, "rstep": cw, "rwrap": cw, "fstep": fb, "fwrap": fb,
                   "mx": max(fab, 1), "rs": cw, "ythr": cw, "ystep": cw, "ywrap": cw,
                   "fimg": fb, "fimgw": fb, "ex": max(fab, 1), "hrows": cw, "fold": cw,
                   "ipj": fb, "cpj": fb, "cp": ob, "xbq": cw, "xbl": cw, "wg": 6, "wbq": cw + 6,
                   "wbl": cw + 6, "bpr": cw, "D": fb, "res": 1, "obeats": cw, "span": 1, "gs": cw,
                   "nsteps": cw, "sq": cw, "gq": cw, "olast": 6})
    return widths


def descriptor_value(job: BankedJob, cfg: BankedConfig) -> int:
    """The descriptor payload as one integer (first field in the LSBs)."""
    v, pos = 0, 0
    for value, width in descriptor_fields(job, cfg).values():
        v |= value << pos
        pos += width
    return v


def _padded(x, layer: ConvLayer):
    x = np.asarray(x, dtype=np.int64)
    if x.ndim == 3:
        x = x[None]
    p = layer.pad
    return np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))


def feature_beats(x, job: BankedJob, cfg: BankedConfig) -> list:
    """The ``x`` stream of ``job`` for input ``x`` (``(Ic, H, W)`` or ``(B, Ic, H, W)``):
    a list of beats, each ``bus_words`` ints."""
    L, bw = job.layer, cfg.bus_words
    xp = _padded(x, L)
    s = L.stride
    cols = np.array([(c % s) * job.Ws + c // s for c in range(job.segin)])
    rows = np.array([(y % s) * job.Hs + y // s for y in range(job.rin)])
    beats = []
    for _i, _g, t, q in steps(job):
        b, oy0, ox0 = job.strips[t]
        ic0 = q * job.icq
        ic1 = ic0 + (job.icq if q < job.Q - 1 else job.icl)
        win = xp[b:b + job.fold, ic0:ic1, oy0 * s:oy0 * s + job.rin,
                 ox0 * s:ox0 * s + job.segin].transpose(1, 0, 2, 3)
        if job.pack:
            # the channels' window rows side by side in one bank row, s Ws words apart
            wr = s * job.Ws
            block = np.zeros((job.fold, s * job.Hs, job.bpr * bw), dtype=np.int64)
            for c in range(ic1 - ic0):
                block[:, rows[:, None], c * wr + cols[None, :]] = win[c]
        else:
            block = np.zeros((ic1 - ic0, job.fold, s * job.Hs, job.bpr * bw), dtype=np.int64)
            block[:, :, rows[:, None], cols[None, :]] = win
        beats += block.reshape(-1, bw).tolist()
    return beats


def _weight_rows(w, job, g, k0, k1):
    """Beats of beat addresses ``k0 .. k1 - 1`` of the flattened ``(ic, ky, kx)`` kernel."""
    bw = job.bw_
    c0 = job.oc0 + g * job.R
    wf = np.asarray(w, dtype=np.int64)[c0:c0 + job.R].reshape(job.R, -1)
    beats = []
    for a in range(k0, k1):
        col = [int(wf[r, a]) for r in range(job.R)]
        col += [0] * (job.wgroup * bw - len(col))
        beats += [col[j * bw:(j + 1) * bw] for j in range(job.wgroup)]
    return beats


def weight_beats(w, job: BankedJob) -> list:
    """The ``w`` stream of ``job`` for weights ``w`` ``(Oc, Ic, kh, kw)``."""
    kk = job.layer.kh * job.layer.kw
    beats = []
    for _i, g, t, q in steps(job):
        if t == 0 or not job.resident:
            k0 = q * job.icq * kk
            beats += _weight_rows(w, job, g, k0, k0 + job.k_of(q))
    return beats


def assemble(words, job: BankedJob, y=None, padded: bool = True):
    """The layer's output ``(B, Oc, Ho, Wo)`` from the ``o`` stream's words of ``job`` (every
    beat's ``bus_words`` words, in order; with ``padded`` False only the strips' ``R P``
    words each, as the shell's ``m_axis_o`` delivers them), written into ``y`` (default
    zeros).  With ``align`` and ``padded`` a strip's channel ``r`` starts at word
    ``r cp``."""
    L = job.layer
    if y is None:
        y = np.zeros((L.batch, L.oc, L.ho, L.wo), dtype=np.int64)
    words = list(words)
    per = job.obeats * job.bw_ if padded else job.E
    pitch = job.cp if padded else job.P
    k = 0
    for g in range(job.G):
        for b, oy0, ox0 in job.strips:
            blk = np.array([words[k + r * pitch:k + r * pitch + job.P] for r in range(job.R)])
            blk = blk.reshape(job.R, job.fold, job.rs, job.segw).transpose(1, 0, 2, 3)
            c0 = job.oc0 + g * job.R
            y[b:b + job.fold, c0:c0 + job.R, oy0:oy0 + job.rs, ox0:ox0 + job.segw] = blk
            k += per
    return y
