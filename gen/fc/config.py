# SPDX-License-Identifier: Apache-2.0
"""The FC engine's config (:class:`FcConfig`): parameters, validation, derived widths and
the pipeline constants the schedule and the gateware share."""

from dataclasses import dataclass

from gen.core.config import check_format, check_int, check_requant
from gen.core.fixed import QFormat
from gen.fc.fdcsr import _check_width

__all__ = ["FcConfig"]


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
    bus_words : int
        The accelerator shell's bus width in words, 1..32: 1 (the default) carries one row
        of ``batch`` words per beat on ``s_axis_x`` and ``m_axis_y``; a multiple of
        ``batch`` carries ``bus_words / batch`` rows per beat (packed, ``tkeep`` marking
        the present rows).  The engine takes one row per clock either way; the weight
        values stay ``nz_per_clock`` per beat (the engine's issue width).
    rq_width : int
        0 (default): the shell's output port carries the exact sums.  2..32: the shell
        requantises every sum on its way out (bias, multiply-shift with round half up,
        saturation to ``rq_width`` signed bits, optional ReLU; ``hdl/lib/requant.py``,
        registers ``RQ_*``) and the output port carries ``rq_width``-bit words; the biases
        arrive on ``s_axis_b``.
    rq_depth : int
        Biases the requantisation stage holds (channels per job), 1..65536.
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
    bus_words: int = 1
    rq_width: int = 0
    rq_depth: int = 512

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
        check_int(self, "bus_words", 1, 32)
        check_requant(self)
        if self.bus_words > 1 and self.bus_words % self.batch:
            raise ValueError(f"bus_words must be 1 or a multiple of batch = {self.batch} "
                             f"(whole rows per beat), not {self.bus_words}")

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

    @property
    def rows_per_beat(self) -> int:
        """Rows of X (and of Y) per AXI4-Stream beat."""
        return max(1, self.bus_words // self.batch)

    @property
    def shell_name(self) -> str:
        """The accelerator shell's module: ``<module>_axi``, ``_w<bus_words>`` beyond 1."""
        return (f"{self.module_name}_axi" + (f"_w{self.bus_words}" if self.bus_words > 1 else "")
                + (f"_rq{self.rq_width}" if self.rq_width else ""))

    # Clocks from a ``meta`` transfer to the decoder taking that beat when nothing waits:
    # the input register stage (per-segment popcounts), then the skid buffer's main entry
    # (the beat's non-zero count).
    meta_latency = 2

    # Pipeline after a group's decode step: decoder output register (1) -> skid buffer
    # (1) -> FIFO write (1) -> pop + activation read (1) -> memory output registers (1) ->
    # operand registers at the multipliers (1) -> multiply (1) -> accumulate into the y
    # register (1): row r's result transfers 8 clocks after its last decode step.
    latency = 8
