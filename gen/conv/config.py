# SPDX-License-Identifier: Apache-2.0
"""The conv array's config (:class:`ConvConfig`, the generated hardware) and a layer
(:class:`ConvLayer`, one convolution it runs), with their validation; the mapping names."""

from dataclasses import dataclass, replace

import numpy as np

from gen.core.config import check_int, check_requant

__all__ = ["ConvConfig", "ConvLayer", "MAPPINGS", "SEED_BUFFERS", "seed_buffers"]


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
    w_lanes : int
        Weights per weight-stream beat ``L``, a power of two 1..32: with ``L > 1`` a beat
        holds the weights of ``L`` consecutive rows of a pass at one bank address
        (:func:`gen.conv.weight_beats`), written into up to ``L`` row banks per clock (one
        per row and copy); the shell's weight port carries one such beat per AXI4-Stream
        beat.
    bus_words : int
        Words per AXI4-Stream beat of the accelerator shell, 1..32 (the bare array takes
        one feature word per clock, and one weight or ``w_lanes`` weights, either way).
    rq_width : int
        0 (default): the shell's output port carries the exact sums.  2..32: the shell
        requantises every sum on its way out (bias, multiply-shift with round half up,
        saturation to ``rq_width`` signed bits, optional ReLU; ``hdl/lib/requant.py``,
        registers ``RQ_*``) and the output port carries ``rq_width``-bit words; the biases
        arrive on ``s_axis_b``.
    rq_depth : int
        Biases the requantisation stage holds (channels per job), 1..65536.
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
    w_lanes: int = 1
    bus_words: int = 1
    rq_width: int = 0
    rq_depth: int = 512

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
        check_int(self, "bus_words", 1, 32)
        check_int(self, "w_lanes", 1, 32)
        check_requant(self)
        if not _pow2(self.w_lanes):
            raise ValueError(f"w_lanes must be a power of two between 1 and 32, "
                             f"not {self.w_lanes}")

    @property
    def module_name(self) -> str:
        return f"conv_{self.rows}x{self.cols}"

    @property
    def shell_name(self) -> str:
        """The accelerator shell's module: ``conv_<rows>x<cols>_axi``, ``_l<w_lanes>`` and
        ``_w<bus_words>`` beyond 1, ``_rq<rq_width>`` with a requantisation stage."""
        return (f"{self.module_name}_axi" + (f"_l{self.w_lanes}" if self.w_lanes > 1 else "")
                + (f"_w{self.bus_words}" if self.bus_words > 1 else "")
                + (f"_rq{self.rq_width}" if self.rq_width else ""))


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


# The seed's (VC709) on-chip buffers for a 128 x 16 array, in words: features 20 x 2048,
# weights 128 x 2048, outputs 2 x 32 x 512 (ping-pong); scaled by the array for others.
SEED_BUFFERS = {"features": 20 * 2048, "weights": 128 * 2048, "outputs": 2 * 32 * 512}


def seed_buffers(cfg: ConvConfig) -> ConvConfig:
    """``cfg`` with buffers as large as the seed's, scaled by the array (rows x cols / 128 x
    16), and no larger: the ``2 cols`` feature banks, ``rows`` weight banks and ``2 cols``
    output banks share the seed's words (``feat_depth`` 1280, ``weight_depth`` 2048,
    ``out_depth`` 1024 on 128 x 16; twice each on 256 x 32), ``max_dim`` 256 and
    ``max_slots`` 16384 (counter widths)."""
    scale = cfg.rows * cfg.cols / (128 * 16)
    feat = int(SEED_BUFFERS["features"] * scale) // (2 * cfg.cols)
    weight = int(SEED_BUFFERS["weights"] * scale) // cfg.rows
    out = int(SEED_BUFFERS["outputs"] * scale) // (2 * cfg.cols)
    return replace(cfg, feat_depth=feat, weight_depth=weight, out_depth=out, max_dim=256,
                   max_slots=16384)
