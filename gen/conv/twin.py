# SPDX-License-Identifier: Apache-2.0
"""RTL twin of the MAC array: layers through the generated Verilog (:func:`rtl_conv`)."""

import numpy as np

from gen.core.fixed import Requant, requant_sums, to_signed, to_unsigned
from gen.core.lanes import pack_beat
from gen.core.regmap import requant_regs
from gen.core.sim import axi_ports, run_axi_jobs, run_job
from gen.core.stimulus import make_job, rate_of
from hdl.conv import BANKED, BANKED_SHELL, IM2COL, IM2COL_SHELL
from hdl.conv.banked.shell import banked_desc_registers, banked_regmap, banked_shell_ports
from hdl.conv.shell import desc_registers, regmap_for, shell_ports

from gen.conv import ConvConfig, banked, check_fits, layer_cycles, pack_descriptor, weight_beats
from gen.conv.descriptor import descriptor

__all__ = ["rtl_conv", "layer_data", "axi_job", "rtl_conv_axi", "requant_conv", "rtl_banked",
           "banked_stream_job", "banked_axi_job", "rtl_banked_axi"]


def rtl_conv(jobs, cfg: ConvConfig, sim="verilator", *, ready_prob=1.0, valid_prob=1.0,
             seed=0, reset_at=None, name="run", waves=False):
    """Run layers through the RTL; same contract as :func:`ref_conv` per layer.

    ``jobs`` is a list of ``(x, w, sched)`` run back to back (ping-pong output buffers);
    ``x`` is ``(Ic, H, W)`` or ``(B, Ic, H, W)`` with ``B = sched.layer.batch``.
    Returns ``(outputs, stats, result)``: the ``(Oc, Ho, Wo)`` (or ``(B, Oc, Ho, Wo)``)
    arrays, per layer
    ``{"busy": busy MAC-cycles, "cycles": compute cycles}`` counted by the RTL, and the raw
    :func:`gen.core.sim.run_job` result.
    """
    cdata, wdata, xdata, counts = [], [], [], []
    for x, w, sched in jobs:
        _, ws, xs = layer_data(x, w, sched)
        cdata.append(pack_descriptor(sched))
        wdata += ws
        xdata += xs
        counts.append(sched.layer.oc * sched.layer.positions)
    total_cycles = sum(2 * (layer_cycles(s)["last_out"] + 64) for _, _, s in jobs)
    job = make_job([("c", cdata, valid_prob), ("w", wdata, valid_prob),
                    ("x", xdata, valid_prob)],
                   [("o", sum(counts), ready_prob), ("s", len(jobs), None)],
                   seed=seed, reset_at=reset_at,
                   max_cycles=int(200 + total_cycles / max(min(ready_prob, valid_prob), 0.05)))
    result = run_job(IM2COL, cfg, job, sim=sim, name=name, waves=waves)
    data = to_signed(result["sinks"]["o"]["data"], cfg.acc_width)
    outputs, at = [], 0
    for (x, w, sched), n in zip(jobs, counts):
        layer = sched.layer
        y = data[at:at + n].reshape(layer.batch, layer.oc, layer.ho, layer.wo)
        outputs.append(y if np.ndim(x) == 4 else y[0])
        at += n
    stats = []
    for word in result["sinks"]["s"]["data"]:
        stats.append({"busy": word & ((1 << 48) - 1), "cycles": word >> 48})
    return outputs, stats, result


def layer_data(x, w, sched, packed=True):
    """``(x, weight words, feature words)`` of one layer in stream order: chunk by chunk,
    the chunk's weights (:func:`gen.conv.weight_beats`: ``Oc x icq x kh x kw``, or beats of
    ``w_lanes`` weights, each beat one integer, lane 0 in the LSBs, or with ``packed`` False
    its lane words one after the other) and features (``B x icq x H x W``); ``x`` with its
    batch axis."""
    cfg, layer = sched.cfg, sched.layer
    check_fits(sched)
    x = np.asarray(x, dtype=np.int64)
    w = np.asarray(w, dtype=np.int64)
    if x.ndim == 3:
        x = x[None]
    if x.shape != (layer.batch, layer.ic, layer.h, layer.w):
        raise ValueError(f"x has shape {x.shape}, the layer needs "
                         f"{(layer.batch, layer.ic, layer.h, layer.w)}")
    xdata, start = [], 0
    for q in sched.chunk_sizes:
        xdata += to_unsigned(x[:, start:start + q], cfg.data_width)
        start += q
    beats = weight_beats(w, sched)
    lanes = to_unsigned(beats, cfg.weight_width)
    if cfg.w_lanes == 1 or not packed:
        return x, lanes, xdata
    L = cfg.w_lanes
    wdata = [pack_beat(lanes[i:i + L], cfg.weight_width) for i in range(0, len(lanes), L)]
    return x, wdata, xdata


def axi_job(x, w, sched, rq=None, cfg=None) -> dict:
    """The AXI bench job (:mod:`gen.core.cocotb_axi`) of one layer: the descriptor's fields in
    the ``DESC_k`` registers, ``O_WORDS``, the weights and features as one packet each; the statistics
    registers read back after it.  ``rq`` (a :class:`gen.core.fixed.Requant`, shells with
    ``rq_width`` > 0): its ``RQ_*`` registers and, when it loads biases, their packet on
    ``s_axis_b`` (``JOB_INPUTS.b_en`` set).  ``cfg``: the shell's config (default the
    schedule's; the requantisation fields do not change a schedule).  ``x`` and ``w`` may
    be lists of equal length: a run of layers of ``sched`` in one job (``LAYERS``, their
    data back to back in each packet)."""
    cfg, layer = cfg or sched.cfg, sched.layer
    if rq is not None and not cfg.rq_width:
        raise ValueError("a Requant job needs a shell with rq_width > 0")
    xs, ws = (x, w) if isinstance(x, (list, tuple)) else ([x], [w])
    if len(xs) != len(ws) or not 1 <= len(xs) < 1 << 16:
        raise ValueError(f"a run needs 1 .. 65535 layers with one x and one w each, "
                         f"not {len(xs)} and {len(ws)}")
    regmap = regmap_for(cfg)
    wdata, xdata = [], []
    for xi, wi in zip(xs, ws):
        _, wd, xd = layer_data(xi, wi, sched, packed=False)
        wdata += wd
        xdata += xd
    pack_descriptor(sched)                     # every field in its width, or an error
    regs = desc_registers(cfg, descriptor(sched))
    regs += [[regmap.offset("O_WORDS"), len(xs) * layer.oc * layer.positions],
             [regmap.offset("LAYERS"), len(xs)],
             [regmap.offset("IRQ_ENABLE"), 1]]
    packets = {"s_axis_w": wdata, "s_axis_x": xdata}
    if cfg.rq_width:
        rq = rq if rq is not None else Requant()
        regs += requant_regs(regmap, rq, layer.ho * layer.wo, layer.oc, cfg.rq_depth)
        loads = rq.bias is not None
        regs += [[regmap.offset("JOB_INPUTS"), 0b11 | int(loads) << 2]]
        if loads:
            packets["s_axis_b"] = to_unsigned(rq.bias, cfg.acc_width)
    return {"regs": regs, "packets": packets,
            "read": [regmap.offset(n) for n in ("MAC_BUSY_LO", "MAC_BUSY_HI",
                                                 "COMPUTE_CYCLES")]}


def requant_conv(y, rq, bias, width: int):
    """Golden model of the shell's output stage on a layer's sums ``y`` ``(..., Oc, Ho,
    Wo)``: ``bias`` the ``Oc`` biases in effect (``rq.bias`` or the last loaded)."""
    b = np.asarray(bias, dtype=np.int64)[:, None, None]
    return requant_sums(y, b, mult=rq.mult, shift=rq.shift, width=width, relu=rq.relu)


def rtl_conv_axi(jobs, cfg: ConvConfig, sim="verilator", *, ready_prob=1.0, valid_prob=1.0,
                 seed=0, name="run-axi"):
    """:func:`rtl_conv` through the accelerator shell: one AXI job per item ``(x, w,
    sched)``, back to back.  Returns ``(outputs, stats, records)``: the layers' outputs
    (shaped as :func:`rtl_conv`'s), per job the statistics read from the registers
    (``busy`` MAC-cycles, compute ``cycles``, summed over its layers) and the bench's
    per-job records.  A job may carry a fourth item, its :class:`gen.core.fixed.Requant`
    (``rq_width`` > 0); the outputs are then the ``rq_width``-bit results.  An item whose
    ``x`` and ``w`` are lists is a run of layers of one schedule in one job
    (:func:`axi_job`); its output is then the list of those layers' outputs."""
    axi = [axi_job(*job, cfg=cfg) for job in jobs]
    sources, sinks = axi_ports(*shell_ports(cfg), valid=valid_prob, ready=ready_prob, seed=seed)
    slow = max(min(rate_of(valid_prob), rate_of(ready_prob)), 0.05)
    runs = [len(job[0]) if isinstance(job[0], (list, tuple)) else 1 for job in jobs]
    total = sum(2 * n * (layer_cycles(job[2])["last_out"] + 64) for n, job in zip(runs, jobs))
    records = run_axi_jobs(IM2COL_SHELL, cfg, axi, sources, sinks, sim=sim, name=name,
                           max_cycles=int(2000 * len(jobs) + total / slow))
    outs, stats = [], []
    for (x, w, sched, *_), n, record in zip(jobs, runs, records):
        layer = sched.layer
        y = to_signed(record["packets"]["m_axis_o"], cfg.rq_width or cfg.acc_width)
        y = y.reshape(n, layer.batch, layer.oc, layer.ho, layer.wo)
        if isinstance(x, (list, tuple)):
            outs.append([yi if np.ndim(xi) == 4 else yi[0] for xi, yi in zip(x, y)])
        else:
            outs.append(y[0] if np.ndim(x) == 4 else y[0][0])
        lo, hi, cycles = record["reads"]
        stats.append({"busy": lo | hi << 32, "cycles": cycles})
    return outs, stats, records


def banked_stream_job(items, cfg, *, valid=None, ready=None, seed=0, reset_at=None) -> dict:
    """The stream job (:func:`gen.core.stimulus.make_job`) of banked-array jobs run back to
    back: ``items`` is a list of ``(x, w, job)`` (:class:`gen.conv.banked.BankedJob`);
    ``valid`` / ``ready``: a pattern or probability for every source / the ``o`` sink."""
    c, wd, xd, nout = [], [], [], 0
    for x, w, job in items:
        c.append(banked.descriptor_value(job, cfg))
        wd += [pack_beat(to_unsigned(b, cfg.weight_width), cfg.weight_width)
               for b in banked.weight_beats(w, job)]
        xd += [pack_beat(to_unsigned(b, cfg.data_width), cfg.data_width)
               for b in banked.feature_beats(x, job, cfg)]
        nout += job.G * job.S * job.obeats
    full = banked.run_cycles([job for _x, _w, job in items], cfg)
    slow = max(min(rate_of(valid), rate_of(ready)), 0.05)
    return make_job([("c", c, valid), ("w", wd, valid), ("x", xd, valid)],
                    [("o", nout, ready), ("s", len(items), None)], seed=seed,
                    reset_at=reset_at,
                    max_cycles=int(500 + 2 * (full["s"][-1] + full["o"][-1]) / slow))


def rtl_banked(items, cfg, sim="verilator", *, valid=None, ready=None, seed=0, reset_at=None,
               name="banked"):
    """Run banked-array jobs back to back through the RTL (:class:`hdl.conv.banked.
    BankedArray`).  Returns ``(outputs, stats, result)``: per item the ``(B, Oc, Ho, Wo)``
    sums of the job's strips (zeros elsewhere, :func:`gen.conv.banked.assemble`), per job
    ``(busy MAC-cycles, beats)`` from the RTL's ``s`` word, and the raw
    :func:`gen.core.sim.run_job` result (``job``: the stream job it ran)."""
    job = banked_stream_job(items, cfg, valid=valid, ready=ready, seed=seed, reset_at=reset_at)
    result = run_job(BANKED, cfg, job, sim=sim, name=name)
    result["job"] = job
    mask = (1 << cfg.acc_width) - 1
    words = [(beat >> (k * cfg.acc_width)) & mask for beat in result["sinks"]["o"]["data"]
             for k in range(cfg.bus_words)]
    words = to_signed(words, cfg.acc_width)
    outputs, at = [], 0
    for _x, _w, bj in items:
        n = bj.G * bj.S * bj.obeats * cfg.bus_words
        outputs.append(banked.assemble(words[at:at + n], bj))
        at += n
    stats = [(d & ((1 << 48) - 1), d >> 48) for d in result["sinks"]["s"]["data"]]
    return outputs, stats, result


def banked_axi_job(x, w, job, cfg, rq=None) -> dict:
    """The AXI bench job (:mod:`gen.core.cocotb_axi`) of one banked-array job: its
    descriptor in the ``DESC_k`` registers, ``O_WORDS``, the weights and features as one
    packet each; the statistics registers read back after it.  With ``cfg.rq_width`` > 0
    (the job channel-aligned): ``rq`` (a :class:`gen.core.fixed.Requant`, default the
    identity without a bias load) in the ``RQ_*`` registers
    (:func:`gen.conv.banked.requant_fields`) and ``JOB_INPUTS``; when it loads biases
    (``rq.bias``: the job's ``G R`` or the layer's ``Oc``,
    :func:`gen.conv.banked.job_biases`) their packet on ``s_axis_b``."""
    if rq is not None and not cfg.rq_width:
        raise ValueError("a Requant job needs a shell with rq_width > 0")
    regmap = banked_regmap(cfg)
    fields = {k: v for k, (v, _w) in banked.descriptor_fields(job, cfg).items()}
    regs = banked_desc_registers(cfg, fields)
    regs += [[regmap.offset("O_WORDS"), job.G * job.S * job.E],
             [regmap.offset("IRQ_ENABLE"), 1]]
    wd = [v for b in banked.weight_beats(w, job) for v in to_unsigned(b, cfg.weight_width)]
    xd = [v for b in banked.feature_beats(x, job, cfg) for v in to_unsigned(b, cfg.data_width)]
    packets = {"s_axis_w": wd, "s_axis_x": xd}
    if cfg.rq_width:
        rq = rq if rq is not None else Requant()
        f = banked.requant_fields(job)
        bias = None if rq.bias is None else banked.job_biases(job, rq.bias)
        regs += requant_regs(regmap, Requant(rq.mult, rq.shift, rq.relu, bias),
                             f["positions"], f["channels"], cfg.rq_depth)
        regs += [[regmap.offset("RQ_STRIPS"), f["strips"] | f["group"] << 16],
                 [regmap.offset("JOB_INPUTS"), 0b11 | int(bias is not None) << 2]]
        if bias is not None:
            packets["s_axis_b"] = to_unsigned(bias, cfg.acc_width)
    return {"regs": regs, "packets": packets,
            "read": [regmap.offset(n) for n in ("MAC_BUSY_LO", "MAC_BUSY_HI",
                                                 "COMPUTE_CYCLES")]}


def rtl_banked_axi(items, cfg, sim="verilator", *, valid=1.0, ready=1.0, seed=0,
                   name="banked-axi", reset_after=None):
    """Banked-array jobs through the accelerator shell (:class:`hdl.conv.banked.shell.
    BankedShell`), one AXI job each, back to back.  Returns ``(outputs, stats, records)``:
    per item the ``(B, Oc, Ho, Wo)`` sums of its strips, per job ``(busy MAC-cycles, beats
    issued)`` read from the registers, and the bench's per-job records.  ``reset_after``:
    hold ``aresetn`` low that many clocks into the first job (its record says so).  An item
    may carry a fourth element, its :class:`gen.core.fixed.Requant` (``rq_width`` > 0,
    :func:`banked_axi_job`); the outputs are then the ``rq_width``-bit results (golden:
    :func:`gen.conv.banked.requant_job`)."""
    jobs = [banked_axi_job(x, w, job, cfg, *rest) for x, w, job, *rest in items]
    if reset_after is not None:
        jobs[0] = dict(jobs[0], reset_after=int(reset_after))
    sources, sinks = axi_ports(*banked_shell_ports(cfg), valid=valid, ready=ready, seed=seed)
    full = banked.run_cycles([job for _x, _w, job, *_ in items], cfg)
    slow = max(min(rate_of(valid), rate_of(ready)), 0.05)
    records = run_axi_jobs(BANKED_SHELL, cfg, jobs, sources, sinks, sim=sim, name=name,
                           max_cycles=int(5000 * len(jobs) + 2 * full["last_out"] / slow))
    outs, stats = [], []
    for (_x, _w, job, *_), rec in zip(items, records):
        if rec.get("reset"):
            outs.append(None)
            stats.append(None)
            continue
        words = to_signed(np.array(rec["packets"]["m_axis_o"], dtype=np.int64),
                          cfg.rq_width or cfg.acc_width)
        outs.append(banked.assemble(words, job, padded=False))
        lo, hi, beats = rec["reads"]
        stats.append((lo | hi << 32, beats))
    return outs, stats, records
