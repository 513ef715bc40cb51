# SPDX-License-Identifier: Apache-2.0
"""``spnn compile``: a layer graph and a sample of inputs -> a plan of blocks, configs,
fixed-point formats and predicted cycles.

Per layer of the graph (:mod:`gen.model.graph`):

* **Block.** ``conv`` -> the MAC array (``gen.conv``; the mapping of
  :data:`gen.conv.MAPPINGS` and the host tiling, :func:`gen.conv.tiling.plan_tiles`, with
  the fewest end-to-end cycles); ``gemm`` -> the sparse PE array (``gen.spmv``) when the
  batch is 1 and the weight density is at most :data:`SPMV_DENSITY` (one vector at a time;
  its cost is the non-zeros), else the FD-CSR FC engine (``gen.fc``; it reuses every
  weight over ``batch`` inputs); the reason is written in the plan.  ``relu``, pools,
  ``flatten`` and ``add`` run on the host (a documented numpy model; a ReLU right after a
  conv or gemm is marked ``fused``: the block's output stage applies it).
* **Formats.** Every tensor a block reads gets a signed format of the width that block
  reads (conv ``data_width``, spmv/fc ``x_fmt`` width): the fewest integer bits ``m`` (sign
  included) with ``max |t| < 2**(m - 1)`` over the calibration inputs, the rest fraction
  bits.  Weights likewise from their own ``max |w|`` at the block's weight width.  A host
  operator's output keeps its input's format.
* **Cycles.** The exact cycle models at full rate: conv ``TilePlan.cycles`` (end to end per
  job, loads included), spmv :func:`gen.spmv.cycle_model` (first weight word to last
  result), fc :func:`gen.fc.fc_schedule` per batch of ``cfg.batch`` columns.

The plan is a dict (``plan.json``; :func:`plan_table` renders it as Markdown).
"""

import numpy as np

from gen.core.config import SpnnError
from gen.core.fixed import QFormat
from gen.model.reference import run_float

__all__ = ["compile_model", "choose_format", "plan_table", "SPMV_DENSITY", "PLAN_VERSION"]

PLAN_VERSION = 1
SPMV_DENSITY = 0.5


def choose_format(max_abs: float, width: int) -> QFormat:
    """The signed ``width``-bit format with the fewest integer bits (sign included) that
    holds ``max_abs``: ``max_abs < 2**(m - 1)``."""
    m = 1
    while m < width and max_abs >= 2.0 ** (m - 1):
        m += 1
    if max_abs >= 2.0 ** (m - 1):
        raise SpnnError(f"a value of magnitude {max_abs:g} does not fit {width} bits")
    return QFormat(m, width - m)


def _shape(t):
    return list(t.shape[1:])


def _conv_entry(layer, x, cfgs, batch):
    from gen.conv import MAPPINGS, ConvLayer
    from gen.conv.tiling import plan_tiles
    cfg = cfgs["conv"]
    oc, ic, kh, kw = layer.w.shape
    cl = ConvLayer(oc=oc, ic=ic, h=x.shape[2], w=x.shape[3], kh=kh, kw=kw,
                   stride=layer.attrs["stride"], pad=layer.attrs["pad"], batch=batch)
    best = None
    for mapping in MAPPINGS:
        try:
            tp = plan_tiles(cl, cfg, mapping)
        except SpnnError:
            continue
        if best is None or tp.cycles < best.cycles:
            best = tp
    if best is None:
        raise SpnnError(f"layer {layer.name!r}: conv {oc}x{ic}x{kh}x{kw} on "
                        f"{x.shape[2]}x{x.shape[3]} does not fit the conv array")
    macs = best.macs
    return {"block": "conv", "mapping": best.mapping, "jobs": best.jobs,
            "tile_shape": list(best.shape), "cycles": int(best.cycles), "macs": int(macs),
            "mac_units": cfg.rows * cfg.cols, "words": best.words,
            "utilisation": best.utilisation(),
            "reason": "Conv -> the MAC array (mapping and tiling with the fewest end-to-end "
                      "cycles)"}, cfg.data_width, cfg.weight_width


def _gemm_entry(layer, x, cfgs, batch):
    rows, cols = layer.w.shape
    nnz = int(np.count_nonzero(layer.w))
    density = nnz / layer.w.size
    spmv = cfgs["spmv"]
    if batch == 1 and density <= SPMV_DENSITY and rows <= spmv.max_rows:
        from gen.spmv import compile_tiled, cycle_model, tile_jobs
        wq = np.where(layer.w != 0, 1, 0)          # the timing depends on the pattern only
        blocks = compile_tiled(wq, spmv, "balanced")
        run = cycle_model(tile_jobs(blocks, np.zeros(cols, np.int64)), spmv)
        cycles = (run["o"][-1] + 1) if run["o"] else run["cycles_run"]
        return {"block": "spmv", "cycles": int(cycles), "macs": nnz, "mac_units": spmv.pes,
                "column_blocks": len(blocks), "utilisation": nnz / (spmv.pes * cycles),
                "reason": f"batch 1 and density {density:.3f} <= {SPMV_DENSITY}: the sparse "
                          f"PE array (cost ~ non-zeros / {spmv.pes} PEs)"}, \
            spmv.x_fmt.width, spmv.w_fmt.width
    from gen.fc import encode, fc_schedule
    fc = cfgs["fc"]
    if rows > fc.max_rows or cols > fc.max_cols:
        raise SpnnError(f"layer {layer.name!r}: a {rows} x {cols} Gemm exceeds the FC "
                        f"engine's max_rows {fc.max_rows} / max_cols {fc.max_cols}")
    per_job = fc_schedule(encode(np.where(layer.w != 0, 1, 0), fc.row_width), fc)["cycles"]
    jobs = -(-batch // fc.batch)
    cycles = per_job * jobs
    why = (f"batch {batch} > 1" if batch > 1 else f"density {density:.3f} > {SPMV_DENSITY}")
    return {"block": "fc", "cycles": int(cycles), "jobs": jobs, "macs": nnz * batch,
            "mac_units": fc.batch * fc.nz_per_clock,
            "utilisation": nnz * batch / (fc.batch * fc.nz_per_clock * cycles),
            "reason": f"{why}: the FD-CSR FC engine (each weight reused over "
                      f"{fc.batch} inputs)"}, fc.x_fmt.width, fc.w_fmt.width


def _default_cfgs(cfgs):
    from gen.conv import ConvConfig
    from gen.fc import FcConfig
    from gen.spmv import SpmvConfig
    out = {"conv": ConvConfig(), "spmv": SpmvConfig(), "fc": FcConfig()}
    out.update(cfgs or {})
    return out


def compile_model(graph, calib, *, batch: int = 1, cfgs=None, name: str = "model") -> dict:
    """The plan of ``graph`` (module docstring) calibrated on ``calib`` (inputs, batch
    first) for ``batch`` inputs per run; ``cfgs`` overrides the blocks' configs
    (``{"conv": ConvConfig, "spmv": SpmvConfig, "fc": FcConfig}``)."""
    cfgs = _default_cfgs(cfgs)
    calib = np.asarray(calib, dtype=np.float64)
    _, tensors = run_float(graph, calib, keep=True)
    peak = {n: float(np.max(np.abs(t))) if t.size else 0.0 for n, t in tensors.items()}
    consumers = {}
    for layer in graph.layers:
        for n in layer.inputs:
            consumers.setdefault(n, []).append(layer)
    entries, formats = [], {}
    for k, layer in enumerate(graph.layers):
        x = tensors[layer.inputs[0]]
        entry = {"name": layer.name, "op": layer.op, "inputs": layer.inputs,
                 "output": layer.output, "in_shape": _shape(x),
                 "out_shape": _shape(tensors[layer.output])}
        if layer.op in ("conv", "gemm"):
            info, x_width, w_width = (_conv_entry if layer.op == "conv" else _gemm_entry)(
                layer, x, cfgs, batch)
            entry.update(info)
            fmt = choose_format(peak[layer.inputs[0]], x_width)
            if layer.inputs[0] in formats and formats[layer.inputs[0]] != str(fmt):
                entry["requantise_input"] = True
            formats.setdefault(layer.inputs[0], str(fmt))
            entry["in_format"] = str(fmt)
            entry["w_format"] = str(choose_format(float(np.max(np.abs(layer.w))), w_width))
            entry["weights"] = int(layer.w.size)
            entry["nnz"] = int(np.count_nonzero(layer.w))
            entry["density"] = entry["nnz"] / entry["weights"]
            after = consumers.get(layer.output, [])
            entry["relu_fused"] = len(after) == 1 and after[0].op == "relu"
        else:
            entry.update(block="host", cycles=0, reason="host operator (numpy model)")
            if layer.op == "relu" and k and graph.layers[k - 1].output == layer.inputs[0] \
                    and graph.layers[k - 1].op in ("conv", "gemm"):
                entry["fused"] = True
        entries.append(entry)
    total = sum(e["cycles"] for e in entries)
    return {"version": PLAN_VERSION, "model": name, "input": graph.input,
            "input_shape": list(graph.input_shape), "output": graph.output, "batch": batch,
            "calibration": {"samples": int(calib.shape[0]),
                            "rule": "fewest integer bits with max|t| < 2**(m-1) over the "
                                    "samples, at the reading block's width"},
            "configs": {k: _cfg_dict(v) for k, v in cfgs.items()},
            "tensor_max_abs": {n: peak[n] for n in sorted(peak)},
            "layers": entries, "total_cycles": int(total)}


def _cfg_dict(cfg):
    from gen.core.config import config_to_dict
    return config_to_dict(cfg)


def plan_table(plan: dict) -> str:
    """The plan as a Markdown table, one row per layer."""
    lines = [f"# Plan of {plan['model']} (batch {plan['batch']})", "",
             "| layer | op | block | in shape | out shape | in format | w format | density "
             "| mapping / jobs | predicted cycles | utilisation (end to end) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for e in plan["layers"]:
        how = e.get("mapping", "")
        if "jobs" in e:
            how = f"{how} / {e['jobs']}".strip(" /")
        util = f"{e['utilisation']:.3f}" if "utilisation" in e else ""
        dens = f"{e['density']:.3f}" if "density" in e else ""
        lines.append(f"| {e['name']} | {e['op']}{' (fused)' if e.get('fused') else ''} | "
                     f"{e['block']} | {e['in_shape']} | {e['out_shape']} | "
                     f"{e.get('in_format', '')} | {e.get('w_format', '')} | {dens} | {how} | "
                     f"{e['cycles']:,} | {util} |")
    lines += ["", f"Total predicted cycles (blocks in sequence, host operators not counted): "
              f"{plan['total_cycles']:,}.", ""]
    reasons = [f"- {e['name']}: {e['reason']}" for e in plan["layers"] if e["block"] != "host"]
    return "\n".join(lines + ["Block choices:"] + reasons) + "\n"
