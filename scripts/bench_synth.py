# SPDX-License-Identifier: Apache-2.0
"""Synthesis benchmark: every registered block's default configurations.

For each block in the registry and each of its default configurations:

* ECP5 (LFE5U-85F, CABGA381, speed 8): Yosys ``synth_ecp5`` + nextpnr-ecp5 with a
  clock constraint (``--freq``, default 150 MHz), once per placement seed
  (``--seeds``, default 3); Fmax is reported as the median and the best over the
  seeds, next to the seeds' 100 MHz (seed 000's design clock).
* xc7 (Virtex-7 class): Yosys ``synth_xilinx -family xc7`` LUT/FF/DSP48E1/BRAM
  counts of the bare block.
* With ``--shells``: the same for each block's accelerator shell (its first default
  configuration), tabulated beside the bare block.

A block that fails (emission, synthesis, place and route) is recorded with its
error and the run goes on.  Per-run work files and JSON go to
build/bench/synth/; the summary to build/bench/synth.json and build/bench/synth.md.

Run:  python scripts/bench_synth.py [--seeds 3] [--freq 150] [--blocks pwl,spmv]
The first YoWASP call on a machine compiles WebAssembly (~30-50 s, cached).
"""

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from gen.registry import BLOCKS
from scripts import docs
from gen.core.config import config_to_dict
from gen.synth import (DEFAULT_FREQ, DEFAULT_PLACER, HEAP_TIMING_DEFAULT, TARGETS, ShellTarget,
                       _classify, _versions, config_id, default_router, result_tag, synth)

SEED_MHZ = 100.0     # seed 000 (and the VC709 designs) run at 100 MHz
GOAL_MHZ = 150.0     # project target on ECP5-85 speed 8
OUT = Path("build/bench")


_VERILOG = {}


def _same_verilog(block, cfg, work: Path) -> bool:
    """Whether ``work`` holds exactly the Verilog the block emits now."""
    from gen.core.emit import to_verilog
    module = block.module_name(cfg)
    key = (module, config_id(cfg))
    if key not in _VERILOG:
        _VERILOG[key] = to_verilog(block.build(cfg), module)
    old = work / f"{module}.v"
    return old.exists() and old.read_text() == _VERILOG[key]


def cached(block, cfg, target, freq, seed):
    """The earlier result of this run under build/bench/synth/ if it is still valid (same
    Verilog, tools and clock target), else None."""
    tag = result_tag(block.module_name(cfg), cfg, target, seed, block.placer,
                     block.heap_timing)
    path = OUT / "synth" / f"{tag}.json"
    if not path.exists():
        return None
    old = json.loads(path.read_text())
    same = old.get("tools") == _versions() and old.get("config_id") == config_id(cfg) \
        and _same_verilog(block, cfg, OUT / "synth" / tag)
    if not same or (target != "xc7" and old.get("freq_target_mhz") != freq):
        return None
    if target != "xc7" and (old.get("placer", DEFAULT_PLACER) != block.placer
                            or old.get("clock_pin") != TARGETS[target].get("clock_pin")
                            or old.get("router") != default_router(sum(old["cells"].values()))):
        return None
    old["resources"] = _classify(target, old["cells"])   # current classes
    old.setdefault("yosys_flow", "default")
    old.setdefault("notes", [])
    old["reused"] = True
    return old


def run(block, cfg, target, freq, seed, timeout, reuse):
    """One synth() run, or with ``reuse`` its earlier result (same Verilog, tools, clock)."""
    old = cached(block, cfg, target, freq, seed) if reuse else None
    if old is not None:
        return old
    return synth(block, cfg, target, freq, OUT, seed=seed, timeout=timeout)


def bench_config(block, cfg, seeds, freq, timeout, reuse, slow):
    entry = {"block": block.name, "module": block.module_name(cfg),
             "config": config_to_dict(cfg), "shell": bool(getattr(block, "is_shell", False))}
    try:
        runs = []
        for seed in seeds:
            if runs and runs[0]["seconds"] > slow and \
                    not (reuse and cached(block, cfg, "ecp5", freq, seed)):
                print(f"    (place and route took over {slow:g} s: seeds with earlier "
                      f"results only)", flush=True)
                break
            r = run(block, cfg, "ecp5", freq, seed, timeout, reuse)
            print(f"    ecp5 seed {seed}: Fmax {r['fmax_mhz']} MHz ({r['router']}, "
                  f"{r.get('placer', DEFAULT_PLACER)} placer)  "
                  f"[{r['seconds']} s{', reused' if r.get('reused') else ''}]", flush=True)
            runs.append(r)
        fmax = [r["fmax_mhz"] for r in runs]
        best = max(runs, key=lambda r: r["fmax_mhz"])
        entry["ecp5"] = {
            "freq_target_mhz": freq,
            "seeds": [r["seed"] for r in runs],
            "fmax_mhz": fmax,
            "fmax_median_mhz": round(statistics.median(fmax), 2),
            "fmax_best_mhz": max(fmax),
            "meets_goal": statistics.median(fmax) >= GOAL_MHZ,
            "resources": best["resources"],
            "harness_ff": best["harness"]["ff"],
            "utilisation": best["utilisation"],
            "critical_path": runs[0]["critical_path"],
            "router": runs[0]["router"],
            "placer": runs[0].get("placer", DEFAULT_PLACER),
            "heap_timing": runs[0].get("heap_timing", list(HEAP_TIMING_DEFAULT)),
            "yosys_flow": runs[0]["yosys_flow"],
            "notes": runs[0]["notes"],
            "device": TARGETS["ecp5"]["description"],
        }
    except Exception as exc:   # record and go on with xc7 and the next block
        entry["error"] = f"ecp5: {type(exc).__name__}: {exc}".splitlines()[0]
        print(f"    FAILED: {entry['error']}", flush=True)
    try:
        r = run(block, cfg, "xc7", freq, 1, timeout, reuse)
        print("    xc7: " + ", ".join(f"{k} {v:g}" for k, v in r["resources"].items())
              + f"  [{r['seconds']} s{', reused' if r.get('reused') else ''}]", flush=True)
        entry["xc7"] = {"resources": r["resources"], "cells": r["cells"],
                        "yosys_flow": r["yosys_flow"], "notes": r["notes"],
                        "device": TARGETS["xc7"]["description"]}
        entry["tools"] = r["tools"]
    except Exception as exc:   # record and go on with the next block
        error = f"xc7: {type(exc).__name__}: {exc}".splitlines()[0]
        entry["error"] = f"{entry['error']}; {error}" if "error" in entry else error
        print(f"    FAILED: {error}", flush=True)
    return entry


def placers_text(results) -> str:
    """``heap`` or e.g. ``static for spmv, heap for the others``, from the ECP5 entries."""
    used = {}
    for e in results:
        if "ecp5" in e:
            used.setdefault(e["ecp5"].get("placer", DEFAULT_PLACER), []).append(e["block"])
    other = {p: sorted(set(b)) for p, b in used.items() if p != DEFAULT_PLACER}
    timing = sorted((e["block"], tuple(e["ecp5"]["heap_timing"])) for e in results
                    if "ecp5" in e and e["ecp5"].get("placer", DEFAULT_PLACER) == "heap"
                    and tuple(e["ecp5"].get("heap_timing", HEAP_TIMING_DEFAULT))
                    != HEAP_TIMING_DEFAULT)
    tail = "".join(f" ({b}: heap timing weight {w}, criticality exponent {x})"
                   for b, (w, x) in timing)
    if not other:
        return DEFAULT_PLACER + tail
    def names(blocks):
        return " and ".join(blocks) if len(blocks) == 2 else ", ".join(blocks)
    parts = [f"{p} for {names(b)}" for p, b in sorted(other.items())]
    return ", ".join(parts) + (f", {DEFAULT_PLACER} for the others"
                               if DEFAULT_PLACER in used else "") + tail


def markdown(results, freq, seeds) -> str:
    lines = [
        "<!-- generated by scripts/bench_synth.py -->",
        "",
        f"ECP5: LFE5U-85F, CABGA381, speed 8; nextpnr-ecp5, clock constraint {freq:g} MHz, "
        f"seeds {', '.join(map(str, seeds))} (fewer where place and route is slow); "
        "Fmax median (best) over the seeds. Block inside the serial "
        "timing harness (all paths register to register; clock on pin "
        f"{TARGETS['ecp5']['clock_pin']}). nextpnr placer: "
        + placers_text(results) + ".",
        "",
        f"| block | module | ECP5 Fmax MHz | goal {GOAL_MHZ:g} | seed design MHz | ECP5 LUT4 | "
        "ECP5 FF (harness) | MULT18 | DP16KD | critical path (ECP5, seed 1) |",
        "|---|---|---:|:-:|---:|---:|---:|---:|---:|---|",
    ]
    shells = [e for e in results if e.get("shell")]
    results = [e for e in results if not e.get("shell")]
    for e in results:
        if "ecp5" not in e:
            lines.append(f"| {e['block']} | {e['module']} | failed: {e.get('error', '?')} "
                         "| | | | | | | |")
            continue
        p = e["ecp5"]
        s = p["resources"]
        cp = " -> ".join((p["critical_path"] or {}).get("through", []))
        ns = (p["critical_path"] or {}).get("total_ns")
        n = len(p["seeds"])
        lines.append(f"| {e['block']} | {e['module']} | {p['fmax_median_mhz']:.1f} "
                     f"({p['fmax_best_mhz']:.1f}, {n} seed{'s' if n > 1 else ''}) | "
                     f"{'yes' if p['meets_goal'] else 'no'} | "
                     f"{SEED_MHZ:g} | {s['lut']} | {s['ff']} ({p['harness_ff']}) | {s['dsp']} | "
                     f"{s['bram']} | `{cp}` ({ns} ns) |")
    lines += [
        "",
        "xc7 (Virtex-7 class, Yosys synth_xilinx -family xc7, bare block, no I/O buffers):",
        "",
        "| block | module | LUT | FF | DSP48E1 | BRAM36 (RAMB36 + RAMB18/2) | LUTRAM/SRL | "
        "CARRY4 |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for e in results:
        if "xc7" not in e:
            continue
        s = e["xc7"]["resources"]
        lines.append(f"| {e['block']} | {e['module']} | {s['lut']} | {s['ff']} | {s['dsp']} | "
                     f"{s['bram']:g} | {s['lutram']} | {s['carry']} |")
    lines += shells_markdown(shells, results)
    notes = [f"- {e['module']} {target}: {note}" for e in results + shells
             for target in ("ecp5", "xc7") for note in e.get(target, {}).get("notes", [])]
    if notes:
        lines += ["", "Notes:", ""] + notes
    return "\n".join(lines) + "\n"


def shells_markdown(shells, bare) -> list:
    """The accelerator shells' table: each shell beside its bare block (same config)."""
    if not shells:
        return []
    lines = ["", "Accelerator shells (AXI4-Stream at the config's `bus_words`, AXI4-Lite "
             "control, adapters and counters; `spnn synth BLOCK --shell`), default "
             "configuration, against the bare block of the same configuration (in "
             "parentheses); ECP5 as above (harness flip-flops included; nextpnr placer: "
             + placers_text(shells) + "), xc7 without I/O buffers:", "",
             "| block | shell module | ECP5 Fmax MHz | goal 150 | ECP5 LUT4 | ECP5 FF | DP16KD | "
             "xc7 LUT | xc7 FF | critical path (ECP5, seed 1) |",
             "|---|---|---:|:-:|---:|---:|---:|---:|---:|---|"]
    for e in shells:
        b = next((x for x in bare if x["block"] == e["block"]
                  and {k: v for k, v in x["config"].items() if k != "bus_words"}
                  == {k: v for k, v in e["config"].items() if k != "bus_words"}), {})
        p, q = e.get("ecp5"), b.get("ecp5")
        if p is None:
            lines.append(f"| {e['block']} | {e['module']} | failed: {e.get('error', '?')} "
                         "| | | | | | | |")
            continue

        def pair(key, this, other):
            mine = this["resources"][key] if this else "-"
            return f"{mine} ({other['resources'][key]})" if other else f"{mine}"
        n = len(p["seeds"])
        cp = " -> ".join((p["critical_path"] or {}).get("through", []))
        ns = (p["critical_path"] or {}).get("total_ns")
        lines.append(
            f"| {e['block']} | {e['module']} | {p['fmax_median_mhz']:.1f} "
            f"({p['fmax_best_mhz']:.1f}, {n} seed{'s' if n > 1 else ''}) | "
            f"{'yes' if p['meets_goal'] else 'no'} | {pair('lut', p, q)} | {pair('ff', p, q)} | "
            f"{pair('bram', p, q)} | {pair('lut', e.get('xc7'), b.get('xc7'))} | "
            f"{pair('ff', e.get('xc7'), b.get('xc7'))} | `{cp}` ({ns} ns) |")
    return lines


def spmv_seed_matrix(results):
    """Seed 000's Table 1 matrix (1024 x 153, 18,331 non-zeros) at the measured ECP5 Fmax.

    The cycle counts come from build/bench/spmv.json (scripts/bench_spmv.py: RTL cycles,
    equal to the cycle model); None when that file or an spmv Fmax is missing.
    """
    path = OUT / "spmv.json"
    fmax = [e["ecp5"] for e in results
            if e["block"] == "spmv" and "ecp5" in e and not e.get("shell")]
    if not path.exists() or not fmax:
        return None
    bench = json.loads(path.read_text())
    rtl = bench.get("rtl") or {}
    if "compute_cycles" not in rtl:
        # bench_spmv --no-rtl: the exact cycle model of the default (balanced) allocator,
        # which the RTL equals cycle for cycle (tb/test_spmv.py)
        model = {e["allocator"]: e for e in bench.get("seed", [])}.get("balanced")
        if not model:
            return None
        rtl = {"compute_cycles": model["cycles"], "total_cycles": model.get("total_cycles"),
               "source": "cycle model"}
    mhz = fmax[0]["fmax_median_mhz"]
    out = {"matrix": bench.get("matrix"), "compute_cycles": rtl["compute_cycles"],
           "total_cycles": rtl.get("total_cycles"), "fmax_mhz": mhz,
           "compute_us_at_fmax": round(rtl["compute_cycles"] / mhz, 2),
           "compute_us_at_100mhz": round(rtl["compute_cycles"] / SEED_MHZ, 2),
           "table1_us": bench.get("table1_us", {}),
           "cycles_from": rtl.get("source", "RTL simulation")}
    if rtl.get("total_cycles"):
        out["total_us_at_fmax"] = round(rtl["total_cycles"] / mhz, 2)
    return out


def spmv_markdown(seed):
    if not seed:
        return ""
    m = seed["matrix"] or {}
    shape = f"{m.get('rows')} x {m.get('cols')}, {m.get('pes')} PEs" if m else "?"
    lines = ["", f"SpMV, seed 000 Table 1 matrix ({shape}), spnn engine at the "
             f"measured ECP5 Fmax ({seed['fmax_mhz']} MHz, median) vs the seed's 100 MHz; "
             f"cycles from build/bench/spmv.json ({seed.get('cycles_from', 'RTL simulation')}):",
             "",
             "| design | time us |", "|---|---:|"]
    for name, us in seed["table1_us"].items():
        lines.append(f"| {name} (from bench_spmv) | {us:.2f} |")
    lines.append(f"| spnn compute, {seed['compute_cycles']} cycles at 100 MHz | "
                 f"{seed['compute_us_at_100mhz']:.2f} |")
    lines.append(f"| spnn compute, {seed['compute_cycles']} cycles at {seed['fmax_mhz']} MHz "
                 f"(ECP5-85 speed 8) | {seed['compute_us_at_fmax']:.2f} |")
    if "total_us_at_fmax" in seed:
        lines.append(f"| spnn incl. result drain, {seed['total_cycles']} cycles at "
                     f"{seed['fmax_mhz']} MHz | {seed['total_us_at_fmax']:.2f} |")
    return "\n".join(lines) + "\n"


BEGIN, END = docs.markers("synth table", "scripts/bench_synth.py")
DOC_FILES = (Path("README.md"), Path("docs/synth.md"))


def splice(path: Path, table: str) -> bool:
    """Replace the synthesis table of ``path`` (between BEGIN and END) by ``table``;
    False (file untouched) when the file has no markers."""
    body = table.replace("<!-- generated by scripts/bench_synth.py -->\n", "")
    return docs.splice(path, body, BEGIN, END)


def write_docs(table: str) -> None:
    body = table.replace("<!-- generated by scripts/bench_synth.py -->\n", "")
    docs.write_docs(body, "synth table", "scripts/bench_synth.py", DOC_FILES)


def rewrite_markdown() -> str:
    """Regenerate build/bench/synth.md from build/bench/synth.json (no tool runs)."""
    summary = json.loads((OUT / "synth.json").read_text())
    table = (markdown(summary["results"], summary["freq_target_mhz"], summary["seeds"])
             + spmv_markdown(summary["spmv_seed_matrix"]))
    (OUT / "synth.md").write_text(table)
    return table


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=3, help="nextpnr seeds 1..N (default 3)")
    parser.add_argument("--freq", type=float, default=DEFAULT_FREQ,
                        help=f"ECP5 clock constraint in MHz (default {DEFAULT_FREQ:g})")
    parser.add_argument("--timeout", type=float, default=1800,
                        help="seconds allowed per tool run (default 1800)")
    parser.add_argument("--slow", type=float, default=300,
                        help="a configuration whose first ECP5 run takes longer than this many "
                        "seconds gets no new runs for further seeds, only the ones --reuse "
                        "finds (default 300)")
    parser.add_argument("--reuse", action="store_true",
                        help="reuse per-run results already under build/bench/synth/ (same "
                        "emitted Verilog, tools and clock constraint)")
    parser.add_argument("--blocks", default="", help="comma-separated block names (default all)")
    parser.add_argument("--shells", nargs="?", const="all", default=None, metavar="BLOCKS",
                        help="also each block's accelerator shell (its first default "
                        "configuration); with a comma-separated list, only those blocks' "
                        "shells")
    parser.add_argument("--markdown-only", action="store_true",
                        help="only regenerate synth.md from synth.json")
    parser.add_argument("--docs", action="store_true",
                        help="also write the tables into README.md and docs/synth.md "
                        "(between their BEGIN/END synth table markers)")
    args = parser.parse_args(argv)
    if args.markdown_only:
        table = rewrite_markdown()
        if args.docs:
            write_docs(table)
        print(table)
        return 0
    names = [n for n in args.blocks.split(",") if n] or list(BLOCKS)
    unknown = sorted(set(names) - set(BLOCKS))
    if unknown:
        parser.error(f"unknown blocks: {', '.join(unknown)}; registered: "
                     f"{', '.join(sorted(BLOCKS))}")
    shells = set()
    if args.shells:
        shells = set(BLOCKS) if args.shells == "all" else set(args.shells.split(","))
        if shells - set(BLOCKS):
            parser.error(f"unknown blocks in --shells: {', '.join(sorted(shells - set(BLOCKS)))}")
    seeds = list(range(1, args.seeds + 1))
    OUT.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    results = []
    for name in names:
        block = BLOCKS[name]
        try:
            configs = block.defaults()
        except Exception as exc:
            results.append({"block": name, "module": "?", "error": f"defaults(): {exc}"})
            continue
        targets = [(block, cfg) for cfg in configs]
        if name in shells and block.shell is not None:
            targets.append((ShellTarget(block), configs[0]))
        for target, cfg in targets:
            print(f"[{time.monotonic() - t0:6.0f} s] {name}: {target.module_name(cfg)}",
                  flush=True)
            results.append(bench_config(target, cfg, seeds, args.freq, args.timeout,
                                        args.reuse, args.slow))
    summary = {"seeds": seeds, "freq_target_mhz": args.freq, "goal_mhz": GOAL_MHZ,
               "seed_design_mhz": SEED_MHZ, "results": results,
               "spmv_seed_matrix": spmv_seed_matrix(results)}
    (OUT / "synth.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    table = markdown(results, args.freq, seeds) + spmv_markdown(summary["spmv_seed_matrix"])
    (OUT / "synth.md").write_text(table)
    if args.docs:
        write_docs(table)
    print(f"\nwrote {OUT / 'synth.json'} and {OUT / 'synth.md'} "
          f"[{time.monotonic() - t0:.0f} s]\n")
    print((OUT / "synth.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
