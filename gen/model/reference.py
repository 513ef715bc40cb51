# SPDX-License-Identifier: Apache-2.0
"""The float reference of a layer graph (:mod:`gen.model.graph`) in numpy (float64).

It computes what onnxruntime computes for the operators spnn maps (``tb/model`` compares
the two on every operator: max |difference| below 1e-5 of the output's range), and records
every tensor's values, which calibration (:mod:`gen.model.compile`) reads.
"""

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

__all__ = ["run_float", "run_onnxruntime", "conv2d", "pool2d", "windows", "window_counts",
           "lstm_float"]


def conv2d(x, w, b=None, stride=1, pad=0):
    """Cross-correlation of ``x`` (B, Ic, H, W) with ``w`` (Oc, Ic, kh, kw) (+ ``b``)."""
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    kh, kw = w.shape[2:]
    win = sliding_window_view(x, (kh, kw), axis=(2, 3))[:, :, ::stride, ::stride]
    y = np.einsum("bchwij,ocij->bohw", win, w, optimize=True)
    return y if b is None else y + np.asarray(b)[None, :, None, None]


def windows(x, kernel, stride, pad, fill=0):
    """The pooling windows of ``x`` (B, C, H, W) padded with ``fill``:
    ``(B, C, Ho, Wo, kh, kw)``."""
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)), constant_values=fill)
    return sliding_window_view(xp, tuple(kernel), axis=(2, 3))[:, :, ::stride[0], ::stride[1]]


def window_counts(shape, kernel, stride, pad):
    """Per output position, how many of its window's positions are not padding."""
    ones = np.pad(np.ones(shape, np.int64), pad)
    return sliding_window_view(ones, tuple(kernel))[::stride[0], ::stride[1]].sum(axis=(-1, -2))


def pool2d(x, kernel, stride, pad, kind, count_include_pad=0):
    """Max or average pooling of ``x`` (B, C, H, W); padding is ``-inf`` for max and
    excluded from the average unless ``count_include_pad``."""
    if kind == "max":
        return windows(x, kernel, stride, pad, -np.inf).max(axis=(-1, -2))
    total = windows(x, kernel, stride, pad).sum(axis=(-1, -2))
    if count_include_pad or not pad:
        return total / (kernel[0] * kernel[1])
    return total / window_counts(x.shape[2:], kernel, stride, pad)


def lstm_float(x, w, b, hidden: int):
    """``torch.nn.LSTM``'s equations (gate order i, f, g, o; ``h_0 = c_0 = 0``) on a batch
    of sequences ``x`` ``(B, T, X)`` with ``w = [W_ih W_hh]`` ``(4H, X + H)`` and ``b =
    b_ih + b_hh``: every step's ``h``, ``(B, T, H)``."""
    n, steps, nx = x.shape
    h, c = np.zeros((n, hidden)), np.zeros((n, hidden))
    out = np.zeros((n, steps, hidden))
    w_ih, w_hh = w[:, :nx], w[:, nx:]

    def sigmoid(v):
        return 0.5 * (1.0 + np.tanh(0.5 * v))          # no overflow for large |v|
    for t in range(steps):
        z = x[:, t] @ w_ih.T + h @ w_hh.T + b
        i, f, g, o = (z[:, k * hidden:(k + 1) * hidden] for k in range(4))
        c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
        h = sigmoid(o) * np.tanh(c)
        out[:, t] = h
    return out


def _layer(layer, args):
    x = args[0]
    a = layer.attrs
    if layer.op == "conv":
        return conv2d(x, layer.w, layer.b, a["stride"], a["pad"])
    if layer.op == "gemm":
        y = x.reshape(x.shape[0], -1) @ layer.w.T
        return y if layer.b is None else y + layer.b
    if layer.op == "lstm":
        return lstm_float(x, layer.w, layer.b, a["hidden"])
    if layer.op == "select":
        return np.take(x, a["index"], axis=a["axis"])
    if layer.op == "relu":
        return np.maximum(x, 0.0)
    if layer.op == "flatten":
        return x.reshape(x.shape[0], -1)
    if layer.op == "add":
        return x + args[1]
    if a.get("global"):
        return x.mean(axis=(2, 3), keepdims=True)
    kind = "max" if layer.op == "maxpool" else "avg"
    return pool2d(x, a["kernel"], a["stride"], a["pad"], kind, a.get("count_include_pad", 0))


def run_float(graph, x, keep: bool = False):
    """The graph's output for inputs ``x`` (batch first); with ``keep`` also every tensor
    ``{name: values}``."""
    x = np.asarray(x, dtype=np.float64)
    if x.shape[1:] != tuple(graph.input_shape):
        raise ValueError(f"inputs of shape {x.shape[1:]} for a model that takes "
                         f"{tuple(graph.input_shape)}")
    tensors = {graph.input: x}
    for layer in graph.layers:
        tensors[layer.output] = _layer(layer, [tensors[n] for n in layer.inputs])
    out = tensors[graph.output]
    return (out, tensors) if keep else out


def run_onnxruntime(model, input_name: str, x):
    """onnxruntime's output for ``x`` (a path or serialised model), its graph optimisations
    off: the ONNX operators' own semantics (with them on, a weight DequantizeLinear +
    MatMul becomes an integer MatMul that quantises the activations too)."""
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model if isinstance(model, bytes) else str(model), opts,
                                providers=["CPUExecutionProvider"])
    return sess.run(None, {input_name: np.asarray(x, dtype=np.float32)})[0]
