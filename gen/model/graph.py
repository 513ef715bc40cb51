# SPDX-License-Identifier: Apache-2.0
"""An ONNX model as spnn's layer graph.

:func:`load_onnx` reads a model with the ``onnx`` package (protobuf, no pickle), checks it
(``onnx.checker``), and turns its nodes, in their topological order, into :class:`Layer` s
of the operators spnn maps (:data:`SUPPORTED`).  On the way it folds what the hardware
never sees as an operator: ``BatchNormalization`` into the preceding ``Conv``, a bias
``Add`` into the preceding ``Gemm``/``MatMul``, ``DequantizeLinear`` of a weight
initialiser into float weights, ``QuantizeLinear``/``DequantizeLinear`` pairs on
activations into the identity (their scale is kept as a hint), ``Identity`` and
``Dropout``.  Anything else - an unsupported operator, an attribute value the blocks do
not implement (groups, dilation, asymmetric padding, ...), a dynamic axis other than the
batch, a malformed file - is one :class:`gen.core.config.SpnnError` naming the node, its
op type and what is supported.
"""

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from gen.core.config import SpnnError

__all__ = ["Layer", "Graph", "load_onnx", "graph_of", "SUPPORTED"]

SUPPORTED = ("Conv", "Gemm", "MatMul", "Relu", "MaxPool", "AveragePool", "GlobalAveragePool",
             "Flatten", "Reshape", "Add", "BatchNormalization", "QuantizeLinear",
             "DequantizeLinear", "Identity", "Dropout")


@dataclass
class Layer:
    """One operator of the graph.

    Attributes
    ----------
    name : str
        The ONNX node's name (or ``<op>_<index>`` when it has none).
    op : str
        ``conv``, ``gemm``, ``relu``, ``maxpool``, ``avgpool``, ``flatten`` or ``add``.
    inputs : list of str
        Tensor names read (one; two for ``add``).
    output : str
        The tensor name written.
    attrs : dict
        ``conv``: ``stride``, ``pad``, ``kernel``; pools: ``kernel``, ``stride``, ``pad``
        (``global`` for a global average); ``flatten``: nothing.
    w, b : numpy.ndarray or None
        ``conv``: ``w`` ``(Oc, Ic, kh, kw)``; ``gemm``: ``w`` ``(out, in)`` (``y = x w^T +
        b``); float64.
    """

    name: str
    op: str
    inputs: list
    output: str
    attrs: dict = field(default_factory=dict)
    w: np.ndarray | None = None
    b: np.ndarray | None = None


@dataclass
class Graph:
    """The layers in execution order; ``input``: the model input's name and its shape
    without the batch axis; ``output``: the output tensor's name; ``hints``: scales of
    quantised activations (``QuantizeLinear``), by tensor name."""

    layers: list
    input: str
    input_shape: tuple
    output: str
    hints: dict = field(default_factory=dict)


def _attrs(node):
    import onnx
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _where(node, index):
    return f"node {node.name or f'#{index}'!r} ({node.op_type})"


def _read(path: Path, flag: str):
    import onnx
    try:
        model = onnx.load(str(path))
    except FileNotFoundError:
        raise SpnnError(f"{flag} {path}: no such file") from None
    except Exception as exc:          # the protobuf parser's errors have no common type
        raise SpnnError(f"{flag} {path}: not an ONNX model "
                        f"({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"
                        ) from None
    try:
        onnx.checker.check_model(model)
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SpnnError(f"{flag} {path}: not a valid ONNX model ({first})") from None
    return model


def _input_shape(graph, inits, flag, path):
    inputs = [i for i in graph.input if i.name not in inits]
    if len(inputs) != 1:
        raise SpnnError(f"{flag} {path}: the model must have one input, not "
                        f"{len(inputs)} ({', '.join(i.name for i in inputs)})")
    dims = inputs[0].type.tensor_type.shape.dim
    shape = []
    for k, d in enumerate(dims):
        if d.HasField("dim_value"):
            shape.append(int(d.dim_value))
        elif k == 0:
            shape.append(None)                      # the batch axis may be dynamic
        else:
            raise SpnnError(f"{flag} {path}: input {inputs[0].name!r} has a dynamic axis "
                            f"{k} ({d.dim_param or '?'}); only the batch axis may be dynamic")
    if len(shape) < 2:
        raise SpnnError(f"{flag} {path}: input {inputs[0].name!r} must have a batch axis "
                        f"and at least one more, not shape {shape}")
    return inputs[0].name, tuple(shape[1:])


def load_onnx(path, flag: str = "--model") -> Graph:
    """The layer graph of the ONNX file ``path`` (module docstring); errors name ``flag``."""
    path = Path(path)
    return graph_of(_read(path, flag), flag, path)


def graph_of(model, flag: str = "model", path="<memory>") -> Graph:
    """The layer graph of a checked ``onnx.ModelProto`` (errors name ``flag`` and
    ``path``)."""
    from onnx import numpy_helper
    g = model.graph
    inits = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in g.initializer}
    raw = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    name, shape = _input_shape(g, inits, flag, path)
    if len(g.output) != 1:
        raise SpnnError(f"{flag} {path}: the model must have one output, not {len(g.output)}")
    state = _State(inits, raw, flag, path)
    for index, node in enumerate(g.node):
        state.add(node, index)
    out = state.alias.get(g.output[0].name, g.output[0].name)
    return Graph(state.layers, name, shape, out, state.hints)


class _State:
    """The layers built so far, the tensors renamed by folded operators, constants."""

    def __init__(self, inits, raw, flag, path):
        self.inits, self.raw, self.flag, self.path = inits, raw, flag, path
        self.layers, self.alias, self.hints, self.producer = [], {}, {}, {}

    def err(self, node, index, msg):
        return SpnnError(f"{self.flag} {self.path}: {_where(node, index)}: {msg}")

    def src(self, name):
        return self.alias.get(name, name)

    def const(self, node, index, name, what):
        if name not in self.inits:
            raise self.err(node, index, f"{what} must be a constant (an initialiser)")
        return self.inits[name]

    def emit(self, layer):
        self.layers.append(layer)
        self.producer[layer.output] = layer

    def add(self, node, index):
        op = node.op_type
        handler = getattr(self, f"_op_{op}", None)
        if node.domain not in ("", "ai.onnx") or handler is None:
            raise self.err(node, index, f"operator {op} is not supported; supported: "
                           f"{', '.join(SUPPORTED)}")
        handler(node, index, _attrs(node), node.name or f"{op.lower()}_{index}")

    # --- operators -------------------------------------------------------------------
    def _op_Conv(self, node, index, a, name):
        if a.get("group", 1) != 1:
            raise self.err(node, index, f"group {a['group']}: only group 1 is supported")
        if any(d != 1 for d in a.get("dilations", [1, 1])):
            raise self.err(node, index, f"dilations {list(a['dilations'])}: only 1 is supported")
        if a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
            raise self.err(node, index, "auto_pad is not supported; give pads")
        w = self.const(node, index, node.input[1], "the weight")
        if w.ndim != 4:
            raise self.err(node, index, f"weights of shape {w.shape}: only 2-D convolutions "
                           "(Oc, Ic, kh, kw) are supported")
        strides = list(a.get("strides", [1, 1]))
        pads = list(a.get("pads", [0, 0, 0, 0]))
        if len(set(strides)) != 1:
            raise self.err(node, index, f"strides {strides}: the array needs equal strides")
        if len(set(pads)) != 1:
            raise self.err(node, index, f"pads {pads}: the array needs equal padding on "
                           "every side")
        b = self.const(node, index, node.input[2], "the bias") if len(node.input) > 2 and \
            node.input[2] else None
        self.emit(Layer(name, "conv", [self.src(node.input[0])], node.output[0],
                        {"stride": strides[0], "pad": pads[0], "kernel": list(w.shape[2:])},
                        w, b))

    def _op_Gemm(self, node, index, a, name):
        if a.get("transA", 0):
            raise self.err(node, index, "transA = 1 is not supported")
        w = self.const(node, index, node.input[1], "B (the weights)") * a.get("alpha", 1.0)
        w = w if a.get("transB", 0) else w.T
        b = None
        if len(node.input) > 2 and node.input[2]:
            b = np.broadcast_to(self.const(node, index, node.input[2], "C (the bias)")
                                * a.get("beta", 1.0), (w.shape[0],)).copy()
        self.emit(Layer(name, "gemm", [self.src(node.input[0])], node.output[0], {}, w, b))

    def _op_MatMul(self, node, index, a, name):
        w = self.const(node, index, node.input[1], "the second operand (the weights)")
        if w.ndim != 2:
            raise self.err(node, index, f"weights of shape {w.shape}: only 2-D is supported")
        self.emit(Layer(name, "gemm", [self.src(node.input[0])], node.output[0], {}, w.T, None))

    def _op_Add(self, node, index, a, name):
        x, y = node.input
        if y in self.inits or x in self.inits:
            tensor, bias = (x, y) if y in self.inits else (y, x)
            prev = self.producer.get(self.src(tensor))
            if prev is None or prev.op not in ("gemm", "conv"):
                raise self.err(node, index, "adding a constant is supported only as the bias "
                               "of a Gemm/MatMul or Conv")
            c = self.inits[bias].reshape(-1)
            n = prev.w.shape[0]
            if c.size not in (1, n):
                raise self.err(node, index, f"a bias of {c.size} values for {n} outputs")
            prev.b = (prev.b if prev.b is not None else 0) + np.broadcast_to(c, (n,))
            self.alias[node.output[0]] = prev.output
            return
        self.emit(Layer(name, "add", [self.src(x), self.src(y)], node.output[0]))

    def _op_Relu(self, node, index, a, name):
        self.emit(Layer(name, "relu", [self.src(node.input[0])], node.output[0]))

    def _pool(self, node, index, a, name, op):
        if a.get("ceil_mode", 0):
            raise self.err(node, index, "ceil_mode = 1 is not supported")
        if any(d != 1 for d in a.get("dilations", [1, 1])):
            raise self.err(node, index, "dilations other than 1 are not supported")
        kernel = list(a["kernel_shape"])
        strides = list(a.get("strides", [1] * len(kernel)))
        pads = list(a.get("pads", [0] * 2 * len(kernel)))
        if len(kernel) != 2 or len(set(pads)) != 1:
            raise self.err(node, index, f"kernel {kernel}, pads {pads}: 2-D pooling with "
                           "equal padding on every side is supported")
        attrs = {"kernel": kernel, "stride": strides, "pad": pads[0]}
        if op == "avgpool":
            attrs["count_include_pad"] = int(a.get("count_include_pad", 0))
        self.emit(Layer(name, op, [self.src(node.input[0])], node.output[0], attrs))

    def _op_MaxPool(self, node, index, a, name):
        if len(node.output) > 1 and node.output[1]:
            raise self.err(node, index, "the Indices output is not supported")
        self._pool(node, index, a, name, "maxpool")

    def _op_AveragePool(self, node, index, a, name):
        self._pool(node, index, a, name, "avgpool")

    def _op_GlobalAveragePool(self, node, index, a, name):
        self.emit(Layer(name, "avgpool", [self.src(node.input[0])], node.output[0],
                        {"global": True}))

    def _op_Flatten(self, node, index, a, name):
        if a.get("axis", 1) != 1:
            raise self.err(node, index, f"axis {a['axis']}: only axis 1 is supported")
        self.emit(Layer(name, "flatten", [self.src(node.input[0])], node.output[0]))

    def _op_Reshape(self, node, index, a, name):
        shape = self.const(node, index, node.input[1], "the shape").astype(np.int64).tolist()
        if len(shape) != 2 or shape[1] != -1 and shape[0] not in (0, -1, 1):
            raise self.err(node, index, f"shape {shape}: only flattening to (batch, -1) is "
                           "supported")
        self.emit(Layer(name, "flatten", [self.src(node.input[0])], node.output[0]))

    def _op_BatchNormalization(self, node, index, a, name):
        prev = self.producer.get(self.src(node.input[0]))
        if prev is None or prev.op != "conv":
            raise self.err(node, index, "BatchNormalization is supported only right after a "
                           "Conv (it is folded into the convolution)")
        scale, bias, mean, var = (self.const(node, index, n, what) for n, what in zip(
            node.input[1:5], ("scale", "B", "mean", "var")))
        k = scale / np.sqrt(var + a.get("epsilon", 1e-5))
        prev.w = prev.w * k[:, None, None, None]
        prev.b = ((prev.b if prev.b is not None else 0) - mean) * k + bias
        self.alias[node.output[0]] = prev.output

    def _op_QuantizeLinear(self, node, index, a, name):
        x = node.input[0]
        if x in self.inits:                  # a weight quantised in the graph
            scale = self.const(node, index, node.input[1], "the scale")
            zp = self.raw[node.input[2]] if len(node.input) > 2 and node.input[2] else \
                np.zeros((), np.uint8)
            info = np.iinfo(zp.dtype)
            shape = [1] * self.inits[x].ndim
            if np.ndim(scale) == 1 and len(shape) > 1:
                shape[a.get("axis", 1)] = -1
            q = np.rint(self.inits[x] / np.reshape(scale, shape or [1])) + \
                np.reshape(zp.astype(np.float64), shape or [1])
            self.raw[node.output[0]] = np.clip(q, info.min, info.max).astype(zp.dtype)
            self.inits[node.output[0]] = self.raw[node.output[0]].astype(np.float64)
            return
        scale = self.const(node, index, node.input[1], "the scale")
        self.hints[self.src(x)] = float(np.max(scale))
        self.alias[node.output[0]] = self.src(x)

    def _op_DequantizeLinear(self, node, index, a, name):
        x = node.input[0]
        scale = self.const(node, index, node.input[1], "the scale")
        if x in self.raw and x not in self.alias:           # a weight initialiser
            zero = (self.raw[node.input[2]].astype(np.float64) if len(node.input) > 2
                    and node.input[2] else 0.0)
            axis = a.get("axis", 1)
            q = self.raw[x].astype(np.float64)
            if np.ndim(scale) == 1 and q.ndim > 1:
                shape = [1] * q.ndim
                shape[axis] = -1
                scale, zero = scale.reshape(shape), np.reshape(zero, shape) if np.ndim(zero) \
                    else zero
            self.inits[node.output[0]] = (q - zero) * scale
            self.raw[node.output[0]] = self.inits[node.output[0]]
            return
        self.alias[node.output[0]] = self.src(x)

    def _op_Identity(self, node, index, a, name):
        self.alias[node.output[0]] = self.src(node.input[0])

    _op_Dropout = _op_Identity
