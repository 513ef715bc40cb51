# SPDX-License-Identifier: Apache-2.0
"""The sweep spec (``SPEC.yaml``): read, checked and expanded into design points.

Keys (docs/sweep.md has the reference):

``block``
    A registered block (``spnn info``).
``base`` (optional)
    Config fields (and options) fixed for every point, e.g. ``{rows_per_pe: 64}``.
``grid`` or ``points``
    ``grid``: a mapping from config field (or block option, e.g. spmv's ``alloc``) to a
    list of values; the points are their product, in the order written (the last key
    varies fastest).  ``points``: a list of mappings, one per point.
``sample`` (optional)
    ``{method: random | lhs, n: N, seed: S}``: ``n`` points of the grid drawn at random
    (without replacement) or by Latin-hypercube sampling (each key's values covered
    evenly), for spaces too large to run whole.
``workloads``
    What every point runs (:mod:`gen.sweep.workloads`).
``stages``
    A list of ``model``, ``rtl``, ``synth``, or a mapping from stage to its options:
    ``rtl: {sim, engine, workloads, points}``, ``synth: {targets, seeds, freq, timeout,
    points}`` (``points: N``: the stage runs on N points spread evenly over the list).
``pareto`` (optional)
    Pairs of summary columns to draw Pareto fronts of, e.g. ``[[cycles, xc7.lut]]``.

Every error is one line naming the spec file, the key as written, the value and what is
allowed (:class:`gen.core.config.SpnnError`).  A value that no point can use (``pes: 300``)
is such an error; a combination the block's config refuses (``w_lanes`` above ``pes``) is
a point that fails with that reason, recorded like any other failure.
"""

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from gen.core.config import SpnnError, config_from_strings, config_to_dict

__all__ = ["Spec", "Point", "STAGES", "load_spec", "parse_spec", "sample_indices",
           "expand_for_stage"]

STAGES = ("model", "rtl", "synth")
SPEC_KEYS = ("block", "base", "grid", "points", "sample", "workloads", "stages", "pareto")
_STAGE_KEYS = {"model": (), "rtl": ("sim", "engine", "workloads", "points"),
               "synth": ("targets", "seeds", "freq", "timeout", "points")}


@dataclass
class Point:
    """One design point.

    Attributes
    ----------
    index : int
        Position in the spec's point list (the summary's order).
    values : dict
        The swept keys' values as written.
    config : object or None
        The block's config; ``None`` when the block refuses the combination.
    config_dict : dict
        ``config_to_dict(config)`` (every field), or the values given when refused.
    options : dict
        The block's options (defaults filled in).
    error : str or None
        Why the block refused the combination.
    """

    index: int
    values: dict
    config: object
    config_dict: dict
    options: dict
    error: str | None = None

    @property
    def id(self) -> str:
        """Short stable hash of the config and options (the same on every machine)."""
        text = json.dumps([self.config_dict, self.options], sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:10]


@dataclass
class Spec:
    """A checked sweep spec (module docstring)."""

    path: Path
    block: str
    keys: tuple
    points: list
    workloads: list
    stages: dict
    pareto: list = field(default_factory=list)
    sample: dict | None = None


def _fail(where, msg):
    raise SpnnError(f"{where}: {msg}")


def load_spec(path) -> Spec:
    """Read and check ``SPEC.yaml`` (errors name the file)."""
    import yaml
    p = Path(path)
    if p.is_dir():
        raise SpnnError(f"SPEC: {str(path)!r} is a folder, not a YAML file")
    if not p.is_file():
        raise SpnnError(f"SPEC: no such file {str(path)!r}")
    try:
        doc = yaml.safe_load(p.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SpnnError(f"{path}: not valid YAML{where}: {problem}") from None
    except UnicodeDecodeError:
        raise SpnnError(f"{path}: not a text file") from None
    try:
        return parse_spec(doc, p.parent, p)
    except SpnnError as exc:
        raise SpnnError(f"{path}: {exc}") from None


def parse_spec(doc, root: Path, path=None) -> Spec:
    """Check a spec already parsed from YAML; relative files start at ``root``."""
    from gen.registry import BLOCKS
    from gen.sweep.blocks import adapter
    from gen.sweep.workloads import parse_workloads
    if not isinstance(doc, dict):
        _fail("spec", f"must be a mapping with keys {', '.join(SPEC_KEYS)}, not "
              f"{type(doc).__name__}")
    unknown = [k for k in doc if k not in SPEC_KEYS]
    if unknown:
        _fail(str(unknown[0]), f"unknown key; allowed: {', '.join(SPEC_KEYS)}")
    block = doc.get("block")
    if block not in BLOCKS:
        _fail("block", f"must be one of {', '.join(sorted(BLOCKS))}, not {block!r}")
    ad = adapter(block)
    stages = _stages(doc.get("stages"), ad)
    if "model" not in stages and "rtl" not in stages:
        if doc.get("workloads"):
            _fail("workloads", "are run by the model and rtl stages; this spec has neither")
        workloads = []
    else:
        workloads = parse_workloads(doc.get("workloads"), block, root)
    names = [w.name for w in workloads]
    if "rtl" in stages:
        want = stages["rtl"]["workloads"]
        for name in want or ():
            if name not in names:
                _fail("stages.rtl.workloads", f"no workload is named {name!r}; workloads: "
                      f"{', '.join(names)}")
    keys, rows, sample = _rows(doc, ad, BLOCKS[block].config_cls)
    section = "grid" if doc.get("grid") is not None else "points"
    points = _points(rows, ad, BLOCKS[block].config_cls, doc.get("base") or {}, section)
    if section == "grid":
        _check_values(keys, points, section)
    if all(p.error for p in points):
        base = doc.get("base") or {}
        named = next((k for k in sorted(base, key=len, reverse=True)
                      if points[0].error.startswith(f"{k} ")), None)
        _fail(f"base.{named}" if named else section,
              f"no point is a valid {block} config ({points[0].error})")
    spec = Spec(Path(path) if path else root / "spec.yaml", block, keys, points, workloads,
                stages, sample=sample)
    from gen.sweep.pareto import check_pairs
    spec.pareto = check_pairs(doc.get("pareto"), spec)
    return spec


# ------------------------------------------------------------------------------- stages

def _stages(value, ad):
    if isinstance(value, list):
        value = {name: {} for name in value} if all(isinstance(v, str) for v in value) \
            else value
    if not isinstance(value, dict) or not value:
        _fail("stages", f"must be a non-empty list or mapping of {', '.join(STAGES)}, "
              f"not {value!r}")
    out = {}
    for name, opts in value.items():
        if name not in STAGES:
            _fail("stages", f"must name stages of {', '.join(STAGES)}, not {name!r}")
        if name not in ad.stages:
            _fail("stages", f"block {ad.name} runs the stages {', '.join(ad.stages)}, "
                  f"not {name!r}")
        opts = {} if opts is None else opts
        if not isinstance(opts, dict):
            _fail(f"stages.{name}", f"must be a mapping of options, not {opts!r}")
        bad = [k for k in opts if k not in _STAGE_KEYS[name]]
        if bad:
            allowed = ", ".join(_STAGE_KEYS[name]) or "none"
            _fail(f"stages.{name}.{bad[0]}", f"unknown option; allowed: {allowed}")
        out[name] = _stage_options(name, opts)
    return out


def _choice(opts, key, where, allowed, default):
    value = opts.get(key, default)
    if value not in allowed:
        _fail(where, f"must be one of {', '.join(map(str, allowed))}, not {value!r}")
    return value


def _list_of(opts, key, where, check, default):
    value = opts.get(key, default)
    value = value if isinstance(value, list) else [value]
    if not value:
        _fail(where, "must not be empty")
    for v in value:
        check(v)
    return value


def _points_option(opts, where):
    n = opts.get("points", "all")
    if n != "all" and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        _fail(where, f"must be a whole number >= 1 or 'all', not {n!r}")
    return n


def _stage_options(name, opts):
    where = f"stages.{name}"
    if name == "model":
        return {}
    if name == "rtl":
        wl = opts.get("workloads")
        if wl is not None and (not isinstance(wl, list) or not all(isinstance(v, str)
                                                                   for v in wl)):
            _fail(f"{where}.workloads", f"must be a list of workload names, not {wl!r}")
        return {"sim": _choice(opts, "sim", f"{where}.sim", ("verilator", "icarus"),
                               "verilator"),
                "engine": _choice(opts, "engine", f"{where}.engine", ("native", "cocotb"),
                                  "native"),
                "workloads": wl, "points": _points_option(opts, f"{where}.points")}
    from gen.synth import DEFAULT_FREQ, TARGETS

    def target(t):
        if t not in TARGETS:
            _fail(f"{where}.targets", f"must be targets of {', '.join(TARGETS)}, not {t!r}")

    def seed(s):
        if isinstance(s, bool) or not isinstance(s, int) or s < 1:
            _fail(f"{where}.seeds", f"must be whole numbers >= 1, not {s!r}")

    freq = opts.get("freq", DEFAULT_FREQ)
    if isinstance(freq, bool) or not isinstance(freq, (int, float)) or not 1 <= freq <= 1000:
        _fail(f"{where}.freq", f"must be a clock in MHz between 1 and 1000, not {freq!r}")
    timeout = opts.get("timeout", 3600)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        _fail(f"{where}.timeout", f"must be seconds > 0, not {timeout!r}")
    targets = _list_of(opts, "targets", f"{where}.targets", target, ["xc7"])
    return {"targets": list(dict.fromkeys(targets)),
            "seeds": list(dict.fromkeys(_list_of(opts, "seeds", f"{where}.seeds", seed, [1]))),
            "freq": float(freq), "timeout": float(timeout),
            "points": _points_option(opts, f"{where}.points")}


# ------------------------------------------------------------------------------- points

def _allowed_keys(ad, cls):
    return sorted([f.name for f in dataclasses.fields(cls)] + list(ad.options))


def _check_key(key, where, ad, cls):
    if key not in _allowed_keys(ad, cls):
        _fail(f"{where}.{key}", f"is not a {ad.name} config field or option; allowed: "
              f"{', '.join(_allowed_keys(ad, cls))}")


def _rows(doc, ad, cls):
    """``(swept keys, [values per point], sample)`` from ``grid`` (+ ``sample``) or
    ``points``."""
    grid, listed = doc.get("grid"), doc.get("points")
    if (grid is None) == (listed is None):
        _fail("grid", "give either 'grid' (field: [values]) or 'points' (a list of "
              "mappings), not " + ("both" if grid is not None else "neither"))
    sample = doc.get("sample")
    if listed is not None:
        if sample is not None:
            _fail("sample", "samples a 'grid'; this spec lists 'points'")
        if not isinstance(listed, list) or not listed or \
                not all(isinstance(p, dict) for p in listed):
            _fail("points", f"must be a non-empty list of mappings, not {listed!r}")
        keys = list(dict.fromkeys(k for p in listed for k in p))
        for i, p in enumerate(listed):
            for k in p:
                _check_key(k, f"points[{i}]", ad, cls)
        return tuple(keys), [dict(p) for p in listed], None
    if not isinstance(grid, dict) or not grid:
        _fail("grid", f"must be a mapping from field to a list of values, not {grid!r}")
    for k, vals in grid.items():
        _check_key(k, "grid", ad, cls)
        if not isinstance(vals, list) or not vals:
            _fail(f"grid.{k}", f"must be a non-empty list of values, not {vals!r}")
        if len(set(map(repr, vals))) != len(vals):
            _fail(f"grid.{k}", f"lists a value twice: {vals!r}")
    keys = tuple(grid)
    sizes = [len(grid[k]) for k in keys]
    total = int(np.prod(sizes, dtype=object))
    if sample is None:
        if total > 100_000:
            _fail("grid", f"has {total:,} points; add 'sample: {{method: lhs, n: N}}'")
        idx = range(total)
    else:
        sample = _sample_spec(sample, total)
        idx = sample_indices(sizes, sample)
    rows = []
    for i in idx:
        pos = np.unravel_index(i, sizes) if sizes else ()
        rows.append({k: grid[k][int(j)] for k, j in zip(keys, pos)})
    return keys, rows, sample


def _sample_spec(sample, total):
    if not isinstance(sample, dict):
        _fail("sample", f"must be a mapping {{method, n, seed}}, not {sample!r}")
    bad = [k for k in sample if k not in ("method", "n", "seed")]
    if bad:
        _fail(f"sample.{bad[0]}", "unknown key; allowed: method, n, seed")
    method = sample.get("method", "lhs")
    if method not in ("random", "lhs"):
        _fail("sample.method", f"must be random or lhs, not {method!r}")
    n, seed = sample.get("n"), sample.get("seed", 0)
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= min(total, 100_000):
        _fail("sample.n", f"must be a whole number between 1 and {min(total, 100_000)} (the "
              f"grid has {total} points), not {n!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        _fail("sample.seed", f"must be a whole number >= 0, not {seed!r}")
    return {"method": method, "n": n, "seed": seed}


def sample_indices(sizes, sample) -> list:
    """Flat grid indices (ascending) of ``sample["n"]`` points of a grid of ``sizes``.

    ``random``: drawn without replacement.  ``lhs``: Latin-hypercube sampling over the
    value indices: each key's ``n`` strata are one random permutation, a point takes one
    random position in its stratum of every key, so every value of a key with at most
    ``n`` values is used about ``n / len`` times; duplicates are dropped and replaced by
    random unused points, so exactly ``n`` distinct points come back."""
    rng = np.random.default_rng(sample["seed"])
    total = int(np.prod(sizes, dtype=object))
    n = sample["n"]
    if sample["method"] == "random" or not sizes:
        return sorted(int(i) for i in rng.choice(total, n, replace=False))
    cols = [np.floor((rng.permutation(n) + rng.random(n)) * m / n).astype(np.int64)
            for m in sizes]
    chosen = list(dict.fromkeys(int(np.ravel_multi_index(tuple(int(c[i]) for c in cols),
                                                         sizes)) for i in range(n)))
    taken = set(chosen)
    while len(chosen) < n:
        i = int(rng.integers(total))
        if i not in taken:
            taken.add(i)
            chosen.append(i)
    return sorted(chosen)


def _points(rows, ad, cls, base, section):
    if not isinstance(base, dict):
        _fail("base", f"must be a mapping of config fields and options, not {base!r}")
    for k in base:
        _check_key(k, "base", ad, cls)
    points = []
    for index, row in enumerate(rows):
        merged = {**base, **row}
        options = {k: merged.get(k, allowed[0]) for k, allowed in ad.options.items()}
        for k, value in options.items():
            if value not in ad.options[k]:
                where = section if k in row else "base"
                _fail(f"{where}.{k}", f"must be one of {', '.join(ad.options[k])}, "
                      f"not {value!r}")
        fields = {k: _text(v) for k, v in merged.items() if k not in ad.options}
        try:
            cfg = config_from_strings(cls, fields)
            points.append(Point(index, row, cfg, config_to_dict(cfg), options))
        except SpnnError as exc:
            points.append(Point(index, row, None, dict(fields), options, str(exc)))
    return points


def _text(value) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _check_values(keys, points, section):
    """A grid value that no point can use, for a reason that names its key, is a spec error
    (exit 2); an unusable combination is a point that fails (and so is every refused point
    of a ``points`` list)."""
    for key in keys:
        seen = {}
        for p in points:
            if key in p.values:
                v = repr(p.values[key])
                ok, first = seen.get(v, (False, None))
                seen[v] = (ok or p.error is None, first or p.error)
        for v, (ok, first) in seen.items():
            if not ok and first and first.startswith(f"{key} "):
                raise SpnnError(f"{section}.{key}: {v} fits no point ({first})")


def expand_for_stage(points, n):
    """The points a stage runs on: all, or ``n`` spread evenly over the list (first and
    last included)."""
    if n == "all" or n >= len(points):
        return list(points)
    if n == 1:
        return [points[0]]
    picks = sorted({round(i * (len(points) - 1) / (n - 1)) for i in range(n)})
    return [points[i] for i in picks]

