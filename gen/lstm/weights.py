# SPDX-License-Identifier: Apache-2.0
"""An LSTM layer's weights: float and integer containers, import from a PyTorch state
dict or ``.npz`` (one-line errors), magnitude pruning and quantisation to a config's
formats."""

from dataclasses import dataclass
import warnings
from pathlib import Path

import numpy as np

from gen.core.fixed import quantise
from gen.lstm.config import LstmConfig

__all__ = ["LstmFloat", "LstmQuant", "load_model", "model_from_dict", "prune_lstm",
           "quantise_lstm"]


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
