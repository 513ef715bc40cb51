# SPDX-License-Identifier: Apache-2.0
"""``spnn compile``: a layer graph and a sample of inputs -> a plan of blocks, configs,
fixed-point formats and predicted cycles.

Per layer of the graph (:mod:`gen.model.graph`):

* **Block.** ``conv`` -> the MAC array (``gen.conv.banked``: the plan of
  :func:`gen.conv.banked.plan_layer`, remainder or naive mapping, with the fewest end-to-end
  cycles through the shell); ``gemm`` -> the sparse PE array (``gen.spmv``) when the
  batch is 1 and the weight density is at most :data:`SPMV_DENSITY` (one vector at a time;
  its cost is the non-zeros), else the FD-CSR FC engine (``gen.fc``; it reuses every
  weight over ``batch`` inputs) unless the layer exceeds its ``max_rows`` / ``max_cols``
  (then the PE array, which tiles any size, one input at a time); ``lstm`` -> the LSTM
  engine (``gen.lstm``: the weights loaded once, then the batch's sequences in one job);
  the reason is written in the plan.  ``relu``, pools, ``flatten``, ``select`` and ``add``
  run on the host (a documented numpy model; a ReLU right after a
  conv or gemm is marked ``fused``: the block's output stage applies it).
* **Formats.** Every tensor a block reads gets a signed format of the width that block
  reads (conv ``data_width``, spmv/fc ``x_fmt`` width): the fewest integer bits ``m`` (sign
  included) with ``max |t| < 2**(m - 1)`` over the calibration inputs, the rest fraction
  bits.  Weights likewise from their own ``max |w|`` at the block's weight width.  A host
  operator's output keeps its input's format.  An LSTM's input and hidden state ``h`` share
  the engine's ``x_fmt``, so its input tensor is calibrated on ``max(|x|, |h|)``;
  :func:`lstm_entry` gives the engine's formats.
* **Cycles.** The exact cycle models at full rate: conv the plan's jobs through the shell
  with its requantisation stage, one AXI job each (:func:`gen.conv.banked.shell_job_cycles`,
  first input beat to last output beat of each job, summed), spmv :func:`gen.spmv.cycle_model` (first weight word to last
  result), fc :func:`gen.fc.fc_schedule` per batch of ``cfg.batch`` columns, lstm
  :func:`gen.lstm.cycle_model` of one job (weights, then ``batch`` calibration sequences).

The plan is a dict (``plan.json``; :func:`plan_table` renders it as Markdown).
"""

import numpy as np

from gen.core.config import SpnnError
from gen.core.fixed import QFormat
from gen.model.reference import run_float

__all__ = ["compile_model", "conv_shell", "conv_plan", "choose_format", "plan_table",
           "config_classes", "layer_config", "lstm_layer", "lstm_entry", "SPMV_DENSITY",
           "PLAN_VERSION"]

PLAN_VERSION = 2        # 2: the conv layers on the banked array (BankedConfig)
SPMV_DENSITY = 0.5


def choose_format(max_abs: float, width: int) -> QFormat:
    """The signed ``width``-bit format with the fewest integer bits ``m`` (sign included)
    in which ``max_abs`` rounds (half up) to a code that fits: ``floor(max_abs * 2**n +
    1/2) <= 2**(width - 1) - 1`` with ``n = width - m``."""
    top = 2 ** (width - 1) - 1
    for m in range(1, width + 1):
        if np.floor(max_abs * 2.0 ** (width - m) + 0.5) <= top:
            return QFormat(m, width - m)
    raise SpnnError(f"a value of magnitude {max_abs:g} does not fit {width} bits")


def _shape(t):
    return list(t.shape[1:])


def _roofline(cycles: int, compute: int, beats: dict) -> dict:
    """The layer's roofline (:func:`gen.core.runutil.roofline_fields`): ``compute`` the
    clocks its arithmetic needs on the block's MAC units, ``beats`` the AXI4-Stream beats
    each port must carry with the block's buffers."""
    from gen.core.runutil import roofline_fields
    r = roofline_fields(int(cycles), int(compute), {k: int(v) for k, v in beats.items()})
    return {k: r[k] for k in ("compute_bound_cycles", "bandwidth_bound_cycles",
                              "roofline_cycles", "roofline_bound", "efficiency_vs_roofline",
                              "bus_beats")}


def conv_shell(cfg, oc: int, width: int):
    """The conv shell a layer of ``oc`` output channels runs on: ``cfg`` with the
    requantisation stage built (``rq_width`` = ``width``, biases for every channel)."""
    from dataclasses import replace
    return replace(cfg, rq_width=width, rq_depth=1 << max(1, (oc - 1).bit_length()))


def conv_plan(cl, cfg, mapping: str):
    """The layer's plan (:func:`gen.conv.banked.plan_layer`) on the shell ``cfg`` with
    ``mapping`` ``remainder`` (up to ``cfg.copies`` copies) or ``naive`` (one copy)."""
    from dataclasses import replace
    from gen.conv.banked import plan_layer
    return plan_layer(cl, cfg if mapping == "remainder" else replace(cfg, copies=1))


def _conv_entry(layer, x, cfgs, batch):
    from gen.conv import ConvLayer
    from gen.conv.banked import shell_job_cycles
    oc, ic, kh, kw = layer.w.shape
    cfg = conv_shell(cfgs["conv"], oc, cfgs["conv"].data_width)
    cl = ConvLayer(oc=oc, ic=ic, h=x.shape[2], w=x.shape[3], kh=kh, kw=kw,
                   stride=layer.attrs["stride"], pad=layer.attrs["pad"], batch=batch)
    found, why = [], None
    for mapping in ("remainder", "naive") if cfg.copies > 1 else ("remainder",):
        try:
            p = conv_plan(cl, cfg, mapping)
        except ValueError as exc:
            why = str(exc)
            continue
        found.append((sum(shell_job_cycles(j, p.cfg) for j in p.jobs), mapping, p))
    if not found:
        raise SpnnError(f"layer {layer.name!r}: conv {oc}x{ic}x{kh}x{kw} on "
                        f"{x.shape[2]}x{x.shape[3]} does not fit the conv array ({why})")
    cycles, mapping, p = min(found, key=lambda e: e[0])
    roof = _roofline(cycles, p.compute_bound, {
        "s_axis_w": p.beats["w"], "s_axis_x": p.beats["x"], "m_axis_o": p.beats["o"]})
    return {"block": "conv", "mapping": mapping, "jobs": len(p.jobs),
            "copies": [j.n for j in p.jobs], "strip_shape": [p.jobs[0].rs, p.jobs[0].segw],
            "fold": p.jobs[0].fold, "span": p.jobs[0].span, "pack": p.jobs[0].pack,
            "cycles": int(cycles), "macs": int(p.macs), "mac_units": cfg.rows * cfg.cols,
            **roof, "utilisation": p.macs / (cfg.rows * cfg.cols * cycles),
            "reason": "Conv -> the MAC array (mapping and plan with the fewest end-to-end "
                      "cycles)"}, cfg.data_width, cfg.weight_width


def _spmv_gemm(layer, cfg, batch, reason):
    """The sparse PE array, one input vector at a time (weights tiled by
    :func:`gen.spmv.compile_tiled` when larger than its memories, and streamed again for
    every vector): exact cycles of one vector x ``batch``."""
    from gen.spmv import compile_tiled, cycle_model, tile_jobs
    rows, cols = layer.w.shape
    nnz = int(np.count_nonzero(layer.w))
    blocks = compile_tiled(np.where(layer.w != 0, 1, 0), cfg, "balanced")  # timing: pattern
    run = cycle_model(tile_jobs(blocks, np.zeros(cols, np.int64)), cfg)
    per = (run["o"][-1] + 1) if run["o"] else run["cycles_run"]
    from gen.spmv import roofline_beats
    beats = roofline_beats(np.where(layer.w != 0, 1, 0), cfg)
    roof = _roofline(per * batch, -(-nnz // cfg.pes) * batch,
                     {k: v * batch for k, v in beats.items()})
    return {"block": "spmv", "cycles": int(per * batch), "jobs": batch, "macs": nnz * batch,
            "mac_units": cfg.pes, "column_blocks": len(blocks), **roof,
            "utilisation": nnz / (cfg.pes * per), "reason": reason}, \
        cfg.x_fmt.width, cfg.w_fmt.width


def _gemm_entry(layer, x, cfgs, batch):
    rows, cols = layer.w.shape
    nnz = int(np.count_nonzero(layer.w))
    density = nnz / layer.w.size
    spmv, fc = cfgs["spmv"], cfgs["fc"]
    if batch == 1 and density <= SPMV_DENSITY:
        return _spmv_gemm(layer, spmv, batch, f"batch 1 and density {density:.3f} <= "
                          f"{SPMV_DENSITY}: the sparse PE array (cost ~ non-zeros / "
                          f"{spmv.pes} PEs)")
    if rows > fc.max_rows or cols > fc.max_cols:
        return _spmv_gemm(layer, spmv, batch, f"{rows} x {cols} exceeds the FC engine's "
                          f"max_rows {fc.max_rows} / max_cols {fc.max_cols}: the sparse PE "
                          f"array, which tiles any size, one input at a time")
    from gen.fc import encode, fc_schedule
    per_job = fc_schedule(encode(np.where(layer.w != 0, 1, 0), fc.row_width), fc)["cycles"]
    jobs = -(-batch // fc.batch)
    cycles = per_job * jobs
    why = (f"batch {batch} > 1" if batch > 1 else f"density {density:.3f} > {SPMV_DENSITY}")
    per_beat = fc.rows_per_beat
    roof = _roofline(cycles, -(-nnz * batch // (fc.batch * fc.nz_per_clock)), {
        "s_axis_x": jobs * -(-cols // per_beat), "m_axis_y": jobs * -(-rows // per_beat),
        "s_axis_vdata": jobs * -(-nnz // fc.nz_per_clock)})
    return {"block": "fc", "cycles": int(cycles), "jobs": jobs, "macs": nnz * batch,
            "mac_units": fc.batch * fc.nz_per_clock, **roof,
            "utilisation": nnz * batch / (fc.batch * fc.nz_per_clock * cycles),
            "reason": f"{why}: the FD-CSR FC engine (each weight reused over "
                      f"{fc.batch} inputs)"}, fc.x_fmt.width, fc.w_fmt.width


def config_classes() -> dict:
    """``{block: config class}`` of the blocks a plan can use."""
    from gen.conv.banked import BankedConfig as ConvConfig
    from gen.fc import FcConfig
    from gen.lstm import LstmConfig
    from gen.spmv import SpmvConfig
    return {"conv": ConvConfig, "spmv": SpmvConfig, "fc": FcConfig, "lstm": LstmConfig}


def _default_cfgs(cfgs):
    out = {block: cls() for block, cls in config_classes().items()}
    out.update(cfgs or {})
    return out


PASS_THROUGH = ("relu", "maxpool", "avgpool", "flatten", "select")  # keep their input's format
OUT_WIDTH = 16            # a tensor no block reads (the model output, an Add operand)


def _readers(graph):
    """``{tensor: [layers reading it]}``."""
    out = {}
    for layer in graph.layers:
        for n in layer.inputs:
            out.setdefault(n, []).append(layer)
    return out


def _formats(graph, peak, widths):
    """Every tensor's format (module docstring): a tensor a block, an ``add`` or the
    model input produces gets the width of the narrowest block that reads it through
    pass-through host operators; those operators' outputs share their input's format."""
    readers = _readers(graph)
    producer = {layer.output: layer for layer in graph.layers}

    def reach(t):
        """(narrowest block width among the readers of t through pass-through ops, peak)"""
        width, top = None, peak[t]
        for r in readers.get(t, []):
            if r.op in PASS_THROUGH:
                w, p = reach(r.output)
                top = max(top, p)
            else:
                w = widths.get(r.name, OUT_WIDTH)
            width = w if width is None else min(width, w) if w is not None else width
        return width, top

    fmts = {}
    for t in [graph.input] + [layer.output for layer in graph.layers]:
        src = producer.get(t)
        if src is not None and src.op in PASS_THROUGH:
            fmts[t] = fmts[src.inputs[0]]
            continue
        width, top = reach(t)
        fmts[t] = choose_format(top, width or OUT_WIDTH)
    return fmts


def _assign(graph, tensors, cfgs, batch):
    """Per block layer ``(info, x width, w width)`` (block choice and predicted cycles)."""
    return {layer.name: (_conv_entry if layer.op == "conv" else _gemm_entry)(
        layer, tensors[layer.inputs[0]], cfgs, batch)
        for layer in graph.layers if layer.op in ("conv", "gemm")}


def layer_config(block, base, fx: QFormat, fw: QFormat):
    """The block config a layer runs with: ``base`` with the layer's formats (spmv, fc;
    the spmv output format is its accumulator's, so the result leaves unrounded for the
    requantisation stage); conv configs carry widths only."""
    from dataclasses import replace
    if block == "spmv":
        cfg = replace(base, w_fmt=fw, x_fmt=fx)
        return replace(cfg, out_fmt=cfg.acc_fmt)
    if block == "fc":
        return replace(base, w_fmt=fw, x_fmt=fx)
    return base


def compile_model(graph, calib, *, batch: int = 1, cfgs=None, name: str = "model") -> dict:
    """The plan of ``graph`` (module docstring) calibrated on ``calib`` (inputs, batch
    first) for ``batch`` inputs per run; ``cfgs`` overrides the blocks' configs
    (``{"conv": BankedConfig, "spmv": SpmvConfig, "fc": FcConfig}``)."""
    cfgs = _default_cfgs(cfgs)
    calib = np.asarray(calib, dtype=np.float64)
    _, tensors = run_float(graph, calib, keep=True)
    peak = {n: float(np.max(np.abs(t))) if t.size else 0.0 for n, t in tensors.items()}
    blocks = _assign(graph, tensors, cfgs, batch)
    widths, fpeak = {n: v[1] for n, v in blocks.items()}, dict(peak)
    for layer in graph.layers:
        if layer.op == "lstm":          # x and h share the engine's x_fmt
            widths[layer.name] = cfgs["lstm"].x_fmt.width
            fpeak[layer.inputs[0]] = max(peak[layer.inputs[0]], peak[layer.output])
    fmts = _formats(graph, fpeak, widths)
    readers = _readers(graph)
    entries = []
    for k, layer in enumerate(graph.layers):
        entry = {"name": layer.name, "op": layer.op, "inputs": layer.inputs,
                 "output": layer.output, "in_shape": _shape(tensors[layer.inputs[0]]),
                 "out_shape": _shape(tensors[layer.output]),
                 "in_format": str(fmts[layer.inputs[0]]), "out_format": str(fmts[layer.output])}
        if layer.op == "lstm":
            entry.update(lstm_entry(layer, tensors, fmts, cfgs["lstm"], batch))
        elif layer.name in blocks:
            info, _, w_width = blocks[layer.name]
            entry.update(info)
            fw = choose_format(float(np.max(np.abs(layer.w))), w_width)
            entry["w_format"] = str(fw)
            entry["config"] = _cfg_dict(layer_config(info["block"], cfgs[info["block"]],
                                                     fmts[layer.inputs[0]], fw))
            entry["weights"] = int(layer.w.size)
            entry["nnz"] = int(np.count_nonzero(layer.w))
            entry["density"] = entry["nnz"] / entry["weights"]
            after = readers.get(layer.output, [])
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
                            "rule": "fewest integer bits m with round(max|t| * 2**n) <= "
                                    "2**(w-1) - 1 over the samples, n = w - m, w the width "
                                    "of the block reading the tensor"},
            "configs": {k: _cfg_dict(v) for k, v in cfgs.items()},
            "formats": {t: str(f) for t, f in fmts.items()},
            "tensor_max_abs": {n: peak[n] for n in sorted(peak)},
            "layers": entries, "total_cycles": int(total)}


def lstm_layer(layer, base, fx: QFormat, fw: QFormat, fb: QFormat):
    """The LSTM engine's config, integer weights and compiled plan for an ``lstm`` layer:
    ``base`` (pes, fifo_depth, segments, pre/act/c formats, lanes) with ``max_inputs`` X,
    ``max_hidden`` H, the formats ``fx`` (x and h), ``fw``, ``fb`` and ``mem_depth`` the
    largest PE load rounded up to a power of two.  Returns ``(cfg, LstmQuant, LstmPlan)``."""
    from dataclasses import replace
    from gen.lstm import LstmFloat, compile_lstm, quantise_lstm
    nx, hid = layer.attrs["inputs"], layer.attrs["hidden"]
    try:
        probe = replace(base, max_inputs=nx, max_hidden=hid, mem_depth=1 << 20, x_fmt=fx,
                        w_fmt=fw, b_fmt=fb)
        q = quantise_lstm(LstmFloat(layer.w[:, :nx], layer.w[:, nx:], layer.b), probe)
        loads = compile_lstm(q, probe).loads.max(initial=1)
        cfg = replace(probe, mem_depth=max(2, 1 << int(loads - 1).bit_length()))
        return cfg, q, compile_lstm(q, cfg)
    except (TypeError, ValueError) as exc:
        raise SpnnError(f"layer {layer.name!r}: LSTM X = {nx}, H = {hid} does not fit the "
                        f"LSTM engine ({exc})") from None


def lstm_entry(layer, tensors, fmts, base, batch: int) -> dict:
    """The plan entry of an ``lstm`` layer.

    Formats: ``x_fmt`` (inputs and ``h``) = the input tensor's calibrated format (chosen on
    ``max(|x|, |h|)`` at ``base.x_fmt``'s width), ``w_fmt`` and ``b_fmt`` by the calibration
    rule on ``max |[W_ih W_hh]|`` and ``max |b|`` at ``base``'s widths (the bias with at most
    ``w_frac + x_frac`` fraction bits); ``pre_fmt``, ``act_fmt``, ``c_fmt`` stay ``base``'s:
    the PWL units cover their input format's range, so narrowing it to the calibrated
    pre-activations or cell state would cut sigmoid/tanh where they are not yet flat.

    Cycles: :func:`gen.lstm.cycle_model` of one job - the weight stream, then ``batch``
    sequences (the first calibration samples, repeated when there are fewer) - from the
    first weight word to the last ``h`` transfer (every step's ``h`` leaves the engine).
    The engine skips zero ``x`` and ``h`` codes, so the count depends on the data.
    """
    from gen.core.fixed import quantise, requantise
    from gen.lstm import cycle_model, step_cycles
    x = tensors[layer.inputs[0]]
    fin = fmts[layer.inputs[0]]
    fx = choose_format(max(float(np.max(np.abs(x))) if x.size else 0.0,
                           float(np.max(np.abs(tensors[layer.output])))), base.x_fmt.width)
    fw = choose_format(float(np.max(np.abs(layer.w))), base.w_fmt.width)
    fb = choose_format(float(np.max(np.abs(layer.b))), base.b_fmt.width)
    acc_frac = fx.frac_bits + fw.frac_bits
    if fb.frac_bits > acc_frac:
        fb = QFormat(fb.width - acc_frac, acc_frac)
    cfg, q, lplan = lstm_layer(layer, base, fx, fw, fb)
    pick = [k % len(x) for k in range(batch)]
    xq = requantise(quantise(x[pick], fin), fin.frac_bits, fx)
    run = cycle_model(lplan, [(s, None, None) for s in xq])
    cycles, steps = run["o"][-1] + 1, x.shape[1]
    macs = lplan.nnz * steps * batch
    from gen.lstm.words import roofline_beats
    one = roofline_beats(lplan, steps)             # the weights once, then each sequence
    roof = _roofline(cycles, lplan.ideal_cycles * steps * batch,
                     {"s_axis_w": one["s_axis_w"], "s_axis_x": one["s_axis_x"] * batch,
                      "m_axis_h": one["m_axis_h"] * batch})
    return {"block": "lstm", "cycles": int(cycles), "jobs": 1, "sequences": batch, **roof,
            "steps": int(steps), "weight_load_cycles": int(run["w"][-1] + 1),
            "cycles_per_step": float(np.mean(step_cycles(run))),
            "ideal_cycles_per_step": lplan.ideal_cycles, "macs": int(macs),
            "mac_units": cfg.pes, "utilisation": macs / (cfg.pes * cycles),
            "x_format": str(fx), "w_format": str(fw), "b_format": str(fb),
            "config": _cfg_dict(cfg), "weights": int(layer.w.size), "nnz": lplan.nnz,
            "density": lplan.nnz / layer.w.size, "relu_fused": False,
            "reason": f"LSTM -> the LSTM engine ({cfg.pes} PEs, PWL gates): the weights "
                      f"loaded once, then the batch's {batch} sequences of {steps} steps in "
                      f"one job"}


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
        if e["block"] == "lstm":
            how = f"{e['sequences']} seq x {e['steps']} steps"
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
