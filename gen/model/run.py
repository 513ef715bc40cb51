# SPDX-License-Identifier: Apache-2.0
"""Running a plan (:mod:`gen.model.compile`): the network in integer arithmetic, each block
layer on its golden model or its RTL, the host operators in numpy.

Per block layer: the input codes (the tensor's format), the weights quantised to the
layer's ``w_format`` (round half up; the format was chosen so that nothing saturates), the
block's integer result - the conv array's exact sums (:func:`gen.conv.ref_conv`; on the
RTL every job of the layer's plan, :func:`gen.model.compile.conv_plan`), the sparse PE array's saturated accumulator
(:func:`gen.spmv.ref_spmv`, its output format set to the accumulator's), the FC engine's
exact sums (:func:`gen.fc.ref_fc`) - then the **requantisation stage**
(:func:`gen.core.fixed.requant_sums`, the shells' ``hdl.lib.requant.RequantStage``): plus
the bias (rounded half up to the sum's ``x.frac + w.frac`` fraction bits), shifted to the
output tensor's format (``mult`` 1 and ``shift`` the fraction bits dropped, or ``mult`` a
power of two when the output has more fraction bits), round half up, saturated, and clamped
at 0 when a ReLU follows.  With ``engine="rtl"`` the conv and FC layers run through their
accelerator shells with that stage built (``rq_width`` = the output format's width) - the
hardware adds the bias, rescales, saturates and applies the ReLU - and the sparse PE array
(no bias stage in its shell) as the bare engine, the stage in numpy after it; every RTL
result must equal the golden model's, bit for bit.

Host operators on codes, in the input's format: ``relu`` max(c, 0); ``maxpool`` the largest
code (padding never wins); ``avgpool`` the sum of the window's codes divided by its size
(count of non-padding positions unless ``count_include_pad``), rounded half up;
``flatten``; ``add``: both operands shifted to the output's format (round half up), added,
saturated; ``select`` one position along an axis.

LSTM layers (:func:`_lstm_layer`): the input codes shifted to the layer's ``x_fmt`` (the
identity when the input tensor has that format, as it has when only the LSTM reads it),
every sequence of the chunk through :func:`gen.lstm.ref_lstm` (golden) or, in one job of
the LSTM shell (the weights, then the chunk's sequences), :func:`gen.lstm.twin.
rtl_lstm_axi` (checked equal bit for bit); the engine's ``h`` codes (``x_fmt``, every step)
shifted to the output tensor's format (round half up, saturate) by the requantisation
stage - in the shell's hardware on the RTL - without bias or ReLU.
"""

import re

import numpy as np

from gen.core.config import SpnnError, config_from_strings
from gen.core.fixed import (QFormat, Requant, parse_format, quantise, requant_sums,
                            requantise, saturate)
from gen.model.compile import config_classes, layer_config
from gen.model.reference import window_counts, windows

__all__ = ["run_plan", "block_configs"]


def block_configs(plan) -> dict:
    """The plan's base block configs as config objects."""
    classes = config_classes()
    return {k: config_from_strings(classes[k], {f: str(v) for f, v in d.items()})
            for k, d in plan["configs"].items()}


def _round_div(total, count):
    """``total / count`` rounded half up (integers; ``count`` > 0)."""
    return np.floor_divide(2 * total + count, 2 * count)


def _host(layer, args, fmts):
    x = args[0]
    a = layer.attrs
    if layer.op == "relu":
        return np.maximum(x, 0)
    if layer.op == "select":
        return np.take(x, a["index"], axis=a["axis"])
    if layer.op == "flatten":
        return x.reshape(x.shape[0], -1)
    if layer.op == "add":
        out = fmts[layer.output]
        parts = [requantise(v, fmts[n].frac_bits, QFormat(64 - out.frac_bits, out.frac_bits))
                 for v, n in zip(args, layer.inputs)]
        return saturate(parts[0] + parts[1], out)
    if a.get("global"):
        return _round_div(x.sum(axis=(2, 3), keepdims=True), x.shape[2] * x.shape[3])
    kernel, stride, pad = a["kernel"], a["stride"], a["pad"]
    if layer.op == "maxpool":
        return windows(x, kernel, stride, pad, np.iinfo(np.int64).min).max(axis=(-1, -2))
    total = windows(x, kernel, stride, pad).sum(axis=(-1, -2))
    if a.get("count_include_pad") or not pad:
        return _round_div(total, kernel[0] * kernel[1])
    return _round_div(total, window_counts(x.shape[2:], kernel, stride, pad))


def _run_name(layer) -> str:
    """The simulator run folder's name for a layer (ONNX names may hold ``/``)."""
    return "model-" + re.sub(r"[^A-Za-z0-9_.-]", "_", layer.name)


class _Blocks:
    """The block computations of one run: golden or RTL (then checked against golden)."""

    def __init__(self, engine, sim, cfgs):
        self.engine, self.sim, self.cfgs = engine, sim, cfgs
        self.rtl_runs = 0
        self.measured = {}          # layer name -> RTL clocks, summed over its runs

    def _count(self, layer, result):
        """Add one RTL run's clocks from its first input transfer to its last output
        transfer, both counted."""
        first = min(v["cycles"][0] for v in result["sources"].values() if v["cycles"])
        last = max(v["cycles"][-1] for v in result["sinks"].values() if v["cycles"])
        self.measured[layer.name] = self.measured.get(layer.name, 0) + last - first + 1

    def _check(self, layer, got, want):
        if not np.array_equal(got, want):
            bad = int(np.sum(np.asarray(got) != np.asarray(want)))
            raise SpnnError(f"layer {layer.name!r}: the RTL differs from the golden model in "
                            f"{bad} of {np.size(want)} results")
        self.rtl_runs += 1
        return got

    def _shell_run(self, layer, record):
        """Count one shell job's clocks (first input beat to last output beat, both
        counted)."""
        self.measured[layer.name] = (self.measured.get(layer.name, 0)
                                     + record["end"] - record["first_in"] + 1)

    def conv(self, layer, entry, xq, wq, cfg, stage):
        """The layer's output codes: the exact sums of its plan's jobs requantised by
        ``stage`` ``(Requant, bias codes, width)``; on the RTL every job one AXI job of the
        shell with the stage built, its channels' biases loaded with it."""
        from dataclasses import replace
        from gen.conv import ConvLayer, ref_conv
        from gen.conv.banked import run_plan
        from gen.model.compile import conv_plan, conv_shell
        rq, bias, width = stage
        oc, ic, kh, kw = wq.shape
        cl = ConvLayer(oc=oc, ic=ic, h=xq.shape[2], w=xq.shape[3], kh=kh, kw=kw,
                       stride=layer.attrs["stride"], pad=layer.attrs["pad"], batch=xq.shape[0])
        gold = np.stack([ref_conv(x, wq, cl.stride, cl.pad) for x in xq])
        gold = requant_sums(gold, bias[None, :, None, None], mult=rq.mult, shift=rq.shift,
                            width=width, relu=rq.relu)
        if self.engine == "golden":
            return gold
        from gen.conv.twin import rtl_banked_axi
        shell = conv_shell(cfg, oc, width)
        plan = conv_plan(cl, shell, entry["mapping"])

        def run(items):                 # every job one AXI job, its channels' biases loaded
            outs, _, records = rtl_banked_axi(
                [(x, w, job, replace(rq, bias=bias)) for x, w, job in items], plan.cfg,
                self.sim, name=_run_name(layer))
            for record in records:
                self._shell_run(layer, record)
            return outs
        return self._check(layer, run_plan(xq, wq, plan, run), gold)

    def spmv(self, layer, entry, xq, wq, cfg, stage):
        """The sparse PE array's results requantised; on the RTL each input one job of the
        shell with the stage built (one bias per row, loaded with it; one result per
        clock: ``drain_lanes`` 1)."""
        from gen.spmv import ref_spmv
        rq, bias, width = stage
        gold = requant_sums(np.stack([ref_spmv(wq, v, cfg) for v in xq]), bias[None, :],
                            mult=rq.mult, shift=rq.shift, width=width, relu=rq.relu)
        if self.engine == "golden":
            return gold
        from dataclasses import replace
        from gen.spmv.twin import rtl_spmv_axi
        rows = wq.shape[0]
        shell = replace(cfg, drain_lanes=1, rq_width=width,
                        rq_depth=1 << max(1, (rows - 1).bit_length()))
        ys, records = rtl_spmv_axi(wq, list(xq), shell, self.sim, name=_run_name(layer),
                                   rq=[replace(rq, bias=bias)] * len(xq))
        for record in records:
            self._shell_run(layer, record)
        return self._check(layer, np.stack(ys), gold)

    def fc(self, layer, entry, xq, wq, cfg, stage):
        """The FC engine's exact sums requantised; on the RTL each ``batch`` of inputs one
        job of the shell with the stage built (the rows' biases loaded with it)."""
        from gen.fc import ref_fc
        rq, bias, width = stage
        cols = [xq[k:k + cfg.batch].T for k in range(0, len(xq), cfg.batch)]
        gold = np.concatenate([ref_fc(wq, c, cfg).T for c in cols])
        gold = requant_sums(gold, bias[None, :], mult=rq.mult, shift=rq.shift, width=width,
                            relu=rq.relu)
        if self.engine == "golden":
            return gold
        from dataclasses import replace
        from gen.fc.twin import rtl_fc_axi
        rows = wq.shape[0]
        shell = replace(cfg, rq_width=width, rq_depth=1 << max(1, (rows - 1).bit_length()))
        rtl = []
        for c in cols:
            y, records = rtl_fc_axi(wq, c, shell, self.sim, name=_run_name(layer),
                                    rq=replace(rq, bias=bias))
            self._shell_run(layer, records[0])
            rtl.append(y.T)
        return self._check(layer, np.concatenate(rtl), gold)

    def lstm(self, layer, xq, q, cfg, lplan, stage):
        """Every sequence of ``xq`` ``(B, T, X)`` (codes of ``cfg.x_fmt``) from h = c = 0:
        the ``h`` codes ``(B, T, H)`` requantised by ``stage``; on the RTL one job of the
        shell with the stage built: the weights once, then the sequences."""
        from gen.lstm import ref_lstm
        rq, bias, width = stage
        gold = requant_sums(np.stack([ref_lstm(q, s, cfg)[0] for s in xq]),
                            bias[None, None, :], mult=rq.mult, shift=rq.shift, width=width,
                            relu=rq.relu)
        if self.engine == "golden":
            return gold
        from dataclasses import replace
        from gen.lstm import seq_words, weight_words
        from gen.lstm.twin import H_WORDS, IRQ_ENABLE, JOB_INPUTS, requant_job, rtl_lstm_axi
        H = lplan.hidden
        plan = replace(lplan, cfg=replace(cfg, rq_width=width,
                                          rq_depth=1 << max(1, (H - 1).bit_length())))
        seqs = [(s, None, None) for s in xq]
        job = {"regs": [[JOB_INPUTS, 3], [H_WORDS, xq.shape[0] * xq.shape[1] * H],
                        [IRQ_ENABLE, 1]],
               "packets": {"s_axis_w": weight_words(plan),
                           "s_axis_x": [w for s in seqs for w in seq_words(plan, *s)]}}
        hs, records = rtl_lstm_axi(plan, seqs, self.sim, jobs=[requant_job(
            job, plan, replace(rq, bias=bias))], name=_run_name(layer))
        self._shell_run(layer, records[0])
        return self._check(layer, hs[0].reshape(gold.shape), gold)


def _lstm_layer(layer, entry, xq, fmts, blocks):
    """An ``lstm`` layer (module docstring): input codes -> the output tensor's codes."""
    from gen.lstm import LstmConfig
    from gen.model.compile import lstm_layer
    cfg = config_from_strings(LstmConfig, {k: str(v) for k, v in entry["config"].items()})
    cfg, q, lplan = lstm_layer(layer, cfg, cfg.x_fmt, cfg.w_fmt, cfg.b_fmt)
    fin, out = fmts[layer.inputs[0]], fmts[layer.output]
    # the engine's h (x_fmt) to the output's format in the shell's stage: a shift (or a
    # power-of-two multiplier), no bias, no ReLU
    drop = cfg.x_fmt.frac_bits - out.frac_bits
    rq = Requant(*((1, drop) if drop >= 0 else (1 << -drop, 0)))
    stage = (rq, np.zeros(lplan.hidden, dtype=np.int64), out.width)
    return blocks.lstm(layer, requantise(xq, fin.frac_bits, cfg.x_fmt), q, cfg, lplan, stage)


def _stage(layer, entry, fx, fw, acc_width, out):
    """The layer's requantisation ``(Requant, bias codes, width)``: the bias rounded half up
    to the sums' fraction bits, the rescale to ``out`` as a shift (or a power-of-two
    multiplier), ReLU when one is fused; a bias beyond the ``acc_width``-bit bias words or a
    rescale beyond the stage's range is an error naming the layer."""
    frac = fx.frac_bits + fw.frac_bits
    n = layer.w.shape[0]
    bias = (np.floor(np.asarray(layer.b, dtype=np.float64) * 2.0 ** frac + 0.5).astype(np.int64)
            if layer.b is not None else np.zeros(n, dtype=np.int64))
    if bias.size and np.abs(bias).max() >= 1 << (acc_width - 1):
        raise SpnnError(f"layer {layer.name!r}: a bias of {np.abs(bias).max()} codes does not "
                        f"fit the {acc_width}-bit sums of its block")
    drop = frac - out.frac_bits
    mult, shift = (1, drop) if drop >= 0 else (1 << -drop, 0)
    try:
        rq = Requant(mult=mult, shift=shift, relu=bool(entry.get("relu_fused")))
    except ValueError as err:
        raise SpnnError(f"layer {layer.name!r}: the rescale to {out} is beyond the output "
                        f"stage ({err})") from None
    return rq, bias, out.width


def _block_layer(layer, entry, xq, fmts, blocks):
    fx, fw = fmts[layer.inputs[0]], parse_format(entry["w_format"])
    wq = quantise(layer.w, fw)
    cfg = layer_config(entry["block"], blocks.cfgs[entry["block"]], fx, fw)
    acc = cfg.acc_width          # the bias words of the output stage (spmv: out_fmt = acc)
    stage = _stage(layer, entry, fx, fw, acc, fmts[layer.output])
    if entry["block"] != "conv":
        xq = xq.reshape(xq.shape[0], -1)
    return getattr(blocks, entry["block"])(layer, entry, xq, wq, cfg, stage)


def _check_input(x, fmt, flag):
    top = float(fmt.max_code) * fmt.lsb
    low = float(fmt.min_code) * fmt.lsb
    if x.size and (x.max() > top + fmt.lsb / 2 or x.min() < low - fmt.lsb / 2):
        raise SpnnError(f"{flag}: values span {x.min():g}..{x.max():g}, outside the model "
                        f"input's format {fmt} ({low:g}..{top:g}) chosen by calibration; "
                        f"compile again with samples that cover them")


def run_plan(graph, plan, x, engine: str = "golden", sim: str = "verilator",
             flag: str = "--input"):
    """The network's output (real values, one row per input) for inputs ``x`` and the run's
    detail ``{"codes": {tensor: codes of the last chunk}, "rtl_runs": n, "measured_cycles":
    {layer: RTL clocks}}`` (RTL clocks: per run from its first input transfer to its last
    output transfer, both counted, summed over the layer's runs; empty on the golden
    engine); inputs in chunks of the plan's batch."""
    if engine not in ("golden", "rtl"):
        raise SpnnError(f"--engine must be golden or rtl, not {engine!r}")
    fmts = {t: parse_format(f) for t, f in plan["formats"].items()}
    entries = {e["name"]: e for e in plan["layers"]}
    blocks = _Blocks(engine, sim, block_configs(plan))
    x = np.asarray(x, dtype=np.float64)
    _check_input(x, fmts[graph.input], flag)
    outs, codes = [], {}
    for at in range(0, len(x), plan["batch"]):
        codes = {graph.input: quantise(x[at:at + plan["batch"]], fmts[graph.input])}
        for layer in graph.layers:
            args = [codes[n] for n in layer.inputs]
            if layer.op in ("conv", "gemm"):
                codes[layer.output] = _block_layer(layer, entries[layer.name], args[0],
                                                   fmts, blocks)
            elif layer.op == "lstm":
                codes[layer.output] = _lstm_layer(layer, entries[layer.name], args[0],
                                                  fmts, blocks)
            else:
                codes[layer.output] = _host(layer, args, fmts)
        out_fmt = fmts[graph.output]
        outs.append(codes[graph.output].astype(np.float64) * out_fmt.lsb)
    return np.concatenate(outs), {"codes": codes, "rtl_runs": blocks.rtl_runs,
                                  "measured_cycles": blocks.measured}
