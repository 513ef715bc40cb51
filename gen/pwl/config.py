# SPDX-License-Identifier: Apache-2.0
"""The PWL unit's config (:class:`PwlConfig`), its validation, and the float reference
functions it approximates."""

from dataclasses import dataclass

import numpy as np

from gen.core.fixed import QFormat

__all__ = ["PwlConfig", "float_func", "FUNCS"]

FUNCS = ("sigmoid", "tanh")


def float_func(func: str):
    """The float reference: ``scipy.special.expit`` for sigmoid, ``numpy.tanh`` for tanh."""
    if func == "sigmoid":
        from scipy.special import expit
        return expit
    return np.tanh


@dataclass(frozen=True)
class PwlConfig:
    """Parameters of a piecewise-linear activation unit.

    Parameters
    ----------
    func : str
        ``sigmoid`` or ``tanh``.
    in_fmt : QFormat
        Input format (default Q4.12: 16 bits, range [-8, 8)).
    out_fmt : QFormat
        Output format (default Q2.14, which holds both functions' whole range [-1, 1]).
    segments : int
        Segments over ``x >= 0``; a power of two between 2 and 256, and at most
        ``2**(in_fmt.width - 1)`` (every segment holds at least one input code).
    x_max : float or None
        End of the fitted input range; ``|x| >= x_max`` saturates.  ``None`` = the
        whole input range.
    boundaries : str
        ``auto``, ``uniform`` or ``optimal`` (see :mod:`gen.pwl.fit`).
    slope_width : int
        Width of the stored slope codes (signed), 8..27 (18 fits one DSP input).
    guard_bits : int
        Extra fraction bits of the stored intercepts below the output LSB, 0..8.
    bus_words : int
        Words per AXI4-Stream beat of the accelerator shell (:mod:`hdl.pwl.shell`), 1..32:
        that many units side by side.  The unit itself (``spnn verilog pwl``) is the same
        for every value.
    """

    func: str = "sigmoid"
    in_fmt: QFormat = QFormat(4, 12)
    out_fmt: QFormat = QFormat(2, 14)
    segments: int = 32
    x_max: float | None = None
    boundaries: str = "auto"
    slope_width: int = 18
    guard_bits: int = 4
    bus_words: int = 1

    def __post_init__(self):
        if self.func not in FUNCS:
            raise ValueError(f"func must be one of {', '.join(FUNCS)}, not {self.func!r}")
        for name in ("in_fmt", "out_fmt"):
            if not isinstance(getattr(self, name), QFormat):
                raise TypeError(f"{name} must be a QFormat, not {getattr(self, name)!r}")
        if not 4 <= self.in_fmt.width <= 24:
            raise ValueError(f"in_fmt must be 4 to 24 bits wide, not {self.in_fmt.width} "
                             f"({self.in_fmt})")
        if not 4 <= self.out_fmt.width <= 24 or self.out_fmt.frac_bits < 2:
            raise ValueError(f"out_fmt must be 4 to 24 bits wide with at least 2 fraction "
                             f"bits, not {self.out_fmt}")
        # Each segment needs an input code of its own: at most 2**(width - 1) magnitudes.
        most = min(256, 1 << (self.in_fmt.width - 1))
        if (not isinstance(self.segments, int) or self.segments < 2 or self.segments > most
                or self.segments & (self.segments - 1)):
            where = f" for {self.in_fmt}" if most < 256 else ""
            raise ValueError(f"segments must be a power of two between 2 and {most}{where}, "
                             f"not {self.segments}")
        full = -self.in_fmt.min_value
        if self.x_max is not None and not (self.in_fmt.lsb * self.segments <= self.x_max <= full):
            raise ValueError(f"x_max must be between {self.in_fmt.lsb * self.segments:g} and "
                             f"{full:g} for {self.in_fmt} with {self.segments} segments, "
                             f"not {self.x_max}")
        if self.boundaries not in ("auto", "uniform", "optimal"):
            raise ValueError(f"boundaries must be auto, uniform or optimal, "
                             f"not {self.boundaries!r}")
        if not 8 <= self.slope_width <= 27:
            raise ValueError(f"slope_width must be between 8 and 27, not {self.slope_width}")
        if not 0 <= self.guard_bits <= 8:
            raise ValueError(f"guard_bits must be between 0 and 8, not {self.guard_bits}")
        if not isinstance(self.bus_words, int) or isinstance(self.bus_words, bool) or \
                not 1 <= self.bus_words <= 32:
            raise ValueError(f"bus_words must be an integer between 1 and 32, "
                             f"not {self.bus_words!r}")

    @property
    def a_max(self) -> int:
        """Largest magnitude code inside the fitted range."""
        if self.x_max is None:
            return self.in_fmt.max_code
        return min(self.in_fmt.max_code, round(self.x_max * 2 ** self.in_fmt.frac_bits) - 1)

    @property
    def module_name(self) -> str:
        return f"pwl_{self.func}"

    @property
    def shell_name(self) -> str:
        """The accelerator shell's module: ``<module>_axi``, ``_w<bus_words>`` beyond 1."""
        return f"{self.module_name}_axi" + (f"_w{self.bus_words}" if self.bus_words > 1 else "")

    @property
    def latency(self) -> int:
        """Clocks from an input transfer to its result (magnitude, log2(segments) search
        stages, ROM read, multiply, add, round/clamp, mirror)."""
        return self.segments.bit_length() - 1 + 6
