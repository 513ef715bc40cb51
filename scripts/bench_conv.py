# SPDX-License-Identifier: Apache-2.0
"""Benchmark of the remainder-aware MAC array (seed 002).

1. Network tables: AlexNet, VGG16, ResNet-18 convolution layers on 128x16 (the seed's
   array) and 256x32 (its motivating example); per-layer and network-level utilisation
   (MACs / (rows x cols x compute cycles)) for the naive, seed and remainder mappings, the
   remainder mapping without the shared-stream limit, and the column bound of any mapping.
2. One PNG bar chart per network (per layer, naive vs seed vs remainder, both arrays).
3. RTL-measured utilisation (busy MAC-cycles counted in the array) on the scaled 8x4 and
   16x4 arrays beside the model, for scaled-down versions of the remainder cases (naive and
   remainder at batch 1, remainder with a batch of 4 images).
4. Batching: network-level utilisation of the remainder mapping with B = 1, 2, 4, 8, 16
   images per layer, the column and tile bounds, and the smallest batch reaching 0.95 on
   both arrays.

Writes build/bench/conv.json, build/bench/conv.md and build/bench/conv_<network>.png.
Run: python scripts/bench_conv.py [--sim icarus|verilator] [--no-rtl]
"""

import argparse
import dataclasses
import itertools
import json
from pathlib import Path
import time

import numpy as np

from gen.conv import (ConvConfig, ConvLayer, network_table, plan, ref_conv, seed_buffers,
                      stagger_cycles)
from gen.conv.twin import rtl_conv
from gen.conv.networks import NETWORKS
from gen.conv.tiling import plan_tiles

OUT = Path("build/bench")
ARRAYS = {"128x16": ConvConfig(rows=128, cols=16, max_groups=8, drain_rows=8),
          "256x32": ConvConfig(rows=256, cols=32, max_groups=8, drain_rows=16)}
MAPS = ("naive", "seed", "remainder")

# Scaled remainder cases for the RTL: (label, oc, ic, h, w, k, stride, pad) on each array.
RTL_CASES = [
    ("R = rows/2 (VGG conv1_2 on 128 rows, scaled)", "half", 3, 8, 8, 3, 1, 1),
    ("R = rows/4", "quarter", 2, 8, 8, 3, 1, 1),
    ("Oc = 1.25 rows (full block + remainder)", "five_quarters", 2, 6, 6, 3, 1, 1),
    ("R = 3/4 rows, 5x5 stride 2", "three_quarters", 2, 9, 9, 5, 2, 2),
    ("1x1, Oc = rows/2 + 1", "half_plus", 4, 6, 6, 1, 1, 0),
    ("7x7 map, full rows (column remainder)", "full", 2, 7, 7, 3, 1, 1),
]
RTL_BATCH = 4          # the remainder mapping is also run with this many images per layer


def _oc(kind, rows):
    return {"half": rows // 2, "quarter": rows // 4, "five_quarters": rows + rows // 4,
            "three_quarters": 3 * rows // 4, "half_plus": rows // 2 + 1, "full": rows}[kind]


def networks():
    results = {}
    for aname, cfg in ARRAYS.items():
        for net, layers in NETWORKS.items():
            t0 = time.time()
            table = network_table(layers, cfg)
            table["stagger_cycles"] = sum(
                stagger_cycles(plan(ConvLayer(oc, ic, h, w, k, k, s, p), cfg,
                                    limit_buffers=False))
                for _, oc, ic, h, w, k, s, p in layers)
            results[f"{net}@{aname}"] = table
            net_u = table["network"]
            print(f"[tables] {net:9s} {aname}: naive {net_u['naive']:.3f}  seed {net_u['seed']:.3f}"
                  f"  remainder {net_u['remainder']:.3f}  (bound {net_u['bound']:.3f})"
                  f"  {time.time() - t0:.1f} s", flush=True)
    return results


def tiled_networks():
    """Every layer at full resolution on the arrays' DEFAULT buffers, host-tiled
    (:func:`gen.conv.tiling.plan_tiles`): end-to-end cycles from the exact model (loads,
    compute and output stream of every job, a job one run of equal tiles; features and
    outputs one word per clock, weights one or ``w_lanes`` = 16 per clock), against
    compute-only; the arrays' default
    buffers and the seed-sized ones (:func:`gen.conv.seed_buffers`).  Keys ``net@array``
    (default buffers, one weight lane), ``@seed`` and ``@l16`` appended for the others."""
    out = {}
    for (aname, base), sized, lanes, (net, layers) in itertools.product(
            ARRAYS.items(), ("default", "seed"), (1, 16), NETWORKS.items()):
        cfg = dataclasses.replace(seed_buffers(base) if sized == "seed" else base,
                                  w_lanes=lanes)
        t0 = time.time()
        cycles = macs = jobs = compute = 0
        words = {"weights": 0, "features": 0, "outputs": 0}
        for _, oc, ic, h, w, k, s, p in layers:
            tp = plan_tiles(ConvLayer(oc, ic, h, w, k, k, s, p), cfg)
            cycles += tp.cycles
            macs += tp.macs
            jobs += tp.jobs
            compute += sum(t.sched.compute_cycles for t in tp.tiles)
            for key, value in tp.words.items():
                words[key] += value
        units = cfg.rows * cfg.cols
        key = (f"{net}@{aname}" + ("@seed" if sized == "seed" else "")
               + (f"@l{lanes}" if lanes > 1 else ""))
        out[key] = {
            "w_lanes": lanes, "buffers_from": sized, "jobs": jobs, "cycles": cycles, "compute_cycles": compute,
            "macs": macs,
            "words": words, "end_to_end_utilisation": macs / (units * cycles),
            "compute_utilisation": macs / (units * compute),
            "buffers": {"feat_depth": cfg.feat_depth, "weight_depth": cfg.weight_depth,
                        "out_depth": cfg.out_depth, "max_dim": cfg.max_dim,
                        "max_slots": cfg.max_slots}}
        r = out[key]
        print(f"[tiled] {net:9s} {aname} {sized} buffers, w_lanes {lanes}: {jobs} jobs, end to end "
              f"{r['end_to_end_utilisation']:.4f}, compute-only "
              f"{r['compute_utilisation']:.3f}  {time.time() - t0:.1f} s", flush=True)
    return out


BATCHES = (1, 2, 4, 8, 16)
TARGET = 0.95


def batch_table():
    """Network-level utilisation (remainder mapping) with B images per layer (weights loaded
    once per chunk, reused over the batch), the bounds, and the smallest batch reaching
    the target on both arrays (powers of two in BATCHES, and the smallest integer)."""
    out = {"batches": list(BATCHES), "target": TARGET, "networks": {}}
    for net, layers in NETWORKS.items():
        entry = {}
        for aname, cfg in ARRAYS.items():
            entry[aname] = {}
            for b in BATCHES:
                u = network_table(layers, cfg, ("remainder",), batch=b)["network"]
                entry[aname][b] = {k: u[k] for k in ("remainder", "bound", "tile_bound",
                                                     "bound_min")}
        ok = [b for b in BATCHES if all(entry[a][b]["remainder"] >= TARGET for a in ARRAYS)]
        smallest = None
        for b in range(1, 33):
            if all(network_table(layers, cfg, ("remainder",), batch=b)["network"]["remainder"]
                   >= TARGET for cfg in ARRAYS.values()):
                smallest = b
                break
        out["networks"][net] = {"arrays": entry, "smallest_pow2": ok[0] if ok else None,
                                "smallest": smallest}
        print(f"[batch] {net:9s} " + "  ".join(
            f"{a}: " + " ".join(f"B{b} {entry[a][b]['remainder']:.3f}" for b in BATCHES)
            for a in ARRAYS) + f"  -> batch {ok[0] if ok else '>16'} (smallest integer "
            f"{smallest})", flush=True)
    return out


def skip_pad_savings():
    """Compute cycles of the remainder mapping without / with padding-beat skipping."""
    out = {}
    for aname, cfg in ARRAYS.items():
        for net, layers in NETWORKS.items():
            base = skip = 0
            for name, oc, ic, h, w, k, s, p in layers:
                layer = ConvLayer(oc, ic, h, w, k, k, s, p)
                base += plan(layer, cfg, "remainder", limit_buffers=False).compute_cycles
                skip += plan(layer, cfg, "remainder", limit_buffers=False,
                             skip_pad=p < k).compute_cycles
            out[f"{net}@{aname}"] = {"cycles": base, "cycles_skip_pad": skip,
                                     "saved": 1 - skip / base}
            print(f"[skip-pad] {net:9s} {aname}: compute cycles {base} -> {skip} "
                  f"({100 * (1 - skip / base):.1f} % saved)", flush=True)
    return out


def charts(results):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    paths = []
    for net in NETWORKS:
        fig, axes = plt.subplots(len(ARRAYS), 1, figsize=(max(8, 0.55 * len(NETWORKS[net]) + 3),
                                                           3.2 * len(ARRAYS)), squeeze=False)
        for ax, aname in zip(axes[:, 0], ARRAYS):
            table = results[f"{net}@{aname}"]
            names = [r["layer"] for r in table["layers"]]
            x = np.arange(len(names))
            width = 0.27
            for i, (m, colour) in enumerate(zip(MAPS, ("#bbbbbb", "#6a9fd4", "#d9822b"))):
                vals = [r[m]["utilisation"] for r in table["layers"]]
                label = {"naive": "naive (rows idle, row strips)",
                         "seed": "seed's channel rule", "remainder": "remainder (ours)"}[m]
                ax.bar(x + (i - 1) * width, vals, width,
                       label=f"{label}: {table['network'][m]:.2f}", color=colour)
            ax.plot(x, [r["bound"] for r in table["layers"]], "k_", markersize=12,
                    label=f"column bound: {table['network']['bound']:.2f}")
            ax.set_xticks(x, names, rotation=60, ha="right", fontsize=7)
            ax.set_ylim(0, 1.05)
            ax.set_ylabel("MAC utilisation")
            ax.set_title(f"{net} on {aname} (network-level in the legend)")
            ax.legend(fontsize=7, loc="lower right")
        fig.tight_layout()
        path = OUT / f"conv_{net}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
        print(f"[chart] {path}", flush=True)
    return paths


def rtl(sim):
    rows = []
    rng = np.random.default_rng(0)
    # buffers for RTL_BATCH images of the largest case (no input-channel split)
    for cfg in (ConvConfig(rows=8, cols=4, max_groups=4, out_depth=4096, feat_depth=2048,
                           max_slots=1024),
                ConvConfig(rows=16, cols=4, max_groups=4, out_depth=4096, feat_depth=2048,
                           max_slots=1024)):
        jobs, meta = [], []
        for label, kind, ic, h, w, k, s, p in RTL_CASES:
            layer = ConvLayer(_oc(kind, cfg.rows), ic, h, w, k, k, s, p)
            x = rng.integers(-128, 128, (RTL_BATCH, ic, h, w))
            wt = rng.integers(-128, 128, (layer.oc, ic, k, k))
            for mapping, b in (("naive", 1), ("remainder", 1), ("remainder", RTL_BATCH)):
                sched = plan(ConvLayer(layer.oc, ic, h, w, k, k, s, p, b), cfg, mapping)
                jobs.append((x[:b] if b > 1 else x[0], wt, sched))
                meta.append((label, mapping))
        t0 = time.time()
        outs, stats, _ = rtl_conv(jobs, cfg, sim, name="bench")
        for (x, wt, sched), y, st, (label, mapping) in zip(jobs, outs, stats, meta):
            layer = sched.layer
            assert np.array_equal(y, ref_conv(x, wt, layer.stride, layer.pad))
            measured = st["busy"] / (cfg.rows * cfg.cols * st["cycles"])
            rows.append({"array": f"{cfg.rows}x{cfg.cols}", "case": label, "mapping": mapping,
                         "batch": layer.batch,
                         "oc": layer.oc, "ic": layer.ic, "h": layer.h, "w": layer.w,
                         "k": layer.kh, "stride": layer.stride, "pad": layer.pad,
                         "passes": [[pp.r, pp.n, pp.count] for pp in sched.passes],
                         "rtl_busy": st["busy"], "rtl_cycles": st["cycles"],
                         "rtl_utilisation": measured, "model_utilisation": sched.utilisation,
                         "model_cycles": sched.compute_cycles,
                         "stagger_cycles": stagger_cycles(sched)})
            assert st["busy"] == sched.busy_mac_cycles and st["cycles"] == sched.compute_cycles
        print(f"[rtl] {cfg.rows}x{cfg.cols}: {len(jobs)} layers under {sim}, outputs exact, "
              f"{time.time() - t0:.1f} s", flush=True)
    return rows


def tiled_markdown(tiled) -> list:
    if not tiled:
        return []
    lines = ["## Default buffers, host-tiled, end to end (batch 1)", "",
             "Every layer at full resolution on the array's default buffers (feature "
             "`feat_depth`, weight `weight_depth`, output `out_depth` words, `max_dim`, "
             "`max_slots`) and on seed-sized ones (`gen.conv.seed_buffers`: the seed's 20 x "
             "2048 feature, 128 x 2048 weight and 2 x 32 x 512 output words for 128 x 16, "
             "scaled by rows x cols), cut into tiles by `gen.conv.tiling.plan_tiles`, equal tiles "
             "of a channel group one job (a run: `LAYERS` tiles of one descriptor). End to end: "
             "the jobs' exact cycles from the first input word to the last output word "
             "(`gen.conv.layers_timeline`): features and outputs one word per clock, weights "
             "one or `w_lanes` (16) per clock, a chunk's loads before its compute, each tile's "
             "loads and compute overlapping the previous tile's output stream; utilisation = "
             "MACs / (rows x cols x cycles). Compute-only counts the same tiles' compute "
             "cycles. Weight words count the weights each tile loads (a layer's weights again "
             "for every spatial tile).", "",
             "| network | array | weight lanes | buffers (feat / weight / out / max_dim) | jobs "
             "| end-to-end utilisation | compute-only | weight / feature / output words |",
             "|---|---|---|---|---|---|---|---|"]
    for key, r in tiled.items():
        net, aname = key.split("@")[:2]
        b, w = r["buffers"], r["words"]
        lines.append(f"| {net} | {aname} | {r['w_lanes']} | {b['feat_depth']} / "
                     f"{b['weight_depth']} / "
                     f"{b['out_depth']} / {b['max_dim']} | {r['jobs']} | "
                     f"{r['end_to_end_utilisation']:.4f} | {r['compute_utilisation']:.3f} | "
                     f"{w['weights']} / {w['features']} / {w['outputs']} |")
    return lines + [""]


def markdown(results, rtl_rows, skip=None, batch=None, tiled=None):
    lines = ["# Remainder-aware MAC array (seed 002): utilisation", "",
             "Utilisation = MACs / (rows x cols x compute cycles), from the exact cycle model "
             "(`gen.conv.compute_cycles`, the same one the RTL tests pin).", "",
             "## Network level", "",
             "| network | array | naive | seed rule | remainder | column bound | "
             "stagger start-up (% of remainder cycles) |", "|---|---|---|---|---|---|---|"]
    for key, table in results.items():
        net, aname = key.split("@")
        u = table["network"]
        lines.append(f"| {net} | {aname} | {u['naive']:.3f} | {u['seed']:.3f} | "
                     f"{u['remainder']:.3f} | {u['bound']:.3f} | "
                     f"{100 * table['stagger_cycles'] / table['cycles']['remainder']:.2f} % |")
    lines += ["", "*naive*: rows = output channels, remainder rows idle, columns in output-row "
              "strips. *seed rule*: the last pass runs n = min(floor(rows/R), ceil(kw/s)) copies. "
              "*remainder*: remainder split into sub-passes with the n rule "
              "min(floor(rows/R), max(2, floor(kw/s)+1), Wo, max_groups), columns flat. "
              "The copies of a pass are staggered (copy g one stride right of copy g-1, "
              "(n-1) s Ic kh beats later) and share one feature stream per column; the "
              "start-up costs (n-1) D per pass. *column bound*: P / (ceil(P/cols) cols), the best any "
              "mapping can do when a row's weight is shared by all its columns.", ""]
    for key, table in results.items():
        net, aname = key.split("@")
        lines += [f"## {net} on {aname}", "",
                  "| layer | Oc | Ic | out | k/s | naive | seed | remainder "
                  "| passes (R, n, blocks) | bound |", "|---|---|---|---|---|---|---|---|---|---|"]
        for r in table["layers"]:
            lines.append(
                f"| {r['layer']} | {r['oc']} | {r['ic']} | {r['ho']}x{r['wo']} | "
                f"{r['k']}/{r['stride']} | {r['naive']['utilisation']:.3f} | "
                f"{r['seed']['utilisation']:.3f} | {r['remainder']['utilisation']:.3f} | "
                f"{' '.join(str(tuple(p)) for p in r['remainder']['passes'])} | "
                f"{r['bound']:.3f} |")
        lines.append("")
    lines += tiled_markdown(tiled)
    if skip:
        lines += ["## Padding-beat skipping (remainder mapping, `--skip-pad`)", "",
                  "Compute cycles from the exact cycle model; beats whose features are all "
                  "zero padding for every active column are not issued.", "",
                  "| network | array | compute cycles | with skipping | saved |",
                  "|---|---|---|---|---|"]
        for key, r in skip.items():
            net, aname = key.split("@")
            lines.append(f"| {net} | {aname} | {r['cycles']} | {r['cycles_skip_pad']} | "
                         f"{100 * r['saved']:.1f} % |")
        lines.append("")
    if batch:
        lines += ["## Batching (remainder mapping, B images per layer)", "",
                  "Network-level utilisation from the exact cycle model with the output "
                  "positions of B images in raster order over (image, oy, ox); bounds: "
                  "column bound P / (ceil(P/cols) cols) and tile bound "
                  "Oc P / (ceil(Oc P / (rows cols)) rows cols) with P = B Ho Wo, min per layer.",
                  "", "| network | array | " + " | ".join(f"B = {b}" for b in BATCHES)
                  + " | min(column, tile) bound at B = 1 / " + str(BATCHES[-1]) + " |",
                  "|---|---|" + "---|" * (len(BATCHES) + 1)]
        for net, r in batch["networks"].items():
            for aname, row in r["arrays"].items():
                cells = [f"**{row[b]['remainder']:.3f}**" if row[b]["remainder"] >= TARGET
                         else f"{row[b]['remainder']:.3f}" for b in BATCHES]
                lines.append(f"| {net} | {aname} | " + " | ".join(cells) + f" | "
                             f"{row[BATCHES[0]]['bound_min']:.3f} / "
                             f"{row[BATCHES[-1]]['bound_min']:.3f} |")
        lines += ["", f"Smallest batch with >= {TARGET:.2f} on both arrays: " + ", ".join(
            f"{net} {r['smallest_pow2']} (smallest integer {r['smallest']})"
            for net, r in batch["networks"].items()) + ".", ""]
    if rtl_rows:
        lines += ["## RTL-measured utilisation on the scaled arrays", "",
                  "Busy MAC-cycles are counted in the array (popcount of the MAC enables); "
                  "outputs are checked against the golden model.", "",
                  "| array | case | layer | mapping | batch | passes (R, n, blocks) | "
                  "RTL busy / cycles | model cycles | stagger start-up | RTL utilisation | "
                  "model |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in rtl_rows:
            lines.append(
                f"| {r['array']} | {r['case']} | {r['oc']}x{r['ic']}x{r['k']}x{r['k']} on "
                f"{r['h']}x{r['w']} s{r['stride']} p{r['pad']} | {r['mapping']} | "
                f"{r['batch']} | "
                f"{' '.join(str(tuple(p)) for p in r['passes'])} | {r['rtl_busy']} / "
                f"{r['rtl_cycles']} | {r['model_cycles']} | {r['stagger_cycles']} | "
                f"{r['rtl_utilisation']:.4f} | {r['model_utilisation']:.4f} |")
        lines.append("")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sim", default="icarus", choices=["icarus", "verilator"])
    ap.add_argument("--no-rtl", action="store_true", help="skip the RTL measurements")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    results = networks()
    skip = skip_pad_savings()
    batch = batch_table()
    tiled = tiled_networks()
    charts(results)
    rtl_rows = [] if args.no_rtl else rtl(args.sim)
    (OUT / "conv.json").write_text(json.dumps({"networks": results, "rtl": rtl_rows,
                                               "skip_pad": skip, "batch": batch,
                                               "tiled": tiled}, indent=1) + "\n")
    (OUT / "conv.md").write_text(markdown(results, rtl_rows, skip, batch, tiled))
    print("\nsummary (network-level utilisation, remainder vs naive):")
    for key, table in results.items():
        u = table["network"]
        print(f"  {key:18s} {u['naive']:.3f} -> {u['remainder']:.3f}  (bound {u['bound']:.3f})")
    if rtl_rows:
        worst = max(abs(r["rtl_utilisation"] - r["model_utilisation"]) for r in rtl_rows)
        print(f"  RTL vs model utilisation: {len(rtl_rows)} layers, max difference {worst:.2e}")
    print(f"wrote {OUT / 'conv.json'}, {OUT / 'conv.md'}, {OUT}/conv_<network>.png")


if __name__ == "__main__":
    main()
