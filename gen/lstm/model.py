# SPDX-License-Identifier: Apache-2.0
"""LSTM layer on the sparse engine (seed 000): config, import, compiler, golden and cycle models.

What the block computes
-----------------------
One PyTorch-style LSTM layer over a whole sequence (gate order i, f, g, o as in
``torch.nn.LSTM``).  With integer codes (formats in :class:`LstmConfig`) per step::

    acc_r  = sum_j W[r, j] * v_j  +  (b_r << (acc_frac - b_frac))      exact, no overflow
             v = [x_t, h_{t-1}],  W = [W_ih W_hh] (4H x (X + H)),  acc_frac = w_frac + x_frac
    pre_r  = requantise(acc_r, acc_frac, pre_fmt)                       round half up, saturate
    i, f, o = ref_pwl(pre, sigmoid table)       g = ref_pwl(pre, tanh table)    (act_fmt)
    c_t    = requantise(f * c_{t-1} << s1  +  i * g << s2,  F,  c_fmt)
             F = max(a + c_frac, 2a),  s1 = F - a - c_frac,  s2 = F - 2a,  a = act_frac
    h_t    = requantise(o * ref_pwl(c_t, tanh table over c_fmt), 2a, x_fmt)

``b = b_ih + b_hh`` (summed in float, then quantised to ``b_fmt``).  The accumulator
(``acc_width`` bits, derived) is wide enough that the sum is exact in any order, so
the hardware may add the products in whatever order its PEs finish them.

Weight compiler (one row permutation for all four gates)
--------------------------------------------------------
Hidden unit ``k`` owns the four rows ``g*H + k`` (g = i, f, g, o).  Units, not rows,
are dealt to the ``P`` PEs by :func:`gen.spmv.allocate` on the *combined* per-unit
non-zero count (the seed merges the gate matrices), at most ``R = ceil(H / P)`` units
per PE; unit ``k`` gets ``(pe, local)``.  Its four gate rows live in the same PE
(local row ``gate << lbits | local``), so a PE holds every gate of its units and
the element-wise stage runs in all PEs in parallel.  The fed-back ``h`` is broadcast
in *slot* order ``q = local * P + pe`` (``R * P`` slots, empty slots are zero) and
the columns of ``W_hh`` are permuted to slot order, so ``h`` is never reordered in
hardware; results leave in the original unit order through the rowmap.

Streams (see :class:`hdl.lstm.LstmEngine`)
------------------------------------------
``w`` words ``{value, idx, pe, kind}``: ROW (rowmap of unit k: pe, idx = local),
BIAS (pe, idx = gate << lbits | local, value = bias code), per column ENTRY words then
one COL word (columns: ``X`` inputs then the ``R * P`` h slots), END.
``x`` words ``{value, kind}``: per sequence ``H`` words H0 (``h_0``, ``x_fmt``, original
order), ``H`` words C0 (``c_0``, ``c_fmt``), then ``T * X`` words X.  ``o``: ``h_t``
codes (``x_fmt``), ``H`` per step in original order.

Cycle model
-----------
:func:`cycle_model` steps the same registers as the RTL clock by clock (loader,
bias initialisation, feeders, per-PE FIFOs and MAC pipelines, element-wise sweep,
output drain), reading each port's own handshake pattern (:mod:`gen.core.stimulus`: idle
inputs and back-pressure), so it predicts the cycle of every transfer exactly.
"""

from collections import deque
from dataclasses import dataclass
import math
import warnings
from pathlib import Path

import numpy as np

from gen.core.config import check_format, check_int
from gen.core.fixed import QFormat, check_codes, index_bits, quantise, requantise
from gen.pwl import PwlConfig, fit_table, ref_pwl
from gen.core.stimulus import ModelSource, make_job, pattern_for

__all__ = ["LstmConfig", "LstmFloat", "LstmQuant", "LstmPlan", "load_model", "model_from_dict",
           "prune_lstm", "quantise_lstm", "float_lstm", "ref_lstm", "compile_lstm", "plan_quant",
           "weight_words", "seq_words", "pack_word", "cycle_model", "step_cycles", "GATES", "PWL_EXTRA_STAGES",
           "KIND_ENTRY", "KIND_COL", "KIND_ROW", "KIND_BIAS", "KIND_END",
           "XK_X", "XK_H0", "XK_C0"]

GATES = ("i", "f", "g", "o")
# Stages the LSTM's PWL units (hdl.lstm_pwl.LstmPwlUnit) add to PwlUnit's pipeline:
# |x| / clamp, operand registers, product register, round / saturate, clamp to 1,
# mirror / saturate.
PWL_EXTRA_STAGES = 6
KIND_ENTRY, KIND_COL, KIND_ROW, KIND_BIAS, KIND_END = 0, 1, 2, 3, 4
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

    def __post_init__(self):
        for name, lo, hi in (("pes", 1, 256), ("max_inputs", 1, 4096), ("max_hidden", 1, 8192),
                             ("fifo_depth", 2, 256), ("mem_depth", 2, 1 << 20),
                             ("segments", 2, 256)):
            check_int(self, name, lo, hi)
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
        if self.b_fmt.frac_bits > self.acc_frac:
            raise ValueError(f"b_fmt must have at most w_fmt + x_fmt fraction bits = "
                             f"{self.acc_frac}, not {self.b_fmt.frac_bits}")

    # ---- derived sizes
    @property
    def module_name(self) -> str:
        return "lstm"

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


# ------------------------------------------------------------------ model import

@dataclass
class _LstmWeights:
    """Weights of one LSTM layer, PyTorch layout: w_ih (4H, X), w_hh (4H, H), b (4H,)."""

    w_ih: np.ndarray
    w_hh: np.ndarray
    b: np.ndarray

    @property
    def hidden(self) -> int:
        return self.w_hh.shape[1]

    @property
    def inputs(self) -> int:
        return self.w_ih.shape[1]

    @property
    def nnz(self) -> int:
        return int(np.count_nonzero(self.w_ih) + np.count_nonzero(self.w_hh))


@dataclass
class LstmFloat(_LstmWeights):
    """Float weights of one LSTM layer (PyTorch layout; ``b = b_ih + b_hh``)."""

    @property
    def density(self) -> float:
        return float(self.nnz / max(self.w_ih.size + self.w_hh.size, 1))


@dataclass
class LstmQuant(_LstmWeights):
    """Integer codes of one LSTM layer (formats of the config it was quantised for)."""


_KEYS = ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0")


def _err(msg):
    from gen.core.config import SpnnError
    return SpnnError(msg)


def model_from_dict(state: dict, name: str = "--model") -> LstmFloat:
    """A state dict (arrays or tensors; keys optionally under one prefix such as
    ``lstm.``) -> :class:`LstmFloat`, with one-line errors for wrong keys/shapes/NaN."""
    arrays = {}
    for key, value in state.items():
        if hasattr(value, "detach"):
            value = value.detach().cpu().numpy()
        arrays[str(key)] = value
    prefixes = sorted({k[:-len("weight_ih_l0")] for k in arrays if k.endswith("weight_ih_l0")})
    if not prefixes:
        raise _err(f"{name}: no LSTM weights found; expected keys {', '.join(_KEYS)} "
                   f"(found {', '.join(sorted(arrays)[:6]) or 'none'})")
    if len(prefixes) > 1:
        raise _err(f"{name}: several LSTMs found (prefixes {', '.join(prefixes)}); "
                   f"save one layer")
    pre = prefixes[0]
    if any(k.startswith(pre) and k.endswith("_l1") for k in arrays):
        raise _err(f"{name}: only one-layer LSTMs are supported (found {pre}weight_ih_l1)")
    if any(k.startswith(pre) and k.endswith("_reverse") for k in arrays):
        raise _err(f"{name}: bidirectional LSTMs are not supported")
    if pre + "weight_hh_l0" not in arrays:
        raise _err(f"{name}: missing key {pre}weight_hh_l0")
    out = {}
    for key in _KEYS:
        full = pre + key
        if full not in arrays:
            if key.startswith("bias"):
                continue
            raise _err(f"{name}: missing key {full}")
        arr = np.asarray(arrays[full])
        if arr.dtype.kind not in "biuf":
            raise _err(f"{name}: {full} must hold numbers, not {arr.dtype}")
        arr = arr.astype(np.float64)
        if not np.all(np.isfinite(arr)):
            raise _err(f"{name}: {full} holds NaN or infinite values")
        out[key] = arr
    if ("bias_ih_l0" in out) != ("bias_hh_l0" in out):
        raise _err(f"{name}: give both bias_ih_l0 and bias_hh_l0 or neither")
    w_ih, w_hh = out["weight_ih_l0"], out["weight_hh_l0"]
    if w_hh.ndim != 2 or w_hh.shape[0] != 4 * w_hh.shape[1] or w_hh.shape[1] == 0:
        raise _err(f"{name}: {pre}weight_hh_l0 must have shape (4H, H), not {w_hh.shape}")
    hid = w_hh.shape[1]
    if w_ih.ndim != 2 or w_ih.shape[0] != 4 * hid or w_ih.shape[1] == 0:
        raise _err(f"{name}: {pre}weight_ih_l0 must have shape (4H, X) = ({4 * hid}, X), "
                   f"not {w_ih.shape}")
    b = np.zeros(4 * hid)
    for key in ("bias_ih_l0", "bias_hh_l0"):
        if key in out:
            if out[key].shape != (4 * hid,):
                raise _err(f"{name}: {pre}{key} must have shape ({4 * hid},), "
                           f"not {out[key].shape}")
            b = b + out[key]
    return LstmFloat(w_ih, w_hh, b)


def load_model(path, name: str = "--model") -> LstmFloat:
    """Load a PyTorch ``nn.LSTM`` state dict (``.pt``/``.pth``, ``weights_only=True``) or an
    ``.npz`` with the same keys; any problem is a one-line :class:`gen.core.config.SpnnError`."""
    p = Path(path)
    if not p.is_file():
        raise _err(f"{name}: no such file {str(path)!r}")
    if p.suffix == ".npz":
        try:
            with np.load(p, allow_pickle=False) as data:
                state = {k: data[k] for k in data.files}
        except ValueError as exc:
            if "pickle" in str(exc).lower():
                raise _err(f"{name}: {str(path)!r} holds pickled objects, which are not "
                           f"loaded; save numeric arrays") from None
            raise _err(f"{name}: {str(path)!r} is not a readable .npz file ({exc})") from None
        except Exception as exc:  # noqa: BLE001
            raise _err(f"{name}: {str(path)!r} is not a readable .npz file "
                       f"({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})") \
                from None
        return model_from_dict(state, name)
    try:
        import torch
    except ImportError:
        raise _err(f"{name}: reading {p.suffix or 'this'} files needs PyTorch; "
                   f"install torch or save the weights as .npz") from None
    try:
        # torch warns (on stderr) about the pickle protocol of a refused file; a refused
        # command prints exactly one line, so its warnings are silenced here.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            state = torch.load(p, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - every load failure is a user error
        text = str(exc)
        if "weights_only" in text or "Unpickl" in type(exc).__name__ or "GLOBAL" in text:
            raise _err(f"{name}: {str(path)!r} holds pickled Python objects, which are not "
                       f"loaded (weights_only=True); save model.state_dict()") from None
        first = text.splitlines()[0] if text else type(exc).__name__
        raise _err(f"{name}: {str(path)!r} is not a readable PyTorch file ({first})") from None
    if not isinstance(state, dict):
        raise _err(f"{name}: {str(path)!r} must hold a state dict, not "
                   f"{type(state).__name__}")
    return model_from_dict(state, name)


def prune_lstm(model: LstmFloat, density: float) -> LstmFloat:
    """Magnitude pruning of the stacked ``[W_ih W_hh]`` to ``density`` (biases kept)."""
    from gen.spmv import prune
    x = model.inputs
    w = prune(np.hstack([model.w_ih, model.w_hh]), density)
    return LstmFloat(w[:, :x].copy(), w[:, x:].copy(), model.b.copy())


def quantise_lstm(model: LstmFloat, cfg: LstmConfig) -> LstmQuant:
    """Float weights -> codes (round half up, saturate); zeros stay zeros."""
    return LstmQuant(quantise(model.w_ih, cfg.w_fmt), quantise(model.w_hh, cfg.w_fmt),
                     quantise(model.b, cfg.b_fmt))


# ------------------------------------------------------------------ reference models

def _sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def float_lstm(model: LstmFloat, xs, h0=None, c0=None):
    """Float64 numpy LSTM (the equations of ``torch.nn.LSTM``): returns ``(h seq T x H, c_T)``."""
    xs = np.asarray(xs, dtype=np.float64)
    hid = model.hidden
    h = np.zeros(hid) if h0 is None else np.asarray(h0, dtype=np.float64)
    c = np.zeros(hid) if c0 is None else np.asarray(c0, dtype=np.float64)
    out = np.zeros((len(xs), hid))
    for t, x in enumerate(xs):
        z = model.w_ih @ x + model.w_hh @ h + model.b
        i, f, g, o = (z[k * hid:(k + 1) * hid] for k in range(4))
        c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
        h = _sigmoid(o) * np.tanh(c)
        out[t] = h
    return out, c


def _requantise_big(values, frac_bits: int, fmt: QFormat):
    """:func:`gen.core.fixed.requantise` (round half up, saturate) on Python integers: for sums
    wider than int64, held in object arrays; returns int64 codes of ``fmt``."""
    shift = frac_bits - fmt.frac_bits
    out = []
    for v in np.asarray(values, dtype=object).ravel():
        v = (int(v) + (1 << (shift - 1))) >> shift if shift > 0 else int(v) << -shift
        out.append(min(max(v, fmt.min_code), fmt.max_code))
    return np.array(out, dtype=np.int64)


def _cell_sum_width(cfg: LstmConfig) -> int:
    """Bits of the cell-update sum ``f*c << s1 + i*g << s2`` (the gateware's ``c_sum``)."""
    a = cfg.act_fmt.frac_bits
    s1, s2 = cfg.prod_frac - a - cfg.c_fmt.frac_bits, cfg.prod_frac - 2 * a
    aw, cw = cfg.act_fmt.width, cfg.c_fmt.width
    return max(cw + aw + s1, 2 * aw + s2) + 1


def ref_lstm(q: LstmQuant, xs, cfg: LstmConfig, h0=None, c0=None):
    """Golden model: input codes ``xs`` (T x X, ``x_fmt``), optional ``h0`` (``x_fmt``) and
    ``c0`` (``c_fmt``) codes -> ``(h codes T x H in x_fmt, c_T codes in c_fmt)``.

    The sums are exact: the accumulator and the cell update use Python integers when
    their width (``acc_width``, the gateware's cell sum) exceeds what int64 holds, as with
    wide formats such as a 32-bit bias with ``bias_shift`` 46."""
    hid, nx = q.hidden, q.inputs
    xs = check_codes(xs, cfg.x_fmt, "xs").reshape(-1, nx)
    h = np.zeros(hid, np.int64) if h0 is None else check_codes(h0, cfg.x_fmt, "h0").ravel()
    c = np.zeros(hid, np.int64) if c0 is None else check_codes(c0, cfg.c_fmt, "c0").ravel()
    tabs = cfg.tables()
    a = cfg.act_fmt.frac_bits
    F = cfg.prod_frac
    s1, s2 = F - a - cfg.c_fmt.frac_bits, F - 2 * a
    # (62 bits leave room for the rounding constant added in requantise)
    big_acc, big_cell = cfg.acc_width > 62, _cell_sum_width(cfg) > 62
    w = np.hstack([q.w_ih, q.w_hh]).astype(np.int64)
    bias = q.b.astype(np.int64)
    if big_acc:
        w, bias = w.astype(object), bias.astype(object)
    bias = bias << cfg.bias_shift
    out = np.zeros((len(xs), hid), np.int64)
    for t, x in enumerate(xs):
        v = np.concatenate([x, h])
        if big_acc:
            pre = _requantise_big(w @ v.astype(object) + bias, cfg.acc_frac, cfg.pre_fmt)
        else:
            pre = requantise(w @ v + bias, cfg.acc_frac, cfg.pre_fmt)
        gi, gf, gg, go = (pre[k * hid:(k + 1) * hid] for k in range(4))
        i, f, o = (ref_pwl(v, tabs["sigmoid"]) for v in (gi, gf, go))
        g = ref_pwl(gg, tabs["tanh"])
        if big_cell:
            big = [v.astype(object) for v in (f, c, i, g)]
            c = _requantise_big((big[0] * big[1] << s1) + (big[2] * big[3] << s2), F,
                                cfg.c_fmt)
        else:
            c = requantise((f * c << s1) + (i * g << s2), F, cfg.c_fmt)
        h = requantise(o * ref_pwl(c, tabs["tanh_c"]), 2 * a, cfg.x_fmt)
        out[t] = h
    return out, c


# ------------------------------------------------------------------ compiler

@dataclass
class LstmPlan:
    """A compiled layer: unit allocation, per-PE memory images and column order."""

    cfg: LstmConfig
    alloc: str
    hidden: int
    inputs: int
    unit_pe: np.ndarray       # per original unit
    unit_local: np.ndarray
    r_run: int                # ceil(H / P): units per PE (slots per PE)
    slot_unit: np.ndarray     # per slot q = local * P + pe: original unit or -1
    counts: np.ndarray        # (P, cols): entries of PE p in column j
    entries: list             # per PE: [(weight code, local row)], column-packed
    bias: np.ndarray          # (P, 4, r_run) bias codes
    nnz: int

    @property
    def slots(self) -> int:
        return self.r_run * self.cfg.pes

    @property
    def cols(self) -> int:
        return self.inputs + self.slots

    @property
    def loads(self) -> np.ndarray:
        return self.counts.sum(axis=1)

    @property
    def ideal_cycles(self) -> int:
        """``ceil(nnz / P)``: one step's MACs spread perfectly over the PEs."""
        return math.ceil(self.nnz / self.cfg.pes)

    def load_report(self) -> dict:
        loads = self.loads
        mean = float(loads.mean()) if len(loads) else 0.0
        return {"allocator": self.alloc, "pes": self.cfg.pes, "nnz": self.nnz,
                "max_load": int(loads.max(initial=0)), "mean_load": mean,
                "max_over_mean": float(loads.max() / mean) if mean else 1.0,
                "ideal_cycles": self.ideal_cycles}


def compile_lstm(q: LstmQuant, cfg: LstmConfig, alloc: str = "balanced") -> LstmPlan:
    """Codes -> :class:`LstmPlan`: one unit permutation for all gates, ``W_hh`` columns in
    slot order; checks that the layer fits the config."""
    from gen.spmv import allocate
    hid, nx = q.hidden, q.inputs
    if hid > cfg.max_hidden:
        raise ValueError(f"hidden size must be at most max_hidden = {cfg.max_hidden}, "
                         f"not {hid}")
    if nx > cfg.max_inputs:
        raise ValueError(f"input size must be at most max_inputs = {cfg.max_inputs}, "
                         f"not {nx}")
    check_codes(q.w_ih, cfg.w_fmt, "w_ih")
    check_codes(q.w_hh, cfg.w_fmt, "w_hh")
    check_codes(q.b, cfg.b_fmt, "bias")
    P = cfg.pes
    w = np.hstack([q.w_ih, q.w_hh]).astype(np.int64)            # (4H, X + H)
    gates = w.reshape(4, hid, nx + hid)
    unit_mask = (gates != 0).any(axis=0)
    unit_nnz = (gates != 0).sum(axis=(0, 2))
    r_run = -(-hid // P)
    unit_pe, unit_local = allocate(unit_nnz, P, alloc, unit_mask, capacity=r_run)
    unit_pe, unit_local = np.asarray(unit_pe), np.asarray(unit_local)
    slot_unit = np.full(r_run * P, -1, np.int64)
    slot_unit[unit_local * P + unit_pe] = np.arange(hid)
    ncols = nx + r_run * P
    # column j of the compiled matrix: x_j, then the h slot j - X
    col_src = np.concatenate([np.arange(nx), np.where(slot_unit >= 0, nx + slot_unit, -1)])
    counts = np.zeros((P, ncols), np.int64)
    entries = [[] for _ in range(P)]
    lb = cfg.lbits
    for j in range(ncols):
        src = col_src[j]
        if src < 0:
            continue
        col = gates[:, :, src]                                   # (4, H)
        gs, ks = np.nonzero(col)
        rows = (gs << lb) | unit_local[ks]
        pes = unit_pe[ks]
        order = np.lexsort((rows, pes))
        for n in order:
            p = int(pes[n])
            entries[p].append((int(col[gs[n], ks[n]]), int(rows[n])))
            counts[p, j] += 1
    loads = counts.sum(axis=1)
    if loads.max(initial=0) > cfg.mem_depth:
        raise ValueError(f"a PE needs {loads.max()} weight entries; mem_depth is "
                         f"{cfg.mem_depth}")
    bias = np.zeros((P, 4, r_run), np.int64)
    for k in range(hid):
        bias[unit_pe[k], :, unit_local[k]] = q.b.reshape(4, hid)[:, k]
    return LstmPlan(cfg, alloc, hid, nx, unit_pe, unit_local, r_run, slot_unit, counts,
                    entries, bias, int(np.count_nonzero(w)))


def _u(v, width):
    return int(v) & ((1 << width) - 1)


def pack_word(kind, pe, idx, value, cfg: LstmConfig) -> int:
    vw = cfg.wv_width
    return (_u(value, vw) | (int(idx) << vw) | (int(pe) << (vw + cfg.idx_bits))
            | (int(kind) << (vw + cfg.idx_bits + cfg.pe_bits)))


def weight_words(plan: LstmPlan) -> list:
    """The weight stream: ROW x H, BIAS x 4H, per column (ENTRY* COL), END."""
    cfg = plan.cfg
    lb = cfg.lbits
    words = [pack_word(KIND_ROW, pe, loc, 0, cfg)
             for pe, loc in zip(plan.unit_pe, plan.unit_local)]
    for k in range(plan.hidden):
        pe, loc = plan.unit_pe[k], plan.unit_local[k]
        for g in range(4):
            words.append(pack_word(KIND_BIAS, pe, (g << lb) | loc, plan.bias[pe, g, loc], cfg))
    pos = [0] * cfg.pes
    for j in range(plan.cols):
        for p in range(cfg.pes):
            for _ in range(plan.counts[p, j]):
                wv, row = plan.entries[p][pos[p]]
                words.append(pack_word(KIND_ENTRY, p, row, wv, cfg))
                pos[p] += 1
        words.append(pack_word(KIND_COL, 0, 0, 0, cfg))
    words.append(pack_word(KIND_END, 0, 0, 0, cfg))
    return words


def seq_words(plan: LstmPlan, xs, h0=None, c0=None) -> list:
    """The ``x`` stream of one sequence: H0 x H, C0 x H, then the inputs step by step."""
    cfg = plan.cfg
    vw = cfg.xv_width
    hid = plan.hidden
    h0 = np.zeros(hid, np.int64) if h0 is None else np.asarray(h0, np.int64).ravel()
    c0 = np.zeros(hid, np.int64) if c0 is None else np.asarray(c0, np.int64).ravel()
    xs = np.asarray(xs, np.int64).reshape(-1, plan.inputs)
    words = [_u(v, vw) | (XK_H0 << vw) for v in h0]
    words += [_u(v, vw) | (XK_C0 << vw) for v in c0]
    words += [_u(v, vw) | (XK_X << vw) for v in xs.ravel()]
    return words


# ------------------------------------------------------------------ cycle model

LOAD, INIT, IDLE, SEQ, SEQW, XFEED, HFEED, EW, EWW = range(9)


def cycle_model(plan: LstmPlan, seqs, *, w_valid_prob=1.0, x_valid_prob=1.0,
                o_ready_prob=1.0, seed=0, max_cycles=100_000_000):
    """Predict the RTL's transfer cycles for sequences ``[(xs, h0, c0), ...]`` (codes).

    Mirrors :class:`hdl.lstm.LstmEngine` register by register and the stream testbench
    port by port: ``w``, ``x`` and ``o`` each have their own pattern (a probability gives
    the port's own seeded Bernoulli pattern, as in :func:`rtl_lstm`); cycle 0 is the
    first clock after reset.  Returns ``{"w", "x", "o": transfer cycles, "steps":
    [{"start": first input accepted, "ew_start", "end": last h written}, ...]}``; one
    step's period is ``end - start + 2`` when inputs are always available.
    """
    cfg = plan.cfg
    P, D = cfg.pes, cfg.fifo_depth
    wsrc = ModelSource(weight_words(plan), pattern_for(w_valid_prob, seed, "w"))
    o_pat = pattern_for(o_ready_prob, seed, "o")
    xdata = []
    nsteps = 0
    for xs, h0, c0 in seqs:
        xw = seq_words(plan, xs, h0, c0)
        xdata += [(w >> cfg.xv_width, w) for w in xw]
        nsteps += len(np.asarray(xs).reshape(-1, plan.inputs))
    xsrc = ModelSource(xdata, pattern_for(x_valid_prob, seed, "x"))
    H, X, R, S = plan.hidden, plan.inputs, plan.r_run, plan.slots
    n_out = nsteps * H
    counts = plan.counts
    # h values as the broadcaster sees them: only whether they are zero matters, so
    # the golden model gives them (per step); x values come from the stream.
    hz = _h_nonzero(plan, seqs)
    o_cycles = []
    state, cnt = LOAD, 0
    nw, nd = 0, 0               # h halves written / drained (mod 4)
    out_flag = [False, False]
    col, qn, t_glob, lcnt, ewcnt = 0, 0, 0, 0, 0
    s1v, s1nz, s1col = False, False, 0
    fifo = [deque() for _ in range(P)]
    rem = [0] * P
    vb, vc, vo, vd, ve = ([False] * P for _ in range(5))   # MAC stage valid bits
    dr_active, dk, dv0, dv1, dov = False, 0, False, False, False
    steps = []
    cur = None
    cycle = 0
    while True:
        if (wsrc.idx >= wsrc.n and xsrc.idx >= xsrc.n and len(o_cycles) >= n_out
                and state == IDLE and not dr_active and nw == nd):
            break
        if cycle >= max_cycles:
            raise RuntimeError("lstm cycle model: timeout")
        wsrc.drive(cycle)
        xsrc.drive(cycle)
        o_ready = o_pat.at(cycle)
        n_state = state
        pending = (nw - nd) & 3
        # ---- drain (independent)
        if dr_active:
            if dov and o_ready:
                o_cycles.append(cycle)
            adv = (not dov) or o_ready
            fin = dk == H and not (dv0 or dv1 or dov)
            if adv:
                issue = dk < H
                dov, dv1, dv0 = dv1, dv0, issue
                dk += issue
            if fin:
                dr_active = False
                nd = (nd + 1) & 3
        elif pending:
            if out_flag[nd & 1]:
                dr_active, dk, dv0, dv1, dov = True, 0, False, False, False
            else:
                nd = (nd + 1) & 3
        # ---- PEs (state at the start of the cycle)
        all_idle = (not any(fifo) and not any(rem) and not any(vb) and not any(vc)
                    and not any(vo) and not any(vd) and not any(ve))
        stall = s1v and s1nz and any(counts[p, s1col] > 0 and len(fifo[p]) == D
                                     for p in range(P))
        advance = not stall
        for p in range(P):
            ve[p] = vd[p]
            vd[p] = vo[p]
            vo[p] = vc[p]
            vc[p] = vb[p]
            if rem[p] > 0:
                rem[p] -= 1
                vb[p] = True
            elif fifo[p]:
                rem[p] = fifo[p].popleft() - 1
                vb[p] = True
            else:
                vb[p] = False
        if advance and s1v and s1nz:
            for p in range(P):
                if counts[p, s1col] > 0:
                    fifo[p].append(int(counts[p, s1col]))
        issue_v, issue_nz, issue_col = False, False, 0
        # ---- controller
        if state == LOAD:
            if wsrc.take(True, cycle) and wsrc.idx == wsrc.n:
                n_state, cnt = INIT, 0
        elif state == INIT:
            if cnt == cfg.rows_per_pe - 1:
                n_state = IDLE
            cnt += 1
        elif state == IDLE:
            if xsrc.valid:
                kind = xsrc.data[xsrc.idx][0]
                if kind == XK_X:
                    n_state, col = XFEED, 0
                    cur = {"start": None}
                    steps.append(cur)
                elif pending < 2:
                    n_state, cnt = SEQ, 0
        elif state == SEQ:
            if xsrc.take(True, cycle):
                if cnt == 2 * H - 1:
                    n_state = SEQW
                cnt += 1
        elif state == SEQW:
            out_flag[nw & 1] = False
            nw = (nw + 1) & 3
            n_state = IDLE
        elif state == XFEED:
            if xsrc.take(advance and col < X, cycle):
                if cur["start"] is None:
                    cur["start"] = cycle
                value = xsrc.data[xsrc.idx - 1][1] & ((1 << cfg.x_fmt.width) - 1)
                issue_v, issue_nz, issue_col = True, value != 0, col
                if col == X - 1:
                    n_state, qn = HFEED, 0
                col += 1
        elif state == HFEED:
            if qn == S and not s1v and all_idle and pending < 2:
                n_state, lcnt = EW, 0
                cur["ew_start"] = cycle + 1
            if advance and qn < S:
                issue_v, issue_nz, issue_col = True, hz[t_glob][qn], col
                qn += 1
                col += 1
        elif state == EW:
            if lcnt == R - 1:
                n_state, ewcnt = EWW, cfg.ew_latency - 1
            lcnt += 1
        elif state == EWW:
            if ewcnt == 0:
                out_flag[nw & 1] = True
                nw = (nw + 1) & 3
                cur["end"] = cycle
                t_glob += 1
                n_state = IDLE
            ewcnt -= 1
        if advance:
            s1v, s1nz, s1col = issue_v, issue_nz, issue_col
        state = n_state
        cycle += 1
    return {"w": wsrc.cycles, "x": xsrc.cycles, "o": o_cycles, "steps": steps,
            "cycles_run": cycle}


def _h_nonzero(plan: LstmPlan, seqs) -> list:
    """Per global step: which h slots (of h_{t-1}) the broadcaster sees as non-zero."""
    cfg = plan.cfg
    out = []
    quant = plan_quant(plan)
    for xs, h0, c0 in seqs:
        xs = np.asarray(xs, np.int64).reshape(-1, plan.inputs)
        hseq, _ = ref_lstm(quant, xs, cfg, h0, c0)
        prev = np.zeros(plan.hidden, np.int64) if h0 is None else np.asarray(h0).ravel()
        for t in range(len(xs)):
            nz = np.zeros(plan.slots, bool)
            ok = plan.slot_unit >= 0
            nz[ok] = prev[plan.slot_unit[ok]] != 0
            out.append(nz)
            prev = hseq[t]
    return out


def plan_quant(plan: LstmPlan) -> LstmQuant:
    """Recover the layer's codes (original order) from a plan."""
    cfg = plan.cfg
    H, X, P = plan.hidden, plan.inputs, cfg.pes
    lb = cfg.lbits
    w = np.zeros((4, H, X + H), np.int64)
    local_to_unit = {(int(p), int(l)): k for k, (p, l) in
                     enumerate(zip(plan.unit_pe, plan.unit_local))}
    for p in range(P):
        pos = 0
        for j in range(plan.cols):
            for _ in range(plan.counts[p, j]):
                wv, row = plan.entries[p][pos]
                pos += 1
                g, loc = row >> lb, row & ((1 << lb) - 1)
                k = local_to_unit[(p, loc)]
                src = j if j < X else X + plan.slot_unit[j - X]
                w[g, k, src] = wv
    b = np.zeros((4, H), np.int64)
    for k in range(H):
        b[:, k] = plan.bias[plan.unit_pe[k], :, plan.unit_local[k]]
    w = w.reshape(4 * H, X + H)
    return LstmQuant(w[:, :X], w[:, X:], b.ravel())


def step_cycles(model: dict) -> list:
    """Per step: cycles from its first input to the element-wise stage's last ``h`` write,
    plus the 2 clocks to the next step's first input (the step period at full rate)."""
    return [s["end"] + 2 - s["start"] for s in model["steps"]]
