# SPDX-License-Identifier: Apache-2.0
"""Benchmark of the FD-CSR FC engine (seed 001).

1. Storage/bandwidth of the seed's six FC layers (16-bit values) in dense, CSR, seed-000
   column-packed and FD-CSR layouts, next to the seed's 2.44x - 6.17x.
2. Cycle model, full-size layers: the engine skipping zeros vs the same engine issuing
   every weight (dense), for 1, 2 and 4 non-zeros per clock.
3. RTL on scaled-down layers (rows and cols / 64, same densities): measured cycles, checked
   against the model and the golden model.

Writes build/bench/fc.json and build/bench/fc.md.  Run: python scripts/bench_fc.py
[--sim icarus (default)|verilator] [--skip-rtl].
"""

import argparse
import json
from pathlib import Path
import sys
import time

import numpy as np

from gen.fc import (SEED_LAYERS, FcConfig, bandwidth_table, decode_walk, dense_cycles, encode,
                    fc_schedule, fixed_overhead, prune_random, ref_fc)
from gen.fc.fdcsr import SEED_REDUCTION
from gen.fc.twin import rtl_fc

OUT = Path("build/bench")
ENGINES = ((1, 4), (2, 8), (4, 8))   # (non-zeros per clock, segments per beat)
SCALE = 64


def _bandwidth():
    table = bandwidth_table()
    for row in table:
        print(f"  {row['layer']:12s} {row['density'] * 100:4.0f} %  FD-CSR(16-bit offsets) "
              f"{row['reduction']['fdcsr16']:.2f}x, 32-bit {row['reduction']['fdcsr32']:.2f}x, "
              f"CSR {row['reduction']['csr']:.2f}x", flush=True)
    return table


def _model_cycles(seed=0):
    """Full-size layers: per-beat non-zero counts of a Bernoulli(density) mask are
    Binomial(beat_cols, density); the decoder's clocks follow gen.fc.decode_walk."""
    rng = np.random.default_rng(seed)
    out = []
    for name, rows, cols, density in SEED_LAYERS:
        for k, segs in ENGINES:
            cfg = FcConfig(batch=1, nz_per_clock=k, segs_per_beat=segs, max_cols=cols
                           if cols % (16 * segs) == 0 else -(-cols // (16 * segs)) * 16 * segs,
                           max_rows=rows, addr_width=24)
            beats = -(-cols // cfg.beat_cols)
            counts = rng.binomial(cfg.beat_cols, density, size=(rows, beats))
            if cols % cfg.beat_cols:
                counts[:, -1] = rng.binomial(cols % cfg.beat_cols, density, size=rows)
            nnz = int(counts.sum())
            decode = int(decode_walk(counts, k)[0][-1])
            sparse = fixed_overhead(cols, cfg) + decode
            dense = dense_cycles(rows, cols, cfg)
            ideal = -(-nnz // k)
            out.append({"layer": name, "rows": rows, "cols": cols, "density": density,
                        "nz_per_clock": k, "segs_per_beat": segs, "nnz": nnz,
                        "decode_clocks": decode, "ideal": ideal, "cycles": sparse,
                        "dense_cycles": dense, "decode_over_ideal": decode / ideal,
                        "speedup": dense / sparse,
                        "fixed_overhead": fixed_overhead(cols, cfg)})
            print(f"  {name:12s} k={k}: {sparse} cycles vs dense {dense} "
                  f"({dense / sparse:.1f}x), decode / ideal {decode / ideal:.3f}", flush=True)
    return out


def _rtl(sim, seed=1):
    rng = np.random.default_rng(seed)
    out = []
    batch = 4
    for k, segs in ((1, 4), (4, 8)):
        cfg = FcConfig(batch=batch, nz_per_clock=k, segs_per_beat=segs, max_cols=512,
                       max_rows=64, addr_width=16)
        for name, rows, cols, density in SEED_LAYERS:
            r, c = max(1, rows // SCALE), max(1, cols // SCALE)
            w = prune_random((r, c), density, rng, cfg.w_fmt.width)
            x = rng.integers(cfg.x_fmt.min_code, cfg.x_fmt.max_code + 1, size=(c, batch))
            t0 = time.time()
            y, res = rtl_fc(w, x, cfg, sim, name=f"bench_k{k}_{name.replace(' ', '_')}")
            sched = fc_schedule(encode(w, cfg.row_width), cfg)
            cycles = res["sinks"]["y"]["cycles"][-1] - res["sources"]["cmd"]["cycles"][0] + 1
            exact = bool(np.array_equal(y, ref_fc(w, x, cfg)))
            dense = dense_cycles(r, c, cfg)
            nnz = int(np.count_nonzero(w))
            out.append({"layer": name, "rows": r, "cols": c, "density": density, "nnz": nnz,
                        "batch": batch, "nz_per_clock": k, "lanes": cfg.lanes,
                        "rtl_cycles": cycles, "model_cycles": sched["cycles"],
                        "decode_clocks": sched["decode_clocks"],
                        "ideal": sched["ideal_cycles"],
                        "dense_cycles": dense, "speedup": dense / cycles,
                        "rtl_matches_golden": exact,
                        "rtl_equals_model": cycles == sched["cycles"]})
            print(f"  {name:12s} {r}x{c} k={k}: RTL {cycles} cycles (model {sched['cycles']}, "
                  f"dense {dense}), exact={exact}  [{time.time() - t0:.1f} s]", flush=True)
    return out


def _markdown(bw, model, rtl):
    lines = ["# FD-CSR FC engine (seed 001): measured by scripts/bench_fc.py", "",
             "## Weight storage of the seed's layers (16-bit values), reduction vs dense", "",
             "Field widths: dense 16 b/element; CSR 16 b value + ceil(log2 cols) b column "
             "index per non-zero + ceil(log2(nnz+1)) b row pointer per row; seed-000 column "
             "packing 20 b entries (16 b value + 4 b local row) plus a terminator entry per "
             "(512-row block, PE, column) with 32 PEs; FD-CSR 16 b value per non-zero and per "
             "16-element segment a 16 b mask and an offset of 16 b (tile-relative), "
             "ceil(log2(nnz+1)) b (minimal) or 32 b.", "",
             "| layer | shape | density | nnz | dense MB | CSR | seed-000 colpack | "
             "FD-CSR 16-b off. | FD-CSR min off. | FD-CSR 32-b off. | FD-CSR no off. |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in bw:
        red = r["reduction"]
        lines.append(f"| {r['layer']} | {r['rows']}x{r['cols']} | {r['density'] * 100:.0f} % | "
                     f"{r['nnz']} | {r['bits']['dense'] / 8e6:.1f} | {red['csr']:.2f}x | "
                     f"{red['colpack']:.2f}x | {red['fdcsr16']:.2f}x | {red['fdcsr']:.2f}x | "
                     f"{red['fdcsr32']:.2f}x | {red['fdcsr_nooff']:.2f}x |")
    f16 = [r["reduction"]["fdcsr16"] for r in bw]
    lines += ["", f"FD-CSR with 16-bit offsets spans {min(f16):.2f}x - {max(f16):.2f}x; the seed "
              f"reports {SEED_REDUCTION[0]}x - {SEED_REDUCTION[1]}x.", "",
              "## Cycles, full-size layers (model): zero-skipping vs dense issue", "",
              "N lanes per non-zero (any batch N); k non-zeros per clock; S = segments per "
              "meta beat.  `decode/ideal` = decoder clocks / ceil(nnz / k); total = decoder "
              f"clocks + fixed overhead (cols + {fixed_overhead(0, FcConfig())}: activation "
              "load, meta input stage, skid buffer and pipeline).", "",
              "| layer | k | S | nnz | FD-CSR cycles | dense cycles | speed-up | decode/ideal |",
              "|---|---|---|---|---|---|---|---|"]
    for r in model:
        lines.append(f"| {r['layer']} | {r['nz_per_clock']} | {r['segs_per_beat']} | "
                     f"{r['nnz']} | {r['cycles']} | {r['dense_cycles']} | {r['speedup']:.1f}x "
                     f"| {r['decode_over_ideal']:.3f} |")
    if rtl:
        lines += ["", f"## RTL, layers scaled down by {SCALE} in rows and cols (batch 4)", "",
                  "| layer | shape | k | nnz | RTL cycles | model | dense | speed-up | "
                  "decode/ideal | exact |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for r in rtl:
            lines.append(f"| {r['layer']} | {r['rows']}x{r['cols']} | {r['nz_per_clock']} | "
                         f"{r['nnz']} | {r['rtl_cycles']} | {r['model_cycles']} | "
                         f"{r['dense_cycles']} | {r['speedup']:.1f}x | "
                         f"{r['decode_clocks'] / r['ideal']:.3f} | "
                         f"{'yes' if r['rtl_matches_golden'] else 'NO'} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    # Icarus by default: the k = 4 engine with 128-element beats takes Verilator several
    # minutes to compile, longer than the whole Icarus run.
    ap.add_argument("--sim", default="icarus", choices=["verilator", "icarus"])
    ap.add_argument("--skip-rtl", action="store_true")
    args = ap.parse_args(argv)
    print("[1/3] storage / bandwidth of the seed's layers", flush=True)
    bw = _bandwidth()
    print("[2/3] cycle model, full-size layers", flush=True)
    model = _model_cycles()
    rtl = []
    if not args.skip_rtl:
        print(f"[3/3] RTL on scaled-down layers ({args.sim})", flush=True)
        rtl = _rtl(args.sim)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "fc.json").write_text(json.dumps({"bandwidth": bw, "model": model, "rtl": rtl,
                                             "seed_reduction": SEED_REDUCTION}, indent=2)
                                 + "\n")
    (OUT / "fc.md").write_text(_markdown(bw, model, rtl))
    bad = [r for r in rtl if not (r["rtl_matches_golden"] and r["rtl_equals_model"])]
    print(f"wrote {OUT / 'fc.json'} and {OUT / 'fc.md'}; "
          f"{len(rtl) - len(bad)}/{len(rtl)} RTL runs exact and on the model's cycle")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
