# SPDX-License-Identifier: Apache-2.0
"""Waveform regressions: fixed-seed jobs whose cycle-level traces are committed.

    python -m tb.waves check  [--sim verilator|icarus] [--case NAME]
    python -m tb.waves update [--sim ...] [--case NAME]
    python -m tb.waves list

``check`` reruns every case and compares its trace with ``tb/golden/<case>.trace``;
on a mismatch it names the first differing cycle and signal, writes a short diff
to ``build/waves/<case>.diff`` and exits 1.  ``update`` rewrites the golden files
and prints what changed.  ``make waves-check`` / ``make waves-update`` call these;
``tb/test_waves.py`` runs the check under both simulators as part of ``make test``.

The cases are the blocks' own (:attr:`gen.core.block.Block.waves`, declared in each
``gen/<block>/block.py``): ``run(sim)`` returns a simulation result, traced with the
case's ``watch`` signals.
"""

import argparse
import difflib
from pathlib import Path
import sys

GOLDEN = Path(__file__).resolve().parent / "golden"


def case_names() -> list:
    """Every block's waveform cases (:attr:`gen.core.block.Block.waves`), sorted."""
    from gen.registry import wave_cases
    return sorted(wave_cases())


def fresh_trace(name, sim="verilator"):
    """Run case ``name`` and return its trace lines."""
    from gen.core.sim import watching
    from gen.core.traces import trace_lines
    from gen.registry import wave_cases
    _, case = wave_cases()[name]
    with watching(case.watch):
        result = case.run(sim)
    return trace_lines(result, sorted(result["log"]), list(case.watch), title=f"case={name}")


def golden_path(name) -> Path:
    return GOLDEN / f"{name}.trace"


def check(names, sim, out_dir=Path("build/waves")) -> int:
    from gen.core.traces import TraceMismatch, compare, write_diff
    failures = 0
    for name in names:
        path = golden_path(name)
        if not path.exists():
            print(f"{name}: no golden trace {path} (run 'make waves-update')")
            failures += 1
            continue
        try:
            compare(path.read_text().splitlines(), fresh_trace(name, sim))
            print(f"{name}: ok ({sim})")
        except TraceMismatch as mismatch:
            diff_path = out_dir / f"{name}.diff"
            write_diff(diff_path, mismatch)
            print(f"{name}: MISMATCH ({sim}) {mismatch}; diff in {diff_path}")
            failures += 1
    return 1 if failures else 0


def update(names, sim) -> int:
    GOLDEN.mkdir(parents=True, exist_ok=True)
    for name in names:
        path = golden_path(name)
        new = fresh_trace(name, sim)
        old = path.read_text().splitlines() if path.exists() else []
        path.write_text("\n".join(new) + "\n")
        if old == new:
            print(f"{name}: unchanged")
        else:
            diff = list(difflib.unified_diff(old, new, "old", "new", n=1, lineterm=""))
            print(f"{name}: updated ({len(new) - 1} events, {len(diff)} diff lines)")
            for line in diff[:20]:
                print("   " + line)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tb.waves", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["check", "update", "list"])
    parser.add_argument("--sim", default="verilator", choices=["verilator", "icarus"])
    parser.add_argument("--case", action="append", choices=case_names())
    args = parser.parse_args(argv)
    names = args.case or case_names()
    if args.action == "list":
        print("\n".join(names))
        return 0
    return check(names, args.sim) if args.action == "check" else update(names, args.sim)


if __name__ == "__main__":
    sys.exit(main())
