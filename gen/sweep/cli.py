# SPDX-License-Identifier: Apache-2.0
"""``spnn sweep``: design-space sweeps of a block over workloads, on Dask."""

import argparse
import sys
import time
from pathlib import Path

from gen.core.config import SpnnError

__all__ = ["register", "DESCRIPTION"]

DESCRIPTION = """\
Sweep a block's configuration over your workloads and stages, on Dask.

SPEC.yaml names the block, a grid of config values (or a list of points, optionally sampled
at random or by Latin hypercube), the workloads (bundled matrices and networks, .npy files,
ONNX models) and the stages each point runs: model (the exact cycle model, milliseconds),
rtl (the generated Verilog on a small workload, checked bit- and cycle-exact) and synth
(Yosys resources; nextpnr Fmax per seed).  Reference: docs/sweep.md.

By default the points run on an embedded Dask LocalCluster sized to this machine (one worker
per core; --workers N); --scheduler tcp://HOST:8786 submits them to a running Dask cluster
(`dask scheduler`, `dask worker tcp://HOST:8786 --resources synth=1`, or dask-jobqueue on
SLURM/PBS).  Synthesis tasks need the worker resource `synth` (one place and route per
unit); a worker that dies has its tasks rerun on the others.

Every finished task is appended to OUT/results.csv at once (one row per point x workload
x stage); a rerun skips every key already there (--retry-failed reruns failed ones too).
At the end OUT/summary.csv, OUT/summary.md (table, best point per objective, Pareto
fronts), OUT/pareto.png (needs matplotlib: the `ml` extra) and OUT/sweep.json are written.

Example SPEC.yaml:
  block: spmv
  grid: {pes: [8, 16, 32], fifo_depth: [4, 16], alloc: [zigzag, balanced]}
  workloads: [seed, seed-skewed]
  stages: {model: {}, rtl: {points: 2, workloads: [seed]}}

Examples:
  spnn sweep spmv.yaml -o build/sweep/spmv
  spnn sweep spmv.yaml -o build/sweep/spmv --workers 2
  spnn sweep conv.yaml -o out/ --scheduler tcp://10.0.0.5:8786
  spnn sweep spmv.yaml -o out/ --serial --dry-run
"""


def register(subparsers):
    p = subparsers.add_parser("sweep", help="design-space sweeps on Dask",
                              description=DESCRIPTION,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("spec", metavar="SPEC.yaml", help="the sweep spec (docs/sweep.md)")
    p.add_argument("-o", "--output", required=True, metavar="OUT",
                   help="output folder (results.csv is appended to and reused)")
    p.add_argument("--scheduler", metavar="ADDR",
                   help="a running Dask scheduler, e.g. tcp://HOST:8786 (default: an "
                   "embedded LocalCluster)")
    p.add_argument("--connect-timeout", default="15", metavar="SECONDS",
                   help="give up connecting to --scheduler after this long (default 15)")
    p.add_argument("--workers", metavar="N",
                   help="worker processes of the embedded LocalCluster (default: one per core)")
    p.add_argument("--serial", action="store_true",
                   help="run every task in this process, one after another (no Dask)")
    p.add_argument("--retries", default="2", metavar="N",
                   help="Dask retries of a task that raises outside its own work (default 2)")
    p.add_argument("--retry-failed", action="store_true",
                   help="run again the tasks results.csv records as failed")
    p.add_argument("--no-plot", action="store_true", help="do not write pareto.png")
    p.add_argument("--dry-run", action="store_true",
                   help="check the spec, print the points and tasks to run, write nothing")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    p.set_defaults(handler=_cmd_sweep)


def _options(args):
    from gen.core.outputs import output_flag
    from gen.core.runutil import float_arg, int_arg
    if args.scheduler is not None and (args.workers is not None or args.serial):
        raise SpnnError("--scheduler runs the sweep on that cluster's workers; it takes "
                        "no --workers and no --serial")
    if args.serial and args.workers is not None:
        raise SpnnError("--serial runs in this process; it takes no --workers")
    if args.scheduler is not None and not args.scheduler.strip():
        raise SpnnError(f"--scheduler must be an address like tcp://HOST:8786, not "
                        f"{args.scheduler!r}")
    workers = None if args.workers is None else int_arg(args.workers, "--workers", 1, 1024)
    retries = int_arg(args.retries, "--retries", 0, 10)
    args.connect_timeout = float_arg(args.connect_timeout, "--connect-timeout", 0.1, 3600)
    return workers, retries, output_flag(args)


def _fixed_columns(spec, tasks):
    """The config and option columns of each task's row."""
    points = {p.index: p for p in spec.points}
    out = {}
    for t in tasks:
        p = points[t.point]
        opts = p.options if t.stage != "synth" else {k: "" for k in p.options}
        out[t.key] = {"point_id": p.id, "block": spec.block, **p.config_dict, **opts}
    return out


def _invalid_rows(spec):
    """One ``config`` row per point the block refuses (its reason as the error)."""
    import hashlib
    import json
    rows = []
    for p in spec.points:
        if p.error:
            key = hashlib.sha256(json.dumps([spec.block, p.config_dict, p.options, "config"],
                                            sort_keys=True).encode()).hexdigest()
            rows.append({"key": key, "point_id": p.id, "block": spec.block, **p.config_dict,
                         **p.options, "workload": "", "stage": "config", "target": "",
                         "seed": "", "status": "failed", "error": p.error})
    return rows


def _write_outputs(spec, out_dir, links, rows, counts, durations, wall, mode, plot):
    from gen.core.outputs import Outputs
    from gen.sweep import report
    summary = report.summarise(spec, links, rows)
    outputs = Outputs()
    png = None
    if plot and spec.pareto:
        from gen.sweep.pareto import plot_png
        try:
            outputs.data(out_dir / "pareto.png", plot_png(
                summary, spec.pareto, spec.keys, f"spnn sweep: {spec.block}, "
                f"{len(summary)} points"))
            png = "pareto.png"
        except ImportError:
            print("spnn sweep: pareto.png not written: matplotlib is not installed "
                  "(pip install matplotlib, or the ml extra: pip install -e '.[ml]')",
                  file=sys.stderr)
    outputs.text(out_dir / "summary.csv", report.summary_csv(spec, summary))
    outputs.text(out_dir / "summary.md", report.summary_markdown(spec, summary, counts, png))
    outputs.text(out_dir / "sweep.json", report.sweep_json(spec, summary, counts, durations,
                                                           wall, mode))
    outputs.commit()
    return summary, report.best_points(spec, summary)


def _print_summary(spec, summary, best, out_dir, counts):
    from gen.sweep.report import summary_columns
    cols = [c for c in summary_columns(spec) if c not in ("error", "point_id")
            and any(r.get(c) not in (None, "") for r in summary)]
    shown = summary[:20]
    print("  ".join(cols))
    for r in shown:
        print("  ".join("" if r.get(c) is None else
                        (f"{r[c]:.4g}" if isinstance(r[c], float) else str(r[c]))
                        for c in cols))
    if len(summary) > len(shown):
        print(f"... {len(summary) - len(shown)} more points in {out_dir / 'summary.md'}")
    for b in best:
        vals = ", ".join(f"{k}={v}" for k, v in b["values"].items())
        print(f"best {b['objective']} ({b['direction']}): {b['value']} at point "
              f"{b['point']} ({vals})")
    print("tasks: " + ", ".join(f"{k} {v}" for k, v in counts.items())
          + f"; results in {out_dir / 'results.csv'}, summary in {out_dir / 'summary.md'}")


def _cmd_sweep(args) -> int:
    from gen.core.outputs import check_output_file, check_output_folder
    from gen.sweep.results import ResultsLog, columns_for, read_rows
    from gen.sweep.run import Progress, execute, open_client, warm_workers
    from gen.sweep.spec import load_spec
    from gen.sweep.tasks import build_tasks, figures_for, tool_versions
    workers, retries, flag = _options(args)
    spec = load_spec(args.spec)
    out_dir = check_output_folder(args.output, flag)
    check_output_file(out_dir / "results.csv", flag)
    tasks, links = build_tasks(spec, tool_versions(spec.stages))
    block_cfg = next((p.config_dict for p in spec.points if p.error is None), {})
    options = list(spec.points[0].options) if spec.points else []
    _, old = read_rows(out_dir / "results.csv")
    done = {k for k, r in old.items() if r["status"] in (("ok",) if args.retry_failed
                                                         else ("ok", "failed"))}
    todo = [t for t in tasks if t.key not in done]
    invalid = [r for r in _invalid_rows(spec) if r["key"] not in old]
    if args.dry_run:
        print(f"{spec.block}: {len(spec.points)} points "
              f"({sum(p.error is not None for p in spec.points)} refused by the config), "
              f"{len(spec.workloads)} workloads, {len(tasks)} tasks, {len(tasks) - len(todo)}"
              f" already in {out_dir / 'results.csv'}, {len(todo)} to run")
        return 0
    mode = "serial" if args.serial else (f"scheduler {args.scheduler}" if args.scheduler
                                         else "LocalCluster")
    mode = mode if todo else "nothing to run"
    client, cluster = (None, None) if args.serial or not todo else \
        open_client(args.scheduler, workers, timeout=args.connect_timeout)
    if client is not None:
        warm_workers(client)
    t0 = time.monotonic()
    try:
        if client is not None and cluster is not None:
            mode += f", {len(client.scheduler_info()['workers'])} workers"
        cols = columns_for(block_cfg, options, figures_for(spec.block, spec.stages))
        with ResultsLog(out_dir / "results.csv", cols) as log:
            for row in invalid:
                log.append(row)
            progress = Progress(len(todo), quiet=args.quiet)
            execute(todo, {w.name: w for w in spec.workloads}, log,
                    _fixed_columns(spec, todo), client=client, retries=retries,
                    progress=progress)
            rows = dict(log.rows)
    finally:
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()
    wall = time.monotonic() - t0
    keys = {t.key for t in tasks}
    durations = [float(r["seconds"]) for k, r in rows.items() if k in keys and r["seconds"]]
    counts = {"total": len(tasks), "reused": len(tasks) - len(todo), "run": len(todo),
              "failed": sum(rows[k]["status"] == "failed" for k in keys if k in rows),
              "lost": sum(rows[k]["status"] == "lost" for k in keys if k in rows)}
    summary, best = _write_outputs(spec, Path(out_dir), links, rows, counts, durations,
                                   wall, mode, not args.no_plot)
    if not args.quiet:
        _print_summary(spec, summary, best, Path(out_dir), counts)
    return 0
