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

A case is a function returning ``(block_name, config, job, ports, watch)`` for a raw
stream job, or ``(block_name, None, run, None, watch)`` where ``run(sim)`` calls the
block's ``rtl_<block>`` twin and returns its simulation result; add cases for a new
block to :data:`CASES`.
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
        from gen.stimulus import make_job
        cfg = PwlConfig(func=func)
        x = np.random.default_rng(seed).integers(-32768, 32768, n)
        job = make_job([("i", to_unsigned(x, 16), valid_prob)], [("o", n, ready_prob)],
                       seed=seed, reset_at=reset_at, max_cycles=20 * n + 100,
                       watch=["advance"])
        return "pwl", cfg, job, ["i", "o"], ["advance"]
    return case


def _rtl_case(block, watch, run):
    """A case that runs a block's ``rtl_<block>`` twin (``run(sim)`` -> sim result) while
    tracing ``watch``; the ports are whatever streams the result logged."""
    def case():
        return block, None, run, None, watch
    return case


def _spmv(sim):
    from gen.spmv import rtl_spmv
    from tb.test_spmv import CFG_A
    rng = np.random.default_rng(21)
    w = rng.integers(-128, 128, (13, 20)) * (rng.random((13, 20)) < 0.3)
    x = rng.integers(-100, 100, 20) * (rng.random(20) < 0.7)
    return rtl_spmv(w, x, CFG_A, sim, o_ready_prob=0.7, name="waves-spmv")[1]


def _conv(sim):
    from gen.conv import rtl_conv
    from tb.test_conv import CFG_8x4, SPECS_8x4, _jobs
    return rtl_conv(_jobs(CFG_8x4, SPECS_8x4[1:2], 22), CFG_8x4, sim, ready_prob=0.8,
                    name="waves-conv")[2]


def _fc(sim):
    from gen.fdcsr import prune_random, rtl_fc
    from tb.test_fc import ONE
    rng = np.random.default_rng(23)
    w = prune_random((6, 40), 0.3, rng, ONE.w_fmt.width)
    x = rng.integers(-100, 100, (40, 3))
    return rtl_fc(w, x, ONE, sim, ready_prob=0.7, seed=23, name="waves-fc")[1]


def _lstm(sim):
    from gen.lstm import compile_lstm, rtl_lstm
    from tb.test_lstm import RTL_CFG, _case
    rng = np.random.default_rng(24)
    q, seq = _case(rng, 7, 3, 2)
    return rtl_lstm(compile_lstm(q, RTL_CFG), [seq], sim, o_ready_prob=0.7, seed=24,
                    name="waves-lstm")[1]


CASES = {
    "pwl_sigmoid_backpressure": _pwl_case("sigmoid", 48, 11, 0.7, 0.6),
    "pwl_tanh_reset": _pwl_case("tanh", 40, 12, 0.9, 0.8, reset_at=25),
    "spmv_small": _rtl_case("spmv", ["state"], _spmv),
    "conv_8x4_n2": _rtl_case("conv", ["ctl_state"], _conv),
    "fc_one": _rtl_case("fc", [], _fc),
    "lstm_small": _rtl_case("lstm", ["state"], _lstm),
}


def fresh_trace(name, sim="verilator"):
    """Run case ``name`` and return its trace lines."""
    from gen.sim import run_job, watching
    from gen.traces import trace_lines
    block, cfg, job, ports, watch = CASES[name]()
    if cfg is None:                      # a case driven through the block's rtl_ twin
        with watching(watch):
            result = job(sim)
        ports = sorted(result["log"])
    else:
        result = run_job(block, cfg, job, sim=sim, name=f"waves-{name}")
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
