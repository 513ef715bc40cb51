# SPDX-License-Identifier: Apache-2.0
"""Benchmark of ``spnn sweep`` (design-space sweeps on Dask).

* SpMV engine: P x FIFO depth x allocator on the seed matrix (1024 x 153, 11.7 %) and a
  skewed one (same size and density, lognormal rows), exact cycle model per point, run on an
  embedded LocalCluster of 1 and of 2 workers (fresh output each): the wall times give the
  speed-up of 2 workers over 1, and the task durations what N workers would take (list
  scheduling, longest first; scheduler overhead not included).  Then a few points through
  the RTL (Verilator, native engine; bit- and cycle-exact checked), reusing the model
  results.
* A small synthesis sweep: tiny SpMV engines (P = w_lanes = 2, 4, 8), Yosys xc7 resources and
  nextpnr ECP5 Fmax (seed 1), with the cycle model on a small matrix: its Pareto fronts
  (cycles vs LUTs/DSP/BRAM, Fmax vs LUTs, time vs LUTs) are build/bench/sweep_pareto.png.

Writes build/bench/sweep.md, build/bench/sweep.json, build/bench/sweep_pareto.png (and the
sweeps' own folders under build/bench/sweep/); ``--docs`` also writes the table into
README.md and docs/sweep.md.

Run:  python -m scripts.bench_sweep [--quick] [--no-rtl] [--no-synth] [--docs]
      (``--from-json``: only render the tables again from build/bench/sweep.json)
"""

import argparse
import json
import os
import shutil
import time
from pathlib import Path

import yaml

from gen.cli import main as spnn
from gen.sweep.report import predict_seconds
from scripts import docs

OUT = Path("build/bench")
WORK = OUT / "sweep"
DOC_FILES = ("README.md", "docs/sweep.md")
DOC_IMG = Path("docs/img/sweep_pareto.png")


def log(msg):
    print(msg, flush=True)


def spmv_spec(quick: bool, rtl: bool) -> dict:
    grid = {"pes": [8, 16, 32] if quick else [4, 8, 16, 32],
            "fifo_depth": [2, 8] if quick else [2, 4, 8, 16],
            "alloc": ["zigzag", "lpt", "balanced"] if quick
            else ["interleave", "zigzag", "lpt", "balanced"]}
    stages = {"model": {}}
    if rtl:
        stages["rtl"] = {"points": 3, "workloads": ["seed"]}
    # memories sized so that the seed matrix is one block at every P (as in seed 000)
    return {"block": "spmv", "base": {"rows_per_pe": 256, "mem_depth": 8192},
            "grid": grid, "workloads": ["seed", "seed-skewed"], "stages": stages,
            "pareto": [["compute_cycles", "mac_units"], ["cycles", "mac_units"]]}


def synth_spec() -> dict:
    # w_lanes = P: the weight stream widens with the array, so end-to-end cycles fall with P
    return {"block": "spmv",
            "base": {"rows_per_pe": 8, "max_cols": 32, "mem_depth": 128, "fifo_depth": 4},
            "points": [{"pes": p, "w_lanes": p} for p in (2, 4, 8)],
            "workloads": [{"name": "small", "generate": {"rows": 32, "cols": 32,
                                                         "density": 0.3, "seed": 5}}],
            "stages": {"model": {}, "synth": {"targets": ["xc7", "ecp5"], "seeds": [1]}}}


def run_sweep(name: str, spec: dict, argv, fresh=True) -> dict:
    """``spnn sweep`` of ``spec`` into WORK/name; returns its sweep.json plus the wall time
    of the whole command (cluster start included)."""
    folder = WORK / name
    if fresh and folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = WORK / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    t0 = time.monotonic()
    rc = spnn(["sweep", str(path), "-o", str(folder), "-q", *argv])
    if rc != 0:
        raise SystemExit(f"spnn sweep {path} failed (exit {rc})")
    out = json.loads((folder / "sweep.json").read_text())
    out["command_seconds"] = round(time.monotonic() - t0, 2)
    return out


def _summary(name):
    import csv
    with open(WORK / name / "summary.csv") as handle:
        return list(csv.DictReader(handle))


def _durations(name):
    from gen.sweep.results import read_rows
    _, rows = read_rows(WORK / name / "results.csv")
    return [float(r["seconds"]) for r in rows.values() if r["seconds"]]


def bench_spmv(args, results):
    spec = spmv_spec(args.quick, rtl=False)
    n = 1
    for vals in spec["grid"].values():
        n *= len(vals)
    log(f"[1/4] SpMV model sweep, {n} points x 2 workloads, LocalCluster of 1 worker")
    one = run_sweep("spmv_1", spec, ["--workers", "1"])
    log(f"      {one['wall_seconds']} s ({one['command_seconds']} s with the cluster start)")
    log("[2/4] the same on 2 workers")
    two = run_sweep("spmv_2", spec, ["--workers", "2"])
    log(f"      {two['wall_seconds']} s ({two['command_seconds']} s with the cluster start)")
    same = (WORK / "spmv_1" / "summary.csv").read_bytes() == \
        (WORK / "spmv_2" / "summary.csv").read_bytes()
    durations = _durations("spmv_2")
    pred = predict_seconds(durations)
    results["spmv"] = {"points": n, "tasks": one["tasks"]["total"],
                       "wall_1": one["wall_seconds"], "wall_2": two["wall_seconds"],
                       "command_1": one["command_seconds"], "command_2": two["command_seconds"],
                       "speedup_2_over_1": round(one["wall_seconds"] / two["wall_seconds"], 2),
                       "task_seconds": round(sum(durations), 2),
                       "mean_task_seconds": round(sum(durations) / len(durations), 4),
                       "predicted_seconds": pred,
                       "predicted_speedup": {k: round(pred[1] / v, 2) for k, v in pred.items()},
                       "same_summary": same, "best": two["best"], "pareto": two["pareto"]}
    rows = _summary("spmv_2")
    results["spmv"]["front"] = [r for r in rows if r["pareto"]]
    if not args.no_rtl:
        log("[3/4] 3 points through the RTL (Verilator), model results reused")
        t0 = time.monotonic()
        rtl = run_sweep("spmv_2", spmv_spec(args.quick, rtl=True), ["--workers", "2"],
                        fresh=False)
        rows = _summary("spmv_2")
        results["spmv"]["rtl"] = {"points": [r["point"] for r in rows if r["rtl"]],
                                  "exact": [r["rtl"] for r in rows if r["rtl"]],
                                  "tasks_run": rtl["tasks"]["run"],
                                  "seconds": round(time.monotonic() - t0, 1)}
        log(f"      RTL runs: {results['spmv']['rtl']}")
    shutil.copyfile(WORK / "spmv_2" / "pareto.png", OUT / "sweep_spmv_pareto.png")


def bench_synth(args, results):
    log("[4/4] small synthesis sweep: SpMV P = w_lanes = 2, 4, 8 (tiny memories), xc7 + ECP5 "
        "seed 1")
    r = run_sweep("synth", synth_spec(), ["--workers", "2"])
    rows = _summary("synth")
    results["synth"] = {"wall_seconds": r["wall_seconds"], "rows": rows, "best": r["best"],
                        "task_seconds": round(sum(_durations("synth")), 1),
                        "predicted_seconds": predict_seconds(_durations("synth"))}
    shutil.copyfile(WORK / "synth" / "pareto.png", OUT / "sweep_pareto.png")
    log(f"      {r['wall_seconds']} s on 2 workers; {len(rows)} points")


def _front_table(front, cols):
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(str(r.get(c, "")) for c in cols) + " |" for r in front]
    return "\n".join(lines)


def _collapse(front):
    """Front rows with the same P and figures as one row listing their FIFO depth and
    allocator."""
    groups = {}
    for r in front:
        key = (r["pes"], r["compute_cycles"], r["cycles"], r["max_over_mean"], r["pareto"])
        groups.setdefault(key, []).append(f"{r['fifo_depth']}/{r['alloc']}")
    return [{"pes": k[0], "compute_cycles": k[1], "cycles": k[2], "max_over_mean": k[3],
             "pareto": k[4], "points": ", ".join(v)} for k, v in groups.items()]


def markdown(results, img: str = "build/bench/sweep_pareto.png") -> str:
    s = results["spmv"]
    pred = s["predicted_seconds"]
    text = [f"**Design-space sweeps** (`python -m scripts.bench_sweep`, "
            f"{results['machine']}):", "",
            f"SpMV engine, P x FIFO depth x allocator = {s['points']} points on the seed "
            f"matrix and a skewed one ({s['tasks']} cycle-model tasks, mean "
            f"{s['mean_task_seconds']:.3f} s each), embedded LocalCluster:", "",
            "| workers | sweep wall time | speed-up |",
            "|---|---|---|",
            f"| 1 | {s['wall_1']:.2f} s | 1.00 |",
            f"| 2 | {s['wall_2']:.2f} s | {s['speedup_2_over_1']:.2f} |", "",
            "Wall time from the first task submitted to the last result written (workers "
            "started and warmed before; the client writing results.csv, the scheduler and "
            "both workers share the machine's cores).", "",
            "Predicted from the task durations (list scheduling, longest first, no scheduler "
            "overhead): " + ", ".join(f"{n} worker{'s' if int(n) > 1 else ''} {pred[n]:.2f} s "
                                      f"({s['predicted_speedup'][n]:.1f}x)"
                                      for n in pred) + ".  Summaries of the 1- and 2-worker "
            f"runs identical: {s['same_summary']}.", ""]
    text += ["Pareto fronts (compute cycles and end-to-end cycles, summed over both "
             "matrices, against P; points with the same figures in one row):", "",
             _front_table(_collapse(s["front"]), ["pes", "compute_cycles", "cycles",
                                                  "max_over_mean", "points", "pareto"]), ""]
    if "rtl" in s:
        text += [f"RTL (Verilator, native engine) on points {', '.join(s['rtl']['points'])} "
                 f"of the "
                 f"seed matrix: {', '.join(s['rtl']['exact'])} bit- and cycle-exact "
                 f"({s['rtl']['tasks_run']} tasks, {s['rtl']['seconds']} s, model results "
                 "reused).", ""]
    if "synth" in results:
        y = results["synth"]
        cols = ["pes", "cycles", "xc7.lut", "xc7.ff", "xc7.dsp", "xc7.bram", "ecp5.lut",
                "ecp5.fmax_mhz", "time_us", "pareto"]
        text += [f"Synthesis sweep (SpMV P = w_lanes = 2, 4, 8 with tiny memories, 32 x 32 "
                 f"matrix at "
                 f"30 %; xc7 resources, ECP5 Fmax seed 1; {y['wall_seconds']:.0f} s on 2 "
                 f"workers, {y['task_seconds']:.0f} s of tasks):", "",
                 _front_table(y["rows"], cols), "",
                 f"![Pareto fronts of the synthesis sweep]({img})", ""]
    return "\n".join(text)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="18 SpMV points instead of 64")
    parser.add_argument("--no-rtl", action="store_true", help="skip the RTL points")
    parser.add_argument("--no-synth", action="store_true", help="skip the synthesis sweep")
    parser.add_argument("--docs", action="store_true",
                        help="also write the tables into README.md and docs/sweep.md")
    parser.add_argument("--from-json", action="store_true",
                        help="render the tables from build/bench/sweep.json (no sweep)")
    args = parser.parse_args(argv)
    if args.from_json:
        results = json.loads((OUT / "sweep.json").read_text())
    else:
        WORK.mkdir(parents=True, exist_ok=True)
        results = {"machine": f"{os.cpu_count()} cores"}
        bench_spmv(args, results)
        if not args.no_synth:
            bench_synth(args, results)
        (OUT / "sweep.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    table = markdown(results)
    (OUT / "sweep.md").write_text(table + "\n")
    log(table)
    if args.docs:
        # the plot beside the docs (committed, as the tables are): README and docs/sweep.md
        # link it relative to themselves
        if (OUT / "sweep_pareto.png").exists():
            DOC_IMG.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(OUT / "sweep_pareto.png", DOC_IMG)
        for path in DOC_FILES:
            rel = os.path.relpath(DOC_IMG, Path(path).parent)
            docs.write_docs(markdown(results, rel), "sweep table", "scripts/bench_sweep.py",
                            (path,))


if __name__ == "__main__":
    main()
