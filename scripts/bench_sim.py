# SPDX-License-Identifier: Apache-2.0
"""Simulation speed: the native engine against the cocotb bench, side by side in one run.

* The seed-matrix SpMV job (1024 x 153, 11.7 %, P = 32; the weights, x and y streams of
  ``spnn run spmv``) under Verilator, eight products back to back in one job (~170k clocks,
  so that neither engine's start-up dominates): cocotb, native (one thread and
  ``--threads 2``) and a bare C++ loop on the same Verilog (a ``main`` of our own: random
  valid bits and payloads on every input, outputs always ready, two evaluations per clock),
  in simulated clocks per second of the simulator process (start-up and file I/O included
  for both engines).
* One product under Icarus, cocotb and native; a PWL job of 100,000 samples (a small
  design, where the testbench's per-clock work weighs most) under both simulators; under
  Icarus each engine on its own netlist (cocotb on Amaranth's Verilog, as the verification
  suite runs it; native on the netlist of ``gen.core.icarus_net``) and on the other one, so
  that the engine's gain and the netlist's show apart; the PWL
  accelerator shell (``bus_words`` 4, 20,000 samples in 4 jobs, AXI4-Lite control) on
  cocotbext-axi and on the native shell testbench.
* ``spnn run spmv`` on the seed matrix, wall clock: cold (a fresh build folder: Amaranth
  conversion + Verilator build) and warm (everything cached).

Every RTL result is checked equal between the engines.  Writes ``build/bench/sim.json`` and
``build/bench/sim.md`` (``--docs``: the table into README.md and docs/sim.md too).  Usage:
``python -m scripts.bench_sim [--out DIR] [--docs]``.
"""

import argparse
import json
import os
from pathlib import Path
import subprocess
import sys
import tempfile
import time

import numpy as np

from gen.core.native import stream_ports
from gen.core.sim import build_root, measuring, recording, run_job, using_engine, verilog_for
from gen.core.simbase import children_cpu
from gen.pwl import PwlConfig
from gen.pwl.twin import rtl_pwl, rtl_pwl_axi
from gen.spmv import SpmvConfig, compile_weights
from gen.spmv.twin import run_jobs
from hdl.spmv import GATEWARE as SPMV
from scripts import docs
from scripts.bench_spmv import COLS, P, seed_matrix

KEYS = ("sinks", "sources", "cycles_run")
# The Icarus rows: each engine on its own netlist, then on the other one.
ICARUS_RUNS = [("cocotb", 1, None), ("native", 1, None), ("cocotb", 1, "icarus"),
               ("native", 1, "amaranth")]


def log(msg):
    print(msg, flush=True)


# The design's Verilog each engine runs under Icarus unless a row says otherwise: the
# cocotb bench Amaranth's text (as the verification suite), the native engine the netlist
# rewritten for Icarus (gen/core/icarus_net.py).  The Icarus jobs also run the other way
# round, so the table separates the engine's gain from the netlist's.
DEFAULT_NETLIST = {"cocotb": "amaranth", "native": "icarus"}
_NETLIST_ENV = {"cocotb": "SPNN_COCOTB_ICARUS_NETLIST", "native": "SPNN_ICARUS_NETLIST"}


def _engine_run(fn, engine, threads=1, netlist=None):
    """One warm-up run (builds), then the measured runs: the best of three for the native
    engine (a run of a second or two is sensitive to the machine's other load), one for
    cocotb (tens of seconds, Python-bound).  ``netlist`` (Icarus): the design's Verilog,
    ``amaranth`` or ``icarus`` (default: the engine's own, :data:`DEFAULT_NETLIST`)."""
    os.environ["SPNN_NATIVE_THREADS"] = str(threads)
    netlist = netlist or DEFAULT_NETLIST[engine]
    os.environ[_NETLIST_ENV[engine]] = netlist
    best = None
    tag = f"{engine}-t{threads}" + ("" if netlist == DEFAULT_NETLIST[engine] else f"-{netlist}")
    with using_engine(engine):
        fn(f"bench-sim-{tag}-warm")                   # builds (cached for the next run)
        for _ in range(3 if engine == "native" else 1):
            with measuring() as cost, recording() as runs:
                fn(f"bench-sim-{tag}")
            if best is None or cost["sim_cpu_seconds"] < best[0]["sim_cpu_seconds"]:
                best = (cost, runs)
    os.environ.pop("SPNN_NATIVE_THREADS", None)
    os.environ.pop(_NETLIST_ENV[engine], None)
    cost, runs = best
    result = runs[-1][-1]
    return {"engine": engine, "threads": threads, "netlist": netlist, "clocks": cost["clocks"],
            "sim_seconds": cost["sim_seconds"], "cpu_seconds": cost["sim_cpu_seconds"],
            "build_seconds": cost["build_seconds"],
            "clocks_per_second": cost["cpu_clocks_per_second"],
            "wall_clocks_per_second": cost["clocks_per_second"]}, result


def _compare(rows, results):
    base = results[0]
    return all(all(r[k] == base[k] for k in KEYS) for r in results[1:])


def _shell_rows(xs, sim="verilator"):
    """The PWL shell at bus_words 4 on both engines (cocotbext-axi and the native shell
    testbench): rows as :func:`_engine_run`'s, ``identical`` every record."""
    cfg = PwlConfig(bus_words=4)
    packets = list(np.array_split(xs, 4))
    rows, records = [], []
    for engine in ("cocotb", "native"):
        with using_engine(engine):
            rtl_pwl_axi(packets[:1], cfg, sim, ready_prob=0.9, seed=2, name="bench-warm")
            with measuring() as cost:
                _, recs = rtl_pwl_axi(packets, cfg, sim, ready_prob=0.9, seed=2,
                                      name="bench-sim-shell")
        rows.append({"engine": engine, "threads": 1, "clocks": cost["clocks"],
                     "sim_seconds": cost["sim_seconds"], "cpu_seconds": cost["sim_cpu_seconds"],
                     "build_seconds": cost["build_seconds"],
                     "clocks_per_second": cost["cpu_clocks_per_second"],
                     "wall_clocks_per_second": cost["clocks_per_second"]})
        records.append(recs)
        log(f"[pwl shell {sim}] {engine}: {rows[-1]['clocks_per_second']:,.0f} clocks/s")
    return {"rows": rows, "identical": records[0] == records[1]}


_MAIN = """// bare Verilator loop (scripts/bench_sim.py): random inputs, two evals per clock
#include "V{m}.h"
#include "verilated.h"
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
int main(int argc, char** argv) {{
  VerilatedContext ctx;
  V{m} top{{&ctx}};
  std::mt19937_64 rng(1);
  long n = atol(argv[1]);
  top.rst = 1;
  for (int i = 0; i < 4; ++i) {{ top.clk = 0; top.eval(); top.clk = 1; top.eval(); }}
  top.rst = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (long c = 0; c < n; ++c) {{
    top.clk = 0;
{drive}
    top.eval();
    top.clk = 1;
    top.eval();
  }}
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  printf("%ld %.6f\\n", n, s);
  return 0;
}}
"""


def bare_loop(clocks=300_000):
    """Clocks per second of a bare C++ loop on the SpMV engine's Verilog."""
    module, text = verilog_for(SPMV, SpmvConfig(pes=P))
    sources, sinks, _ = stream_ports(text, module)
    drive = []
    sources = [(n + "___05F", w) for n, w in sources]   # Verilator's "__"
    sinks = [(n + "___05F", w) for n, w in sinks]
    for name, w in sources:
        drive.append(f"    top.{name}valid = rng() & 1;")
        if w > 64:
            drive += [f"    top.{name}payload[{i}] = (uint32_t)rng();"
                      for i in range(-(-w // 32))]
        elif w:
            drive.append(f"    top.{name}payload = rng() & ((1ULL << {w}) - 1ULL);"
                         if w < 64 else f"    top.{name}payload = rng();")
    drive += [f"    top.{name}ready = 1;" for name, _ in sinks]
    folder = build_root().resolve() / "bench-sim" / f"bare-{module}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{module}.v").write_text(text)
    (folder / "main.cpp").write_text(_MAIN.format(m=module, drive="\n".join(drive)))
    exe = folder / "obj" / f"V{module}"
    t0 = time.perf_counter()
    if not exe.exists():
        subprocess.run(["verilator", "--cc", "--exe", "--build", "-O3", "--x-assign", "fast",
                        "--x-initial", "fast", "-CFLAGS", "-O2", "-Wno-fatal", "-Wno-lint",
                        "-Mdir", "obj", "-j", "2", "--top-module", module, "main.cpp",
                        f"{module}.v"], cwd=folder, check=True, capture_output=True,
                       env=dict(os.environ, MAKEFLAGS="CFG_CXXFLAGS_PCH_I=-include OPT_FAST=-O2 "
                                "OPT_SLOW=-O2 OPT_GLOBAL=-O2"))
    build = time.perf_counter() - t0
    times = []
    for _ in range(3):                                 # the best of three, as the engines
        c0 = children_cpu()
        out = subprocess.run([str(exe), str(clocks)], capture_output=True, text=True,
                             check=True)
        times.append(out.stdout.split() + [children_cpu() - c0])
    n, s, cpu = min(times, key=lambda t: t[2])
    return {"engine": "bare C++ loop", "threads": 1, "clocks": int(n), "sim_seconds": float(s),
            "cpu_seconds": cpu, "build_seconds": build, "clocks_per_second": int(n) / cpu,
            "wall_clocks_per_second": int(n) / float(s)}


def spnn_wall(w, x, tmp):
    """Wall seconds of ``spnn run spmv`` on the seed matrix: cold, then warm."""
    np.save(tmp / "w.npy", w)
    np.save(tmp / "x.npy", x)
    env = dict(os.environ, SPNN_BUILD_DIR=str(tmp / "build"))
    argv = [sys.executable, "-m", "gen.cli", "run", "spmv", "--weights", str(tmp / "w.npy"),
            "--x", str(tmp / "x.npy"), "--pes", str(P), "--report", str(tmp / "r.json")]
    walls = []
    for _ in ("cold", "warm"):
        t0 = time.perf_counter()
        subprocess.run(argv, env=env, check=True, capture_output=True)
        walls.append(time.perf_counter() - t0)
    report = json.loads((tmp / "r.json").read_text())
    return {"cold_seconds": walls[0], "warm_seconds": walls[1],
            "report": {k: report[k] for k in ("engine", "build_seconds", "sim_seconds",
                                              "clocks_per_second", "cycles")}}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="build/bench")
    ap.add_argument("--docs", action="store_true",
                    help="also write the table into README.md and docs/sim.md")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    w = seed_matrix(0.117, rng)
    x = rng.integers(-128, 128, COLS)
    cfg = SpmvConfig(pes=P)
    plan = compile_weights(w, cfg, "balanced")
    res = {"load": {"cpus": os.cpu_count(), "start": os.getloadavg()[0]}}
    for sim in ("verilator", "icarus"):
        rows, results = [], []
        runs = ([("cocotb", 1, None), ("native", 1, None), ("native", 2, None)]
                if sim == "verilator" else ICARUS_RUNS)
        repeat = 8 if sim == "verilator" else 1
        for engine, threads, netlist in runs:
            def job(name, sim=sim, repeat=repeat):
                run_jobs([(plan, x)] * repeat, cfg, sim, name=name)
            row, result = _engine_run(job, engine, threads, netlist)
            rows.append(row)
            results.append(result)
            log(f"[spmv {sim}] {engine} threads {threads}: {row['clocks']} clocks in "
                f"{row['sim_seconds']:.2f} s = {row['clocks_per_second']:,.0f} clocks/s")
        if sim == "verilator":
            rows.append(bare_loop())
            log(f"[spmv {sim}] bare loop: {rows[-1]['clocks_per_second']:,.0f} clocks/s")
        res[f"spmv_{sim}"] = {"rows": rows, "identical": _compare(rows, results)}
    xs = np.random.default_rng(1).integers(-32768, 32768, 100_000)
    for sim in ("verilator", "icarus"):
        rows, results = [], []
        for engine, threads, netlist in (ICARUS_RUNS if sim == "icarus"
                                         else [("cocotb", 1, None), ("native", 1, None)]):
            def job(name, sim=sim):
                rtl_pwl(xs, PwlConfig(), sim, ready_prob=0.9, seed=2, name=name)
            row, result = _engine_run(job, engine, threads, netlist)
            rows.append(row)
            results.append(result)
            log(f"[pwl {sim}] {engine}: {row['clocks_per_second']:,.0f} clocks/s")
        res[f"pwl_{sim}"] = {"rows": rows, "identical": _compare(rows, results)}
    res["pwlshell_verilator"] = _shell_rows(xs[:20_000])
    with tempfile.TemporaryDirectory() as tmp:
        res["spnn_run_spmv"] = spnn_wall(w, x, Path(tmp))
    log(f"[spnn run spmv] cold {res['spnn_run_spmv']['cold_seconds']:.1f} s, warm "
        f"{res['spnn_run_spmv']['warm_seconds']:.2f} s")
    res["load"]["end"] = os.getloadavg()[0]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "sim.json").write_text(json.dumps(res, indent=2) + "\n")
    (out / "sim.md").write_text(markdown(res))
    if args.docs:
        docs.write_docs(markdown(res), "sim table", "scripts/bench_sim.py",
                        ("README.md", "docs/sim.md"))
    log(f"[done] {out / 'sim.json'}, {out / 'sim.md'}")
    return 0 if all(v.get("identical", True) for v in res.values() if isinstance(v, dict)) \
        else 1


def _ratio(rows, a, b):
    """``a`` / ``b`` in clocks per second; each ``(engine, threads)`` or ``(engine, threads,
    netlist)`` (default: the engine's own netlist)."""
    pick = {(r["engine"], r["threads"], r.get("netlist") or DEFAULT_NETLIST.get(r["engine"])):
            r["clocks_per_second"] for r in rows}

    def key(k):
        return k if len(k) == 3 else (k[0], k[1], DEFAULT_NETLIST.get(k[0]))
    return pick[key(a)] / pick[key(b)]


def _wall_ratio(rows, a, b):
    """Native ``a`` threads / ``b`` threads in wall-clock speed (threads share the work, so
    their CPU seconds add up)."""
    pick = {r["threads"]: r.get("wall_clocks_per_second", r["clocks_per_second"])
            for r in rows if r["engine"] == "native"}
    return pick[a] / pick[b]


def _label(row, sim):
    """The engine column: the engine, and the design's Verilog under Icarus."""
    if sim != "icarus" or row["engine"] not in DEFAULT_NETLIST:
        return row["engine"]
    text = {"amaranth": "Amaranth's Verilog", "icarus": "Icarus netlist"}[row["netlist"]]
    return f"{row['engine']}, {text}"


def markdown(res) -> str:
    lines = ["**Simulation speed** (`python -m scripts.bench_sim`):", "",
             "Simulated clocks per CPU second (user + system) of the simulator process "
             "(start-up and file I/O included; CPU time, as other load on the machine inflates "
             "the wall time, unevenly between runs), warm builds, the best of three runs for "
             "the native engine and the bare loop; every engine's transfers identical.  "
             "`build/bench/sim.json` has the wall times too.", "",
             "| job | simulator | engine | threads | clocks | CPU seconds | clocks/s |",
             "|---|---|---|---|---|---|---|"]
    for key, block in res.items():
        if not isinstance(block, dict) or "rows" not in block:
            continue
        job, sim = key.split("_")
        name = {"spmv": "SpMV seed matrix, P = 32" + (", 8 products" if sim == "verilator"
                                                        else ""),
                "pwl": "PWL, 100,000 samples",
                "pwlshell": "PWL shell, bus_words 4, 20,000 samples"}[job]
        for r in block["rows"]:
            lines.append(f"| {name} | {sim} | {_label(r, sim)} | {r['threads']} | {r['clocks']:,} "
                         f"| {r.get('cpu_seconds', r['sim_seconds']):.2f} "
                         f"| {r['clocks_per_second']:,.0f} |")
    v = res["spmv_verilator"]["rows"]
    lines += ["", f"- SpMV under Verilator: native / cocotb = "
              f"{_ratio(v, ('native', 1), ('cocotb', 1)):.1f}x; bare loop / native = "
              f"{_ratio(v, ('bare C++ loop', 1), ('native', 1)):.2f}x; native 2 threads / 1 = "
              f"{_wall_ratio(v, 2, 1):.2f}x in wall time "
              f"({_ratio(v, ('native', 2), ('native', 1)):.2f}x in CPU time)."]
    for key, job in (("spmv_icarus", "SpMV"), ("pwl_icarus", "PWL")):
        r = res[key]["rows"]
        lines.append(
            f"- {job} under Icarus: native / cocotb = "
            f"{_ratio(r, ('native', 1), ('cocotb', 1)):.1f}x "
            f"(each engine on its own netlist: cocotb on Amaranth's Verilog as the verification "
            f"suite runs it, native on the Icarus netlist); on one netlist "
            f"{_ratio(r, ('native', 1, 'icarus'), ('cocotb', 1, 'icarus')):.1f}x (Icarus netlist), "
            f"{_ratio(r, ('native', 1, 'amaranth'), ('cocotb', 1, 'amaranth')):.1f}x (Amaranth's "
            f"Verilog); the Icarus netlist speeds the native run "
            f"{_ratio(r, ('native', 1, 'icarus'), ('native', 1, 'amaranth')):.1f}x and the cocotb "
            f"run {_ratio(r, ('cocotb', 1, 'icarus'), ('cocotb', 1, 'amaranth')):.1f}x.")
    lines += [f"- PWL shell (AXI) under Verilator: native / cocotbext-axi = "
              f"{_ratio(res['pwlshell_verilator']['rows'], ('native', 1), ('cocotb', 1)):.1f}x.",
              ""]
    s = res["spnn_run_spmv"]
    lines += [f"`spnn run spmv` on the seed matrix: cold {s['cold_seconds']:.1f} s (fresh build "
              f"folder: conversion and the native Verilator build), warm "
              f"{s['warm_seconds']:.2f} s wall.", ""]
    if "load" in res:           # other processes share the CPUs: the figures move with them
        load = res["load"]
        lines += [f"The machine's load average (1 min) at the start and the end of the run: "
                  f"{load['start']:.1f} and {load['end']:.1f} on {load['cpus']} CPUs.", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
