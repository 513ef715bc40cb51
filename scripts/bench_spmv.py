# SPDX-License-Identifier: Apache-2.0
"""Benchmark of the sparse matrix-vector engine (seed 000 tables 1 and 2).

Run as ``python scripts/bench_spmv.py [--no-rtl]``.  Writes build/bench/spmv.json,
build/bench/spmv.md and build/bench/spmv_loads.png.

* The seed matrix: 1024 x 153, 18,331 non-zeros (11.7 %) at uniformly random
  positions (numpy seed 0), P = 32, dense x; every allocator; cycles from the exact
  cycle model (:func:`gen.spmv.cycle_model`) and, once, from the Verilator RTL run
  (checked equal to the model, transfer by transfer).
* FIFO depth sweep on the seed matrix.
* Table 2: sparsity 0.883 / 0.483 / 0.083, uniform and skewed row distributions,
  dense x and 50 % zero activations, all allocators.
* Times in us at 100 MHz beside the seed's Table 1 and a scipy CSR SpMV timed here.
"""

import argparse
import json
import math
from pathlib import Path
import sys
import time
import timeit

import numpy as np

from gen.spmv import (ALLOCATORS, SpmvConfig, beat_count, compile_tiled, compile_weights,
                      cycle_model, load_report, ref_spmv, tile_jobs)
from gen.spmv.twin import run_jobs

OUT = Path("build/bench")
ROWS, COLS, P = 1024, 153, 32
# Fmax of the default configuration on ECP5-85 speed 8 (``spnn synth spmv --target ecp5``,
# median of seeds 1-3; docs/spmv.md): Table 1 also gives the time at this clock.
ECP5_FMAX_MHZ = 156.1
SEED_TABLE1_US = {"CPU": 167.6, "GPU": 14.5, "ESE": 5.36, "seed design": 6.68}
SEED_TABLE2_US = {0.883: (6.84, 6.68), 0.483: (25.95, 25.285), 0.083: (45.02, 44.96)}


def log(msg):
    print(msg, flush=True)


def seed_matrix(density, rng, skew=False):
    """Weight codes (int8, non-zero values) with round(density * size) non-zeros.

    ``skew``: row weights drawn from a lognormal (sigma 1), so a few rows hold many
    non-zeros and many rows few ("zeros distributed extremely unevenly").
    """
    nnz = round(density * ROWS * COLS)
    w = np.zeros((ROWS, COLS), dtype=np.int64)
    if not skew:
        pos = rng.choice(ROWS * COLS, nnz, replace=False)
        w.ravel()[pos] = rng.choice(np.r_[-128:0, 1:128], nnz)
        return w
    weight = rng.lognormal(0.0, 1.0, ROWS)
    prob = np.repeat(weight / weight.sum(), COLS) / COLS
    prob = np.minimum(prob, prob.sum() / nnz * 50)  # keep rows from exceeding COLS
    pos = rng.choice(ROWS * COLS, nnz, replace=False, p=prob / prob.sum())
    w.ravel()[pos] = rng.choice(np.r_[-128:0, 1:128], nnz)
    return w


def model_run(w, x, cfg, alloc):
    plan = compile_weights(w, cfg, alloc)
    job = cycle_model([(plan, x)], cfg)["jobs"][0]
    rep = load_report(plan)
    return plan, {"allocator": alloc, "cycles": job["compute_cycles"],
                  "total_cycles": job["total_cycles"], "ideal_cycles": rep["ideal_cycles"],
                  "ratio": job["compute_cycles"] / rep["ideal_cycles"],
                  "max_load": rep["max_load"], "mean_load": rep["mean_load"],
                  "max_over_mean": rep["max_over_mean"], "loads": rep["loads"]}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-rtl", action="store_true", help="skip the Verilator run")
    parser.add_argument("--tiled-lanes", default=[1, 8, 16, 32],
                        type=lambda v: [int(n) for n in v.split(",")],
                        help="weight lanes of the checkerboard runs (default 1,8,16,32; "
                             "the 1-lane runs model about 13 M clocks and take ~15 min)")
    parser.add_argument("--fmax", type=float, default=ECP5_FMAX_MHZ,
                        help=f"clock for the Table 1 time at Fmax (default {ECP5_FMAX_MHZ:g}"
                             " MHz, the measured ECP5 Fmax)")
    args = parser.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    results = {"matrix": {"rows": ROWS, "cols": COLS, "pes": P}}
    big = SpmvConfig(mem_depth=8192)

    # ---- the seed matrix
    rng = np.random.default_rng(0)
    w = seed_matrix(0.117, rng)
    x = rng.integers(1, 2048, COLS) * rng.choice([-1, 1], COLS)
    cfg = SpmvConfig()
    log(f"[1/6] seed matrix {ROWS}x{COLS}, nnz {np.count_nonzero(w)}, P={P}, "
        f"FIFO depth {cfg.fifo_depth}")
    seed_rows, plans = [], {}
    for alloc in ALLOCATORS:
        plan, row = model_run(w, x, cfg, alloc)
        plans[alloc] = plan
        seed_rows.append(row)
        log(f"  {alloc:10s} cycles {row['cycles']:4d} = {row['ratio']:.3f} x ideal "
            f"{row['ideal_cycles']}, max/mean load {row['max_over_mean']:.4f}")
    results["seed"] = seed_rows

    # ---- RTL once
    if not args.no_rtl:
        log("[2/6] RTL (Verilator) on the seed matrix, balanced allocator ...")
        t0 = time.time()
        plan = plans["balanced"]
        ys, res = run_jobs([(plan, x)], cfg, "verilator", name="bench_seed")
        model = cycle_model([(plan, x)], cfg)
        same = (res["sinks"]["o"]["cycles"] == model["o"]
                and res["sources"]["x"]["cycles"] == model["x"]
                and res["sources"]["w"]["cycles"] == model["w"])
        exact = bool(np.array_equal(ys[0], ref_spmv(w, x, cfg)))
        job = model["jobs"][0]
        first_x = res["sources"]["x"]["cycles"][0]
        # first result = idle + done_delay (done) + 1 (drain start) + drain_latency
        rtl_compute = (res["sinks"]["o"]["cycles"][0] - cfg.drain_latency - 1
                       - cfg.done_delay - first_x)
        results["rtl"] = {"sim": "verilator", "rtl_equals_golden": exact,
                          "rtl_cycles_equal_model": same, "compute_cycles": rtl_compute,
                          "model_compute_cycles": job["compute_cycles"],
                          "total_cycles": res["sinks"]["o"]["cycles"][-1] - first_x + 1,
                          "load_cycles": len(res["sources"]["w"]["cycles"]),
                          "wall_s": round(time.time() - t0, 1)}
        log(f"  RTL == golden: {exact}; RTL transfer cycles == model: {same}; compute "
            f"{rtl_compute} cycles ({time.time() - t0:.0f} s)")
    else:
        log("[2/6] RTL run skipped (--no-rtl)")

    # ---- FIFO depth sweep
    log("[3/6] FIFO depth sweep (cycle model)")
    sweep = []
    for depth in (1, 2, 4, 8, 12, 16, 32):
        c = SpmvConfig(fifo_depth=depth)
        row = {"fifo_depth": depth}
        for alloc in ALLOCATORS:
            _, r = model_run(w, x, c, alloc)
            row[alloc] = r["cycles"]
        sweep.append(row)
        log("  depth %2d: " % depth + ", ".join(f"{a} {row[a]}" for a in ALLOCATORS))
    results["fifo_sweep"] = sweep

    # ---- Table 2
    log("[4/6] Table 2: sparsity x distribution x activations x allocator (cycle model)")
    table2 = []
    for sparsity in (0.883, 0.483, 0.083):
        for skew in (False, True):
            rng2 = np.random.default_rng(1)
            wm = seed_matrix(1 - sparsity, rng2, skew)
            xd = rng2.integers(1, 2048, COLS) * rng2.choice([-1, 1], COLS)
            xh = xd.copy()
            xh[rng2.choice(COLS, COLS // 2, replace=False)] = 0
            for xname, xv in (("dense", xd), ("50% zeros", xh)):
                row = {"sparsity": sparsity, "rows": "skewed" if skew else "uniform",
                       "x": xname, "nnz": int(np.count_nonzero(wm))}
                for alloc in ALLOCATORS:
                    _, r = model_run(wm, xv, big, alloc)
                    row[alloc] = r["cycles"]
                    row[alloc + "_max_over_mean"] = r["max_over_mean"]
                active = np.count_nonzero(wm[:, xv != 0])
                row["ideal_cycles"] = math.ceil(active / P)
                table2.append(row)
                log(f"  sparsity {sparsity} {row['rows']:7s} x {xname:9s}: " + ", ".join(
                    f"{a} {row[a]}" for a in ALLOCATORS) + f" (ideal {row['ideal_cycles']})")
    results["table2"] = table2

    # ---- checkerboard tiles and weight bandwidth
    log("[5/6] checkerboard: 4096 x 9216 at 11.7 %, default memories, weight lanes x "
        "bandwidth (cycle model)")
    rng3 = np.random.default_rng(2)
    trows, tcols = 4096, 9216
    tnnz = round(0.117 * trows * tcols)
    wt = np.zeros(trows * tcols, dtype=np.int8)
    wt[rng3.choice(trows * tcols, tnnz, replace=False)] = 1
    wt = wt.reshape(trows, tcols)
    xt = np.ones(tcols, dtype=np.int64)
    tiles = []
    for lanes in args.tiled_lanes:
        tcfg = SpmvConfig(w_lanes=lanes)
        t0 = time.time()
        blocks = compile_tiled(wt, tcfg, "balanced")
        jobs = tile_jobs(blocks, xt)
        for prob in (1.0, 0.5):
            model = cycle_model(jobs, tcfg, w_valid_prob=prob)
            beats = sum(beat_count(b) for b in blocks)
            compute = sum(d["compute_cycles"] for d in model["jobs"])
            total = model["o"][-1] + 1
            row = {"lanes": lanes, "w_valid_prob": prob, "words_per_clock": lanes * prob,
                   "blocks": len(blocks), "block_cols": int(blocks[0].cols),
                   "beats": beats, "compute_cycles_sum": compute,
                   "total_cycles": total, "ideal_cycles": math.ceil(tnnz / P),
                   "ratio": total / math.ceil(tnnz / P),
                   "serial_estimate": int(beats / prob) + compute}
            tiles.append(row)
            log(f"  lanes {lanes:2d} x p {prob}: {len(blocks)} blocks, {beats} beats, "
                f"total {total} cycles = {row['ratio']:.2f} x ideal {row['ideal_cycles']} "
                f"(no overlap would be ~{row['serial_estimate']}) [{time.time() - t0:.0f} s]")
    results["tiled"] = {"rows": trows, "cols": tcols, "nnz": tnnz, "runs": tiles}

    # ---- scipy CSR and Table 1
    log("[6/6] scipy CSR SpMV timing and Table 1")
    import scipy
    import scipy.sparse
    csr = scipy.sparse.csr_matrix(w.astype(np.float32))
    xf = x.astype(np.float32)
    reps = 2000
    times = timeit.repeat(lambda: csr @ xf, number=reps, repeat=5)
    scipy_us = min(times) / reps * 1e6
    best = min(seed_rows, key=lambda r: r["cycles"])
    table1 = dict(SEED_TABLE1_US)
    table1[f"spnn ({best['allocator']}, compute)"] = best["cycles"] * 0.01
    table1[f"spnn ({best['allocator']}, incl. 1024 results at 1/clock)"] = \
        best["total_cycles"] * 0.01
    table1[f"spnn ({best['allocator']}, compute) at {args.fmax:g} MHz (ECP5 Fmax)"] = \
        best["cycles"] / args.fmax
    table1[f"spnn ({best['allocator']}, incl. 1024 results) at {args.fmax:g} MHz"] = \
        best["total_cycles"] / args.fmax
    table1["ideal 32 PEs"] = best["ideal_cycles"] * 0.01
    table1[f"scipy {scipy.__version__} CSR float32, this machine"] = scipy_us
    results["table1_us"] = table1
    log(f"  scipy CSR: {scipy_us:.2f} us; spnn at 100 MHz: {best['cycles'] * 0.01:.2f} us")

    # ---- plot
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(10, 4))
        width = 0.8 / len(ALLOCATORS)
        for i, row in enumerate(seed_rows):
            ax.bar(np.arange(P) + i * width, row["loads"], width,
                   label=f"{row['allocator']} (max/mean {row['max_over_mean']:.3f})")
        ax.axhline(best["ideal_cycles"], color="k", lw=0.8, ls="--", label="nnz / P")
        lo = min(min(r["loads"]) for r in seed_rows)
        ax.set_ylim(lo * 0.9, max(max(r["loads"]) for r in seed_rows) * 1.02)
        ax.set_xlabel("PE")
        ax.set_ylabel("non-zeros")
        ax.set_title("Per-PE loads, 1024x153 at 11.7 % density, P = 32")
        ax.legend(fontsize=8, ncol=2)
        fig.tight_layout()
        fig.savefig(OUT / "spmv_loads.png", dpi=120)
        results["plot"] = str(OUT / "spmv_loads.png")
    except ImportError:
        log("  matplotlib missing: no plot (pip install matplotlib)")

    (OUT / "spmv.json").write_text(json.dumps(results, indent=2) + "\n")
    (OUT / "spmv.md").write_text(markdown(results))
    log(f"wrote {OUT / 'spmv.json'}, {OUT / 'spmv.md'}" +
        (f", {results['plot']}" if "plot" in results else ""))
    log("\n" + markdown(results))
    return 0


def markdown(res) -> str:
    a = ALLOCATORS
    lines = ["### SpMV engine, seed matrix 1024 x 153, 11.7 % density, P = 32, "
             f"FIFO {SpmvConfig().fifo_depth}", "",
             "| allocator | cycles | ideal | cycles / ideal | max/mean load | us @100 MHz |",
             "|---|---|---|---|---|---|"]
    for r in res["seed"]:
        lines.append(f"| {r['allocator']} | {r['cycles']} | {r['ideal_cycles']} | "
                     f"{r['ratio']:.3f} | {r['max_over_mean']:.4f} | {r['cycles'] * 0.01:.2f} |")
    if "rtl" in res:
        r = res["rtl"]
        lines += ["", f"Verilator RTL run (balanced): compute {r['compute_cycles']} cycles, "
                  f"RTL == golden: {r['rtl_equals_golden']}, every transfer cycle == model: "
                  f"{r['rtl_cycles_equal_model']}; weight load {r['load_cycles']} cycles; "
                  f"first x to last y {r['total_cycles']} cycles."]
    lines += ["", "FIFO depth sweep (compute cycles):", "",
              "| depth | " + " | ".join(a) + " |", "|---" * (len(a) + 1) + "|"]
    for r in res["fifo_sweep"]:
        lines.append(f"| {r['fifo_depth']} | " + " | ".join(str(r[k]) for k in a) + " |")
    lines += ["", "Table 2 (compute cycles; seed: unbalanced -> balanced us at 100 MHz):", "",
              "| sparsity | rows | x | nnz | ideal | " + " | ".join(a) + " | best max/mean | "
              "seed us |", "|---" * (len(a) + 7) + "|"]
    for r in res["table2"]:
        seed = SEED_TABLE2_US[r["sparsity"]]
        mm = min(r[k + "_max_over_mean"] for k in a)
        lines.append(f"| {r['sparsity']} | {r['rows']} | {r['x']} | {r['nnz']} | "
                     f"{r['ideal_cycles']} | " + " | ".join(str(r[k]) for k in a)
                     + f" | {mm:.3f} | {seed[0]} -> {seed[1]} |")
    t = res["tiled"]
    lines += ["", f"Checkerboard {t['rows']} x {t['cols']}, nnz {t['nnz']}, P = 32, "
              "1024 rows x 256 cols x 1024 entries/PE per bank, double-buffered "
              "(cycle model; total = first weight beat to last result):", "",
              "| lanes | valid prob | words/clock | blocks | beats | total cycles | "
              "total / ideal | serial load+compute |", "|---" * 8 + "|"]
    for r in t["runs"]:
        lines.append(f"| {r['lanes']} | {r['w_valid_prob']} | {r['words_per_clock']:g} | "
                     f"{r['blocks']} | {r['beats']} | {r['total_cycles']} | "
                     f"{r['ratio']:.2f} | {r['serial_estimate']} |")
    lines += ["", "Table 1 (us):", "", "| design | us |", "|---|---|"]
    for k, v in res["table1_us"].items():
        lines.append(f"| {k} | {v:.2f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
