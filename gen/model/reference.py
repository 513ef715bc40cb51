# SPDX-License-Identifier: Apache-2.0
"""The float reference of a layer graph (:mod:`gen.model.graph`) in numpy (float64).

It computes what onnxruntime computes for the operators spnn maps (``tb/model`` compares
the two on every operator: max |difference| below 1e-5 of the output's range), and records
every tensor's values, which calibration (:mod:`gen.model.compile`) reads.
"""

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

__all__ = ["run_float", "conv2d", "pool2d"]


def conv2d(x, w, b=None, stride=1, pad=0):
    """Cross-correlation of ``x`` (B, Ic, H, W) with ``w`` (Oc, Ic, kh, kw) (+ ``b``)."""
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    kh, kw = w.shape[2:]
    win = sliding_window_view(x, (kh, kw), axis=(2, 3))[:, :, ::stride, ::stride]
    y = np.einsum("bchwij,ocij->bohw", win, w, optimize=True)
    return y if b is None else y + np.asarray(b)[None, :, None, None]


def pool2d(x, kernel, stride, pad, kind, count_include_pad=0):
    """Max or average pooling of ``x`` (B, C, H, W); padding is ``-inf`` for max and
    excluded from the average unless ``count_include_pad``."""
    kh, kw = kernel
    sh, sw = stride
    fill = -np.inf if kind == "max" else 0.0
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)), constant_values=fill)
    win = sliding_window_view(xp, (kh, kw), axis=(2, 3))[:, :, ::sh, ::sw]
    if kind == "max":
        return win.max(axis=(-1, -2))
    if count_include_pad or not pad:
        return win.mean(axis=(-1, -2))
    ones = np.pad(np.ones(x.shape[2:]), pad)
    count = sliding_window_view(ones, (kh, kw))[::sh, ::sw].sum(axis=(-1, -2))
    return win.sum(axis=(-1, -2)) / count


def _layer(layer, args):
    x = args[0]
    a = layer.attrs
    if layer.op == "conv":
        return conv2d(x, layer.w, layer.b, a["stride"], a["pad"])
    if layer.op == "gemm":
        y = x.reshape(x.shape[0], -1) @ layer.w.T
        return y if layer.b is None else y + layer.b
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
