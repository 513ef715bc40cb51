# SPDX-License-Identifier: Apache-2.0
"""An ONNX model as spnn's layer graph.

:func:`load_onnx` reads a model with the ``onnx`` package (protobuf, no pickle), checks it
(``onnx.checker``), and turns its nodes, in their topological order, into :class:`Layer` s
of the operators spnn maps (:data:`SUPPORTED`).  On the way it folds what the hardware
never sees as an operator: ``BatchNormalization`` into the preceding ``Conv``, a bias
``Add`` into the preceding ``Gemm``/``MatMul``, ``DequantizeLinear`` of a weight
initialiser into float weights, ``QuantizeLinear``/``DequantizeLinear`` pairs on
activations into the identity (their scale is kept as a hint), ``Identity`` and
``Dropout``.

``LSTM`` (forward, one direction, default activations; :meth:`_State._op_LSTM`) becomes an
``lstm`` layer with PyTorch's gate order.  Its sequences are sequence-first in ONNX (``X``
``[T, N, X]``, ``Y`` ``[T, 1, N, H]``, ``Y_h`` ``[1, N, H]``) while every layer here is
batch first, so ``Transpose`` and ``Squeeze`` of the LSTM's size-1 axis only relabel axes
(each ONNX tensor keeps the list of the batch-first tensor's axes it shows, ``None`` for an
added size-1 axis; only ``LSTM``, ``Transpose``, ``Squeeze`` and ``Gather`` read a tensor
whose axes are not the identity); ``Gather`` of one step becomes a host ``select``.  The
exporter's zero initial state (``Shape`` -> ``Gather`` -> ``Unsqueeze`` -> ``Concat`` ->
``ConstantOfShape``, sized by the batch) and ``Constant`` nodes are evaluated at import.

Anything else - an unsupported operator, an attribute value the blocks do
not implement (groups, dilation, asymmetric padding, ...), a dynamic axis other than the
batch, a malformed file - is one :class:`gen.core.config.SpnnError` naming the node, its
op type and what is supported.
"""

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from gen.core.config import SpnnError

__all__ = ["Layer", "Graph", "load_onnx", "graph_of", "SUPPORTED"]

SUPPORTED = ("Conv", "Gemm", "MatMul", "LSTM", "Relu", "MaxPool", "AveragePool",
             "GlobalAveragePool", "Flatten", "Reshape", "Add", "BatchNormalization",
             "QuantizeLinear", "DequantizeLinear", "Identity", "Dropout", "Transpose", "Squeeze",
             "Gather", "Constant", "Shape", "Unsqueeze", "Concat", "ConstantOfShape")

# ONNX LSTM gate blocks are i, o, f, c; the engine's (PyTorch's) are i, f, g (= c), o.
ONNX_TO_IFGO = (0, 2, 3, 1)
# operators that read tensors whose axes are relabelled (sequence-first views)
_VIEW_OPS = ("LSTM", "Transpose", "Squeeze", "Gather", "Shape", "Identity", "Dropout",
             "QuantizeLinear", "DequantizeLinear")
# operators that evaluate shapes and constants at import
_SHAPE_OPS = ("Gather", "Unsqueeze", "Concat", "Squeeze", "Transpose", "ConstantOfShape")
# rank of the (batch-first) tensor a layer writes, by op; others keep their input's rank
_RANK = {"conv": 4, "gemm": 2, "flatten": 2, "maxpool": 4, "avgpool": 4, "lstm": 3}


@dataclass
class Layer:
    """One operator of the graph.

    Attributes
    ----------
    name : str
        The ONNX node's name (or ``<op>_<index>`` when it has none).
    op : str
        ``conv``, ``gemm``, ``lstm``, ``relu``, ``maxpool``, ``avgpool``, ``flatten``,
        ``add`` or ``select``.
    inputs : list of str
        Tensor names read (one; two for ``add``).
    output : str
        The tensor name written.
    attrs : dict
        ``conv``: ``stride``, ``pad``, ``kernel``; pools: ``kernel``, ``stride``, ``pad``
        (``global`` for a global average); ``flatten``: nothing; ``lstm``: ``hidden`` H,
        ``inputs`` X (input ``(batch, T, X)``, output every step's ``h``, ``(batch, T,
        H)``); ``select``: ``axis`` (of the batch-first input, never 0) and ``index`` (one
        position along it, the axis dropped).
    w, b : numpy.ndarray or None
        ``conv``: ``w`` ``(Oc, Ic, kh, kw)``; ``gemm``: ``w`` ``(out, in)`` (``y = x w^T +
        b``); ``lstm``: ``w`` = ``[W_ih W_hh]`` ``(4H, X + H)`` and ``b`` = ``b_ih + b_hh``
        ``(4H,)`` in PyTorch's gate order i, f, g, o; float64.
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
    state.prepare(model, name, shape)
    for index, node in enumerate(g.node):
        state.add(node, index)
    state.check_output(g.output[0].name)
    out = state.alias.get(g.output[0].name, g.output[0].name)
    return Graph(state.layers, name, shape, out, state.hints)


def _text(value):
    return value.decode() if isinstance(value, bytes) else str(value)


class _State:
    """The layers built so far, the tensors renamed by folded operators, constants."""

    def __init__(self, inits, raw, flag, path):
        self.inits, self.raw, self.flag, self.path = inits, raw, flag, path
        self.layers, self.alias, self.hints, self.producer = [], {}, {}, {}
        self.axes = {}       # ONNX tensor -> the batch-first tensor's axes it shows (None:
        #                      an added size-1 axis), when not the identity
        self.sym = {}        # shape values (object arrays; None = the batch size)
        self.fills = {}      # ConstantOfShape of a batch-sized shape -> its fill value
        self.refused = {}    # tensors no operator may read -> why
        self.ranks = {}      # batch-first tensor -> rank
        self.shapes = None   # ONNX tensor -> inferred shape (:meth:`shape`)
        self.used = set()    # tensors some node or the graph output reads

    def prepare(self, model, name, shape):
        """Ranks and readers; the ONNX shapes are inferred on first use (:meth:`shape`)."""
        g = model.graph
        self.model, self.input_name = model, name
        self.ranks[name] = 1 + len(shape)
        self.used = {n for node in g.node for n in node.input if n} | {o.name for o in g.output}

    def shape(self, name):
        """The inferred ONNX shape of ``name`` (None: the batch axis, -1: unknown), or None
        (``onnx.shape_inference``, run once, only for models that need it)."""
        if self.shapes is None:
            import onnx
            self.shapes = {}
            g = self.model.graph
            try:
                g = onnx.shape_inference.infer_shapes(self.model).graph
            except Exception:                      # noqa: BLE001 - shapes are only a help
                pass
            batch = next((d.dim_param for i in g.input if i.name == self.input_name
                          for d in i.type.tensor_type.shape.dim[:1]), None)
            for v in list(g.input) + list(g.value_info) + list(g.output):
                if v.type.tensor_type.HasField("shape"):
                    self.shapes[v.name] = [int(d.dim_value) if d.HasField("dim_value") else
                                           None if batch and d.dim_param == batch else -1
                                           for d in v.type.tensor_type.shape.dim]
        return self.shapes.get(name)

    def check_output(self, name):
        """The model output must be a batch-first activation."""
        where = f"{self.flag} {self.path}: the output {name!r}"
        if name in self.refused:
            raise SpnnError(f"{where} {self.refused[name]}")
        if name in self.inits or name in self.sym or name in self.fills:
            raise SpnnError(f"{where} is a constant; the output must depend on the input")
        if name in self.axes:
            raise SpnnError(f"{where} is not batch first (it is sequence first or keeps the "
                            f"LSTM's direction axis); squeeze and transpose it to (batch, ...)")

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
        rank = _RANK.get(layer.op, self.ranks.get(layer.inputs[0], 0))
        self.ranks[layer.output] = rank - 1 if layer.op == "select" else rank

    def add(self, node, index):
        op = node.op_type
        handler = getattr(self, f"_op_{op}", None)
        if node.domain not in ("", "ai.onnx") or handler is None:
            raise self.err(node, index, f"operator {op} is not supported; supported: "
                           f"{', '.join(SUPPORTED)}")
        self._check_inputs(node, index)
        handler(node, index, _attrs(node), node.name or f"{op.lower()}_{index}")

    def _check_inputs(self, node, index):
        """Refused tensors, sequence-first views, shape values and batch-sized fills may
        be read only by the operators that understand them."""
        op = node.op_type
        for n in (n for n in node.input if n):
            if n in self.refused:
                raise self.err(node, index, f"input {n!r} {self.refused[n]}")
            if n in self.axes and op not in _VIEW_OPS:
                raise self.err(node, index, f"input {n!r} is transposed or has an added "
                               f"size-1 axis (it shows the axes {self.axes[n]} of a "
                               f"batch-first tensor); only LSTM, Transpose, Squeeze and "
                               f"Gather read such tensors")
            if n in self.sym and op not in _SHAPE_OPS:
                raise self.err(node, index, f"input {n!r} is a shape computed from the "
                               f"batch size; only Gather, Unsqueeze, Concat, Squeeze and "
                               f"ConstantOfShape read it")
            if n in self.fills and op != "LSTM":
                raise self.err(node, index, f"input {n!r} (ConstantOfShape sized by the "
                               f"batch) is supported only as an LSTM's zero initial state")

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
        self._view(node.output[0], x, self.axes.get(x))

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
        self._view(node.output[0], x, self.axes.get(x))

    def _op_Identity(self, node, index, a, name):
        self.alias[node.output[0]] = self.src(node.input[0])
        if node.input[0] in self.axes:
            self.axes[node.output[0]] = self.axes[node.input[0]]

    _op_Dropout = _op_Identity

    # --- sequences: views, steps, the LSTM, shapes and constants --------------------------
    def _view(self, out, x, axes):
        """``out`` is ``x``'s batch-first tensor shown with ``axes`` (None: the identity)."""
        self.alias[out] = self.src(x)
        if axes is None or axes == list(range(len(axes))):
            self.axes.pop(out, None)
        else:
            self.axes[out] = list(axes)

    def _axes(self, name):
        """The batch-first axes the ONNX tensor ``name`` shows."""
        return self.axes.get(name, list(range(self.ranks.get(self.src(name), 0))))

    def _value(self, name):
        """A constant's or a shape value's array, or None for an activation."""
        if name in self.sym:
            return self.sym[name]
        return self.raw.get(name)

    def _store(self, name, arr):
        arr = np.asarray(arr)
        if arr.dtype == object and any(v is None for v in arr.ravel()):
            self.sym[name] = arr
            return
        if arr.dtype == object:
            arr = arr.astype(np.int64)
        self.raw[name] = arr
        self.inits[name] = arr.astype(np.float64)

    def _fold(self, node, fn, names):
        """Evaluate ``fn`` on constant / shape inputs at import; False for activations."""
        vals = [self._value(n) for n in names]
        if any(v is None for v in vals):
            return False
        self._store(node.output[0], fn(*vals))
        return True

    def _axes_arg(self, node, index, a):
        """The ``axes`` of Squeeze / Unsqueeze: input 2 (opset 13+) or the attribute."""
        if len(node.input) > 1 and node.input[1]:
            return [int(v) for v in np.ravel(self.const(node, index, node.input[1], "axes"))]
        return [int(v) for v in a["axes"]] if "axes" in a else None

    def _op_Constant(self, node, index, a, name):
        from onnx import numpy_helper
        if "value" in a:
            value = numpy_helper.to_array(a["value"])
        elif any(k in a for k in ("value_float", "value_int", "value_floats", "value_ints")):
            value = np.asarray(next(a[k] for k in ("value_float", "value_int", "value_floats",
                                                   "value_ints") if k in a))
        else:
            raise self.err(node, index, f"attribute {sorted(a)[0] if a else '?'}: only "
                           "numeric values are supported")
        self._store(node.output[0], value)

    def _op_Shape(self, node, index, a, name):
        shape = self.shape(node.input[0])
        if shape is None or -1 in shape:
            raise self.err(node, index, f"the shape of {node.input[0]!r} is not known at "
                           "import; only the batch axis may be dynamic")
        shape = shape[a.get("start", 0):a.get("end", len(shape))]
        self._store(node.output[0], np.array(shape, dtype=object))

    def _op_Unsqueeze(self, node, index, a, name):
        axes = self._axes_arg(node, index, a)
        if axes is None or not self._fold(node, lambda v: np.expand_dims(
                v, tuple(k % (np.ndim(v) + len(axes)) for k in axes)), node.input[:1]):
            raise self.err(node, index, "only constants and shapes can be unsqueezed, with "
                           "constant axes")

    def _op_Concat(self, node, index, a, name):
        def cat(*vs):
            obj = any(np.asarray(v).dtype == object for v in vs)
            return np.concatenate([np.asarray(v, dtype=object) if obj else np.asarray(v)
                                   for v in vs], axis=a.get("axis", 0))
        if not self._fold(node, cat, node.input):
            raise self.err(node, index, "only constants and shapes can be concatenated")

    def _op_ConstantOfShape(self, node, index, a, name):
        from onnx import numpy_helper
        shape = self._value(node.input[0])
        if shape is None:
            raise self.err(node, index, "the shape must be a constant or computed from shapes")
        value = numpy_helper.to_array(a["value"]).ravel()[0] if "value" in a else np.float32(0)
        if any(v is None for v in np.ravel(shape)):
            self.fills[node.output[0]] = float(value)
        else:
            self._store(node.output[0], np.full([int(v) for v in np.ravel(shape)], value))

    def _op_Transpose(self, node, index, a, name):
        x = node.input[0]
        perm = [int(p) for p in a["perm"]] if "perm" in a else None
        if self._fold(node, lambda v: np.transpose(v, perm), [x]):
            return
        axes = self._axes(x)
        perm = list(range(len(axes) - 1, -1, -1)) if perm is None else perm
        if sorted(perm) != list(range(len(axes))):
            raise self.err(node, index, f"perm {perm} for a tensor of rank {len(axes)}")
        self._view(node.output[0], x, [axes[p] for p in perm])

    def _op_Squeeze(self, node, index, a, name):
        x = node.input[0]
        sq = self._axes_arg(node, index, a)
        if sq is None:
            raise self.err(node, index, "Squeeze without axes is not supported; give axes")
        if self._fold(node, lambda v: np.squeeze(v, tuple(sq)), [x]):
            return
        axes = self._axes(x)
        sq = [k % len(axes) for k in sq]
        if any(axes[k] is not None for k in sq):
            raise self.err(node, index, f"axes {sq}: only the size-1 axis an LSTM adds "
                           "(num_directions) can be squeezed")
        self._view(node.output[0], x, [v for k, v in enumerate(axes) if k not in sq])

    def _op_Gather(self, node, index, a, name):
        x, idx = node.input[0], self._value(node.input[1])
        if idx is None:
            raise self.err(node, index, "the indices must be a constant")
        if self._fold(node, lambda v, i: np.take(v, np.asarray(i).astype(np.int64),
                                                 axis=a.get("axis", 0)), node.input[:2]):
            return
        if np.ndim(idx) != 0:
            raise self.err(node, index, f"indices of shape {list(np.shape(idx))}: only one "
                           "(scalar) index is supported")
        axes = self._axes(x)
        axis, i = a.get("axis", 0) % len(axes), int(idx)
        k, rest = axes[axis], axes[:axis] + axes[axis + 1:]
        if k == 0:
            raise self.err(node, index, "gathering along the batch axis is not supported")
        size = (self.shape(x) or [None] * len(axes))[axis] if k is not None else 1
        if size and size > 0 and not -size <= i < size:
            raise self.err(node, index, f"index {i} out of range for an axis of {size}")
        if k is None:
            self._view(node.output[0], x, rest)
            return
        self.emit(Layer(name, "select", [self.src(x)], node.output[0], {"axis": k, "index": i}))
        rest = [j if j is None or j < k else j - 1 for j in rest]
        if rest != list(range(len(rest))):
            self.axes[node.output[0]] = rest

    def _op_LSTM(self, node, index, a, name):
        """One forward LSTM layer -> ``lstm`` (module docstring); every attribute or input
        the engine does not implement is an error naming it."""
        x, wn, rn, bn, lens, h0, c0, peep = (list(node.input) + [""] * 8)[:8]
        self._lstm_checks(node, index, a, lens, h0, c0, peep)
        w = self.const(node, index, wn, "W (the input weights)")
        r = self.const(node, index, rn, "R (the recurrent weights)")
        hid = int(a.get("hidden_size", r.shape[-1]))
        if r.shape != (1, 4 * hid, hid) or w.ndim != 3 or w.shape[:2] != (1, 4 * hid):
            raise self.err(node, index, f"W {list(w.shape)}, R {list(r.shape)}: expected "
                           f"(1, 4 * hidden_size, input_size) and (1, {4 * hid}, {hid})")
        b = self.const(node, index, bn, "B (the biases)") if bn else np.zeros((1, 8 * hid))
        if b.shape != (1, 8 * hid):
            raise self.err(node, index, f"B {list(b.shape)}: expected (1, {8 * hid})")
        if x in self.inits or x in self.sym or x in self.fills:
            raise self.err(node, index, "the input X must be an activation, not a constant")
        if self._axes(x) != [1, 0, 2] or (self.shape(x) or [-1])[-1] not in (-1, w.shape[2]):
            raise self.err(node, index, f"input {x!r} must be a batch-first (batch, T, "
                           f"{w.shape[2]}) tensor transposed to (T, batch, X)")

        def ifgo(m):
            return m.reshape(4, hid, -1)[list(ONNX_TO_IFGO)].reshape(4 * hid, -1)
        y = node.output[0] if node.output and node.output[0] else f"{name}/Y"
        self.emit(Layer(name, "lstm", [self.src(x)], y, {"hidden": hid, "inputs": w.shape[2]},
                        np.hstack([ifgo(w[0]), ifgo(r[0])]),
                        ifgo(b[0, :4 * hid] + b[0, 4 * hid:]).ravel()))
        self.axes[y] = [1, None, 0, 2]                     # Y: (T, 1, batch, H)
        outs = list(node.output) + ["", ""]
        if outs[1] and outs[1] in self.used:
            self.emit(Layer(f"{name}/Y_h", "select", [y], outs[1], {"axis": 1, "index": -1}))
            self.axes[outs[1]] = [None, 0, 1]               # Y_h: (1, batch, H)
        if outs[2]:
            self.refused[outs[2]] = "is the LSTM's cell state Y_c, which the engine does " \
                                    "not output (only h)"

    def _lstm_checks(self, node, index, a, lens, h0, c0, peep):
        direction = _text(a.get("direction", "forward"))
        if direction != "forward":
            raise self.err(node, index, f"direction {direction}: only forward is supported")
        acts = [_text(v) for v in a.get("activations", [])] or ["Sigmoid", "Tanh", "Tanh"]
        if acts != ["Sigmoid", "Tanh", "Tanh"]:
            raise self.err(node, index, f"activations {acts}: only the default Sigmoid, "
                           "Tanh, Tanh are supported")
        for key in ("activation_alpha", "activation_beta"):
            if key in a:
                raise self.err(node, index, f"{key} is not supported (the default "
                               "activations take no parameters)")
        if "clip" in a:
            raise self.err(node, index, f"clip {a['clip']:g}: cell clipping is not supported")
        if a.get("input_forget", 0):
            raise self.err(node, index, f"input_forget {a['input_forget']}: only 0 "
                           "(separate input and forget gates) is supported")
        if a.get("layout", 0):
            raise self.err(node, index, f"layout {a['layout']}: only 0 (sequence first, "
                           "as PyTorch exports; onnxruntime has no layout 1 either)")
        if lens:
            raise self.err(node, index, "sequence_lens is not supported (every sequence "
                           "runs all its steps)")
        if peep:
            raise self.err(node, index, "peepholes (input P) are not supported")
        for n, what in ((h0, "initial_h"), (c0, "initial_c")):
            zero = self.fills.get(n) == 0.0 or (n in self.raw and not np.any(self.raw[n]))
            if n and not zero:
                raise self.err(node, index, f"{what} must be zero (absent, or a constant or "
                               "ConstantOfShape of 0): the engine starts every sequence "
                               "from h = c = 0")
