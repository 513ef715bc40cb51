# SPDX-License-Identifier: Apache-2.0
"""Benchmark of the sparse dataflow explorer (seed 003) on a real pruned CNN.

Run as ``python scripts/bench_explore.py``.  Writes build/bench/explore.json,
build/bench/explore.md and build/bench/explore.png.

* Data: the digits CNN of ``scripts/train_cnn_digits.py`` (trained first if
  build/explore/manifest.json is missing, ~20 s on one core): three 3x3 conv layers
  (pad 1) at weight sparsities 0 / 50 / 70 / 80 / 90 %, real ReLU activations of 64 test
  images (the FC layer, pruned too, is only listed in the data table: the explorer models
  convolutions).
* Every unrolling at several parallel degrees, every skip mode; totals over the three
  layers and 64 images: parallel efficiency (busy PE-cycles), load-imbalance loss, speedup
  over dense execution of the same unrolling, efficiency against the ideal.
* The seed's parallel-degree-of-freedom column against the model (random data, every
  unrolling, skip mode and parallel degree), and imbalance loss vs degree of freedom on
  the real data.
* The MAC array of gen/conv.py (16 x 4, remainder mapping): cycles saved on the real data
  by skipping all-zero beats (lockstep skipping, no load imbalance), with the array's
  real drain rate (1 row per clock) and with drain not limiting.
"""

import argparse
import json
from pathlib import Path
import sys
import time

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

from gen.explore.model import PE_NAMES
from gen.explore import (SKIPS, ExploreConfig, explore, explore_modes, measured_dof, queue_lengths,
                         seed_dof)

OUT = Path("build/bench")
DATA = Path("build/explore")
UNITS = {
    "synapse": [(3, 1), (3, 3)],
    "neuron": [(2, 2), (4, 4), (8, 8)],
    "fmap": [(2, 2), (4, 4), (8, 8)],
    "array": [(4, 4), (16, 4), (16, 8)],
}
DOF_SIZES = {"synapse": [(2, 2), (3, 3), (5, 5)], "neuron": [(2, 2), (4, 4), (8, 8)],
             "fmap": [(2, 2), (4, 4), (4, 8)], "array": [(4, 4), (16, 4), (8, 8)]}
LOCK = "both-lockstep"      # skip both, one timeline per step (no imbalance)
MODES = SKIPS + (LOCK,)
SUM_KEYS = ("cycles", "dense_cycles", "ideal_cycles", "performed_macs", "useful_macs",
            "dense_macs", "imbalance_idle_pe_cycles", "mapping_idle_pe_cycles",
            "drain_idle_pe_cycles")


def log(msg):
    print(msg, flush=True)


def conv_names(manifest):
    """The conv layers of the manifest (the ones with a kernel; the FC layer has none)."""
    return [n for n, geo in manifest["layers"].items() if "kernel" in geo]


def load_data():
    man = DATA / "manifest.json"
    if not man.is_file():
        log("training the digits CNN (scripts/train_cnn_digits.py) ...")
        from scripts import train_cnn_digits
        if train_cnn_digits.main(["--out", str(DATA)]) != 0:
            raise SystemExit("training failed (torch and scikit-learn are needed)")
    manifest = json.loads(man.read_text())
    levels = []
    for lv in manifest["levels"]:
        layers = []
        for name in conv_names(manifest):
            geo = manifest["layers"][name]
            w = np.load(DATA / lv["folder"] / f"{name}_w.npy")
            x = np.load(DATA / lv["folder"] / f"{name}_x.npy")
            layers.append((name, w, x, geo["stride"], geo["pad"]))
        levels.append((lv, layers))
    return manifest, levels


def totals(reports, pes):
    t = {k: sum(r[k] for r in reports) for k in SUM_KEYS}
    budget = pes * t["cycles"]
    t.update(parallel_efficiency=t["performed_macs"] / budget,
             utilisation=t["useful_macs"] / budget,
             imbalance_loss=t["imbalance_idle_pe_cycles"] / budget,
             mapping_loss=t["mapping_idle_pe_cycles"] / budget,
             drain_loss=t["drain_idle_pe_cycles"] / budget,
             speedup=t["dense_cycles"] / t["cycles"],
             efficiency=t["ideal_cycles"] / t["cycles"])
    return t


def active_imbalance(r):
    """Imbalance idle PE-cycles as a share of the active PE-cycles (mapping loss removed)."""
    active = r["performed_macs"] + r["imbalance_idle_pe_cycles"]
    return r["imbalance_idle_pe_cycles"] / active if active else 0.0


def spearman(xs, ys):
    rx = np.argsort(np.argsort(xs, kind="stable"), kind="stable").astype(float)
    ry = np.argsort(np.argsort(ys, kind="stable"), kind="stable").astype(float)
    return float(np.corrcoef(rx, ry)[0, 1])


def dof_trend(rows):
    """Rank correlation of the degree of freedom and the imbalance share, per sparsity."""
    out = []
    for s in sorted({r["sparsity"] for r in rows}):
        sel = [r for r in rows if r["sparsity"] == s and r["skip"] in ("weights", "acts",
                                                                          "both")]
        out.append({"sparsity": s, "configs": len(sel),
                    "spearman": spearman([r["dof"] for r in sel],
                                         [active_imbalance(r) for r in sel])})
    return out


def sweep(levels):
    rows = []
    for lv, layers in levels:
        for unroll, sizes in UNITS.items():
            for a, b in sizes:
                t0 = time.time()
                per_layer = {s: [] for s in MODES}
                layer_rows = []
                for name, w, x, stride, pad in layers:
                    cfg = ExploreConfig(unroll, a, b, stride=stride, pad=pad,
                                        mapping="remainder")
                    rep = explore_modes(w, x, cfg)
                    rep[LOCK] = explore(w, x, cfg, "both", lockstep=True)
                    for s in MODES:
                        per_layer[s].append(rep[s])
                        layer_rows.append({"layer": name, "skip": s,
                                           **{k: rep[s][k] for k in (
                                               "cycles", "dense_cycles", "ideal_cycles",
                                               "parallel_efficiency", "imbalance_loss",
                                               "mapping_loss", "utilisation")}})
                for s in MODES:
                    dof = 1 if s == LOCK else seed_dof(unroll, a, b, s)
                    rows.append({"sparsity": lv["sparsity"], "unroll": unroll, "pe": [a, b],
                                 "pes": a * b, "skip": s, "dof": dof,
                                 **totals(per_layer[s], a * b)})
                both = rows[-2]
                log(f"  sparsity {lv['sparsity']:.2f} {unroll:7s} {a}x{b}: skip both "
                    f"eff {both['parallel_efficiency']:.3f} imbalance "
                    f"{both['imbalance_loss']:.3f} speedup {both['speedup']:.2f} "
                    f"({time.time() - t0:.1f} s)")
                rows[-1]["layers"] = layer_rows
    return rows


def dof_check(real):
    """Seed column vs the model on random data; also counted on a real layer (``real`` =
    (w, x, stride, pad)), where only steps with every PE active are used and coincidences
    of the real zero pattern can merge classes (None: no such step)."""
    w, x, stride, pad = real
    out = []
    for unroll, sizes in DOF_SIZES.items():
        for s in ("acts", "weights", "both"):
            for a, b in sizes:
                seed = seed_dof(unroll, a, b, s)
                model = measured_dof(unroll, a, b, s)
                q, full = queue_lengths(w, x, ExploreConfig(unroll, a, b, stride=stride,
                                                            pad=pad), s)
                on_real = int(len(np.unique(q[full].T, axis=0))) if full.any() else None
                out.append({"unroll": unroll, "skip": s, "pe": [a, b], "seed": seed,
                            "model": model, "real": on_real, "agree": seed == model})
    return out


def recommendation(levels):
    """Skipping all-zero beats on the gen/conv array (16 x 4, remainder mapping)."""
    out = []
    for lv, layers in levels:
        for drain in (1, 16):
            tot = {"none": 0, "acts": 0, "weights": 0, "both": 0}
            per = []
            for name, w, x, stride, pad in layers:
                cfg = ExploreConfig("array", 16, 4, stride=stride, pad=pad,
                                    mapping="remainder", drain_rows=drain)
                rep = explore_modes(w, x, cfg, ("none", "acts", "weights", "both"),
                                    lockstep=True)
                for s in tot:
                    tot[s] += rep[s]["cycles"]
                per.append({"layer": name, **{s: rep[s]["cycles"] for s in tot},
                            "drain_loss": rep["none"]["drain_loss"],
                            "passes": rep["none"]["array_schedule"]["passes"]})
            # the structural part: beats that read only zero padding (known statically)
            pad_only = 0
            for name, w, x, stride, pad in layers:
                cfg = ExploreConfig("array", 16, 4, stride=stride, pad=pad,
                                    mapping="remainder", drain_rows=drain)
                pad_only += explore(np.ones_like(w), np.ones_like(x), cfg, "acts",
                                    lockstep=True)["cycles"]
            tot["padding"] = pad_only
            out.append({"sparsity": lv["sparsity"], "drain_rows": drain, "cycles": tot,
                        "saved": {s: 1 - tot[s] / tot["none"] for s in tot}, "layers": per})
            log(f"  array 16x4 drain {drain:2d} sparsity {lv['sparsity']:.2f}: all-zero "
                f"beat skipping saves acts {out[-1]['saved']['acts']:.3f} weights "
                f"{out[-1]['saved']['weights']:.3f} both {out[-1]['saved']['both']:.3f}")
    return out


def rtl_context(levels):
    """The same skipping on the generated array as built (ConvConfig defaults: 16 x 4,
    drain 1 row/clk, 1024-word buffers -> input-channel chunks), against its exact
    compute-phase and whole-layer cycle models (gen.conv.compute_cycles / layer_cycles)."""
    from gen.conv import ConvConfig, ConvLayer, compute_cycles, layer_cycles, plan
    ccfg = ConvConfig()
    out = []
    for lv, layers in levels:
        if lv["sparsity"] not in (0.0, 0.8, 0.9):
            continue
        for name, w, x, stride, pad in layers:
            m, n, kh, kw = w.shape
            layer = ConvLayer(m, n, x.shape[2], x.shape[3], kh, kw, stride, pad)
            sched = plan(layer, ccfg, "remainder")
            cfg = ExploreConfig("array", ccfg.rows, ccfg.cols, stride=stride, pad=pad,
                                mapping="remainder", drain_rows=ccfg.drain_rows)
            rep = explore_modes(w, x, cfg, ("none", "acts", "both"), lockstep=True,
                                sched=sched)
            pad_only = explore(np.ones_like(w), np.ones_like(x), cfg, "acts", lockstep=True,
                               sched=sched)["cycles"]
            images = x.shape[0]
            comp = images * compute_cycles(sched)
            total = images * layer_cycles(sched)["stat"]
            assert comp - rep["none"]["cycles"] >= 0
            row = {"sparsity": lv["sparsity"], "layer": name, "images": images,
                   "chunks": list(sched.chunk_sizes),
                   "passes": [[p.r, p.n, p.count, p.tiles] for p in sched.passes],
                   "compute_cycles": comp, "layer_cycles": total,
                   "model_dense": rep["none"]["cycles"],
                   "saved": {"padding": rep["none"]["cycles"] - pad_only,
                             "acts": rep["none"]["cycles"] - rep["acts"]["cycles"],
                             "both": rep["none"]["cycles"] - rep["both"]["cycles"]}}
            out.append(row)
            log(f"  RTL 16x4 sparsity {lv['sparsity']:.2f} {name}: compute {comp} layer "
                f"{total} cycles; all-zero activation beats save {row['saved']['acts']} "
                f"({100 * row['saved']['acts'] / comp:.1f} % of compute, "
                f"{100 * row['saved']['acts'] / total:.1f} % of the layer)")
    return out


def write_md(manifest, rows, dof, trend, rec, rtl, path):
    L = ["# Sparse dataflow explorer on a pruned digits CNN (seed 003)", "",
         "Generated by `python scripts/bench_explore.py` (model: `gen/explore.py`, "
         "definitions in `docs/explore.md`).  Three 3x3 conv layers (pad 1), "
         f"{manifest['images']} test images, totals over layers and images.", "",
         "## Data", "", "Weight sparsity: the conv layers' (the FC layer's: the same, at "
         f"most {manifest.get('fc_max_sparsity', 0):.2f}; `scripts/train_cnn_digits.py`).", "",
         "| weight sparsity | test accuracy | " + " | ".join(
             f"{n} w / x density" for n in manifest["layers"]) + " |",
         "|---|---|" + "---|" * len(manifest["layers"])]
    for lv in manifest["levels"]:
        L.append(f"| {lv['sparsity']:.2f} | {lv['accuracy']:.4f} | " + " | ".join(
            f"{lv['layers'][n]['weight_density']:.2f} / "
            f"{lv['layers'][n]['activation_density']:.2f}" for n in manifest["layers"]) + " |")
    sps = sorted({r["sparsity"] for r in rows})
    for skip, title in (("both", "skip zero weights and zero activations"),
                        (LOCK, "skip both in lockstep (a slot is dropped only when no PE "
                         "of the step needs it: no imbalance, zero operands executed)"),
                        ("weights", "skip zero weights"), ("acts", "skip zero activations"),
                        ("none", "dense")):
        L += ["", f"## Parallel efficiency, {title}", "",
              "Cell: busy / useful PE-cycles % (load-imbalance loss %) speedup over "
              "dense.", "",
              "| unrolling | PEs | DoF | " + " | ".join(f"w sparsity {s:.2f}" for s in sps)
              + " |", "|---|---|---|" + "---|" * len(sps)]
        for unroll, sizes in UNITS.items():
            for a, b in sizes:
                cells = []
                for s in sps:
                    r = next(r for r in rows if r["sparsity"] == s and r["unroll"] == unroll
                             and r["pe"] == [a, b] and r["skip"] == skip)
                    cells.append(f"{100 * r['parallel_efficiency']:.1f} / "
                                 f"{100 * r['utilisation']:.1f} "
                                 f"({100 * r['imbalance_loss']:.1f}) {r['speedup']:.2f}x")
                dof_v = 1 if skip == LOCK else seed_dof(unroll, a, b, skip)
                L.append(f"| {unroll} {a}x{b} | {a * b} | {dof_v} | "
                         + " | ".join(cells) + " |")
    L += ["", "## Parallel degree of freedom: seed vs model", "",
          "Seed column (Fig. 5; `array` derived the same way) against the number of "
          "independent queue lengths the model produces on random data (`measured_dof`); "
          "`real`: the same count on conv2 at 80 % weight sparsity (16 images, steps with "
          "every PE active; `-` = no such step, e.g. a synapse array larger than the 3x3 "
          "kernel).", "",
          "| unrolling | skip | PEs | seed | model | agree | real |",
          "|---|---|---|---|---|---|---|"]
    for d in dof:
        real = "-" if d["real"] is None else d["real"]
        L.append(f"| {d['unroll']} | {d['skip']} | {d['pe'][0]}x{d['pe'][1]} | {d['seed']} | "
                 f"{d['model']} | {'yes' if d['agree'] else 'NO'} | {real} |")
    L += ["", "## Imbalance loss vs degree of freedom (real data)", "",
          "Imbalance share = imbalance idle / active PE-cycles (partial-tile idling "
          "removed).  Spearman rank correlation of the seed's DoF and the imbalance share "
          "over all unrollings, parallel degrees and skip modes (none excluded):", "",
          "| weight sparsity | configurations | Spearman rho |", "|---|---|---|"]
    for t in trend:
        L.append(f"| {t['sparsity']:.2f} | {t['configs']} | {t['spearman']:.3f} |")
    L += ["", "At 80 % weight sparsity:", "",
          "| unrolling | skip | DoF | imbalance share |", "|---|---|---|---|"]
    sel = sorted((r for r in rows if abs(r["sparsity"] - 0.8) < 1e-9
                  and r["skip"] in ("weights", "acts", "both")),
                 key=lambda r: (r["dof"], r["unroll"]))
    for r in sel:
        L.append(f"| {r['unroll']} {r['pe'][0]}x{r['pe'][1]} | {r['skip']} | {r['dof']} | "
                 f"{100 * active_imbalance(r):.1f} % |")
    L += ["", "## MAC array (gen/conv.py, 16 x 4, remainder mapping): skipping all-zero beats",
          "", "Lockstep skipping: a beat of a tile is dropped when no MAC of the tile needs it "
          "(all features of the tile's positions zero: `acts`; all weights of the tile's "
          "channels zero: `weights`; no non-zero product: `both`).  No queues, no "
          "imbalance.  A tile still lasts at least its drain (R x n rows / drain_rows).", "",
          "`padding`: only the beats whose features are all zero padding (a static "
          "schedule property, no zero detection needed).", "",
          "| weight sparsity | drain rows/clk | dense cycles | padding saved | acts saved | "
          "weights saved | both saved |", "|---|---|---|---|---|---|---|"]
    for r in rec:
        L.append(f"| {r['sparsity']:.2f} | {r['drain_rows']} | {r['cycles']['none']} | "
                 f"{100 * r['saved']['padding']:.1f} % | "
                 f"{100 * r['saved']['acts']:.1f} % | {100 * r['saved']['weights']:.1f} % | "
                 f"{100 * r['saved']['both']:.1f} % |")
    L += ["", "Per layer (drain 16 rows/clk, beats: dense / acts / weights / both):", "",
          "| weight sparsity | " + " | ".join(conv_names(manifest)) + " |",
          "|---|" + "---|" * len(conv_names(manifest))]
    for r in rec:
        if r["drain_rows"] != 16:
            continue
        L.append(f"| {r['sparsity']:.2f} | " + " | ".join(
            f"{p['none']} / {p['acts']} / {p['weights']} / {p['both']}" for p in r["layers"])
            + " |")
    L += ["", "### On the array as generated (gen/conv.py defaults)", "",
          "ConvConfig() = 16 x 4, drain 1 row/clk, 1024-word feature/weight buffers (conv3 is "
          "split into input-channel chunks); compute and layer cycles from "
          "`gen.conv.compute_cycles` / `layer_cycles` (all images; the layer time includes "
          "the serial weight and feature loads).  Saved = dense beats - lockstep beats of "
          "the explorer on the same schedule.", "",
          "| weight sparsity | layer | chunks | compute cycles | layer cycles | padding saved "
          "| acts saved (% compute / % layer) | both saved (% compute / % layer) |",
          "|---|---|---|---|---|---|---|---|"]
    for r in rtl:
        c, t = r["compute_cycles"], r["layer_cycles"]
        L.append(f"| {r['sparsity']:.2f} | {r['layer']} | {r['chunks']} | {c} | {t} | "
                 f"{r['saved']['padding']} | {r['saved']['acts']} "
                 f"({100 * r['saved']['acts'] / c:.1f} / {100 * r['saved']['acts'] / t:.1f}) | "
                 f"{r['saved']['both']} ({100 * r['saved']['both'] / c:.1f} / "
                 f"{100 * r['saved']['both'] / t:.1f}) |")
    path.write_text("\n".join(L) + "\n")


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig = plt.figure(figsize=(16, 11))
    gs = fig.add_gridspec(3, 4, height_ratios=[1, 1, 1.1])
    styles = {"both": "-", "weights": "--", "acts": ":"}
    colours = ["tab:blue", "tab:orange", "tab:green"]
    for col, (unroll, sizes) in enumerate(UNITS.items()):
        ax_e = fig.add_subplot(gs[0, col])
        ax_s = fig.add_subplot(gs[1, col])
        for ci, (a, b) in enumerate(sizes):
            for skip, ls in styles.items():
                sel = sorted((r for r in rows if r["unroll"] == unroll and r["pe"] == [a, b]
                              and r["skip"] == skip), key=lambda r: r["sparsity"])
                xs = [100 * r["sparsity"] for r in sel]
                lab = f"{a}x{b} {skip}"
                ax_e.plot(xs, [r["parallel_efficiency"] for r in sel], ls, marker="o",
                          color=colours[ci], label=lab, ms=3)
                ax_s.plot(xs, [r["speedup"] for r in sel], ls, marker="o",
                          color=colours[ci], label=lab, ms=3)
        ax_e.set_title(f"{unroll} ({' x '.join(PE_NAMES[unroll])})")
        ax_e.set_ylim(0, 1.05)
        ax_e.set_xlabel("weight sparsity (%)")
        ax_e.set_ylabel("parallel efficiency (busy PE-cycles)")
        ax_s.set_xlabel("weight sparsity (%)")
        ax_s.set_ylabel("speedup over dense")
        ax_e.grid(alpha=0.3)
        ax_s.grid(alpha=0.3)
        ax_e.legend(fontsize=6, ncol=3)
    ax = fig.add_subplot(gs[2, :])
    ucol = {"synapse": "tab:blue", "neuron": "tab:orange", "fmap": "tab:green",
            "array": "tab:red"}
    smark = {"both": "o", "weights": "s", "acts": "^"}
    for unroll in UNITS:
        for skip in smark:
            sel = [r for r in rows if r["unroll"] == unroll and r["skip"] == skip
                   and abs(r["sparsity"] - 0.8) < 1e-9]
            ax.scatter([r["dof"] for r in sel], [active_imbalance(r) for r in sel],
                       marker=smark[skip], s=45, color=ucol[unroll], alpha=0.8,
                       label=f"{unroll} skip {skip}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("parallel degree of freedom (seed column, evaluated)")
    ax.set_ylabel("imbalance idle / active PE-cycles")
    ax.set_title("Imbalance loss vs degree of freedom, 80 % weight sparsity, real activations")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=4)
    fig.suptitle("Sparse convolution unrollings on a pruned digits CNN (solid: skip both, "
                 "dashed: weights, dotted: activations)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.parse_args(argv)                  # no options: --help, and a typo exits 2
    OUT.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    manifest, levels = load_data()
    log("efficiency vs sparsity ...")
    rows = sweep(levels)
    log("degree of freedom: seed vs model ...")
    lv80 = next(layers for lv, layers in levels if abs(lv["sparsity"] - 0.8) < 1e-9)
    _, w2, x2, st2, pad2 = next(t for t in lv80 if t[0] == "conv2")
    dof = dof_check((w2, x2[:16], st2, pad2))
    bad = [d for d in dof if not d["agree"]]
    log(f"  {len(dof) - len(bad)} of {len(dof)} agree")
    log("MAC array: skipping all-zero beats ...")
    rec = recommendation(levels)
    log("the generated MAC array (ConvConfig defaults) ...")
    rtl = rtl_context(levels)
    trend = dof_trend(rows)
    for t in trend:
        log(f"  sparsity {t['sparsity']:.2f}: Spearman(DoF, imbalance share) "
            f"{t['spearman']:.3f}")
    result = {"data": manifest, "dof_trend": trend,
              "units": {k: [list(p) for p in v] for k, v in UNITS.items()},
              "rows": rows, "dof_check": dof, "array_beat_skipping": rec,
              "array_rtl_context": rtl,
              "seconds": round(time.time() - t0, 1)}
    (OUT / "explore.json").write_text(json.dumps(result, indent=1) + "\n")
    write_md(manifest, rows, dof, trend, rec, rtl, OUT / "explore.md")
    plot(rows, OUT / "explore.png")
    log(f"wrote {OUT}/explore.json, explore.md, explore.png ({time.time() - t0:.0f} s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
