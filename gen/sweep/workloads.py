# SPDX-License-Identifier: Apache-2.0
"""The workloads of a sweep: what every design point runs.

A workload is one of three kinds, after the block it feeds:

* ``matrix`` (``spmv``, ``fc``): a weight matrix and its activations.  Bundled: ``seed``
  (the seed matrix, 1024 x 153, 18,331 non-zeros at uniformly random positions, numpy seed
  0, the matrix of ``scripts/bench_spmv.py``) and ``seed-skewed`` (the same size and
  density, row weights drawn from a lognormal, seed 1).  Or ``{generate: {rows, cols,
  density, skew, seed}}``, ``{weights: W.npy, x: x.npy}`` (``x`` optional) or
  ``{onnx: model.onnx}`` (every Gemm/MatMul weight of the model, quantised to 8-bit codes).
* ``layer`` (``conv``): a convolution shape.  Bundled: the networks of
  :data:`gen.conv.networks.NETWORKS` (``vgg16``, ``resnet18``, ``alexnet``; one workload
  per layer, ``{network: vgg16, layers: [conv1_1, ...]}`` for some), ``{layer: {oc, ic, h,
  w, k, stride, pad, batch}}`` or ``{onnx: model.onnx}`` (every Conv of the model).
* ``samples`` (``pwl``): ``{samples: N, seed: S}`` random input codes, the bundled
  ``all-codes`` (every input code once) or ``{input: x.npy}``.

Integer arrays are codes; float arrays are quantised (round half up, saturating) to the
point's format.  Files are read once, by the process that reads the spec (``.npy`` with
``allow_pickle=False``); their content travels to the workers with the tasks, so workers on
other machines need no shared files.  Generated workloads travel as their parameters and are
generated where they run.  A workload's :attr:`Workload.digest` hashes its content (never a
path), so results keys are the same on every machine.
"""

import hashlib
import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from gen.core.config import SpnnError
from gen.core.runutil import load_npy

__all__ = ["Workload", "KINDS", "BUNDLED", "parse_workloads", "materialise", "seed_matrix"]

KINDS = {"spmv": "matrix", "fc": "matrix", "conv": "layer", "pwl": "samples",
         "lstm": "lstm"}
BUNDLED = {"matrix": ("seed", "seed-skewed"), "layer": ("vgg16", "resnet18", "alexnet"),
           "samples": ("all-codes",), "lstm": ("ese", "small")}
_ENTRY_KEYS = {
    "matrix": ("name", "generate", "weights", "x", "onnx", "layers"),
    "layer": ("name", "network", "layers", "layer", "onnx"),
    "samples": ("name", "samples", "seed", "input"),
    "lstm": ("name", "generate"),
}
# Random pruned LSTM layers: ``inputs`` X, ``hidden`` H, weight ``density``, ``steps`` of
# one input sequence, ``seed``.  Bundled: ``ese`` (seed 000's layer: X 153, H 1024, 11.7 %)
# and ``small``.
_LSTM_KEYS = ("inputs", "hidden", "density", "steps", "seed")
_LSTM_BUNDLED = {"ese": {"inputs": 153, "hidden": 1024, "density": 0.117, "steps": 4,
                         "seed": 0},
                 "small": {"inputs": 16, "hidden": 32, "density": 0.2, "steps": 4, "seed": 0}}
_LAYER_KEYS = ("oc", "ic", "h", "w", "k", "stride", "pad", "batch")
_GENERATE_KEYS = ("rows", "cols", "density", "skew", "seed")


@dataclass
class Workload:
    """One workload of a sweep.

    Attributes
    ----------
    name : str
        Unique in the sweep; the ``workload`` column of ``results.csv``.
    kind : str
        ``matrix``, ``layer``, ``samples`` or ``lstm``.
    params : dict
        JSON-able description (generator parameters, layer shape, sample count).
    arrays : dict
        Arrays read from files (``w``, ``x``), empty for generated workloads.
    digest : str
        SHA-256 of the kind, the parameters and the arrays' dtypes, shapes and bytes.
    """

    name: str
    kind: str
    params: dict
    arrays: dict = field(default_factory=dict)
    digest: str = ""

    def __post_init__(self):
        h = hashlib.sha256(json.dumps([self.kind, self.params], sort_keys=True).encode())
        for key in sorted(self.arrays):
            arr = np.ascontiguousarray(self.arrays[key])
            h.update(f"{key}:{arr.dtype.str}:{arr.shape}".encode())
            h.update(arr.tobytes())
        self.digest = h.hexdigest()


def seed_matrix(rows, cols, density, seed, skew=False):
    """Weight codes (int8 values, never 0) with ``round(density * rows * cols)`` non-zeros and
    a dense activation vector (codes 1..2047 with random signs), from numpy seed ``seed``.

    ``skew``: row weights drawn from a lognormal (sigma 1), so a few rows hold many
    non-zeros and many rows few.  ``seed_matrix(1024, 153, 0.117, 0)`` is the seed matrix of
    ``scripts/bench_spmv.py`` (the same draws in the same order).
    """
    rng = np.random.default_rng(seed)
    nnz = round(density * rows * cols)
    w = np.zeros((rows, cols), dtype=np.int64)
    if not skew:
        pos = rng.choice(rows * cols, nnz, replace=False)
    else:
        weight = rng.lognormal(0.0, 1.0, rows)
        prob = np.repeat(weight / weight.sum(), cols) / cols
        prob = np.minimum(prob, prob.sum() / max(nnz, 1) * 50)  # keep rows below cols
        pos = rng.choice(rows * cols, nnz, replace=False, p=prob / prob.sum())
    w.ravel()[pos] = rng.choice(np.r_[-128:0, 1:128], nnz)
    x = rng.integers(1, 2048, cols) * rng.choice([-1, 1], cols)
    return w, x


_SEED = {"rows": 1024, "cols": 153, "density": 0.117, "skew": False, "seed": 0}


@lru_cache(maxsize=16)
def _generated(params_json: str):
    p = json.loads(params_json)
    return seed_matrix(p["rows"], p["cols"], p["density"], p["seed"], p["skew"])


def materialise(workload: Workload) -> dict:
    """The workload's data where a task runs: ``{"w", "x"}`` for a matrix (generated here
    from its parameters, cached per process), ``{"layer": ConvLayer}`` for a layer,
    ``{"x": codes or values}`` for samples (``None`` for random or all codes: the block
    draws them in its input format)."""
    p = workload.params
    if workload.kind == "matrix":
        if "generate" in p:
            w, x = _generated(json.dumps(p["generate"], sort_keys=True))
            return {"w": w, "x": x}
        return dict(workload.arrays)
    if workload.kind == "layer":
        from gen.conv import ConvLayer
        return {"layer": ConvLayer(p["oc"], p["ic"], p["h"], p["w"], p["k"], p["k"],
                                   p["stride"], p["pad"], p["batch"])}
    if workload.kind == "lstm":
        return _lstm_layer(json.dumps(p["generate"], sort_keys=True))
    return {"x": workload.arrays.get("x"), **p}


@lru_cache(maxsize=4)
def _lstm_layer(params_json: str) -> dict:
    """``{"layer": LstmFloat, "xs": (steps, inputs) real inputs in [-1, 1)}`` of a
    generated LSTM workload (weights and biases uniform in [-1, 1), pruned at random)."""
    from gen.lstm import LstmFloat
    p = json.loads(params_json)
    rng = np.random.default_rng(p["seed"])
    X, H = p["inputs"], p["hidden"]
    shape = (4 * H, X + H)
    w = np.where(rng.random(shape) < p["density"], rng.uniform(-1, 1, shape), 0.0)
    return {"layer": LstmFloat(w[:, :X], w[:, X:], rng.uniform(-1, 1, 4 * H)),
            "xs": rng.uniform(-1, 1, (p["steps"], X))}


# ----------------------------------------------------------------------------- parsing

def _err(where, msg):
    raise SpnnError(f"{where}: {msg}")


def _int(value, where, lo, hi=None):
    if isinstance(value, bool) or not isinstance(value, int) or value < lo or \
            (hi is not None and value > hi):
        allowed = f"between {lo} and {hi}" if hi is not None else f"at least {lo}"
        _err(where, f"must be an integer {allowed}, not {value!r}")
    return value


def dense_x(cols: int):
    """A dense activation vector of ``cols`` codes (1..2047, random signs, numpy seed 0)
    for a matrix given without one."""
    rng = np.random.default_rng(0)
    return rng.integers(1, 2048, cols) * rng.choice([-1, 1], cols)


def _file(value, where, root: Path) -> Path:
    if not isinstance(value, str) or not value.strip():
        _err(where, f"must name a file, not {value!r}")
    path = Path(value)
    return path if path.is_absolute() else root / path


def _npy(value, where, root):
    return load_npy(_file(value, where, root), where)


def _generate(spec, where):
    if not isinstance(spec, dict):
        _err(where, f"must be a mapping with keys {', '.join(_GENERATE_KEYS)}, not {spec!r}")
    unknown = sorted(set(spec) - set(_GENERATE_KEYS))
    if unknown:
        _err(f"{where}.{unknown[0]}", f"unknown key; allowed: {', '.join(_GENERATE_KEYS)}")
    p = dict(_SEED, **spec)
    _int(p["rows"], f"{where}.rows", 1, 65536)
    _int(p["cols"], f"{where}.cols", 1, 65536)
    _int(p["seed"], f"{where}.seed", 0)
    d = p["density"]
    if isinstance(d, bool) or not isinstance(d, (int, float)) or not 0 < d <= 1:
        _err(f"{where}.density", f"must be a number in (0, 1], not {d!r}")
    if not isinstance(p["skew"], bool):
        _err(f"{where}.skew", f"must be true or false, not {p['skew']!r}")
    p["density"] = float(d)
    return p


def _matrix(entry, where, root, name):
    if "generate" in entry:
        p = _generate(entry["generate"], f"{where}.generate")
        return [Workload(name or f"generated-{p['rows']}x{p['cols']}", "matrix",
                         {"generate": p})]
    if "onnx" in entry:
        return _onnx_gemms(entry, where, root)
    if "weights" not in entry:
        _err(where, "a matrix workload needs 'generate', 'weights' or 'onnx'")
    w = _npy(entry["weights"], f"{where}.weights", root)
    if w.ndim != 2 or not w.size:
        _err(f"{where}.weights", f"must be a non-empty 2-D matrix, not shape {w.shape}")
    if not np.all(np.isfinite(w)):
        _err(f"{where}.weights", "holds NaN or infinite values")
    arrays = {"w": w}
    if "x" in entry:
        x = _npy(entry["x"], f"{where}.x", root)
        if x.shape[0] != w.shape[1] or x.ndim not in (1, 2) or not np.all(np.isfinite(x)):
            _err(f"{where}.x", f"must hold one finite value per weight column ({w.shape[1]}), "
                 f"not shape {x.shape}")
        arrays["x"] = x
    else:
        arrays["x"] = dense_x(w.shape[1])
    return [Workload(name or Path(entry["weights"]).stem, "matrix", {"file": True}, arrays)]


def _onnx_graph(entry, where, root):
    from gen.model.graph import load_onnx
    return load_onnx(_file(entry["onnx"], f"{where}.onnx", root), f"{where}.onnx")


def _onnx_gemms(entry, where, root):
    from gen.core.fixed import quantise
    from gen.model.compile import choose_format
    graph = _onnx_graph(entry, where, root)
    stem = Path(entry["onnx"]).stem
    out = []
    for layer in graph.layers:
        if layer.op != "gemm":
            continue
        fmt = choose_format(float(np.max(np.abs(layer.w))) or 1.0, 8)
        w = quantise(layer.w, fmt)
        x = dense_x(w.shape[1])
        out.append(Workload(f"{stem}.{layer.name}", "matrix", {"file": True},
                            {"w": w, "x": x}))
    if not out:
        _err(f"{where}.onnx", f"{entry['onnx']!r} has no Gemm or MatMul layer")
    return out


def _layer_params(spec, where):
    if not isinstance(spec, dict):
        _err(where, f"must be a mapping with keys {', '.join(_LAYER_KEYS)}, not {spec!r}")
    unknown = sorted(set(spec) - set(_LAYER_KEYS))
    if unknown:
        _err(f"{where}.{unknown[0]}", f"unknown key; allowed: {', '.join(_LAYER_KEYS)}")
    missing = [k for k in ("oc", "ic", "h", "w", "k") if k not in spec]
    if missing:
        _err(where, f"needs {', '.join(missing)} (keys: {', '.join(_LAYER_KEYS)})")
    p = {"stride": 1, "pad": 0, "batch": 1, **spec}
    for key in _LAYER_KEYS:
        _int(p[key], f"{where}.{key}", 0 if key == "pad" else 1)
    from gen.conv import ConvLayer
    try:
        ConvLayer(p["oc"], p["ic"], p["h"], p["w"], p["k"], p["k"], p["stride"], p["pad"],
                  p["batch"])
    except ValueError as exc:
        _err(where, str(exc))
    return {k: p[k] for k in _LAYER_KEYS}


def _network(entry, where, prefix=None):
    from gen.conv.networks import NETWORKS
    net = entry["network"]
    if net not in NETWORKS:
        _err(f"{where}.network", f"must be one of {', '.join(NETWORKS)}, not {net!r}")
    layers = NETWORKS[net]
    names = [lay[0] for lay in layers]
    want = entry.get("layers", names)
    if not isinstance(want, list) or not want:
        _err(f"{where}.layers", f"must be a list of layer names of {net}, not {want!r}")
    for name in want:
        if name not in names:
            _err(f"{where}.layers", f"{net} has no layer {name!r}; layers: {', '.join(names)}")
    out = []
    for name, oc, ic, h, w, k, s, p in layers:
        if name in want:
            out.append(Workload(f"{prefix or net}.{name}", "layer",
                                {"oc": oc, "ic": ic, "h": h, "w": w, "k": k, "stride": s,
                                 "pad": p, "batch": 1}))
    return out


def _onnx_convs(entry, where, root):
    from gen.model.reference import run_float
    graph = _onnx_graph(entry, where, root)
    _, tensors = run_float(graph, np.zeros((1, *graph.input_shape)), keep=True)
    stem = Path(entry["onnx"]).stem
    out = []
    for layer in graph.layers:
        if layer.op != "conv":
            continue
        oc, ic, kh, kw = layer.w.shape
        if kh != kw:
            _err(f"{where}.onnx", f"layer {layer.name!r} has a {kh}x{kw} kernel; the sweep "
                 f"takes square kernels")
        _, _, h, w = tensors[layer.inputs[0]].shape
        out.append(Workload(f"{stem}.{layer.name}", "layer",
                            {"oc": int(oc), "ic": int(ic), "h": int(h), "w": int(w),
                             "k": int(kh), "stride": int(layer.attrs["stride"]),
                             "pad": int(layer.attrs["pad"]), "batch": 1}))
    if not out:
        _err(f"{where}.onnx", f"{entry['onnx']!r} has no Conv layer")
    return out


def _layer(entry, where, root, name):
    if "network" in entry:
        return _network(entry, where, name)
    if "onnx" in entry:
        return _onnx_convs(entry, where, root)
    if "layer" not in entry:
        _err(where, "a layer workload needs 'network', 'layer' or 'onnx'")
    p = _layer_params(entry["layer"], f"{where}.layer")
    return [Workload(name or "layer-{oc}x{ic}x{k}x{k}-{h}x{w}".format(**p), "layer", p)]


def _samples(entry, where, root, name):
    if "input" in entry:
        x = _npy(entry["input"], f"{where}.input", root)
        if not x.size or not np.all(np.isfinite(x)):
            _err(f"{where}.input", "must be a non-empty array of finite values")
        return [Workload(name or Path(entry["input"]).stem, "samples", {"file": True},
                         {"x": x.ravel()})]
    if "samples" not in entry:
        _err(where, "a samples workload needs 'samples' (a count) or 'input'")
    n = _int(entry["samples"], f"{where}.samples", 1, 10_000_000)
    seed = _int(entry.get("seed", 0), f"{where}.seed", 0)
    return [Workload(name or f"samples-{n}", "samples", {"samples": n, "seed": seed})]


def _lstm(entry, where, root, name):
    if "generate" not in entry or not isinstance(entry["generate"], dict):
        _err(where, "an lstm workload needs 'generate': {inputs, hidden, density, steps, seed}")
    g = entry["generate"]
    unknown = sorted(set(g) - set(_LSTM_KEYS))
    if unknown:
        _err(f"{where}.generate.{unknown[0]}", f"unknown key; allowed: {', '.join(_LSTM_KEYS)}")
    p = {"inputs": _int(g.get("inputs", 16), f"{where}.generate.inputs", 1, 4096),
         "hidden": _int(g.get("hidden", 32), f"{where}.generate.hidden", 1, 4096),
         "steps": _int(g.get("steps", 4), f"{where}.generate.steps", 1, 10_000),
         "seed": _int(g.get("seed", 0), f"{where}.generate.seed", 0)}
    density = g.get("density", 0.2)
    if isinstance(density, bool) or not isinstance(density, (int, float)) \
            or not 0 < density <= 1:
        _err(f"{where}.generate.density", f"must be a number in (0, 1], not {density!r}")
    p["density"] = float(density)
    return [Workload(name or "lstm-{inputs}x{hidden}-{density}".format(**p), "lstm",
                     {"generate": p})]


def _bundled(text, kind, where):
    if text not in BUNDLED[kind]:
        _err(where, f"bundled {kind} workloads are {', '.join(BUNDLED[kind])}, not {text!r}")
    if kind == "lstm":
        return [Workload(text, "lstm", {"generate": dict(_LSTM_BUNDLED[text])})]
    if kind == "matrix":
        p = dict(_SEED, **({"skew": True, "seed": 1} if text == "seed-skewed" else {}))
        return [Workload(text, "matrix", {"generate": p})]
    if kind == "layer":
        return _network({"network": text}, where)
    return [Workload(text, "samples", {"samples": 0, "seed": 0, "all_codes": True})]


def parse_workloads(entries, block: str, root: Path) -> list:
    """The :class:`Workload` list of a spec's ``workloads`` (module docstring); ``root`` is
    the folder relative paths start from.  Errors are one line naming ``workloads[i]``."""
    kind = KINDS.get(block)
    if kind is None:
        if entries:
            _err("workloads", f"block {block!r} takes no workloads (synth stage only)")
        return []
    if not isinstance(entries, list) or not entries:
        _err("workloads", f"must be a non-empty list; bundled {kind} workloads: "
             f"{', '.join(BUNDLED[kind])}")
    out = []
    for i, entry in enumerate(entries):
        where = f"workloads[{i}]"
        if isinstance(entry, str):
            out += _bundled(entry, kind, where)
            continue
        if not isinstance(entry, dict):
            _err(where, f"must be a bundled name or a mapping, not {entry!r}")
        unknown = sorted(set(entry) - set(_ENTRY_KEYS[kind]))
        if unknown:
            _err(f"{where}.{unknown[0]}", f"unknown key for a {kind} workload ({block}); "
                 f"allowed: {', '.join(_ENTRY_KEYS[kind])}")
        name = entry.get("name")
        if name is not None and (not isinstance(name, str) or not name.strip()):
            _err(f"{where}.name", f"must be a non-empty string, not {name!r}")
        maker = {"matrix": _matrix, "layer": _layer, "samples": _samples,
                 "lstm": _lstm}[kind]
        out += maker(entry, where, root, name)
    seen = set()
    for w in out:
        if w.name in seen:
            _err("workloads", f"two workloads are named {w.name!r}; give one a 'name'")
        seen.add(w.name)
    return out
