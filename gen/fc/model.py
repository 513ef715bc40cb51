# SPDX-License-Identifier: Apache-2.0
"""FD-CSR sparse weights (seed 001): format, storage model, FC engine config and models.

Format (seed 001, "fine-grained dataflow CSR")
----------------------------------------------
A weight matrix ``W`` (``rows x cols``) is cut into *segments* of ``row_width``
elements (16 by default; the seed calls them "rows of 16 elements").  Each matrix
row is cut separately and its last segment is padded with zeros when ``cols`` is
not a multiple of ``row_width`` **(reading)**: the seed re-lays a 1-D array as a
2-D array with 16 columns; we apply that per matrix row so that a segment never
straddles two output neurons (a 1-D array is one row).  For the six seed layers
``cols`` is a multiple of 16 and both readings give the same bits.

* ``values``  -- all non-zeros, row-major order (``nnz`` entries);
* ``masks``   -- one ``row_width``-bit mask per segment, bit ``k`` = 1 when element
  ``k`` of the segment is non-zero (LSB = first element);
* ``offsets`` -- one per segment: the index in ``values`` of the segment's first
  non-zero (for an all-zero segment, the index its first non-zero would have,
  i.e. the number of non-zeros before it).

The address of element ``k`` of segment ``s`` is
``offsets[s] + popcount(masks[s] & ((1 << k) - 1))`` (the seed's running
``offset - 1 + bit`` sum).  :func:`encode` / :func:`decode` convert; :func:`save` /
:func:`load` use ``.npz`` files (see ``docs/fdcsr.md``).

Storage model
-------------
:func:`storage_bits` gives the bits of one matrix in four layouts with every field
width stated (:data:`SCHEMES`); :func:`bandwidth_table` reproduces the seed's six
layers with synthetic (uniform random, i.e. magnitude-of-Gaussian) pruning.

FC engine (``hdl/fc.py``)
-------------------------
:class:`FcConfig`, the golden model :func:`ref_fc` (exact integer ``W @ X``), the cycle
models -- :func:`fc_schedule` (closed form, exact when every stream is always valid / ready)
and :func:`fc_cycle_model` (clock by clock, exact under any per-port stimulus of
:mod:`gen.core.stimulus`) -- and the RTL twin :func:`rtl_fc`.
"""

from collections import deque
from dataclasses import dataclass

import numpy as np

from gen.core.config import check_format, check_int
from gen.core.fixed import QFormat, check_codes, index_bits
from gen.core.stimulus import ModelSource, Pattern, job_patterns, make_job, pattern_for

__all__ = ["FdCsr", "encode", "decode", "save", "load", "segment_popcounts",
           "storage_bits", "SCHEMES", "SEED_LAYERS", "prune_random", "bandwidth_table",
           "FcConfig", "ref_fc", "decode_walk", "fc_schedule", "fc_cycle_model",
           "model_cycles_from_counts",
           "fc_job", "dense_cycles", "fixed_overhead", "unpack_y", "unpack_requests"]

FORMAT_NAME = "fdcsr"
FORMAT_VERSION = 1


def _mask_dtype(width):
    return np.uint8 if width <= 8 else np.uint16 if width <= 16 else np.uint32


def _check_width(row_width):
    if isinstance(row_width, bool) or not isinstance(row_width, (int, np.integer)):
        raise TypeError(f"row_width must be an integer, not {row_width!r}")
    if row_width not in (4, 8, 16, 32):
        raise ValueError(f"row_width must be 4, 8, 16 or 32, not {row_width}")
    return int(row_width)


@dataclass(frozen=True, eq=False)
class FdCsr:
    """One matrix in FD-CSR.

    ``shape`` is the original shape (``(n,)`` or ``(rows, cols)``); ``values`` has
    the matrix dtype; ``masks`` is unsigned ``row_width`` bits; ``offsets`` int64.
    Segment ``r * segs_per_row + s`` holds columns ``s*row_width .. +row_width-1``
    of row ``r``.
    """

    shape: tuple
    row_width: int
    values: np.ndarray
    masks: np.ndarray
    offsets: np.ndarray

    @property
    def rows(self) -> int:
        return 1 if len(self.shape) == 1 else int(self.shape[0])

    @property
    def cols(self) -> int:
        return int(self.shape[-1])

    @property
    def segs_per_row(self) -> int:
        return -(-self.cols // self.row_width)

    @property
    def nnz(self) -> int:
        return int(len(self.values))

    def validate(self):
        """Raise ValueError (one line) if the arrays are not a consistent FD-CSR matrix."""
        w = self.row_width
        nseg = self.rows * self.segs_per_row
        if self.masks.ndim != 1 or len(self.masks) != nseg:
            raise ValueError(f"masks must hold {nseg} entries for shape {self.shape} and "
                             f"row_width {w}, not {self.masks.size}")
        if self.offsets.ndim != 1 or len(self.offsets) != nseg:
            raise ValueError(f"offsets must hold {nseg} entries, not {self.offsets.size}")
        masks = self.masks.astype(np.int64)
        if np.any(masks < 0) or np.any(masks >> w):
            raise ValueError(f"masks must be {w}-bit values")
        pad = self.segs_per_row * w - self.cols
        if pad and np.any(masks.reshape(self.rows, -1)[:, -1] >> (w - pad)):
            raise ValueError(f"mask bits beyond column {self.cols} must be 0")
        counts = segment_popcounts(self.masks, w)
        expect = np.concatenate([[0], np.cumsum(counts)[:-1]]) if nseg else counts
        if not np.array_equal(self.offsets.astype(np.int64), expect):
            bad = int(np.flatnonzero(self.offsets != expect)[0])
            raise ValueError(f"offsets must be the running non-zero count; segment {bad} has "
                             f"{int(self.offsets[bad])}, expected {int(expect[bad])}")
        if self.values.ndim != 1 or len(self.values) != int(counts.sum()):
            raise ValueError(f"values must hold {int(counts.sum())} entries (the masks' "
                             f"popcount), not {self.values.size}")
        if np.any(self.values == 0):
            raise ValueError("values must not contain zeros (a zero is a cleared mask bit)")

    def storage(self, value_bits=16) -> dict:
        return storage_bits((self.rows, self.cols), self.nnz, value_bits, self.row_width)


def segment_popcounts(masks, row_width=16):
    """Number of set bits of each mask (int64 array)."""
    m = np.asarray(masks).astype(np.int64)
    count = np.zeros(m.shape, dtype=np.int64)
    for k in range(row_width):
        count += (m >> k) & 1
    return count


def _as_matrix(w):
    w = np.asarray(w)
    if w.ndim == 1:
        return w.reshape(1, -1)
    if w.ndim != 2:
        raise ValueError(f"weights must be a 1-D or 2-D array, not {w.ndim}-D")
    return w


def encode(w, row_width=16) -> FdCsr:
    """Dense array (1-D or 2-D, integer or float) -> :class:`FdCsr`."""
    row_width = _check_width(row_width)
    w = np.asarray(w)
    mat = _as_matrix(w)
    rows, cols = mat.shape
    segs = -(-cols // row_width)
    padded = np.zeros((rows, segs * row_width), dtype=mat.dtype)
    padded[:, :cols] = mat
    nz = (padded != 0).reshape(rows * segs, row_width)
    weights = (np.int64(1) << np.arange(row_width, dtype=np.int64))
    masks = (nz.astype(np.int64) * weights).sum(axis=1).astype(_mask_dtype(row_width))
    counts = nz.sum(axis=1).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64) \
        if len(counts) else counts
    values = padded.reshape(-1)[nz.reshape(-1)].copy()
    return FdCsr(tuple(int(s) for s in w.shape), row_width, values, masks, offsets)


def decode(fd: FdCsr) -> np.ndarray:
    """:class:`FdCsr` -> the dense array (original shape and dtype); validates first."""
    fd.validate()
    w = fd.row_width
    nseg = len(fd.masks)
    bits = ((fd.masks.astype(np.int64)[:, None] >> np.arange(w)) & 1).astype(bool)
    # The seed's address rule, applied to every set bit.
    below = np.cumsum(bits, axis=1) - bits
    addr = fd.offsets.astype(np.int64)[:, None] + below
    flat = np.zeros((nseg, w), dtype=fd.values.dtype)
    flat[bits] = fd.values[addr[bits]]
    out = flat.reshape(fd.rows, fd.segs_per_row * w)[:, :fd.cols]
    return out.reshape(fd.shape)


def save(path, fd: FdCsr):
    """Write ``fd`` to an ``.npz`` (keys: format, version, shape, row_width, values,
    masks, offsets)."""
    np.savez(path, format=np.array(FORMAT_NAME), version=np.array(FORMAT_VERSION),
             shape=np.array(fd.shape, dtype=np.int64), row_width=np.array(fd.row_width),
             values=fd.values, masks=fd.masks, offsets=fd.offsets)


def _field(data: dict, key: str, where: str, ndim: int, kinds: str, what: str):
    """``data[key]`` checked for dimensionality and dtype kind; one ValueError line if not."""
    arr = data[key]
    if arr.ndim != ndim or arr.dtype.kind not in kinds:
        shape = "a scalar" if arr.ndim == 0 else f"{arr.ndim}-D"
        raise ValueError(f"{where}: field {key!r} must be {what}, not {shape} {arr.dtype}")
    return arr


def load(path) -> FdCsr:
    """Read an ``.npz`` written by :func:`save`; every field is validated as :func:`encode`
    guarantees it on save (kinds, shapes, widths, finite non-zero values, masks, offsets);
    any problem is one ValueError line."""
    where = repr(str(path))
    try:
        z = np.load(path, allow_pickle=False)
    except Exception as exc:  # noqa: BLE001 - any parse failure is a user error
        first = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else \
            type(exc).__name__
        raise ValueError(f"{where} is not a readable .npz file ({first})") from None
    if not isinstance(z, np.lib.npyio.NpzFile):
        raise ValueError(f"{where} is not an FD-CSR file (a single .npy array, not an .npz "
                         f"archive)")
    with z:
        try:
            data = {k: z[k] for k in z.files}
        except Exception as exc:  # noqa: BLE001
            first = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else \
                type(exc).__name__
            raise ValueError(f"{where} is not a readable .npz file ({first})") from None
    need = ("format", "version", "shape", "row_width", "values", "masks", "offsets")
    missing = [k for k in need if k not in data]
    if missing:
        raise ValueError(f"{where} is not an FD-CSR file (missing {', '.join(missing)})")
    name = _field(data, "format", where, 0, "U", "the text 'fdcsr'")
    version = _field(data, "version", where, 0, "iu", "an integer")
    if str(name) != FORMAT_NAME or int(version) != FORMAT_VERSION:
        raise ValueError(f"{where} is not an FD-CSR v{FORMAT_VERSION} file")
    shape = tuple(int(s) for s in _field(data, "shape", where, 1, "iu",
                                         "a 1-D integer array"))
    if len(shape) not in (1, 2) or any(s < 0 for s in shape):
        raise ValueError(f"{where}: shape must be 1-D or 2-D with sizes >= 0, not {shape}")
    row_width = int(_field(data, "row_width", where, 0, "iu", "an integer"))
    if row_width not in (4, 8, 16, 32):
        raise ValueError(f"{where}: row_width must be 4, 8, 16 or 32, not {row_width}")
    values = _field(data, "values", where, 1, "biuf", "a 1-D numeric array")
    masks = _field(data, "masks", where, 1, "u", "a 1-D unsigned integer array")
    offsets = _field(data, "offsets", where, 1, "iu", "a 1-D integer array")
    if masks.dtype.itemsize * 8 < row_width:
        raise ValueError(f"{where}: masks must be at least {row_width}-bit integers, not "
                         f"{masks.dtype}")
    if values.dtype.kind == "f" and not np.all(np.isfinite(values)):
        bad = "NaN" if np.any(np.isnan(values)) else "an infinity"
        raise ValueError(f"{where}: values must be finite, found {bad}")
    fd = FdCsr(shape, row_width, values, masks, offsets.astype(np.int64))
    try:
        fd.validate()
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    return fd


# ---------------------------------------------------------------------- storage model

SCHEMES = {
    "dense": "value_bits per element",
    "csr": "value_bits + ceil(log2(cols)) column index per non-zero; "
           "ceil(log2(nnz+1)) row pointer per row + 1",
    "colpack": "seed 000: P=32 PEs x 16 rows per PE per block (blocks of 512 rows); per "
               "(block, PE, column) the non-zeros as (value_bits value + 4-bit local row) "
               "entries and one all-zero terminator entry",
    "fdcsr32": "seed 001: value_bits per non-zero; per segment a row_width-bit mask and a "
               "32-bit offset",
    "fdcsr16": "seed 001 in 16-bit words (the FDPU's data width): value_bits per non-zero; "
               "per segment a row_width-bit mask and a 16-bit offset relative to a tile of at "
               "most 2**16 values (reading)",
    "fdcsr": "seed 001 with minimal offsets: value_bits per non-zero; per segment a "
             "row_width-bit mask and a ceil(log2(nnz+1))-bit offset",
    "fdcsr_nooff": "seed 001 without stored offsets (a sequential reader keeps the running "
                   "count): value_bits per non-zero + row_width-bit mask per segment",
}


def storage_bits(shape, nnz, value_bits=16, row_width=16, pes=32, local_row_bits=4) -> dict:
    """Bits of a ``rows x cols`` matrix with ``nnz`` non-zeros in each scheme, plus the
    field widths used (see :data:`SCHEMES`)."""
    rows, cols = shape
    segs = rows * (-(-cols // row_width))
    col_bits = index_bits(cols)
    ptr_bits = index_bits(nnz + 1)
    block_rows = pes << local_row_bits
    entry = value_bits + local_row_bits
    blocks = -(-rows // block_rows)
    return {
        "dense": rows * cols * value_bits,
        "csr": nnz * (value_bits + col_bits) + (rows + 1) * ptr_bits,
        "colpack": entry * (nnz + blocks * pes * cols),
        "fdcsr32": nnz * value_bits + segs * (row_width + 32),
        "fdcsr16": nnz * value_bits + segs * (row_width + 16),
        "fdcsr": nnz * value_bits + segs * (row_width + ptr_bits),
        "fdcsr_nooff": nnz * value_bits + segs * row_width,
        "widths": {"value": value_bits, "csr_col_index": col_bits, "csr_row_ptr": ptr_bits,
                   "colpack_entry": entry, "colpack_local_row": local_row_bits,
                   "colpack_terminators": blocks * pes * cols, "mask": row_width,
                   "offset_min": ptr_bits, "segments": segs},
    }


# Seed 001's layers: (name, rows = outputs, cols = inputs, density after pruning).
SEED_LAYERS = (
    ("AlexNet FC6", 4096, 9216, 0.09),
    ("AlexNet FC7", 4096, 4096, 0.09),
    ("AlexNet FC8", 1000, 4096, 0.25),
    ("VGG16 FC6", 4096, 25088, 0.04),
    ("VGG16 FC7", 4096, 4096, 0.04),
    ("VGG16 FC8", 1000, 4096, 0.23),
)
SEED_REDUCTION = (2.44, 6.17)


def prune_random(shape, density, rng, value_bits=16):
    """Synthetic pruned weights: Gaussian codes keeping the largest ``density`` fraction by
    magnitude (= uniform random positions), as integer codes of ``value_bits``."""
    w = rng.standard_normal(shape)
    keep = int(round(density * w.size))
    out = np.zeros(shape, dtype=np.int64)
    if keep:
        thresh = np.partition(np.abs(w).ravel(), w.size - keep)[w.size - keep]
        sel = np.abs(w) >= thresh
        lim = (1 << (value_bits - 1)) - 1
        codes = np.clip(np.round(w / np.abs(w).max() * lim), -lim, lim).astype(np.int64)
        codes[sel & (codes == 0)] = 1
        out[sel] = codes[sel]
    return out


def bandwidth_table(value_bits=16, row_width=16, seed=0) -> list:
    """The seed's six layers at its densities: bits per scheme and reduction vs dense."""
    rows_out = []
    for name, rows, cols, density in SEED_LAYERS:
        nnz = int(round(density * rows * cols))
        bits = storage_bits((rows, cols), nnz, value_bits, row_width)
        red = {k: bits["dense"] / v for k, v in bits.items() if k not in ("widths",)}
        rows_out.append({"layer": name, "rows": rows, "cols": cols, "density": density,
                         "nnz": nnz, "bits": {k: v for k, v in bits.items() if k != "widths"},
                         "widths": bits["widths"], "reduction": red})
    return rows_out


# ------------------------------------------------------------------------- FC engine

@dataclass(frozen=True)
class FcConfig:
    """Parameters of the batched FD-CSR FC engine (``hdl/fc.py``).

    Parameters
    ----------
    batch : int
        N, activation vectors held on chip and processed together, 1..64.
    nz_per_clock : int
        Non-zeros the decoder issues per clock, 1, 2 or 4; ``lanes = batch * nz_per_clock``
        multipliers.
    row_width : int
        FD-CSR segment width (mask bits), 4, 8, 16 or 32 (seed: 16).
    segs_per_beat : int
        FD-CSR segments (mask + offset pairs) per ``meta`` transfer, 1, 2, 4 or 8; more
        lets the decoder skip sparse segments faster than one per clock.
    w_fmt, x_fmt : QFormat
        Weight and activation formats (2..24 bits).  Results are the exact integer
        sums in ``Q(w.int + x.int + log2 max_cols, w.frac + x.frac)``.
    max_cols : int
        Activation memory depth (largest ``cols``), a multiple of
        ``row_width * segs_per_beat``, up to 65536.
    max_rows : int
        Largest ``rows`` per job, 1..65535.
    addr_width : int
        Bits of a value address (non-zeros per job < 2**addr_width), 4..32.
    fifo_depth : int
        Decoded non-zero groups waiting for their values (memory read latency), 2..64.
    """

    batch: int = 4
    nz_per_clock: int = 1
    row_width: int = 16
    segs_per_beat: int = 4
    w_fmt: QFormat = QFormat(2, 14)
    x_fmt: QFormat = QFormat(4, 12)
    max_cols: int = 1024
    max_rows: int = 4096
    addr_width: int = 20
    fifo_depth: int = 4

    def __post_init__(self):
        check_int(self, "batch", 1, 64)
        if self.nz_per_clock not in (1, 2, 4):
            raise ValueError(f"nz_per_clock must be 1, 2 or 4, not {self.nz_per_clock}")
        _check_width(self.row_width)
        if self.segs_per_beat not in (1, 2, 4, 8):
            raise ValueError(f"segs_per_beat must be 1, 2, 4 or 8, not {self.segs_per_beat}")
        check_format(self, "w_fmt", 2, 24)
        check_format(self, "x_fmt", 2, 24)
        check_int(self, "max_cols", 1, 65536)
        if self.max_cols % self.beat_cols:
            raise ValueError(f"max_cols must be a multiple of row_width * segs_per_beat = "
                             f"{self.beat_cols}, not {self.max_cols}")
        check_int(self, "max_rows", 1, 65535)
        check_int(self, "addr_width", 4, 32)
        check_int(self, "fifo_depth", 2, 64)

    @property
    def beat_cols(self) -> int:
        return self.row_width * self.segs_per_beat

    @property
    def lanes(self) -> int:
        return self.batch * self.nz_per_clock

    @property
    def col_width(self) -> int:
        return max(1, (self.max_cols - 1).bit_length())

    @property
    def acc_width(self) -> int:
        return self.w_fmt.width + self.x_fmt.width + max(1, (self.max_cols - 1).bit_length())

    @property
    def y_fmt(self) -> QFormat:
        return QFormat(self.acc_width - self.w_fmt.frac_bits - self.x_fmt.frac_bits,
                       self.w_fmt.frac_bits + self.x_fmt.frac_bits)

    @property
    def module_name(self) -> str:
        return (f"fc_fdcsr_n{self.batch}_k{self.nz_per_clock}"
                f"_w{self.row_width}x{self.segs_per_beat}")

    # Clocks from a ``meta`` transfer to the decoder taking that beat when nothing waits:
    # the input register stage (per-segment popcounts), then the skid buffer's main entry
    # (the beat's non-zero count).
    meta_latency = 2

    # Pipeline after a group's decode step: decoder output register (1) -> skid buffer
    # (1) -> FIFO write (1) -> pop + activation read (1) -> memory output registers (1) ->
    # operand registers at the multipliers (1) -> multiply (1) -> accumulate into the y
    # register (1): row r's result transfers 8 clocks after its last decode step.
    latency = 8


def fixed_overhead(cols, cfg: FcConfig) -> int:
    """Clocks of one job besides the decoder's: ``cmd`` (1), the activation load
    (``cols``), ``meta`` to the decoder (:attr:`FcConfig.meta_latency`) and the pipeline
    (:attr:`FcConfig.latency`); a job takes ``fixed_overhead + decoder clocks``."""
    return cols + 2 + cfg.meta_latency + cfg.latency


def ref_fc(w, x, cfg: FcConfig):
    """Golden model: integer codes ``W`` (rows x cols) and ``X`` (cols x N) -> ``W @ X``
    (int64), exactly what the RTL outputs (no rounding: the accumulator is wide enough)."""
    w = check_codes(w, cfg.w_fmt, "weights")
    x = check_codes(x, cfg.x_fmt, "activations")
    # Python ints via object dtype would be exact too; int64 suffices for <= 2*24+16 bits.
    return w @ x


def _beats(fd: FdCsr, cfg: FcConfig):
    """Masks and offsets per meta beat, padded to whole beats per row: arrays of shape
    (rows, beats_per_row, segs_per_beat)."""
    c = cfg.segs_per_beat
    spr = fd.segs_per_row
    bpr = max(1, -(-spr // c))
    masks = np.zeros((fd.rows, bpr * c), dtype=np.int64)
    masks[:, :spr] = fd.masks.astype(np.int64).reshape(fd.rows, spr)
    counts = segment_popcounts(masks, fd.row_width)
    flat_counts = counts.reshape(-1)
    offsets = (np.concatenate([[0], np.cumsum(flat_counts)[:-1]])
               .reshape(fd.rows, bpr * c))
    return masks.reshape(fd.rows, bpr, c), offsets.reshape(fd.rows, bpr, c), \
        counts.reshape(fd.rows, bpr, c).sum(axis=2)


def decode_walk(beat_nnz, k):
    """The decoder's clock-by-clock behaviour from per-beat non-zero counts.

    ``beat_nnz``: (rows, beats_per_row) counts.  Each clock the decoder issues
    ``min(k, left)`` non-zeros of the held beat; if that empties the beat and the beat is
    not its row's last, the group is topped up with the next beat's first non-zeros
    (look-ahead), and the next beat is accepted in the same clock.  A beat with nothing
    left still takes one clock (that clock may issue the next beat's non-zeros).
    Returns ``(finish, groups)``: the clock (1-based) in which each beat is finished and
    the size of every issued group, in order.
    """
    counts = np.asarray(beat_nnz, dtype=np.int64)
    bpr = counts.shape[1]
    flat = counts.reshape(-1).tolist()
    nb = len(flat)
    finish = np.zeros(nb, dtype=np.int64)
    groups = []
    clock, idx = 0, 0
    cur = flat[0] if nb else 0
    while idx < nb:
        clock += 1
        take = min(k, cur)
        cur -= take
        extra = 0
        if cur == 0 and (idx % bpr) != bpr - 1 and idx + 1 < nb:
            extra = min(k - take, flat[idx + 1])
        if take + extra:
            groups.append(take + extra)
        if cur == 0:
            finish[idx] = clock
            idx += 1
            if idx < nb:
                cur = flat[idx] - extra
    return finish, groups


def fc_schedule(fd: FdCsr, cfg: FcConfig) -> dict:
    """Exact cycle model of the engine for one job (all streams always valid/ready).

    Cycle 0 is the ``cmd`` transfer; ``x`` transfers at 1..cols; the first ``meta``
    beat at ``cols + 1`` enters the input register stage, then the two-entry skid buffer,
    and the decoder takes it at ``cols + 1 + meta_latency`` (``cols + 3``).  The decoder
    then runs as :func:`decode_walk` describes: up to ``k = nz_per_clock`` non-zeros per
    clock, a beat boundary inside a row costs nothing (look-ahead), a beat with nothing
    left costs one clock, each beat is accepted in the clock that finishes the previous
    one.  Row ``r``'s result transfers on ``y`` at ``cols + 1 + meta_latency + F_r +
    latency`` where ``F_r`` is the clock that finishes the row's last beat.  So ``cycles
    = S + fixed_overhead(cols)`` with ``S`` the decoder clocks (:func:`fixed_overhead`:
    ``cols + 12``, activation load, input stage, skid buffer and pipeline).  ``meta``
    transfers whenever the input stage is empty or moves on (:func:`_meta_transfers`).
    Returns the per-row ``y`` cycles, the ``meta`` cycles, the memory requests
    ``(addr, count)`` in order, and totals.  With idle inputs or back-pressure use
    :func:`fc_cycle_model` (which equals this with every pattern ``always``).
    """
    k = cfg.nz_per_clock
    _, _, beat_nnz = _beats(fd, cfg)
    finish, groups = decode_walk(beat_nnz, k)
    first_meta = fd.cols + 1              # meta_open is set by the last x transfer
    first_decode = first_meta + cfg.meta_latency
    bpr = beat_nnz.shape[1]
    accept = first_decode + np.concatenate([[0], finish[:-1]])   # decoder takes beat b
    meta_cycles = _meta_transfers(accept, first_meta)
    row_end = finish.reshape(fd.rows, bpr)[:, -1]
    y_cycles = first_decode + row_end + cfg.latency
    requests, addr = [], 0
    for n in groups:
        requests.append((addr, n))
        addr += n
    decode_clocks = int(finish[-1]) if len(finish) else 0
    overhead = fixed_overhead(fd.cols, cfg)
    assert int(y_cycles[-1]) + 1 == overhead + decode_clocks
    return {"y_cycles": y_cycles.astype(np.int64), "meta_cycles": meta_cycles,
            "requests": requests, "decode_clocks": decode_clocks,
            "cycles": int(y_cycles[-1]) + 1, "fixed_overhead": overhead,
            "ideal_cycles": -(-fd.nnz // k), "beats": int(beat_nnz.size)}


def _meta_transfers(accept, first):
    """Cycles of the ``meta`` transfers, replaying the input register stage ``s0`` and the
    two-entry skid buffer (main, spare) clock by clock, given the cycles ``accept`` in
    which the decoder takes each beat.  ``meta`` transfers while ``s0`` is empty or moves
    into the skid buffer (whose spare entry is free); both are registered conditions."""
    n = len(accept)
    out = np.zeros(n, dtype=np.int64)
    s0 = main = spare = None            # beat index held, or None
    cycle, nxt, dec = first, 0, 0       # dec: the beat the decoder takes next
    while dec < n:
        take = dec < n and accept[dec] == cycle
        # The decoder must find each beat at the head of the skid buffer when it wants it.
        assert not take or main == dec, "front-end model inconsistent"
        push = s0 is not None and spare is None
        meta = nxt < n and (s0 is None or spare is None)
        if not (take or push or meta):
            cycle = int(accept[dec])    # nothing moves until the decoder takes a beat
            continue
        if take:
            dec += 1
            main, spare = (spare, None) if spare is not None else (s0 if push else None, None)
        elif push:
            if main is None:
                main = s0
            else:
                spare = s0
        if meta:
            out[nxt] = cycle
            s0, nxt = nxt, nxt + 1
        elif push:
            s0 = None
        cycle += 1
    return out


# -------------------------------------------------- clock-by-clock model (any stimulus)

FC_SOURCES = ("cmd", "x", "meta", "vdata")
FC_SINKS = ("vaddr", "y")


class _Skid:
    """:class:`hdl.skid.SkidBuffer`: the main entry (offered on ``o``) and the spare entry;
    ``i.ready`` is "the spare entry is free".  Entries are payloads, ``None`` when empty."""

    __slots__ = ("main", "spare")

    def __init__(self):
        self.main = self.spare = None

    @property
    def ready(self) -> bool:
        return self.spare is None

    def clock(self, push, out_ready):
        """One rising edge: ``push`` is the payload transferred on ``i`` this clock (or
        ``None``), ``out_ready`` the consumer's ``o.ready``."""
        if self.main is not None and out_ready:
            if self.spare is not None:
                self.main, self.spare = self.spare, None
            else:
                self.main = push
        elif push is not None:
            if self.main is None:
                self.main = push
            else:
                self.spare = push


class _FcModel:
    """The registers of :class:`hdl.fc.FcEngine` that decide *when* things move, stepped
    one clock at a time against the testbench's sources and sinks (:func:`fc_cycle_model`).

    State: job control (``idle``, ``loading``, ``meta_open``, the ``x`` / beat / row
    counters and the job sizes minus one); the ``meta`` input register ``s0`` and its skid
    buffer (entries: ``(nnz, last, job)``); the decoder (``has``, ``cnt`` = non-zeros left
    in the held beat, its ``last`` flag, the output register ``dout`` = ``(count, last,
    job)``); the group skid buffer, the group FIFO and the ``vaddr`` skid buffer; the four
    datapath stages (``None`` or the group's ``last`` flag) and ``y.valid``.  Payload
    values (masks, weights, activations, sums) never decide a hand-shake and are not kept.
    """

    def __init__(self, jobs, cfg: FcConfig, patterns: dict):
        self.cfg, self.k, self.jobs = cfg, cfg.nz_per_clock, jobs
        self.beats = [(n, j) for j, job in enumerate(jobs) for n in job["nnz"]]
        n_req = sum(job["requests"] for job in jobs)
        counts = {"cmd": len(jobs), "x": sum(job["cols"] for job in jobs),
                  "meta": len(self.beats), "vdata": n_req}
        self.src = {p: ModelSource(counts[p], patterns[p]) for p in FC_SOURCES}
        self.sink_pat = {p: patterns[p] for p in FC_SINKS}
        self.want = {"vaddr": n_req, "y": sum(job["rows"] for job in jobs)}
        self.sinks = {p: [] for p in FC_SINKS}
        self.requests, self.addr = [], [0] * len(jobs)
        # job control
        self.idle, self.loading, self.meta_open = True, False, False
        self.rows_m1 = self.cols_m1 = self.bpr_m1 = 0
        self.x_count = self.beat = self.meta_rows = self.y_rows = 0
        # meta front end and decoder
        self.s0, self.mskid = None, _Skid()
        self.has, self.cnt, self.last, self.hjob = False, 0, False, 0
        self.dout = None
        # back end and datapath
        self.gskid, self.vskid, self.fifo = _Skid(), _Skid(), deque()
        self.stages = [None] * 4          # s1, x, o, p: None or the group's `last`
        self.y_valid = False

    @property
    def done(self) -> bool:
        return (all(s.idx >= s.n for s in self.src.values())
                and all(len(self.sinks[p]) >= self.want[p] for p in FC_SINKS))

    def _decoder(self, out_ready):
        """The decoder's combinational step (:class:`hdl.fdcsr.FdcsrDecoder`) from its
        registers, the skid head (``i``) and ``o.ready``."""
        k, cnt, head = self.k, self.cnt, self.mskid.main
        iv = head is not None
        nnz = head[0] if iv else 0
        finishing = cnt <= k
        merging = finishing and self.has and not self.last and iv
        deficit = k - cnt
        short = nnz < deficit
        from_next = (nnz if short else deficit) if merging else 0
        count = cnt + from_next if finishing else k
        emit = cnt != 0 or (merging and nnz != 0) or (self.last and finishing)
        can_step = self.dout is None or out_ready
        need_next = not self.last and cnt < k
        step = self.has and can_step and (not need_next or iv)
        i_ready = not self.has or (step and finishing)
        return {"can_step": can_step, "step": step, "finishing": finishing,
                "emit": emit, "count": count, "i_ready": i_ready, "load": iv and i_ready,
                "cnt_load": ((0 if short else nnz - deficit) if merging else nnz)}

    def _decoder_clock(self, d):
        """The decoder's registers at the rising edge, from :meth:`_decoder`'s signals."""
        if d["can_step"]:
            if d["step"] and d["emit"]:
                self.dout = (d["count"], self.last and d["finishing"], self.hjob)
            else:
                self.dout = None
        if d["step"]:
            self.cnt = 0 if d["finishing"] else self.cnt - self.k
            if d["finishing"]:
                self.has = False
        if d["load"]:
            _, last, job = self.mskid.main
            self.has, self.cnt, self.last, self.hjob = True, d["cnt_load"], last, job

    def _job_control(self, c):
        """``cmd``, ``x`` and ``meta`` transfers and the counters of :class:`FcEngine`'s
        job control and ``meta`` input register; returns the ``meta`` skid push."""
        cmd, x, meta = self.src["cmd"], self.src["x"], self.src["meta"]
        job = self.jobs[cmd.idx] if cmd.idx < cmd.n else None
        beat = self.beats[meta.idx] if meta.idx < meta.n else None
        meta_ready = self.meta_open and (self.s0 is None or self.mskid.ready)
        push = self.s0 if self.s0 is not None and self.mskid.ready else None
        took_x = x.take(self.loading, c)           # every ready from the registers
        if cmd.take(self.idle, c):
            self.rows_m1, self.cols_m1 = job["rows"] - 1, job["cols"] - 1
            self.bpr_m1 = len(job["nnz"]) // job["rows"] - 1
            self.x_count, self.idle, self.loading = 0, False, True
        if took_x:
            if self.x_count == self.cols_m1:
                self.beat = self.meta_rows = self.y_rows = 0
                self.loading, self.meta_open = False, True
            self.x_count += 1
        if meta.take(meta_ready, c):
            last = self.beat == self.bpr_m1
            self.s0 = (beat[0], last, beat[1])
            self.beat = 0 if last else self.beat + 1
            if last:
                if self.meta_rows == self.rows_m1:
                    self.meta_open = False
                self.meta_rows += 1
        elif push is not None:
            self.s0 = None
        return push

    def clock(self, c):
        """One clock: the sources drive, every hand-shake is decided from the registers
        and the ports' patterns, transfers are recorded, then the registers update."""
        for s in self.src.values():
            s.drive(c)
        vaddr_ready, y_ready = (self.sink_pat[p].at(c) for p in FC_SINKS)
        dec = self._decoder(self.gskid.ready)
        gpush = self.dout if self.dout is not None and self.gskid.ready else None
        group = self.gskid.main
        accept = (group is not None and len(self.fifo) < self.cfg.fifo_depth
                  and (group[0] == 0 or self.vskid.ready))
        vpush = group if accept and group[0] != 0 else None
        p_last = bool(self.stages[3])      # p_valid & p_last
        advance = not (p_last and self.y_valid and not y_ready)
        head = self.fifo[0] if self.fifo else None
        needs = head is not None and head[0] != 0
        took_v = self.src["vdata"].take(advance and needs, c)
        pop = advance and head is not None and (not needs or took_v)
        y_xfer = self.y_valid and y_ready
        if y_xfer:
            self.sinks["y"].append(c)
        if self.vskid.main is not None and vaddr_ready:
            self.sinks["vaddr"].append(c)
        # registers
        end_job = y_xfer and not self.idle and not self.loading and \
            self.y_rows == self.rows_m1
        mpush = self._job_control(c)
        self._decoder_clock(dec)            # loads from the skid head: before its edge
        self.mskid.clock(mpush, dec["i_ready"])
        self.gskid.clock(gpush, accept)
        if vpush is not None:
            count, _, job = vpush
            self.requests.append((self.addr[job], count))
            self.addr[job] += count
        self.vskid.clock(vpush, vaddr_ready)
        if pop:
            self.fifo.popleft()
        if accept:
            self.fifo.append(group)
        if y_xfer:
            self.y_valid = False
            self.y_rows += 1
        if advance:
            if p_last:
                self.y_valid = True
            self.stages = [head[1] if pop else None] + self.stages[:3]
        if end_job:
            self.idle = True


def _model_job(fd: FdCsr, cfg: FcConfig) -> dict:
    """What :class:`_FcModel` needs of one job: sizes, per-beat non-zero counts in stream
    order and the number of memory requests (non-empty groups, :func:`decode_walk`)."""
    _, _, beat_nnz = _beats(fd, cfg)
    _, groups = decode_walk(beat_nnz, cfg.nz_per_clock)
    return {"rows": fd.rows, "cols": fd.cols, "nnz": beat_nnz.reshape(-1).tolist(),
            "requests": len(groups)}


def _model_patterns(patterns) -> dict:
    """``{port: Pattern}`` for the six ports from a job dict, a mapping of ports to
    patterns (or their JSON form) or ``None``; a port left out transfers every clock."""
    if patterns is None:
        patterns = {}
    elif "sources" in patterns or "sinks" in patterns:
        patterns = job_patterns(patterns)
    unknown = set(patterns) - set(FC_SOURCES + FC_SINKS)
    if unknown:
        raise ValueError(f"unknown FC ports {sorted(unknown)}; the ports are "
                         f"{', '.join(FC_SOURCES + FC_SINKS)}")
    return {p: Pattern.from_json(patterns.get(p)) for p in FC_SOURCES + FC_SINKS}


def _run_model(jobs, cfg, patterns, start, stop, max_cycles) -> _FcModel:
    model = _FcModel(jobs, cfg, patterns)
    cycle = start
    while not model.done and (stop is None or cycle < stop):
        if cycle - start >= max_cycles:
            raise RuntimeError(f"FC cycle model: not done after {max_cycles} clocks")
        model.clock(cycle)
        cycle += 1
    model.end = cycle
    return model


def fc_cycle_model(fd, cfg: FcConfig, patterns=None, *, reset_at=None,
                   max_cycles=1_000_000) -> dict:
    """Exact clock-by-clock model of :class:`hdl.fc.FcEngine` under any stimulus.

    Steps the registers that decide every hand-shake (job control, ``meta`` input
    register and skid buffer, decoder, group skid buffer, group FIFO, ``vaddr`` skid
    buffer, the four datapath stages and ``y.valid``: :class:`_FcModel`) against the
    testbench's streams (:mod:`gen.core.stimulus`): each source raises ``valid`` in clock ``c``
    when its pattern allows ``c`` and holds it until accepted, each sink's ``ready`` is its
    pattern at ``c``.  ``vdata`` is such a source too, as in :func:`fc_job`: its words are
    the responses in request order, offered by the pattern alone (a response may be taken
    before its request has left on ``vaddr``; the engine accepts one whenever the FIFO's
    head group needs values).  With every pattern ``always`` the result equals
    :func:`fc_schedule`'s.

    Parameters
    ----------
    fd : FdCsr or sequence of FdCsr
        The job's weights; several matrices are jobs sent back to back on the same
        streams (the next ``cmd`` is accepted once the engine is idle again).
    cfg : FcConfig
    patterns : dict, optional
        The job dict of :func:`fc_job` / :func:`gen.core.stimulus.make_job` (its ports'
        patterns are read with :func:`gen.core.stimulus.job_patterns`), or ``{port: Pattern}``
        (or a pattern's JSON form) for the ports ``cmd``, ``x``, ``meta``, ``vdata``
        (valid) and ``vaddr``, ``y`` (ready); a port left out transfers every clock.
    reset_at : int, optional
        The job's ``reset_at``: the engine and the sources restart at that clock (the
        clock count runs on, so the patterns continue); must come before the job ends.
    max_cycles : int
        Guard against a stimulus that never completes the job.

    Returns
    -------
    dict
        ``sources`` / ``sinks``: ``{port: [cycle of every transfer]}``, as
        ``result["sources"][port]["cycles"]`` of :func:`gen.core.sim.run_job` (after the reset,
        if any); ``before_reset``: ``{"sinks": {port: cycles}}`` of the clocks before
        ``reset_at``, or ``None``; ``requests``: the ``(addr, count)`` of every ``vaddr``
        transfer, in order; ``y_cycles`` / ``meta_cycles`` (arrays); ``jobs``: per job its
        ``cmd`` cycle, ``y_cycles`` and ``cycles`` (``cmd`` to last ``y`` inclusive);
        ``cycles``: first ``cmd`` to last ``y`` inclusive; ``end``: the clock after the
        last transfer.
    """
    fds = [fd] if isinstance(fd, FdCsr) else list(fd)
    if not fds:
        raise ValueError("fc_cycle_model needs at least one matrix")
    jobs = [_model_job(f, cfg) for f in fds]
    pats = _model_patterns(patterns)
    before, start = None, 0
    if reset_at is not None:
        pre = _run_model(jobs, cfg, pats, 0, int(reset_at), max_cycles)
        if pre.done:
            raise ValueError(f"reset_at={reset_at} comes after the job's last transfer "
                             f"(clock {pre.end - 1})")
        before, start = {"sinks": {p: list(c) for p, c in pre.sinks.items()}}, int(reset_at)
    m = _run_model(jobs, cfg, pats, start, None, max_cycles)
    y, cmd = m.sinks["y"], m.src["cmd"].cycles
    out_jobs, first = [], 0
    for job, c0 in zip(jobs, cmd):
        ys = y[first:first + job["rows"]]
        first += job["rows"]
        out_jobs.append({"cmd": c0, "y_cycles": np.array(ys, dtype=np.int64),
                         "cycles": ys[-1] - c0 + 1})
    return {"sources": {p: list(s.cycles) for p, s in m.src.items()},
            "sinks": {p: list(c) for p, c in m.sinks.items()},
            "before_reset": before, "requests": m.requests,
            "y_cycles": np.array(y, dtype=np.int64),
            "meta_cycles": np.array(m.src["meta"].cycles, dtype=np.int64),
            "jobs": out_jobs, "cycles": y[-1] - cmd[0] + 1, "end": m.end}


def dense_cycles(rows, cols, cfg: FcConfig) -> int:
    """The same engine without zero skipping (every weight issued, ``k`` per clock)."""
    return fixed_overhead(cols, cfg) + rows * (-(-cols // cfg.nz_per_clock))


def model_cycles_from_counts(beat_nnz, cols, cfg: FcConfig) -> int:
    """:func:`fc_schedule`'s total from per-beat non-zero counts (rows x beats_per_row),
    for layers too large to encode."""
    finish, _ = decode_walk(beat_nnz, cfg.nz_per_clock)
    return fixed_overhead(cols, cfg) + int(finish[-1])


# ---------------------------------------------------------------- RTL payload packing

def _pack(fields):
    """[(value, width), ...] -> int, first field in the LSBs."""
    out, pos = 0, 0
    for value, width in fields:
        out |= (int(value) & ((1 << width) - 1)) << pos
        pos += width
    return out


def _unpack_signed(word, width, count):
    mask = (1 << width) - 1
    vals = [(word >> (i * width)) & mask for i in range(count)]
    return [v - (1 << width) if v >> (width - 1) else v for v in vals]


def fc_job(w, x, cfg: FcConfig, *, valid_prob=1.0, ready_prob=1.0, seed=0, reset_at=None,
           patterns=None):
    """The stream job (see :func:`gen.core.sim.run_job`) computing ``W @ X`` on the engine.

    Parameters
    ----------
    w, x : array
        Integer codes, ``rows x cols`` and ``cols x N`` (``N <= batch``, zero-padded).
    cfg : FcConfig
    valid_prob, ready_prob : float or Pattern
        The pattern of every source (``cmd``, ``x``, ``meta``, ``vdata``) / sink
        (``vaddr``, ``y``); a probability is a Bernoulli pattern seeded per port
        (:func:`gen.core.stimulus.make_job`).
    seed : int
        The job seed (per-port seeds, :func:`gen.core.stimulus.port_seed`).
    reset_at : int, optional
        Clock of a mid-job reset.
    patterns : dict, optional
        ``{port: Pattern or probability}`` overriding ``valid_prob`` / ``ready_prob`` for
        the ports named.

    Returns
    -------
    tuple
        ``(job, schedule, fd)``: the job dict, :func:`fc_schedule` (the unstalled timing;
        :func:`fc_cycle_model` with the job's patterns gives any other) and the FD-CSR
        matrix.
    """
    pats = dict(patterns or {})
    unknown = set(pats) - set(FC_SOURCES + FC_SINKS)
    if unknown:
        raise ValueError(f"unknown FC ports {sorted(unknown)}; the ports are "
                         f"{', '.join(FC_SOURCES + FC_SINKS)}")
    spec = {p: pats.get(p, valid_prob) for p in FC_SOURCES}
    spec.update({p: pats.get(p, ready_prob) for p in FC_SINKS})
    w = check_codes(w, cfg.w_fmt, "weights")
    x = check_codes(x, cfg.x_fmt, "activations")
    if w.ndim != 2 or x.ndim != 2 or w.shape[1] != x.shape[0]:
        raise ValueError(f"weights (rows x cols) and activations (cols x N) must agree, "
                         f"not {w.shape} and {x.shape}")
    rows, cols = w.shape
    if not 1 <= cols <= cfg.max_cols:
        raise ValueError(f"cols must be between 1 and max_cols={cfg.max_cols}, not {cols}")
    if not 1 <= rows <= cfg.max_rows:
        raise ValueError(f"rows must be between 1 and max_rows={cfg.max_rows}, not {rows}")
    if x.shape[1] > cfg.batch:
        raise ValueError(f"activations must have at most batch={cfg.batch} columns, "
                         f"not {x.shape[1]}")
    fd = encode(w, cfg.row_width)
    if fd.nnz >= 1 << cfg.addr_width:
        raise ValueError(f"non-zeros must be fewer than 2**addr_width={1 << cfg.addr_width}, "
                         f"not {fd.nnz}")
    xs = np.zeros((cols, cfg.batch), dtype=np.int64)
    xs[:, :x.shape[1]] = x
    masks, offsets, _ = _beats(fd, cfg)
    sched = fc_schedule(fd, cfg)
    xw, ww, aw = cfg.x_fmt.width, cfg.w_fmt.width, cfg.addr_width
    cmd = [_pack([(rows, 16), (cols, 17)])]
    xdata = [_pack([(v, xw) for v in xs[c]]) for c in range(cols)]
    meta = []
    for r in range(masks.shape[0]):
        for b in range(masks.shape[1]):
            meta.append(_pack([(m, cfg.row_width) for m in masks[r, b]]
                              + [(o, aw) for o in offsets[r, b]]))
    vdata = []
    for addr, n in sched["requests"]:
        vdata.append(_pack([(fd.values[addr + i] if i < n else 0, ww)
                            for i in range(cfg.nz_per_clock)]))
    slow = 1.0 / max(min(pattern_for(v, seed, p).rate for p, v in spec.items()), 0.05)
    job = make_job([("cmd", cmd, spec["cmd"]), ("x", xdata, spec["x"]),
                    ("meta", meta, spec["meta"]), ("vdata", vdata, spec["vdata"])],
                   [("vaddr", len(sched["requests"]), spec["vaddr"]), ("y", rows, spec["y"])],
                   seed=seed, reset_at=reset_at,
                   max_cycles=int(200 + 3 * slow * (sched["cycles"] + len(vdata))))
    return job, sched, fd


def unpack_y(words, cfg: FcConfig):
    return np.array([_unpack_signed(wd, cfg.acc_width, cfg.batch) for wd in words],
                    dtype=np.int64).reshape(-1, cfg.batch)


def unpack_requests(words, cfg: FcConfig):
    cw = cfg.nz_per_clock.bit_length()
    mask = (1 << cfg.addr_width) - 1
    return [(wd & mask, (wd >> cfg.addr_width) & ((1 << cw) - 1)) for wd in words]
