# SPDX-License-Identifier: Apache-2.0
"""What a sweep runs per block: the ``model`` and ``rtl`` stages, their figures and the
block's run options (grid keys that are not config fields, e.g. the SpMV allocator).

Every adapter answers the same questions (a :class:`BlockSweep`): which options it takes,
which stages it runs, what the ``model`` stage measures (the exact cycle model at full rate)
and what the ``rtl`` stage measures (the generated Verilog on the native engine, checked
bit for bit against the golden model and cycle for cycle against the cycle model).  The
``synth`` stage is the same for every block (:mod:`gen.sweep.tasks`).

Figures every ``model`` stage gives: ``cycles`` (end to end, first input to last result,
loads included), ``ideal_cycles`` (non-zeros or MACs / MAC units), ``efficiency`` (ideal /
the block's busy cycles) and ``mac_units`` (multipliers: P, rows x cols, lanes; 1 for PWL).
"""

import math

import numpy as np

__all__ = ["BlockSweep", "ADAPTERS", "adapter", "MODEL_FIGURES", "RTL_FIGURES"]

MODEL_FIGURES = ("cycles", "ideal_cycles", "efficiency", "mac_units")
RTL_FIGURES = ("rtl_cycles", "model_cycles", "bit_exact", "cycle_exact")


def _codes(arr, fmt, what):
    """Integer arrays are codes of ``fmt`` (refused outside it); floats are quantised (round
    half up, saturating)."""
    from gen.core.fixed import check_codes, quantise
    arr = np.asarray(arr)
    if arr.dtype.kind in "biu":
        return check_codes(arr.astype(np.int64), fmt, what)
    return quantise(arr, fmt)


def _rtl_context(sim: str, engine: str):
    from gen.core.sim import missing_reason, sim_available, using_engine
    if not sim_available(sim):
        raise RuntimeError(missing_reason(sim).split(":")[0])
    return using_engine(engine)


class BlockSweep:
    """A block's sweep adapter (subclasses below; one per block in :data:`ADAPTERS`).

    Attributes
    ----------
    name : str
        The block (:data:`gen.registry.BLOCKS`).
    options : dict
        ``{option: allowed values}``, the first the default: grid keys besides the
        config fields, passed to the stages (they do not change the hardware, so ``synth``
        ignores them).
    stages : tuple
        The stages the block runs.
    figures : tuple
        The ``model`` stage's figures beyond :data:`MODEL_FIGURES`.
    """

    name = ""
    options: dict = {}
    stages = ("model", "rtl", "synth")
    figures: tuple = ()

    def model(self, cfg, opts: dict, data: dict) -> dict:
        """The ``model`` stage's figures for one workload."""
        raise NotImplementedError

    def rtl(self, cfg, opts: dict, data: dict, sim: str, engine: str) -> dict:
        """The ``rtl`` stage's figures (:data:`RTL_FIGURES`) for one workload."""
        raise NotImplementedError


class SpmvSweep(BlockSweep):
    """SpMV engine: ``alloc`` option; ``cycles`` = first weight beat to last result
    (:func:`gen.spmv.cycle_model` over the checkerboard of blocks the matrix needs),
    ``compute_cycles`` = first activation to the last busy clock (weights already loaded,
    the figure of seed 000's tables)."""

    name = "spmv"
    figures = ("compute_cycles", "column_blocks", "max_over_mean")

    @property
    def options(self):
        from gen.spmv import ALLOCATORS
        return {"alloc": ("balanced",) + tuple(a for a in ALLOCATORS if a != "balanced")}

    def _jobs(self, cfg, opts, data):
        from gen.spmv import compile_tiled, tile_jobs
        w = _codes(data["w"], cfg.w_fmt, "weights")
        x = np.asarray(data["x"])
        x = _codes(x if x.ndim == 1 else x[:, 0], cfg.x_fmt, "x")
        blocks = compile_tiled(w, cfg, opts["alloc"])
        return w, x, blocks, tile_jobs(blocks, x)

    def model(self, cfg, opts, data):
        from gen.spmv import cycle_model
        w, _, blocks, jobs = self._jobs(cfg, opts, data)
        run = cycle_model(jobs, cfg)
        info = run["jobs"]
        starts = [d["compute_start"] for d in info if d["compute_start"] is not None]
        compute = info[-1]["done"] - starts[0] if starts else 0
        nnz = int(np.count_nonzero(w))
        loads = np.sum([b.loads for b in blocks], axis=0)
        ideal = math.ceil(nnz / cfg.pes)
        return {"cycles": run["o"][-1] + 1 if run["o"] else run["cycles_run"],
                "ideal_cycles": ideal, "efficiency": ideal / compute if compute else None,
                "mac_units": cfg.pes, "compute_cycles": compute, "column_blocks": len(blocks),
                "max_over_mean": float(loads.max() / loads.mean()) if loads.mean() else 1.0}

    def rtl(self, cfg, opts, data, sim, engine):
        from gen.spmv import cycle_model, gather_tiled, ref_spmv
        from gen.spmv.twin import run_jobs
        w, x, blocks, jobs = self._jobs(cfg, opts, data)
        with _rtl_context(sim, engine):
            ys, result = run_jobs(jobs, cfg, sim, name="sweep")
        model = cycle_model(jobs, cfg)
        o = result["sinks"]["o"]["cycles"]
        return {"rtl_cycles": o[-1] + 1, "model_cycles": model["o"][-1] + 1,
                "bit_exact": bool(np.array_equal(gather_tiled(blocks, ys),
                                                 ref_spmv(w, x, cfg))),
                "cycle_exact": o == model["o"]
                and result["sources"]["x"]["cycles"] == model["x"]}


class ConvSweep(BlockSweep):
    """MAC array: ``mapping`` option (``remainder``: up to ``copies`` copies of a part's
    channels; ``naive``: one copy; ``best``: the faster of the two per layer); ``cycles`` =
    the layer's jobs back to back, first input beat to last output beat at full rate
    (:func:`gen.conv.banked.plan_layer` on the point's buffers)."""

    name = "conv"
    figures = ("jobs", "utilisation", "mapping_used", "roofline_cycles")

    options = {"mapping": ("remainder", "naive", "best")}

    @staticmethod
    def _plan(cfg, mapping, layer):
        from dataclasses import replace
        from gen.conv.banked import plan_layer
        tried = {"remainder": cfg, "naive": replace(cfg, copies=1)}
        names = tuple(tried) if mapping == "best" else (mapping,)
        plans = [(plan_layer(layer, tried[m]), m) for m in names]
        return min(plans, key=lambda e: e[0].cycles)

    def model(self, cfg, opts, data):
        plan, used = self._plan(cfg, opts["mapping"], data["layer"])
        units = cfg.rows * cfg.cols
        return {"cycles": int(plan.cycles), "ideal_cycles": plan.compute_bound,
                "efficiency": plan.compute_bound / plan.cycles, "mac_units": units,
                "jobs": len(plan.jobs), "utilisation": plan.utilisation,
                "mapping_used": used, "roofline_cycles": plan.roofline}

    def rtl(self, cfg, opts, data, sim, engine):
        from gen.conv import ref_conv
        from gen.conv.banked import run_cycles, run_plan
        from gen.conv.twin import rtl_banked
        layer = data["layer"]
        plan, _used = self._plan(cfg, opts["mapping"], layer)
        rng = np.random.default_rng(0)
        hi_x, hi_w = 1 << (cfg.data_width - 1), 1 << (cfg.weight_width - 1)
        x = rng.integers(-hi_x, hi_x, (layer.batch, layer.ic, layer.h, layer.w))
        w = rng.integers(-hi_w, hi_w, (layer.oc, layer.ic, layer.kh, layer.kw))
        runs = []

        def conv(items):
            with _rtl_context(sim, engine):
                outs, stats, result = rtl_banked(items, plan.cfg, sim, name="sweep")
            runs.append((stats, result))
            return outs
        y = run_plan(x, w, plan, conv)
        (stats, result), = runs
        model = run_cycles(plan.jobs, plan.cfg)
        took = result["sinks"]["o"]["cycles"][-1] - result["sources"]["c"]["cycles"][0] + 1
        want = np.stack([ref_conv(x[b], w, layer.stride, layer.pad)
                         for b in range(layer.batch)])
        return {"rtl_cycles": took, "model_cycles": model["o"][-1] - model["c"][0] + 1,
                "bit_exact": bool(np.array_equal(y, want)),
                "cycle_exact": stats == model["stats"]
                and all(result["sources"][p]["cycles"] == model[p] for p in "cwx")
                and result["sinks"]["o"]["cycles"] == model["o"]}


class FcSweep(BlockSweep):
    """FD-CSR FC engine: ``cycles`` = :func:`gen.fc.fc_schedule` per job of ``batch``
    activation vectors (``x`` with N columns: ``ceil(N / batch)`` jobs)."""

    name = "fc"
    figures = ("jobs",)

    def _prepare(self, cfg, data):
        from gen.fc import encode
        w = _codes(data["w"], cfg.w_fmt, "weights")
        x = np.asarray(data["x"])
        x = _codes(x.reshape(len(x), -1), cfg.x_fmt, "x")
        rows, cols = w.shape
        if rows > cfg.max_rows or cols > cfg.max_cols:
            raise ValueError(f"the matrix is {rows} x {cols}; the engine takes at most "
                             f"max_rows {cfg.max_rows} x max_cols {cfg.max_cols}")
        fd = encode(w, cfg.row_width)
        if fd.nnz >= 1 << cfg.addr_width:
            raise ValueError(f"{fd.nnz} non-zeros need addr_width "
                             f"{fd.nnz.bit_length()}, not {cfg.addr_width}")
        return w, x, fd

    def model(self, cfg, opts, data):
        from gen.fc import fc_schedule
        _, x, fd = self._prepare(cfg, data)
        sched = fc_schedule(fd, cfg)
        jobs = -(-x.shape[1] // cfg.batch)
        ideal = jobs * sched["ideal_cycles"]
        return {"cycles": jobs * sched["cycles"], "ideal_cycles": ideal,
                "efficiency": ideal / (jobs * sched["cycles"]), "mac_units": cfg.lanes,
                "jobs": jobs}

    def rtl(self, cfg, opts, data, sim, engine):
        from gen.fc import fc_schedule, ref_fc
        from gen.fc.twin import rtl_fc
        w, x, fd = self._prepare(cfg, data)
        want = fc_schedule(fd, cfg)["cycles"]
        took, exact, timed = 0, True, True
        with _rtl_context(sim, engine):
            for p in range(0, x.shape[1], cfg.batch):
                part = x[:, p:p + cfg.batch]
                y, result = rtl_fc(w, part, cfg, sim, name=f"sweep{p}")
                exact = exact and bool(np.array_equal(y, ref_fc(w, part, cfg)))
                n = result["sinks"]["y"]["cycles"][-1] - \
                    result["sources"]["cmd"]["cycles"][0] + 1
                timed = timed and n == want
                took += n
        jobs = -(-x.shape[1] // cfg.batch)
        return {"rtl_cycles": took, "model_cycles": jobs * want, "bit_exact": exact,
                "cycle_exact": timed}


class PwlSweep(BlockSweep):
    """PWL unit: ``cycles`` = first input to last output transfer of the samples
    (:func:`gen.pwl.cycle_model`); ``max_abs_error`` = the fitted table's error against
    the float function over every input code."""

    name = "pwl"
    figures = ("max_abs_error",)

    @staticmethod
    def _inputs(cfg, data):
        fmt = cfg.in_fmt
        if data.get("x") is not None:
            return _codes(data["x"], fmt, "input")
        if data.get("all_codes"):
            return np.arange(fmt.min_code, fmt.max_code + 1, dtype=np.int64)
        rng = np.random.default_rng(data["seed"])
        return rng.integers(fmt.min_code, fmt.max_code + 1, data["samples"])

    def model(self, cfg, opts, data):
        from gen.pwl import cycle_model
        from gen.pwl.fit import fit_table
        x = self._inputs(cfg, data)
        run = cycle_model(len(x), cfg)
        cycles = run["o"][-1] - run["i"][0] + 1
        ideal = len(x) + cfg.latency
        return {"cycles": cycles, "ideal_cycles": ideal, "efficiency": ideal / cycles,
                "mac_units": 1, "max_abs_error": fit_table(cfg).max_abs_error}

    def rtl(self, cfg, opts, data, sim, engine):
        from gen.pwl import cycle_model, ref_pwl
        from gen.pwl.fit import fit_table
        from gen.pwl.twin import rtl_pwl
        x = self._inputs(cfg, data)
        with _rtl_context(sim, engine):
            y, result = rtl_pwl(x, cfg, sim, name="sweep")
        model = cycle_model(len(x), cfg)
        i, o = result["sources"]["i"]["cycles"], result["sinks"]["o"]["cycles"]
        return {"rtl_cycles": o[-1] - i[0] + 1, "model_cycles": model["o"][-1] -
                model["i"][0] + 1, "bit_exact": bool(np.array_equal(y, ref_pwl(x, fit_table(
                    cfg)))), "cycle_exact": o == model["o"] and i == model["i"]}


class LstmSweep(BlockSweep):
    """LSTM layer on the sparse PE array: ``alloc`` option; a workload is a generated pruned
    layer and one input sequence from h = c = 0.  ``cycles`` = the job end to end, weight
    load included (:func:`gen.lstm.cycle_model`: first clock to the last ``h`` transfer,
    + 1); ``ideal_cycles`` = ``ceil(nnz / P)`` per step x steps; ``efficiency`` = that over
    the steps' cycles (the weight load excluded); ``step_cycles_max`` the slowest step's
    period; ``weight_beats`` the weight stream's transfers."""

    name = "lstm"
    figures = ("step_cycles_max", "weight_beats")

    @property
    def options(self):
        from gen.spmv import ALLOCATORS
        return {"alloc": ("balanced",) + tuple(a for a in ALLOCATORS if a != "balanced")}

    def _plan(self, cfg, opts, data):
        from gen.core.fixed import quantise
        from gen.lstm import compile_lstm, quantise_lstm
        q = quantise_lstm(data["layer"], cfg)
        plan = compile_lstm(q, cfg, opts["alloc"])
        return q, plan, [(quantise(data["xs"], cfg.x_fmt), None, None)]

    def model(self, cfg, opts, data):
        from gen.lstm import cycle_model, step_cycles, weight_beats
        _, plan, seqs = self._plan(cfg, opts, data)
        run = cycle_model(plan, seqs)
        steps = step_cycles(run)
        ideal = plan.ideal_cycles * len(steps)
        return {"cycles": run["o"][-1] + 1, "ideal_cycles": ideal,
                "efficiency": ideal / sum(steps), "mac_units": cfg.pes,
                "step_cycles_max": max(steps), "weight_beats": len(weight_beats(plan))}

    def rtl(self, cfg, opts, data, sim, engine):
        from gen.lstm import cycle_model, ref_lstm
        from gen.lstm.twin import rtl_lstm
        q, plan, seqs = self._plan(cfg, opts, data)
        with _rtl_context(sim, engine):
            outs, result = rtl_lstm(plan, seqs, sim, name="sweep")
        model = cycle_model(plan, seqs)
        o = result["sinks"]["o"]["cycles"]
        return {"rtl_cycles": o[-1] + 1, "model_cycles": model["o"][-1] + 1,
                "bit_exact": bool(np.array_equal(outs[0], ref_lstm(q, seqs[0][0], cfg)[0])),
                "cycle_exact": o == model["o"]
                and result["sources"]["x"]["cycles"] == model["x"]}


ADAPTERS = {a.name: a for a in (SpmvSweep(), ConvSweep(), FcSweep(), PwlSweep(), LstmSweep())}


def adapter(block: str) -> BlockSweep:
    """The sweep adapter of a registered block."""
    return ADAPTERS[block]
