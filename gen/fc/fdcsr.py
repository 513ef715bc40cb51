# SPDX-License-Identifier: Apache-2.0
"""The FD-CSR sparse weight format (seed 001): :class:`FdCsr`, encode/decode, ``.npz``
files, and the storage and bandwidth model.

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
:func:`load` use ``.npz`` files (see ``docs/fc.md``).

Storage model
-------------
:func:`storage_bits` gives the bits of one matrix in four layouts with every field
width stated (:data:`SCHEMES`); :func:`bandwidth_table` reproduces the seed's six
layers with synthetic (uniform random, i.e. magnitude-of-Gaussian) pruning.
"""

from dataclasses import dataclass

import numpy as np

from gen.core.fixed import index_bits

__all__ = ["FdCsr", "encode", "decode", "save", "load", "segment_popcounts", "storage_bits",
           "SCHEMES", "SEED_LAYERS", "prune_random", "bandwidth_table"]


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
