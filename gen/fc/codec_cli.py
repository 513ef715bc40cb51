# SPDX-License-Identifier: Apache-2.0
"""``spnn encode fdcsr`` and ``spnn decode``: dense .npy <-> FD-CSR .npz."""

import argparse
import io
from pathlib import Path

from gen.core.config import SpnnError
from gen.fc import decode, encode, load, save
from gen.core.outputs import Outputs, output_flag
from gen.core.runutil import check_finite, check_not_empty, flag_message, int_arg, load_npy

__all__ = ["register"]

ENCODE_DESCRIPTION = """\
Encode a dense weight array (.npy, 1-D or 2-D, integer or float) as FD-CSR (seed 001):
values, one ROW_WIDTH-bit mask per ROW_WIDTH-element segment of each matrix row
(LSB = first element) and one offset per segment.  See docs/fc.md for the file layout.

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
    row_width = int_arg(args.row_width, "--row-width")
    if row_width not in (4, 8, 16, 32):
        raise SpnnError(f"--row-width must be 4, 8, 16 or 32, not {row_width}")
    outputs = Outputs()
    out = outputs.file(args.output, output_flag(args), suffix=".npz")
    w = load_npy(args.weights, "WEIGHTS")
    check_finite(w, "WEIGHTS")
    if w.ndim not in (1, 2):
        raise SpnnError(f"WEIGHTS must be a 1-D or 2-D array, not {w.ndim}-D {w.shape}")
    check_not_empty(w, "WEIGHTS")
    try:
        fd = encode(w, row_width)
    except (TypeError, ValueError) as exc:
        raise SpnnError(flag_message(str(exc), {"row_width": "--row-width"})) from None
    buf = io.BytesIO()
    save(buf, fd)
    outputs.data(out, buf.getvalue())
    outputs.commit()
    print(f"{out}: {_summary(fd, 16)}")
    return 0


def _decode(args) -> int:
    outputs = Outputs()
    out = outputs.file(args.output, output_flag(args), suffix=".npy")
    path = Path(args.input)
    if path.is_dir():
        raise SpnnError(f"INPUT: {str(args.input)!r} is a folder, not an FD-CSR file")
    if not path.is_file():
        raise SpnnError(f"INPUT: no such file {str(args.input)!r}")
    try:
        fd = load(args.input)
        w = decode(fd)
    except (TypeError, ValueError) as exc:
        raise SpnnError(f"INPUT: {exc}") from None
    outputs.npy(out, w)
    outputs.commit()
    print(f"{out}: {w.shape} {w.dtype}, {fd.nnz} non-zeros")
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
