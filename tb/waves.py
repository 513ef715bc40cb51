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

A case is a function returning ``(block_name, config, job, ports, watch)``; add
cases for a new block to :data:`CASES`.
"""

import argparse
import difflib
from pathlib import Path
import sys

import numpy as np

GOLDEN = Path(__file__).resolve().parent / "golden"


def _pwl_case(func, n, seed, valid_prob, ready_prob, reset_at=None):
    def case():
        from gen.pwl import PwlConfig, to_unsigned
        cfg = PwlConfig(func=func)
        x = np.random.default_rng(seed).integers(-32768, 32768, n)
        job = {"sources": [{"port": "i", "data": to_unsigned(x, 16), "valid_prob": valid_prob}],
               "sinks": [{"port": "o", "count": n, "ready_prob": ready_prob}],
               "seed": seed, "reset_at": reset_at, "max_cycles": 20 * n + 100,
               "watch": ["advance"]}
        return "pwl", cfg, job, ["i", "o"], ["advance"]
    return case


CASES = {
    "pwl_sigmoid_backpressure": _pwl_case("sigmoid", 48, 11, 0.7, 0.6),
    "pwl_tanh_reset": _pwl_case("tanh", 40, 12, 0.9, 0.8, reset_at=25),
}


def fresh_trace(name, sim="verilator", block_override=None):
    """Run case ``name`` and return its trace lines."""
    from gen.sim import run_job
    from gen.traces import trace_lines
    block, cfg, job, ports, watch = CASES[name]()
    result = run_job(block_override or block, cfg, job, sim=sim, name=f"waves-{name}")
    return trace_lines(result, ports, watch, title=f"case={name}")


def golden_path(name) -> Path:
    return GOLDEN / f"{name}.trace"


def check(names, sim, out_dir=Path("build/waves")) -> int:
    from gen.traces import TraceMismatch, compare, write_diff
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
    parser.add_argument("--case", action="append", choices=sorted(CASES))
    args = parser.parse_args(argv)
    names = args.case or sorted(CASES)
    if args.action == "list":
        print("\n".join(names))
        return 0
    return check(names, args.sim) if args.action == "check" else update(names, args.sim)


if __name__ == "__main__":
    sys.exit(main())
