# SPDX-License-Identifier: Apache-2.0
"""The LSTM engine's config (:class:`LstmConfig`): hardware maxima, fixed-point formats,
validation, derived sizes and pipeline latencies; the gate order, the PWL stage count and
the word kinds of the ``w`` and ``x`` streams."""

from dataclasses import dataclass

from gen.core.config import check_format, check_int, check_requant
from gen.core.fixed import QFormat, index_bits
from gen.pwl import PwlConfig, fit_table

__all__ = ["LstmConfig", "GATES", "PWL_EXTRA_STAGES", "KIND_ENTRY", "KIND_COL", "KIND_ROW",
           "KIND_BIAS", "KIND_END", "KIND_NOP", "XK_X", "XK_H0", "XK_C0"]


GATES = ("i", "f", "g", "o")
# Stages the LSTM's PWL units (hdl.lstm_pwl.LstmPwlUnit) add to PwlUnit's pipeline:
# |x| / clamp, operand registers, product register, round / saturate, clamp to 1,
# mirror / saturate.
PWL_EXTRA_STAGES = 6
KIND_ENTRY, KIND_COL, KIND_ROW, KIND_BIAS, KIND_END, KIND_NOP = 0, 1, 2, 3, 4, 5
XK_X, XK_H0, XK_C0 = 0, 1, 2


@dataclass(frozen=True)
class LstmConfig:
    """Parameters of the LSTM engine (hardware maxima and fixed-point formats).

    Parameters
    ----------
    pes : int
        Processing elements ``P``, 1..256.
    max_inputs : int
        Largest input size ``X`` a job may use, 1..4096.
    max_hidden : int
        Largest hidden size ``H`` a job may use, 1..8192.
    fifo_depth : int
        Activation FIFO depth per PE, 2..256.
    mem_depth : int
        Weight entries per PE, 2..1048576.
    w_fmt : QFormat
        Weights (2..24 bits), saturating quantisation.
    b_fmt : QFormat
        Biases ``b_ih + b_hh`` (2..32 bits, ``frac_bits <= w_frac + x_frac``).
    x_fmt : QFormat
        Inputs and hidden state ``h`` (what the PEs multiply), 4..24 bits.
    pre_fmt : QFormat
        Gate pre-activations (input of the PWL units), 4..24 bits.
    act_fmt : QFormat
        Gate activations (PWL outputs), 4..24 bits, >= 2 fraction bits.
    c_fmt : QFormat
        Cell state (and input of the tanh(c) PWL unit), 4..24 bits.
    segments : int
        PWL segments, power of two between 2 and 256, and at most
        ``2**(w - 1)`` for the narrower PWL input (``pre_fmt``, ``c_fmt``) of ``w`` bits.
    w_lanes : int
        Weight words per weight-stream beat ``L``, 1..min(pes, 64): lane ``l`` feeds the
        PEs ``p`` with ``p mod L = l`` (:func:`gen.lstm.weight_beats`); the shell's weight
        port then carries one such beat per AXI4-Stream beat.
    bus_words : int
        Words per AXI4-Stream beat of the accelerator shell, 1..32 (the bare engine takes
        and gives one sequence and one result word per clock either way).
    rq_width : int
        0 (default): the shell's ``h`` port carries ``x_fmt`` words.  2..32: the shell
        requantises every ``h`` word on its way out (a bias per hidden unit, multiply-shift
        with round half up, saturation to ``rq_width`` signed bits, optional ReLU;
        ``hdl/lib/requant.py``, registers ``RQ_*``; the engine's own feedback keeps
        ``x_fmt``) and the port carries ``rq_width``-bit words.
    rq_depth : int
        Biases the requantisation stage holds (hidden units), 1..65536.
    """

    pes: int = 2
    max_inputs: int = 8
    max_hidden: int = 8
    fifo_depth: int = 8
    mem_depth: int = 256
    w_fmt: QFormat = QFormat(3, 9)
    b_fmt: QFormat = QFormat(4, 12)
    x_fmt: QFormat = QFormat(4, 12)
    pre_fmt: QFormat = QFormat(4, 12)
    act_fmt: QFormat = QFormat(2, 14)
    c_fmt: QFormat = QFormat(5, 11)
    segments: int = 32
    w_lanes: int = 1
    bus_words: int = 1
    rq_width: int = 0
    rq_depth: int = 1024

    def __post_init__(self):
        for name, lo, hi in (("pes", 1, 256), ("max_inputs", 1, 4096), ("max_hidden", 1, 8192),
                             ("fifo_depth", 2, 256), ("mem_depth", 2, 1 << 20),
                             ("segments", 2, 256), ("w_lanes", 1, 64), ("bus_words", 1, 32)):
            check_int(self, name, lo, hi)
        if self.w_lanes > self.pes:
            raise ValueError(f"w_lanes must be between 1 and pes = {self.pes}, "
                             f"not {self.w_lanes}")
        if self.segments & (self.segments - 1):
            raise ValueError(f"segments must be a power of two between 2 and 256, "
                             f"not {self.segments}")
        for name, lo, hi in (("w_fmt", 2, 24), ("b_fmt", 2, 32), ("x_fmt", 4, 24),
                             ("pre_fmt", 4, 24), ("act_fmt", 4, 24), ("c_fmt", 4, 24)):
            check_format(self, name, lo, hi)
        if self.act_fmt.frac_bits < 2:
            raise ValueError(f"act_fmt must have at least 2 fraction bits, not {self.act_fmt}")
        # The PWL units (inputs pre_fmt and c_fmt) need an input code per segment.
        narrow = min(self.pre_fmt, self.c_fmt, key=lambda fmt: fmt.width)
        most = min(256, 1 << (narrow.width - 1))
        if self.segments > most:
            raise ValueError(f"segments must be a power of two between 2 and {most} for the "
                             f"{narrow.width}-bit PWL input {narrow}, not {self.segments}")
        check_requant(self)
        if self.b_fmt.frac_bits > self.acc_frac:
            raise ValueError(f"b_fmt must have at most w_fmt + x_fmt fraction bits = "
                             f"{self.acc_frac}, not {self.b_fmt.frac_bits}")

    # ---- derived sizes
    @property
    def module_name(self) -> str:
        return "lstm"

    @property
    def shell_name(self) -> str:
        """The accelerator shell's module: ``lstm_axi``, ``_l<w_lanes>`` and
        ``_w<bus_words>`` beyond 1, ``_rq<rq_width>`` with a requantisation stage."""
        return ("lstm_axi" + (f"_l{self.w_lanes}" if self.w_lanes > 1 else "")
                + (f"_w{self.bus_words}" if self.bus_words > 1 else "")
                + (f"_rq{self.rq_width}" if self.rq_width else ""))

    @property
    def rows_per_pe(self) -> int:
        """Hidden units a PE can own, ``ceil(max_hidden / pes)``."""
        return -(-self.max_hidden // self.pes)

    @property
    def lbits(self) -> int:
        return index_bits(self.rows_per_pe)

    @property
    def idx_bits(self) -> int:
        return self.lbits + 2

    @property
    def pe_bits(self) -> int:
        return index_bits(self.pes)

    @property
    def max_slots(self) -> int:
        return self.rows_per_pe * self.pes

    @property
    def max_cols(self) -> int:
        return self.max_inputs + self.max_slots

    @property
    def col_bits(self) -> int:
        return self.max_cols.bit_length()

    @property
    def addr_bits(self) -> int:
        return index_bits(self.mem_depth)

    @property
    def count_bits(self) -> int:
        return (4 * self.rows_per_pe).bit_length()

    @property
    def hid_bits(self) -> int:
        return self.max_hidden.bit_length()

    @property
    def acc_frac(self) -> int:
        return self.w_fmt.frac_bits + self.x_fmt.frac_bits

    @property
    def bias_shift(self) -> int:
        return self.acc_frac - self.b_fmt.frac_bits

    @property
    def acc_width(self) -> int:
        """Accumulator bits: the largest possible sum of products plus bias fits exactly."""
        bound = (self.max_cols * (1 << (self.w_fmt.width - 1)) * (1 << (self.x_fmt.width - 1))
                 + ((1 << (self.b_fmt.width - 1)) << self.bias_shift))
        return bound.bit_length() + 1

    @property
    def acc_fmt(self) -> QFormat:
        return QFormat(self.acc_width - self.acc_frac, self.acc_frac)

    @property
    def prod_frac(self) -> int:
        """Fraction bits of the cell-update sum ``F = max(a + c_frac, 2a)``."""
        a = self.act_fmt.frac_bits
        return max(a + self.c_fmt.frac_bits, 2 * a)

    @property
    def wv_width(self) -> int:
        """Width of the ``value`` field of a weight-stream word."""
        return max(self.w_fmt.width, self.b_fmt.width)

    @property
    def word_width(self) -> int:
        """Bits of one weight-stream word ``{value, idx, pe, kind}``."""
        return self.wv_width + self.idx_bits + self.pe_bits + 3

    @property
    def xv_width(self) -> int:
        """Width of the ``value`` field of an ``x`` stream word."""
        return max(self.x_fmt.width, self.c_fmt.width)

    def pwl_config(self, which: str) -> PwlConfig:
        """``sigmoid`` / ``tanh`` (gate units, input ``pre_fmt``) or ``tanh_c`` (input ``c_fmt``)."""
        if which == "tanh_c":
            return PwlConfig("tanh", in_fmt=self.c_fmt, out_fmt=self.act_fmt,
                             segments=self.segments)
        return PwlConfig(which, in_fmt=self.pre_fmt, out_fmt=self.act_fmt,
                         segments=self.segments)

    def tables(self) -> dict:
        return {k: fit_table(self.pwl_config(k)) for k in ("sigmoid", "tanh", "tanh_c")}

    @property
    def pwl_latency(self) -> int:
        """Pipeline depth of the LSTM's PWL units (:class:`hdl.lstm_pwl.LstmPwlUnit`)."""
        return self.pwl_config("sigmoid").latency + PWL_EXTRA_STAGES

    @property
    def ew_latency(self) -> int:
        """Clocks from an element-wise issue to the ``h`` write: command register in
        the PE (1), accumulator read (1), round (1) and saturate (1) the pre-activations, gate PWL (L),
        products (M = :attr:`ew_mul_latency`), cell sum (1), round (1), saturate to
        ``c_t`` (1), tanh PWL (L), ``o * tanh(c_t)`` (M), round (1), saturate to
        ``h_t`` (1; the ``h`` bank write takes it in that clock): ``9 + 2 L + 2 M``."""
        return 9 + 2 * self.pwl_latency + 2 * self.ew_mul_latency

    @property
    def ew_mul_latency(self) -> int:
        """Clocks of the element-wise multipliers (shift-and-add, no DSP): operand
        registers, then one adder-tree level per clock over ``act_fmt.width`` partial
        products: ``1 + ceil(log2(act_fmt.width))``."""
        return 1 + (self.act_fmt.width - 1).bit_length()

    def formats(self) -> dict:
        return {"weights": self.w_fmt.to_dict(), "bias": self.b_fmt.to_dict(),
                "x_h": self.x_fmt.to_dict(), "pre_activation": self.pre_fmt.to_dict(),
                "activation": self.act_fmt.to_dict(), "cell": self.c_fmt.to_dict(),
                "accumulator": self.acc_fmt.to_dict()}
