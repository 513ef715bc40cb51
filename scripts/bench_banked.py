# SPDX-License-Identifier: Apache-2.0
"""Benchmark of the banked MAC array (hdl/conv/banked) on whole networks, end to end.

AlexNet, VGG16 and ResNet-18 at full resolution, every convolution layer planned by
:func:`gen.conv.banked.plan_layer` on arrays with the seed's buffer sizes
(:func:`gen.conv.banked.seed_banked`: 128 x 16 and 256 x 32, up to 4 copies), ``bus_words``
16 and 32, batch 1 and 16.  Every figure comes from the exact cycle model, which the RTL
matches transfer for transfer (tb/conv/test_banked.py):

* end-to-end cycles: per layer from its first input beat to its last output beat (all its
  jobs back to back, loads and result streams included, every stream at full rate), layers
  in sequence;
* end-to-end utilisation = MACs / (rows x cols x end-to-end cycles); compute-only
  utilisation = MACs / (rows x cols x clocks with a beat issued);
* roofline = max(compute bound = MACs / (rows x cols), bandwidth bound = the busiest
  AXI4-Stream port's beats with the least traffic those buffer sizes force, over the
  planner's tilings: weights again for every strip when a group's weights do not fit both
  weight sets, features again for every channel group and the halo rows of every strip,
  every output once), per layer, summed; efficiency = roofline / end-to-end.

Writes build/bench/banked.json, build/bench/banked.md and build/bench/banked_<network>.png
(a roofline plot per network).  ``--docs`` also splices the network table into README.md and
docs/conv.md.
"""

import argparse
import json
from pathlib import Path

from gen.conv.banked import plan_layer, run_cycles, seed_banked
from gen.conv.config import ConvLayer
from gen.conv.networks import NETWORKS
from scripts.docs import write_docs

OUT = Path("build/bench")
ARRAYS = ((128, 16), (256, 32))
BUS = (16, 32)
BATCH = (1, 16)
# The starting point: END-TO-END utilisation of the previous array (batch 1 / 16).
BEFORE = {("alexnet", 128, 1): 0.097, ("vgg16", 128, 1): 0.164, ("resnet18", 128, 1): 0.052,
          ("alexnet", 128, 16): 0.278, ("vgg16", 128, 16): 0.236,
          ("resnet18", 128, 16): 0.136, ("alexnet", 256, 1): 0.026, ("vgg16", 256, 1): 0.047,
          ("resnet18", 256, 1): 0.014, ("alexnet", 256, 16): 0.088,
          ("vgg16", 256, 16): 0.072, ("resnet18", 256, 16): 0.038}


def network(net, rows, cols, bw, batch):
    """Per-layer plans and the network's totals."""
    cfg = seed_banked(rows, cols, bw, copies=4)
    layers, tot = [], {"macs": 0, "cycles": 0, "roofline": 0, "beats_issued": 0}
    for name, oc, ic, h, w, k, s, p in NETWORKS[net]:
        plan = plan_layer(ConvLayer(oc, ic, h, w, k, k, s, p, batch), cfg)
        beats = sum(b for _busy, b in run_cycles(plan.jobs, cfg, record=False)["stats"])
        job = plan.jobs[0]
        layers.append({"layer": name, "jobs": len(plan.jobs), "n": job.n, "R": job.R,
                       "strip": f"{job.rs}x{job.segw}", "fold": job.fold, "icq": job.icq,
                       "pack": job.pack,
                       "resident": job.resident, "macs": plan.macs, "cycles": plan.cycles,
                       "compute_bound": plan.compute_bound,
                       "bandwidth_bound": plan.bandwidth_bound, "roofline": plan.roofline,
                       "beats": plan.beats, "utilisation": plan.utilisation,
                       "compute_only": plan.macs / (rows * cols * beats),
                       "efficiency": plan.efficiency})
        tot["macs"] += plan.macs
        tot["cycles"] += plan.cycles
        tot["roofline"] += plan.roofline
        tot["beats_issued"] += beats
    cells = rows * cols
    tot.update(utilisation=tot["macs"] / (cells * tot["cycles"]),
               compute_only=tot["macs"] / (cells * tot["beats_issued"]),
               efficiency=tot["roofline"] / tot["cycles"],
               x_roofline=tot["cycles"] / tot["roofline"])
    return {"config": cfg.module_name, "buffers": {"feat_depth": cfg.feat_depth,
            "weight_depth": cfg.weight_depth, "out_depth": cfg.out_depth, "nb": cfg.nb},
            "layers": layers, "total": tot}


def table(results) -> str:
    lines = ["End to end (first input beat to last output beat of every layer, loads and "
             "result streams included; layers in sequence), exact cycle model of the banked "
             "array (`python -m scripts.bench_banked`), seed-sized buffers "
             "(`gen.conv.banked.seed_banked`), up to 4 copies, full-rate streams. Roofline = "
             "max(MACs / MAC cells, busiest port's beats with the least traffic the buffer "
             "sizes force), summed over the layers; x roofline = end-to-end / roofline "
             "(target <= 1.10). Before: the issue's end-to-end figures of the previous array.",
             "",
             "| network | array | bus_words | batch | end-to-end utilisation | before | "
             "compute-only | end-to-end cycles | roofline cycles | x roofline |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for key, r in results.items():
        net, rows, cols, bw, batch = key.split("@")
        t = r["total"]
        before = BEFORE.get((net, int(rows), int(batch)))
        lines.append(f"| {net} | {rows}x{cols} | {bw} | {batch} | {t['utilisation']:.3f} | "
                     f"{before if before is not None else '-'} | {t['compute_only']:.3f} | "
                     f"{t['cycles']:,} | {t['roofline']:,} | {t['x_roofline']:.3f} |")
    return "\n".join(lines) + "\n"


def layer_table(r) -> str:
    lines = ["| layer | jobs | n x R | strip | icq | resident | cycles | roofline | bound | "
             "utilisation | compute-only | x roofline |", "|" + "---|" * 12]
    for lay in r["layers"]:
        bound = "compute" if lay["compute_bound"] >= lay["bandwidth_bound"] else "bandwidth"
        lines.append(f"| {lay['layer']} | {lay['jobs']} | {lay['n']} x {lay['R']} | "
                     f"{lay['strip']}{' x ' + str(lay['fold']) if lay['fold'] > 1 else ''} | "
                     f"{lay['icq']}{' packed' if lay.get('pack') else ''} | {lay['resident']} | "
                     f"{lay['cycles']:,} | {lay['roofline']:,} | {bound} | "
                     f"{lay['utilisation']:.3f} | {lay['compute_only']:.3f} | "
                     f"{1 / lay['efficiency']:.3f} |")
    return "\n".join(lines) + "\n"


def charts(results):
    """A roofline plot per network: MACs per clock against MACs per beat of the busiest
    port, per layer, both arrays at bus_words 16, batch 1."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    for net in NETWORKS:
        fig, ax = plt.subplots(figsize=(7.5, 5))
        for (rows, cols), colour in zip(ARRAYS, ("#d9822b", "#6a9fd4")):
            r = results[f"{net}@{rows}@{cols}@16@1"]
            cells = rows * cols
            xs = [lay["macs"] / max(lay["bandwidth_bound"], 1) for lay in r["layers"]]
            lo, hi = min(xs + [cells]) / 4, max(xs + [cells]) * 4
            ax.plot([lo, cells, hi], [lo, cells, cells], "-", color=colour, lw=1,
                    label=f"roof {rows}x{cols}: min({cells} MACs, 16-word beats)")
            ax.scatter(xs, [lay["macs"] / lay["cycles"] for lay in r["layers"]], s=18,
                       color=colour, label=f"layers on {rows}x{cols} (end to end: "
                       f"{r['total']['utilisation']:.3f}, {r['total']['x_roofline']:.3f}x "
                       "roofline)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("MACs per beat of the busiest port (operational intensity)")
        ax.set_ylabel("MACs per clock, end to end")
        ax.set_title(f"{net}: banked array, seed-sized buffers, bus_words 16, batch 1")
        ax.legend(fontsize=7, loc="lower right")
        fig.tight_layout()
        path = OUT / f"banked_{net}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        print(f"[chart] {path}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", action="store_true",
                    help="also write the network table into README.md and docs/conv.md")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    results = {}
    for net in NETWORKS:
        for rows, cols in ARRAYS:
            for bw in BUS:
                for batch in BATCH:
                    key = f"{net}@{rows}@{cols}@{bw}@{batch}"
                    results[key] = network(net, rows, cols, bw, batch)
                    t = results[key]["total"]
                    print(f"{net:9s} {rows}x{cols} bw {bw:2d} B {batch:2d}: end to end "
                          f"{t['utilisation']:.3f}, {t['x_roofline']:.3f}x roofline", flush=True)
    charts(results)
    md = ["# Banked MAC array: whole networks end to end", "", table(results)]
    for net in NETWORKS:
        md += [f"## {net} on 128x16, bus_words 16, batch 1", "",
               layer_table(results[f"{net}@128@16@16@1"])]
    (OUT / "banked.json").write_text(json.dumps(results, indent=1) + "\n")
    (OUT / "banked.md").write_text("\n".join(md))
    print(f"wrote {OUT / 'banked.json'}, {OUT / 'banked.md'}, {OUT}/banked_<network>.png")
    if args.docs:
        write_docs(table(results), "banked table", "scripts/bench_banked.py",
                   ["README.md", "docs/conv.md"])


if __name__ == "__main__":
    main()
