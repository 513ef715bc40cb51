# SPDX-License-Identifier: Apache-2.0
"""End-to-end runs of the accelerator shells (AXI4-Stream + AXI4-Lite) beside the roofline.

Every figure counts from the first input beat to the last output beat (loads and result
streams included), through the product's AXI bench under Verilator, at full rate (every
source always valid, every sink always ready).  The roofline is ``gen.core.runutil.
roofline_fields``: the larger of the compute bound (MACs or non-zeros / MAC units) and the
busiest port's beats (words that must cross it / words per beat).

* spmv: the seed matrix (1024 x 153, 11.7 %, the seed of scripts/bench_spmv.py), P = 32,
  16 words per beat (``w_lanes`` 16, ``drain_lanes`` 16: 16 results per clock), cut into
  the blocks of :func:`gen.spmv.plan_blocks` (reordered columns, ROW words spread over the
  blocks); roofline beats from :func:`gen.spmv.roofline_beats`; the RTL's cycles must
  equal :func:`gen.spmv.shell_cycles`.  ``--spmv-plan columns`` runs the earlier
  :func:`gen.spmv.plan_columns` plan instead.
* lstm: H = 64, X = 32 at 20 % density, T = 8, P = 16, 8 words per beat (``w_lanes`` 8); the
  weights and the sequence in one job; roofline beats from :func:`gen.lstm.roofline_beats`.
* conv: the default 16 x 4 array (``BankedConfig``) at 16 words per beat, a 16 x 16 x 3 x
  3 layer on 8 x 8 (pad 1), batch 1, planned by :func:`gen.conv.banked.plan_layer` (one
  job).

Writes build/bench/shells.json and build/bench/shells.md.  Run: python -m scripts.bench_shells
(``--only spmv`` runs one block and writes nothing).
"""

import json
import math
from pathlib import Path

import numpy as np

from gen.core.runutil import roofline_fields
from scripts.bench_spmv import seed_matrix


SPMV_CFG = dict(pes=32, rows_per_pe=32, max_cols=256, mem_depth=1024, w_lanes=16,
                drain_lanes=16, bus_words=16, acc_width=32)


def spmv_blocks(plan="blocks"):
    """The seed matrix, its vector, the config and its planned blocks (``plan``:
    ``"blocks"`` :func:`gen.spmv.plan_blocks`, ``"columns"`` :func:`gen.spmv.plan_columns`)."""
    from gen.spmv import SpmvConfig, compile_tiled, plan_blocks, plan_columns
    rng = np.random.default_rng(0)
    w = seed_matrix(0.117, rng)
    x = rng.integers(-2048, 2048, w.shape[1])
    cfg = SpmvConfig(**SPMV_CFG)
    if plan == "columns":
        blocks = compile_tiled(w, cfg, col_starts=plan_columns(w, x, cfg))
    else:
        blocks = plan_blocks(w, x, cfg)
    return w, x, cfg, blocks


def spmv_row(plan="blocks"):
    from gen.spmv import ref_spmv, roofline_beats, shell_cycles, tile_jobs
    from gen.spmv.twin import rtl_spmv_axi
    w, x, cfg, blocks = spmv_blocks(plan)
    y, job = rtl_spmv_axi(w, x, cfg, "verilator", name="bench-shell", blocks=blocks)
    nnz = int(np.count_nonzero(w))
    how = ("column blocks" if plan == "columns" else
           "blocks of reordered columns, ROW words spread")
    row = _row("spmv", f"seed matrix 1024 x 153, 11.7 %, P = 32, {len(blocks)} {how}, "
               f"16 results per clock", cfg.bus_words, job,
               math.ceil(nnz / cfg.pes), roofline_beats(w, cfg),
               np.array_equal(y, ref_spmv(w, x, cfg)))
    row["model_cycles"] = shell_cycles(tile_jobs(blocks, x), cfg)
    if row["model_cycles"] != row["end_to_end_cycles"]:
        raise SystemExit(f"bench_shells: the shell took {row['end_to_end_cycles']} cycles, "
                         f"gen.spmv.shell_cycles says {row['model_cycles']}")
    return row


def lstm_row():
    from gen.core.fixed import quantise
    from gen.lstm import (LstmConfig, LstmFloat, compile_lstm, prune_lstm, quantise_lstm,
                          ref_lstm, roofline_beats, weight_words)
    from gen.lstm.twin import JOB_INPUTS, axi_jobs, rtl_lstm_axi
    rng = np.random.default_rng(1)
    H, X, T = 64, 32, 8
    model = prune_lstm(LstmFloat(rng.uniform(-0.5, 0.5, (4 * H, X)),
                                 rng.uniform(-0.5, 0.5, (4 * H, H)),
                                 rng.uniform(-0.5, 0.5, 4 * H)), 0.2)
    cfg = LstmConfig(pes=16, max_inputs=X, max_hidden=H, fifo_depth=16, mem_depth=1024,
                     w_lanes=8, bus_words=8)
    q = quantise_lstm(model, cfg)
    plan = compile_lstm(q, cfg)
    xs = quantise(rng.uniform(-1, 1, (T, X)), cfg.x_fmt)
    jobs = axi_jobs(plan, [(xs, None, None)], with_weights=False)
    jobs[0]["regs"][0] = [JOB_INPUTS, 3]
    jobs[0]["packets"]["s_axis_w"] = weight_words(plan)
    hs, records = rtl_lstm_axi(plan, [(xs, None, None)], "verilator", jobs=jobs,
                               name="bench-shell")
    n = cfg.bus_words
    return _row("lstm", f"H = {H}, X = {X}, 20 %, T = {T}, P = 16, weight load included, "
                f"{cfg.w_lanes} weight words per clock", n,
                records[0], plan.ideal_cycles * T, roofline_beats(plan, T),
                np.array_equal(hs[0], ref_lstm(q, xs, cfg)[0]))


def conv_row():
    from gen.conv import ConvLayer, ref_conv
    from gen.conv.banked import BankedConfig, plan_layer, run_plan
    from gen.conv.twin import rtl_banked_axi
    rng = np.random.default_rng(2)
    layer = ConvLayer(16, 16, 8, 8, 3, 3, 1, 1)
    cfg = BankedConfig(bus_words=16)
    plan = plan_layer(layer, cfg)
    x = rng.integers(-128, 128, (16, 8, 8))
    w = rng.integers(-128, 128, (16, 16, 3, 3))
    runs = []

    def conv(items):
        outs, stats, records = rtl_banked_axi(items, cfg, "verilator", name="bench-shell")
        runs.extend(zip(stats, records))
        return outs
    y = run_plan(x, w, plan, conv)[0]
    if len(runs) != 1:
        raise SystemExit(f"bench_shells: the conv layer took {len(runs)} jobs, not one")
    (busy, issued), record = runs[0]
    beats = {"s_axis_w": plan.beats["w"], "s_axis_x": plan.beats["x"],
             "m_axis_o": record["beats_out"]}
    row = _row("conv", f"{cfg.rows} x {cfg.cols} array (default buffers, {cfg.copies} "
               f"copies), 16 x 16 x 3 x 3 on 8 x 8, pad 1, one job", cfg.bus_words, record,
               plan.compute_bound, beats, np.array_equal(y, ref_conv(x, w, 1, 1)))
    row["compute_only_utilisation"] = busy / (cfg.rows * cfg.cols * issued)
    row["end_to_end_utilisation"] = layer.macs / (cfg.rows * cfg.cols
                                                  * row["end_to_end_cycles"])
    return row


def _row(block, workload, bus_words, job, compute_bound, beats, exact):
    cycles = job["end"] - job["first_in"] + 1
    return {"block": block, "workload": workload, "bus_words": bus_words,
            **roofline_fields(cycles, compute_bound, beats), "counters": job["counters"],
            "rtl_equals_golden": bool(exact)}


def markdown(rows) -> str:
    lines = ["| block | workload | words per beat | end-to-end cycles | compute bound "
             "| bandwidth bound | roofline | efficiency vs roofline | RTL == golden |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['block']} | {r['workload']} | {r['bus_words']} "
                     f"| {r['end_to_end_cycles']} | {r['compute_bound_cycles']} "
                     f"| {r['bandwidth_bound_cycles']} | {r['roofline_cycles']} "
                     f"| {r['efficiency_vs_roofline']:.3f} | {r['rtl_equals_golden']} |")
    conv = next((r for r in rows if r["block"] == "conv"), None)
    lines += ["", "End to end: first input beat to last output beat, loads and result "
              "streams included, Verilator, full rate. Compute bound: non-zeros (spmv, lstm: "
              "per step x steps) or MACs (conv) / MAC units; bandwidth bound: the busiest "
              "AXI4-Stream port's beats."]
    if conv:
        lines.append(f"conv utilisation: {conv['end_to_end_utilisation']:.3f} end to end, "
                     f"{conv['compute_only_utilisation']:.3f} compute-only (the array's own "
                     "busy MAC-cycles over its compute cycles).")
    return "\n".join(lines) + "\n"


def main(argv=None):
    import argparse
    from gen.core.sim import sim_available
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spmv-plan", choices=("blocks", "columns"), default="blocks",
                    help="SpMV plan: gen.spmv.plan_blocks (default) or plan_columns")
    ap.add_argument("--only", choices=("spmv", "lstm", "conv"), action="append",
                    help="run only these blocks (repeatable; default all)")
    args = ap.parse_args(argv)
    if not sim_available("verilator"):
        raise SystemExit("bench_shells needs Verilator (the dev extra)")
    rows = []
    for name, fn in (("spmv", lambda: spmv_row(args.spmv_plan)), ("lstm", lstm_row),
                     ("conv", conv_row)):
        if args.only and name not in args.only:
            continue
        print(f"shell: {name}", flush=True)
        rows.append(fn())
        print(f"  {rows[-1]['end_to_end_cycles']} cycles end to end, roofline "
              f"{rows[-1]['roofline_cycles']}", flush=True)
    if args.only:       # a partial run leaves the tables of the full one alone
        print(markdown(rows))
        return
    out = Path("build/bench")
    out.mkdir(parents=True, exist_ok=True)
    (out / "shells.json").write_text(json.dumps(rows, indent=2) + "\n")
    (out / "shells.md").write_text(markdown(rows))
    print((out / "shells.md").read_text())


if __name__ == "__main__":
    main()
