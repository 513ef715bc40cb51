# SPDX-License-Identifier: Apache-2.0
"""LSTM engine benchmark: ESE-sized layer (X = 153, H = 1024, 11.7 % density, P = 32).

Cycles per timestep (first input of a step to its last ``h`` write, + 2 clocks to the
next step's first input = the step period at full input rate) from the exact cycle
model, against ``ceil(nnz / P)`` where ``nnz`` counts every non-zero of the stacked
``[W_ih W_hh]`` (4H x (X + H)).  The step includes the bias (added in the element-wise
stage's rounding adder), the PWL activations, the cell/hidden update (per-PE
element-wise units, all in parallel, fixed latency ``ew_latency``) and the feedback of
``h``.  ``h_0`` is random and non-zero so every step
runs the full matrix.  Also: FIFO-depth and allocator sweeps, the element-wise tail vs a
one-element-per-clock tail, and an RTL run confirming the cycle model (``--rtl small``:
a scaled layer; ``--rtl full``, the default: the ESE layer itself, a 16-step sequence, its
weights through 16 lanes; ``--rtl none``), by default on the native engine under Verilator
(build and simulation seconds reported apart).

Writes ``build/bench/lstm.json`` and ``build/bench/lstm.md``.
Usage: ``python scripts/bench_lstm.py [--rtl small|full|none] [--sim verilator|icarus]``
"""

import argparse
import dataclasses
import json
from pathlib import Path
import sys
import time

import numpy as np

REPO = Path(__file__).resolve().parents[1]

from gen.core.fixed import quantise
from gen.core.sim import measuring, using_engine
from gen.lstm import (LstmConfig, LstmFloat, compile_lstm, cycle_model, quantise_lstm, ref_lstm,
                      step_cycles, weight_beats)
from gen.lstm.twin import rtl_lstm

X, H, DENSITY, P = 153, 1024, 0.117, 32
BOUND = 1.11


def log(msg):
    print(msg, flush=True)


def synthetic(rng, H, X, density):
    shape = (4 * H, X + H)
    w = np.where(rng.random(shape) < density, rng.uniform(-1, 1, shape), 0.0)
    return LstmFloat(w[:, :X], w[:, X:], rng.uniform(-1, 1, 4 * H))


def measure(layer, cfg, alloc, T, rng):
    q = quantise_lstm(layer, cfg)
    plan = compile_lstm(q, cfg, alloc)
    xs = quantise(rng.uniform(-1, 1, (T, layer.inputs)), cfg.x_fmt)
    h0 = quantise(rng.uniform(-0.9, 0.9, layer.hidden), cfg.x_fmt)
    h0[h0 == 0] = 1
    seqs = [(xs, h0, None)]
    cm = cycle_model(plan, seqs)
    steps = step_cycles(cm)
    return plan, q, seqs, cm, steps


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rtl", default="full", choices=["small", "full", "none"])
    ap.add_argument("--sim", default="verilator", choices=["verilator", "icarus"])
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--full-steps", type=int, default=16,
                    help="sequence length of the --rtl full run (default 16)")
    ap.add_argument("--engine", default="native", choices=["native", "cocotb"])
    ap.add_argument("--out", default=str(REPO / "build" / "bench"))
    args = ap.parse_args(argv)
    t0 = time.time()
    rng = np.random.default_rng(2024)
    layer = synthetic(rng, H, X, DENSITY)
    log(f"[layer] X = {X}, H = {H}, [W_ih W_hh] {4 * H} x {X + H}, density "
        f"{layer.density:.4f}, P = {P}")
    res = {"X": X, "H": H, "P": P, "density": layer.density, "bound": BOUND}

    cfg = LstmConfig(pes=P, max_inputs=X, max_hidden=H, fifo_depth=16, mem_depth=32768)
    plan, q, seqs, cm, steps = measure(layer, cfg, "balanced", args.steps, rng)
    ideal = plan.ideal_cycles
    worst = max(steps)
    res["main"] = {"fifo_depth": 16, "alloc": "balanced", "nnz": plan.nnz,
                   "ideal_cycles": ideal, "cycles_per_step": steps,
                   "ratio": worst / ideal, "efficiency": ideal / worst,
                   "load": plan.load_report(), "ew_cycles": plan.r_run + cfg.ew_latency,
                   "one_per_clock_tail": H + cfg.ew_latency,
                   "meets_bound": worst <= BOUND * ideal}
    log(f"[main] nnz {plan.nnz}, ceil(nnz/P) = {ideal}, cycles/step {steps} -> "
        f"{worst / ideal:.4f} x ideal (bound {BOUND}), efficiency {ideal / worst:.3f} "
        f"({time.time() - t0:.0f} s)")
    log(f"[main] element-wise stage: {plan.r_run} issue clocks + {cfg.ew_latency} latency "
        f"(a 1-element/clock tail would be {H} + latency = "
        f"{100 * H / ideal:.1f} % of a step)")

    res["fifo_sweep"] = []
    for depth in (4, 8, 16, 32):
        c = LstmConfig(pes=P, max_inputs=X, max_hidden=H, fifo_depth=depth, mem_depth=32768)
        p, _, _, _, s = measure(layer, c, "balanced", 1, np.random.default_rng(1))
        res["fifo_sweep"].append({"fifo_depth": depth, "cycles": s[0],
                                  "ratio": s[0] / p.ideal_cycles})
        log(f"[fifo] depth {depth:3d}: {s[0]} cycles/step, {s[0] / p.ideal_cycles:.4f} x ideal")
    res["alloc_sweep"] = []
    for alloc in ("interleave", "zigzag", "lpt", "balanced"):
        p, _, _, _, s = measure(layer, cfg, alloc, 1, np.random.default_rng(1))
        lr = p.load_report()
        res["alloc_sweep"].append({"alloc": alloc, "cycles": s[0], "ratio": s[0] / p.ideal_cycles,
                                   "max_over_mean": lr["max_over_mean"]})
        log(f"[alloc] {alloc:10s}: max/mean load {lr['max_over_mean']:.4f}, {s[0]} cycles/step, "
            f"{s[0] / p.ideal_cycles:.4f} x ideal")

    res["rtl"] = None
    if args.rtl != "none":
        if args.rtl == "full":
            # the weights through 16 lanes (16 words per clock) instead of one word per
            # clock (about 580k load clocks)
            fcfg = dataclasses.replace(cfg, w_lanes=16)
            rplan, rq, rseqs, rcm, _ = measure(layer, fcfg, "balanced", args.full_steps,
                                               np.random.default_rng(0))
        else:
            sx, sh, sp = 40, 128, 8
            small = synthetic(np.random.default_rng(5), sh, sx, DENSITY)
            scfg = LstmConfig(pes=sp, max_inputs=sx, max_hidden=sh, fifo_depth=16,
                              mem_depth=2048)
            rplan, rq, rseqs, rcm, _ = measure(small, scfg, "balanced", 2,
                                               np.random.default_rng(6))
        t1 = time.time()
        c = rplan.cfg
        log(f"[rtl] {args.rtl}: X = {rplan.inputs}, H = {rplan.hidden}, P = {c.pes}, "
            f"{len(rseqs[0][0])} steps on {args.sim} (build + run) ...")
        with using_engine(args.engine), measuring() as cost:
            outs, rres = rtl_lstm(rplan, rseqs, args.sim, name=f"bench_{args.rtl}")
        golden = ref_lstm(rq, rseqs[0][0], c, rseqs[0][1], rseqs[0][2])[0]
        exact = bool(np.array_equal(outs[0], golden))
        same = rres["sinks"]["o"]["cycles"] == rcm["o"] and \
            rres["sources"]["x"]["cycles"] == rcm["x"]
        res["rtl"] = {"kind": args.rtl, "sim": args.sim, "X": rplan.inputs, "H": rplan.hidden,
                      "P": c.pes, "w_lanes": c.w_lanes,
                      "weight_beats": len(weight_beats(rplan)),
                      "bit_exact": exact, "cycles_match_model": same,
                      "cycles_per_step": step_cycles(rcm), "ideal_cycles": rplan.ideal_cycles,
                      "seconds": time.time() - t1, "engine": args.engine,
                      "build_seconds": cost["build_seconds"], "sim_seconds": cost["sim_seconds"],
                      "clocks": cost["clocks"], "clocks_per_second": cost["clocks_per_second"]}
        log(f"[rtl] {len(weight_beats(rplan))} weight beats at {c.w_lanes} lanes; bit-exact "
            f"{exact}, every transfer cycle == model {same} ({time.time() - t1:.0f} s)")

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "lstm.json").write_text(json.dumps(res, indent=2) + "\n")
    m = res["main"]
    md = ["# LSTM engine: ESE-sized layer", "",
          f"X = {X}, H = {H}, stacked [W_ih W_hh] {4 * H} x {X + H} at density "
          f"{layer.density:.4f} ({m['nnz']} non-zeros), P = {P}, FIFO depth 16, balanced "
          f"allocation of hidden units (one permutation for all gates).", "",
          "| quantity | value |", "|---|---|",
          f"| ceil(nnz / P) | {ideal} |",
          f"| cycles per step (cycle model) | {', '.join(map(str, steps))} |",
          f"| worst / ideal | {m['ratio']:.4f} (bound {BOUND}) |",
          f"| efficiency | {m['efficiency']:.3f} |",
          f"| element-wise stage per step | {m['ew_cycles']} cycles "
          f"(1-per-clock tail: {m['one_per_clock_tail']}) |", "",
          "| FIFO depth | cycles/step | x ideal |", "|---|---|---|"]
    md += [f"| {r['fifo_depth']} | {r['cycles']} | {r['ratio']:.4f} |" for r in res["fifo_sweep"]]
    md += ["", "| allocator | max/mean PE load | cycles/step | x ideal |", "|---|---|---|---|"]
    md += [f"| {r['alloc']} | {r['max_over_mean']:.4f} | {r['cycles']} | {r['ratio']:.4f} |"
           for r in res["alloc_sweep"]]
    if res["rtl"]:
        r = res["rtl"]
        md += ["", f"RTL ({r['kind']}: X = {r['X']}, H = {r['H']}, P = {r['P']}, {r['sim']}): "
               f"bit-exact with golden {r['bit_exact']}, every transfer cycle equal to the "
               f"cycle model {r['cycles_match_model']}, cycles/step "
               f"{', '.join(map(str, r['cycles_per_step']))} (ideal {r['ideal_cycles']}); "
               f"{r['weight_beats']} weight beats at {r['w_lanes']} lanes; "
               f"{r['engine']} engine: {r['seconds']:.0f} s in all, of which "
               f"{r['build_seconds']:.0f} s conversion and simulator build, "
               f"{r['sim_seconds']:.1f} s simulation of {r['clocks']:,} clocks "
               f"({r['clocks_per_second']:,.0f} clocks/s)."]
    (out / "lstm.md").write_text("\n".join(md) + "\n")
    log(f"[done] {out / 'lstm.json'}, {out / 'lstm.md'} ({time.time() - t0:.0f} s)")
    return 0 if m["meets_bound"] and (res["rtl"] is None or (
        res["rtl"]["bit_exact"] and res["rtl"]["cycles_match_model"])) else 1


if __name__ == "__main__":
    sys.exit(main())
