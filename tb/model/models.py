# SPDX-License-Identifier: Apache-2.0
"""Small ONNX models built with ``onnx.helper`` (no PyTorch) for the model-flow tests."""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = ["cnn", "residual", "single", "save"]


def _sparse(rng, shape, density):
    w = rng.normal(0, 0.5, shape)
    return (w * (rng.random(shape) < density)).astype(np.float32)


def _model(nodes, inits, x_shape, y_shape, batch="N"):
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, *x_shape])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, *y_shape])],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def cnn(seed=0, density=0.5, gemm_density=0.3):
    """Conv 1->4 3x3 pad 1 + BatchNorm + ReLU, MaxPool 2, Conv 4->8 3x3 stride 2 + bias +
    ReLU, Flatten, Gemm 32->10 (transB) on 8 x 8 inputs."""
    rng = np.random.default_rng(seed)
    inits = {"w1": _sparse(rng, (4, 1, 3, 3), density),
             "g": rng.uniform(0.5, 1.5, 4).astype(np.float32),
             "be": rng.normal(0, 0.1, 4).astype(np.float32),
             "mu": rng.normal(0, 0.1, 4).astype(np.float32),
             "var": rng.uniform(0.5, 2, 4).astype(np.float32),
             "w2": _sparse(rng, (8, 4, 3, 3), density),
             "b2": rng.normal(0, 0.1, 8).astype(np.float32),
             "w3": _sparse(rng, (10, 32), gemm_density),
             "b3": rng.normal(0, 0.1, 10).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv1", pads=[1, 1, 1, 1],
                              kernel_shape=[3, 3]),
             helper.make_node("BatchNormalization", ["c1", "g", "be", "mu", "var"], ["n1"],
                              name="bn1"),
             helper.make_node("Relu", ["n1"], ["r1"], name="relu1"),
             helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2],
                              strides=[2, 2]),
             helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], name="conv2",
                              strides=[2, 2], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
             helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
             helper.make_node("Flatten", ["r2"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "w3", "b3"], ["y"], name="fc", transB=1)]
    return _model(nodes, inits, (1, 8, 8), (10,))


def residual(seed=1):
    """Conv + ReLU, Conv, Add (residual), ReLU, GlobalAveragePool, Flatten, MatMul + Add."""
    rng = np.random.default_rng(seed)
    inits = {"w1": _sparse(rng, (4, 4, 3, 3), 0.6), "w2": _sparse(rng, (4, 4, 3, 3), 0.6),
             "wm": _sparse(rng, (4, 6), 0.8), "bm": rng.normal(0, 0.1, 6).astype(np.float32)}
    pads = dict(pads=[1, 1, 1, 1], kernel_shape=[3, 3])
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv1", **pads),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             helper.make_node("Conv", ["r1", "w2"], ["c2"], name="conv2", **pads),
             helper.make_node("Add", ["c2", "x"], ["s"], name="res"),
             helper.make_node("Relu", ["s"], ["r2"], name="relu2"),
             helper.make_node("AveragePool", ["r2"], ["a"], name="avg", kernel_shape=[2, 2],
                              strides=[2, 2]),
             helper.make_node("GlobalAveragePool", ["a"], ["g"], name="gap"),
             helper.make_node("Flatten", ["g"], ["f"], name="flat"),
             helper.make_node("MatMul", ["f", "wm"], ["m"], name="mm"),
             helper.make_node("Add", ["m", "bm"], ["y"], name="bias")]
    return _model(nodes, inits, (4, 6, 6), (6,))


def single(op, x_shape, y_shape, inits=None, inputs=("x",), **attrs):
    """A one-node model ``op(inputs) -> y``."""
    node = helper.make_node(op, list(inputs), ["y"], name=f"the_{op.lower()}", **attrs)
    return _model([node], dict(inits or {}), x_shape, y_shape)


def save(model, path):
    onnx.save(model, str(path))
    return path
