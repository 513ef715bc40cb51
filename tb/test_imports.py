# SPDX-License-Identifier: Apache-2.0
"""The import graph of gen/, hdl/, tb/ and scripts/ runs downward only; no function in gen/
or hdl/ is over 150 lines.

Every import counts: top-level and function-local ``import`` / ``from ... import`` and
``importlib.import_module("...")`` with a constant name.  The test fails on any cycle and
on gen/ or hdl/ importing tb/ (or naming a tb module in a string, as a cocotb
``test_module`` would).
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TREES = ("gen", "hdl", "tb", "scripts")


def _modules() -> dict:
    mods = {}
    for tree in TREES:
        for path in sorted((ROOT / tree).rglob("*.py")):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            mods[name.removesuffix(".__init__")] = path
    return mods


def _imports(name: str, path: Path, mods: dict) -> set:
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            else:
                base = node.module
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant)):
            found.add(node.args[0].value)
    # Importing ``a.b.c`` runs ``a/__init__`` and ``a/b/__init__`` first: parents count.
    # (A module's own ancestors are already running when it is imported: no edge to them.)
    parents = {".".join(m.split(".")[:k]) for m in found for k in range(1, m.count(".") + 1)}
    found |= {m for m in parents if not name.startswith(m + ".")}
    return {m for m in found if m in mods and m != name}


def import_graph() -> dict:
    mods = _modules()
    return {name: _imports(name, path, mods) for name, path in mods.items()}


def cycles(graph: dict) -> list:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def test_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_gen_and_hdl_never_import_tb():
    graph = import_graph()
    bad = {m: sorted(d for d in deps if d.startswith("tb"))
           for m, deps in graph.items() if m.startswith(("gen", "hdl"))}
    assert not {m: d for m, d in bad.items() if d}
    for path in list((ROOT / "gen").rglob("*.py")) + list((ROOT / "hdl").rglob("*.py")):
        assert '"tb.' not in path.read_text(), f"{path} names a tb module"


def test_parents_count_as_imports():
    """``from gen.core.block import x`` runs ``gen/core/__init__.py``: an edge to gen.core."""
    graph = import_graph()
    assert {"gen.core", "gen.core.block", "hdl.spmv"} <= graph["gen.spmv.block"]


def test_no_import_cycles():
    assert cycles(import_graph()) == []


def test_no_sys_path_edits():
    """Scripts run as ``python -m scripts.<name>``; nothing edits ``sys.path``."""
    for tree in TREES:
        for path in (ROOT / tree).rglob("*.py"):
            if path.name == "test_imports.py":
                continue
            assert "sys.path.insert" not in path.read_text() and \
                "sys.path.append" not in path.read_text(), path


MAX_FUNCTION_LINES = 150


def long_functions(root=ROOT, trees=("gen", "hdl"), limit=MAX_FUNCTION_LINES) -> list:
    """(lines, path, name) of every function in ``trees`` longer than ``limit`` lines."""
    out = []
    for tree in trees:
        for path in sorted((root / tree).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    lines = node.end_lineno - node.lineno + 1
                    if lines > limit:
                        out.append((lines, path.relative_to(root).as_posix(), node.name))
    return sorted(out, reverse=True)


def test_long_function_finder_finds_one(tmp_path):
    (tmp_path / "gen").mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(6))
    (tmp_path / "gen" / "m.py").write_text(f"def short():\n    pass\n\ndef f():\n{body}\n")
    assert long_functions(tmp_path, limit=5) == [(7, "gen/m.py", "f")]


def test_no_function_over_150_lines():
    """No function in gen/ or hdl/ is longer than 150 lines (the redesign's rule)."""
    assert long_functions() == []
