# SPDX-License-Identifier: Apache-2.0
"""What a user reads after a sweep: one summary row per point, the Pareto fronts, the best
point per objective, and what the task durations predict for more workers.

Per point (``summary.csv`` / ``summary.md``, in the spec's point order): the swept values,
``status`` (``ok``, ``failed`` when any of its tasks failed or was lost, ``invalid`` when
the block refuses the combination), the ``model`` figures over all workloads (cycles and
other counts summed, ratios averaged, ``mac_units`` and ``max_abs_error`` the largest),
``rtl`` (exact runs / runs), per synthesis target its resources and the median Fmax over
the seeds, ``time_us`` (summed cycles at the median Fmax of the first place-and-route
target), ``pareto`` (the fronts the point is on) and the first error.
"""

import csv
import io
import json
import statistics

from gen.sweep.pareto import front, maximised, objectives

__all__ = ["summarise", "summary_csv", "summary_markdown", "best_points", "predict_seconds",
           "parse_value"]

_ADDITIVE = {"cycles", "ideal_cycles", "compute_cycles", "jobs", "column_blocks"}
_LARGEST = {"mac_units", "max_abs_error"}


def parse_value(text: str):
    """A results.csv cell as a Python value (int, float, bool, None or str)."""
    if text is None or text == "":
        return None
    if text in ("true", "false"):
        return text == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _aggregate(name, values):
    if any(v is None for v in values) or not values:
        return None
    if name in _ADDITIVE:
        return sum(values)
    if name in _LARGEST:
        return max(values)
    if all(isinstance(v, str) for v in values):
        return "/".join(dict.fromkeys(values))
    return round(statistics.fmean(values), 6)


def _model_columns(spec):
    from gen.sweep.blocks import MODEL_FIGURES, adapter
    return list(MODEL_FIGURES) + list(adapter(spec.block).figures) \
        if "model" in spec.stages else []


def _synth_columns(spec):
    from gen.synth import TARGETS
    out = []
    for t in spec.stages.get("synth", {}).get("targets", []):
        out += [f"{t}.{r}" for r in ("lut", "ff", "dsp", "bram")]
        if TARGETS[t]["pnr"]:
            out += [f"{t}.fmax_mhz", f"{t}.seeds"]
    return out


def _point_row(spec, point, links, rows):
    out = {"point": point.index, "point_id": point.id,
           **{k: point.values.get(k) for k in spec.keys}}
    if point.error:
        return {**out, "status": "invalid", "error": point.error}
    got = [(st, wl, tg, sd, rows.get(key)) for st, wl, tg, sd, key in links]
    bad = [r for *_, r in got if r is None or r["status"] != "ok"]
    out["status"] = "ok" if not bad else ("missing" if any(r is None for r in bad)
                                          else "failed")
    errors = [r["error"] for r in bad if r is not None and r.get("error")]
    model = [r for st, *_, r in got if st == "model"]
    if model and all(r is not None and r["status"] == "ok" for r in model):
        for name in _model_columns(spec):
            out[name] = _aggregate(name, [parse_value(r.get(name)) for r in model])
    rtl = [r for st, *_, r in got if st == "rtl"]
    if rtl:
        out["rtl"] = f"{sum(r is not None and r['status'] == 'ok' for r in rtl)}/{len(rtl)}"
    for target in spec.stages.get("synth", {}).get("targets", []):
        runs = [r for st, _, tg, _, r in got if st == "synth" and tg == target
                and r is not None and r["status"] == "ok"]
        if runs:
            for res in ("lut", "ff", "dsp", "bram"):
                out[f"{target}.{res}"] = parse_value(runs[0].get(res))
            fmax = [parse_value(r.get("fmax_mhz")) for r in runs]
            fmax = [f for f in fmax if f is not None]
            if fmax:
                out[f"{target}.fmax_mhz"] = round(statistics.median(fmax), 2)
                out[f"{target}.seeds"] = len(fmax)
    pnr = [c for c in _synth_columns(spec) if c.endswith(".fmax_mhz")]
    if pnr and out.get("cycles") is not None and out.get(pnr[0]):
        out["time_us"] = round(out["cycles"] / out[pnr[0]], 3)
    out["error"] = errors[0] if errors else ""
    return out


def summary_columns(spec) -> list:
    """The summary's columns (module docstring)."""
    cols = ["point", "point_id", *spec.keys, "status", *_model_columns(spec)]
    cols += ["rtl"] if "rtl" in spec.stages else []
    cols += _synth_columns(spec)
    cols += ["time_us"] if "time_us" in objectives(spec) else []
    return cols + ["pareto", "error"]


def summarise(spec, links, rows) -> list:
    """One dict per point (module docstring); ``rows`` are results.csv rows by key."""
    out = [_point_row(spec, p, links[p.index], rows) for p in spec.points]
    for a, b in spec.pareto:
        for i in front(out, a, b):
            out[i]["pareto"] = "; ".join(filter(None, [out[i].get("pareto"), f"{a}/{b}"]))
    return out


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def summary_csv(spec, summary) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    cols = summary_columns(spec)
    w.writerow(cols)
    for row in summary:
        w.writerow([_cell(row.get(c)) for c in cols])
    return buf.getvalue()


def best_points(spec, summary) -> list:
    """The best point per objective of the Pareto pairs (ties: the first point)."""
    out = []
    names = list(dict.fromkeys(n for pair in spec.pareto for n in pair))
    for name in names:
        cands = [r for r in summary if isinstance(r.get(name), (int, float))
                 and not isinstance(r.get(name), bool)]
        if not cands:
            continue
        sign = -1 if maximised(name) else 1
        best = min(cands, key=lambda r: (sign * r[name], r["point"]))
        out.append({"objective": name, "direction": "max" if sign < 0 else "min",
                    "value": best[name], "point": best["point"], "point_id": best["point_id"],
                    "values": {k: best.get(k) for k in spec.keys}})
    return out


def _md_table(cols, rows) -> str:
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(_cell(r.get(c)).replace("|", "/") for c in cols) + " |"
              for r in rows]
    return "\n".join(lines)


def summary_markdown(spec, summary, counts: dict, png: str | None) -> str:
    """``summary.md``: counts, the summary table (Pareto points marked), the best point per
    objective and each front."""
    ok = sum(r["status"] == "ok" for r in summary)
    text = [f"# Sweep of `{spec.block}`: {len(summary)} points",
            "",
            f"{ok} points ok, {sum(r['status'] == 'failed' for r in summary)} failed, "
            f"{sum(r['status'] == 'invalid' for r in summary)} invalid; tasks: "
            + ", ".join(f"{k} {v}" for k, v in counts.items()) + ".", ""]
    cols = [c for c in summary_columns(spec) if any(r.get(c) not in (None, "")
                                                     for r in summary)]
    text += ["## Points", "", _md_table(cols, summary), ""]
    best = best_points(spec, summary)
    if best:
        text += ["## Best point per objective", "",
                 _md_table(["objective", "direction", "value", "point", "values"],
                           [{**b, "values": ", ".join(f"{k}={v}" for k, v in
                                                      b["values"].items())} for b in best]),
                 ""]
    for a, b in spec.pareto:
        idx = front(summary, a, b)
        text += [f"## Pareto front: {b} vs {a}", ""]
        text += [_md_table(["point", *spec.keys, a, b], [summary[i] for i in idx])
                 if idx else "(no point has both figures)", ""]
    if png:
        text += [f"![Pareto fronts]({png})", ""]
    return "\n".join(text)


def predict_seconds(durations, workers=(1, 2, 4, 8, 16, 32)) -> dict:
    """Makespan of tasks of these ``durations`` on ``N`` equal workers, longest first, each
    to the worker free first (list scheduling: within 4/3 of the best schedule), per N;
    scheduler and transfer overheads not included."""
    import heapq
    ds = sorted((float(d) for d in durations if d is not None), reverse=True)
    out = {}
    for n in workers:
        free = [0.0] * n
        for d in ds:
            heapq.heappush(free, heapq.heappop(free) + d)
        out[n] = round(max(free) if ds else 0.0, 3)
    return out


def sweep_json(spec, summary, counts, durations, wall: float, mode: str) -> str:
    """``sweep.json``: the run's record (counts, wall time, mode, the predictions)."""
    data = {"block": spec.block, "spec": spec.path.name, "points": len(summary),
            "keys": list(spec.keys), "stages": spec.stages, "tasks": counts,
            "mode": mode, "wall_seconds": round(wall, 3),
            "task_seconds": round(sum(d for d in durations if d is not None), 3),
            "predicted_seconds": predict_seconds(durations),
            "pareto": [{"objectives": p, "points": [summary[i]["point"] for i in
                                                     front(summary, *p)]}
                       for p in spec.pareto],
            "best": best_points(spec, summary)}
    return json.dumps(data, indent=2, default=str) + "\n"
