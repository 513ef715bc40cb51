# SPDX-License-Identifier: Apache-2.0
"""The SpMV engine's config (:class:`SpmvConfig`): parameters, validation, derived sizes
and the pipeline delays the cycle model and the gateware share; the allocator names and
the weight-stream word kinds."""

from dataclasses import dataclass

from gen.core.config import check_format, check_int, check_requant
from gen.core.fixed import QFormat, index_bits

__all__ = ["SpmvConfig", "ALLOCATORS", "KIND_ENTRY", "KIND_LAST", "KIND_SKIP", "KIND_ROW",
           "KIND_END", "KIND_NOP"]


ALLOCATORS = ("interleave", "zigzag", "lpt", "balanced")
KIND_ENTRY, KIND_LAST, KIND_SKIP, KIND_ROW, KIND_END, KIND_NOP = 0, 1, 2, 3, 4, 5


@dataclass(frozen=True)
class SpmvConfig:
    """Parameters of the sparse matrix-vector engine.

    Parameters
    ----------
    pes : int
        Processing elements ``P``, 1..256.
    fifo_depth : int
        Depth of each PE's activation FIFO, 1..64.
    rows_per_pe : int
        Accumulators per PE (rows a PE can own), 2..4096.
    max_cols : int
        Columns per job (pointer-table depth), 2..65536.
    mem_depth : int
        Non-zero entries per PE, 2..65536.
    w_fmt, x_fmt : QFormat
        Weight and activation formats (2..32 bits each).
    acc_width : int
        Accumulator width in bits (>= w width + x width, <= 64); fraction bits
        ``w_fmt.frac_bits + x_fmt.frac_bits``; saturates on every add.
    out_fmt : QFormat
        Result format (2..64 bits).
    w_lanes : int
        Words per weight-stream beat ``L``, 1..min(pes, 64): lane ``l`` feeds the PEs
        ``p`` with ``p mod L = l`` and the rowmap of the rows ``r`` with ``r mod L = l``.
        The accelerator shell's weight port carries one such beat per AXI4-Stream beat.
    drain_lanes : int
        Results per clock ``D``: 1, or ``w_lanes`` when ``w_lanes`` divides ``pes``.  With
        ``D > 1`` the drain reads the rows ``k D .. k D + D - 1`` of a block row in one
        clock, row ``r`` from lane ``r mod D``, so the compiler keeps every row on a PE of
        its lane (``row_pe mod D = r mod D``, :func:`gen.spmv.allocate` per lane) and the
        ``o`` stream carries ``D`` words per transfer.
    bus_words : int
        Activation and result words per AXI4-Stream beat of the accelerator shell, 1..32
        (the bare engine takes and gives one per clock either way).
    rq_width : int
        0 (default): the shell's result port carries ``out_fmt`` words.  2..32 (with
        ``drain_lanes`` 1): the shell requantises every result on its way out (the row's
        bias, multiply-shift with round half up, saturation to ``rq_width`` signed bits,
        optional ReLU; ``hdl/lib/requant.py``, registers ``RQ_*``) and the result port
        carries ``rq_width``-bit words; the biases arrive on ``s_axis_b``.
    rq_depth : int
        Biases the requantisation stage holds (rows per job), 1..65536.
    """

    pes: int = 32
    fifo_depth: int = 16
    rows_per_pe: int = 32
    max_cols: int = 256
    mem_depth: int = 1024
    w_fmt: QFormat = QFormat(1, 7)
    x_fmt: QFormat = QFormat(4, 12)
    acc_width: int = 32
    out_fmt: QFormat = QFormat(8, 12)
    w_lanes: int = 1
    drain_lanes: int = 1
    bus_words: int = 1
    rq_width: int = 0
    rq_depth: int = 1024

    def __post_init__(self):
        for name, lo, hi in (("pes", 1, 256), ("fifo_depth", 1, 64), ("rows_per_pe", 2, 4096),
                             ("max_cols", 2, 65536), ("mem_depth", 2, 65536),
                             ("acc_width", 2, 64), ("w_lanes", 1, 64),
                             ("drain_lanes", 1, 64), ("bus_words", 1, 32)):
            check_int(self, name, lo, hi)
        check_format(self, "w_fmt", 2, 32)
        check_format(self, "x_fmt", 2, 32)
        check_format(self, "out_fmt", 2, 64)
        if self.w_lanes > self.pes:
            raise ValueError(f"w_lanes must be between 1 and pes = {self.pes}, "
                             f"not {self.w_lanes}")
        check_requant(self)
        if self.rq_width and self.drain_lanes != 1:
            raise ValueError(f"rq_width needs drain_lanes 1 (one row per result transfer), "
                             f"not drain_lanes {self.drain_lanes}")
        if self.drain_lanes not in (1, self.w_lanes) or self.pes % self.drain_lanes:
            raise ValueError(f"drain_lanes must be 1 or w_lanes = {self.w_lanes} (when it "
                             f"divides pes = {self.pes}), not {self.drain_lanes}")
        need = self.w_fmt.width + self.x_fmt.width
        if self.acc_width < need:
            raise ValueError(f"acc_width must be at least w_fmt + x_fmt width = {need}, "
                             f"not {self.acc_width}")

    # ---- derived sizes
    @property
    def module_name(self) -> str:
        return "spmv"

    @property
    def shell_name(self) -> str:
        """The accelerator shell's module: ``spmv_axi``, ``_l<w_lanes>``, ``_d<drain_lanes>``
        and ``_w<bus_words>`` beyond 1, ``_rq<rq_width>`` with a requantisation stage."""
        return ("spmv_axi" + (f"_l{self.w_lanes}" if self.w_lanes > 1 else "")
                + (f"_d{self.drain_lanes}" if self.drain_lanes > 1 else "")
                + (f"_w{self.bus_words}" if self.bus_words > 1 else "")
                + (f"_rq{self.rq_width}" if self.rq_width else ""))

    def out_transfers(self, rows: int) -> int:
        """Transfers on ``o`` for a block row of ``rows`` rows: ``ceil(rows / D)``."""
        return -(-rows // self.drain_lanes)

    @property
    def acc_frac(self) -> int:
        return self.w_fmt.frac_bits + self.x_fmt.frac_bits

    @property
    def acc_fmt(self) -> QFormat:
        return QFormat(self.acc_width - self.acc_frac, self.acc_frac)

    @property
    def max_rows(self) -> int:
        return self.pes * self.rows_per_pe

    @property
    def pe_bits(self) -> int:
        return index_bits(self.pes)

    @property
    def idx_bits(self) -> int:
        return index_bits(self.rows_per_pe)

    @property
    def addr_bits(self) -> int:
        return index_bits(self.mem_depth)

    @property
    def count_bits(self) -> int:
        return (self.rows_per_pe).bit_length()

    @property
    def col_bits(self) -> int:
        return self.max_cols.bit_length()

    @property
    def row_bits(self) -> int:
        return self.max_rows.bit_length()

    @property
    def word_width(self) -> int:
        return self.w_fmt.width + self.idx_bits + self.pe_bits + 3

    @property
    def beat_width(self) -> int:
        return self.w_lanes * self.word_width

    @property
    def lane_rows(self) -> int:
        """Rowmap entries per lane."""
        return -(-self.max_rows // self.w_lanes)

    # Pipeline constants used by the cycle model (see hdl/spmv.py).
    # PE issue -> final sum: address register, entry register, operand register,
    # product register (beside the DSP), product register, product/accumulator
    # register, add
    pe_latency = 7

    @property
    def tree_levels(self) -> int:
        """Register levels of the binary broadcast trees from the engine to the ``P``
        PEs: ``ceil(log2 P)``."""
        return (self.pes - 1).bit_length()

    @property
    def reduce_levels(self) -> int:
        """Register levels of the 4-way OR/AND trees from the PEs back to the
        engine: ``ceil(log4 P)``."""
        return ((self.pes - 1).bit_length() + 1) // 2

    @property
    def load_delay(self) -> int:
        """Weight END beat accepted -> its bank full: engine register, broadcast tree, PE
        register, PE 0's column count register, one register back to the engine."""
        return 4 + self.tree_levels

    @property
    def push_delay(self) -> int:
        """Activation accepted -> pushed into the FIFOs: broadcast tree, pointer read,
        pointer register."""
        return 3 + self.tree_levels

    @property
    def stall_delay(self) -> int:
        """FIFO level -> broadcaster stall: PE flag, OR tree."""
        return 1 + self.reduce_levels

    @property
    def done_delay(self) -> int:
        """PEs idle -> block done: PE idle flag, AND tree."""
        return 1 + self.reduce_levels

    @property
    def fifo_slack(self) -> int:
        """Pushes that can reach a FIFO after its level was last compared with
        ``fifo_depth``: ``stall_delay`` clocks of accepts plus those in the pointer
        pipeline."""
        return self.stall_delay + self.push_delay

    @property
    def fifo_slots(self) -> int:
        """RAM words of a PE's FIFO: ``fifo_depth + fifo_slack`` rounded up to a power of
        two (the broadcaster stops at ``fifo_depth`` items with a registered, delayed
        flag; the slots beyond absorb what is in flight; the head register is spare)."""
        return 1 << (self.fifo_depth + self.fifo_slack - 1).bit_length()

    @property
    def out_slots(self) -> int:
        """RAM words of the result FIFO: credits for one result per clock."""
        return 1 << self.drain_latency.bit_length()

    @property
    def drain_latency(self) -> int:
        """Row issue -> result valid: rowmap read, its register, the broadcast tree, the
        PE's address register (and clear), accumulator read, its register, the OR
        tree (the last level also rounds; one rounding stage when P = 1), saturate
        (register), result FIFO."""
        return 7 + self.tree_levels + max(1, self.reduce_levels)
