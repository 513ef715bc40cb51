# SPDX-License-Identifier: Apache-2.0
"""``spnn encode fdcsr`` and ``spnn decode``: dense .npy <-> FD-CSR .npz."""

import argparse
from pathlib import Path

from .config import SpnnError
from .fdcsr import decode, encode, load, save
from .runutil import check_finite, load_npy, write_npy

__all__ = ["register"]

ENCODE_DESCRIPTION = """\
Encode a dense weight array (.npy, 1-D or 2-D, integer or float) as FD-CSR (seed 001):
values, one ROW_WIDTH-bit mask per ROW_WIDTH-element segment of each matrix row
(LSB = first element) and one offset per segment.  See docs/fdcsr.md for the file layout.

Examples:
  spnn encode fdcsr W.npy -o w.fdcsr.npz
  spnn encode fdcsr W.npy -o w8.fdcsr.npz --row-width 8
"""

DECODE_DESCRIPTION = """\
Decode an FD-CSR .npz (written by 'spnn encode fdcsr') back to the dense .npy
(same shape and dtype); the file is validated first (masks, offsets, value count).

Examples:
  spnn decode w.fdcsr.npz -o W.npy
"""


def _summary(fd, value_bits):
    bits = fd.storage(value_bits)
    size = fd.rows * fd.cols
    density = fd.nnz / size if size else 0.0
    return (f"{fd.shape} {fd.nnz} non-zeros ({100 * density:.2f} %), "
            f"{len(fd.masks)} segments of {fd.row_width}; FD-CSR {bits['fdcsr'] / 8:.0f} B "
            f"vs dense {bits['dense'] / 8:.0f} B at {value_bits}-bit values "
            f"({bits['dense'] / bits['fdcsr']:.2f}x)")


def _encode(args) -> int:
    w = load_npy(args.weights, "WEIGHTS")
    check_finite(w, "WEIGHTS")
    if w.ndim not in (1, 2):
        raise SpnnError(f"WEIGHTS must be a 1-D or 2-D array, not {w.ndim}-D {w.shape}")
    if w.size == 0:
        raise SpnnError("WEIGHTS must hold at least one value, not an empty array")
    try:
        row_width = int(args.row_width)
    except ValueError:
        raise SpnnError(f"--row-width must be an integer, not {args.row_width!r}") from None
    try:
        fd = encode(w, row_width)
    except (TypeError, ValueError) as exc:
        raise SpnnError(str(exc).replace("row_width", "--row-width")) from None
    out = Path(args.output)
    if out.suffix != ".npz":
        raise SpnnError(f"-o must name a .npz file, not {str(out)!r}")
    out.parent.mkdir(parents=True, exist_ok=True)
    save(out, fd)
    print(f"{out}: {_summary(fd, 16)}")
    return 0


def _decode(args) -> int:
    if not Path(args.input).is_file():
        raise SpnnError(f"INPUT: no such file {str(args.input)!r}")
    try:
        fd = load(args.input)
        w = decode(fd)
    except (TypeError, ValueError) as exc:
        raise SpnnError(f"INPUT: {exc}") from None
    if Path(args.output).suffix != ".npy":
        raise SpnnError(f"-o must name a .npy file, not {str(args.output)!r}")
    write_npy(args.output, w)
    print(f"{args.output}: {w.shape} {w.dtype}, {fd.nnz} non-zeros")
    return 0


def register(subparsers):
    """Add the top-level ``encode`` and ``decode`` commands."""
    p = subparsers.add_parser("encode", help="encode dense weights as FD-CSR",
                              description=ENCODE_DESCRIPTION,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("format", choices=["fdcsr"], help="sparse format (fdcsr)")
    p.add_argument("weights", metavar="WEIGHTS", help="dense weights .npy")
    p.add_argument("-o", "--output", required=True, metavar="OUT.npz", help="output file")
    p.add_argument("--row-width", default="16", help="segment width: 4, 8, 16 (default) "
                   "or 32")
    p.set_defaults(handler=_encode)

    p = subparsers.add_parser("decode", help="decode an FD-CSR file to dense .npy",
                              description=DECODE_DESCRIPTION,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("input", metavar="INPUT", help="FD-CSR .npz")
    p.add_argument("-o", "--output", required=True, metavar="OUT.npy", help="output file")
    p.set_defaults(handler=_decode)
