# SPDX-License-Identifier: Apache-2.0
"""Soak rates: random job sequences (back-pressure, resets) through every block's RTL on the
native engine, every result checked against the golden model (:mod:`scripts.soak`).

Per block a fixed number of vectors (``SIZES``) after a one-vector warm-up (the builds), one
process, Verilator; writes ``build/bench/soak.json`` and ``build/bench/soak.md`` (and with
``--docs`` the table into README.md and docs/sim.md).  ``make soak BLOCK=... N=10**6`` is the
full-length run.  Usage: ``python -m scripts.bench_soak [--out DIR] [--sim S] [--docs]``.
"""

import argparse
import json
from pathlib import Path
import sys

from scripts import docs
from scripts.soak import soak

# vectors per block: about a minute each on this project's 2-core machine
SIZES = {"pwl": 1_000_000, "spmv": 10_000, "fc": 10_000, "lstm": 10_000, "conv": 100_000}
WHAT = {"pwl": "input code", "spmv": "x vector of a random sparse matrix",
        "fc": "x column of a random FD-CSR layer", "lstm": "LSTM time step",
        "conv": "conv output position"}
DOC_FILES = ("README.md", "docs/sim.md")


def markdown(rows, sim) -> str:
    lines = [f"Soak (`python -m scripts.bench_soak`, {sim}, native engine, one process; every "
             "result checked against the golden model):", "",
             "| block | vector | vectors | jobs | with a reset | mismatches | vectors/s | "
             "10^6 vectors |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['block']} | {WHAT[r['block']]} | {r['vectors']:,} | {r['jobs']} | "
                     f"{r['resets']} | {r['mismatches']} | {r['vectors_per_second']:,.0f} | "
                     f"{1e6 / r['vectors_per_second'] / 60:,.1f} min |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="build/bench")
    ap.add_argument("--sim", default="verilator", choices=["verilator", "icarus"])
    ap.add_argument("--docs", action="store_true",
                    help="also write the table into README.md and docs/sim.md")
    args = ap.parse_args(argv)
    rows = []
    for block, n in SIZES.items():
        soak(block, 1, args.sim, seed=10**6)                   # builds, not timed
        rows.append(soak(block, n, args.sim, seed=0))
        r = rows[-1]
        print(f"[soak {block}] {r['vectors']:,} vectors, {r['mismatches']} mismatches, "
              f"{r['vectors_per_second']:,.0f} vectors/s", flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "soak.json").write_text(json.dumps(rows, indent=2) + "\n")
    table = markdown(rows, args.sim)
    (out / "soak.md").write_text(table)
    if args.docs:
        docs.write_docs(table, "soak table", "scripts/bench_soak.py", DOC_FILES)
    return 1 if any(r["mismatches"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
