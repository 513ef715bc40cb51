# SPDX-License-Identifier: Apache-2.0
"""Soak: long random job sequences through a block's RTL on the native engine, every result
checked against the golden model.

``python -m scripts.soak BLOCK [-n N] [--sim verilator|icarus] [--seed S]`` (``make soak
BLOCK=... N=...``) streams N random *vectors* through the block in jobs of a few thousand
clocks each, every job with its own random idle-input / back-pressure patterns and, in
every third job, a reset at a random clock (the job then restarts; its results after the
reset must be complete and exact).  A vector is, per block:

* ``pwl``: one input code (the first job covers every one of the 65,536 codes);
* ``spmv``: one x vector of a random sparse matrix (random shape up to the engine's limits,
  several matrices per job);
* ``fc``: one x column of a random FD-CSR layer;
* ``lstm``: one time step of a random sequence (random layer, random initial state);
* ``conv``: one output position of a random job (random layer shape, stride, padding, batch,
  strips, chunks and copies).

Prints (and writes with ``--report``) vectors, jobs, resets, mismatches and vectors per
second; exit 1 on any mismatch.  ``-j N`` runs N processes (seeds ``seed .. seed+N-1``).
Not part of ``make test``; ``tb/test_soak.py`` runs a short version of every block.
"""

import argparse
import json
import os
import sys
import time

import numpy as np

from gen.core.sim import using_engine

__all__ = ["soak", "BLOCKS"]


def _probs(rng):
    """A random handshake rate: full rate a third of the time, else 0.3 .. 1."""
    return 1.0 if rng.random() < 1 / 3 else float(rng.uniform(0.3, 1.0))


def _reset(rng, job, span):
    return int(rng.integers(0, span)) if job % 3 == 2 else None


def _pwl(rng, job, budget, sim):
    from gen.pwl import PwlConfig, fit_table, ref_pwl
    from gen.pwl.twin import rtl_pwl
    cfg = PwlConfig(func=("sigmoid", "tanh")[job % 2])
    n = min(budget, 65536 if job == 0 else 20000)
    x = rng.permutation(65536)[:n] - 32768 if job == 0 else rng.integers(-32768, 32768, n)
    reset = _reset(rng, job, n)
    y, _ = rtl_pwl(x, cfg, sim, valid_prob=_probs(rng), ready_prob=_probs(rng),
                   seed=int(rng.integers(1 << 31)), reset_at=reset, name="soak")
    return n, int(np.sum(y != ref_pwl(x, fit_table(cfg)))), reset is not None


def _spmv(rng, job, budget, sim):
    from gen.spmv import SpmvConfig, compile_weights, ref_spmv
    from gen.spmv.twin import run_jobs
    cfg = SpmvConfig(pes=4, fifo_depth=4, rows_per_pe=16, max_cols=64, mem_depth=1024)
    fmt = cfg.w_fmt
    cases = []
    for _ in range(min(budget, 64)):
        rows, cols = int(rng.integers(1, 65)), int(rng.integers(1, 65))
        w = rng.integers(fmt.min_code, fmt.max_code + 1, (rows, cols))
        w[rng.random((rows, cols)) > rng.uniform(0.05, 0.6)] = 0
        x = rng.integers(cfg.x_fmt.min_code, cfg.x_fmt.max_code + 1, cols)
        x[rng.random(cols) < 0.2] = 0
        alloc = str(rng.choice(["interleave", "zigzag", "lpt", "balanced"]))
        cases.append((w, x, compile_weights(w, cfg, alloc)))
    reset = _reset(rng, job, 100)
    ys, _ = run_jobs([(p, x) for _, x, p in cases], cfg, sim, w_valid_prob=_probs(rng),
                     x_valid_prob=_probs(rng), o_ready_prob=_probs(rng),
                     seed=int(rng.integers(1 << 31)), reset_at=reset, name="soak")
    bad = sum(int(np.sum(y != ref_spmv(w, x, cfg))) for (w, x, _), y in zip(cases, ys))
    return len(cases), bad, reset is not None


def _fc(rng, job, budget, sim):
    """Several random layers back to back in one job: each layer's ``fc_job`` streams
    concatenated (the engine takes the next ``cmd`` when a layer's results are out)."""
    from gen.core.sim import run_job
    from gen.core.stimulus import make_job
    from gen.fc import FcConfig, ref_fc
    from gen.fc.fdcsr import prune_random
    from gen.fc.job import fc_job, unpack_y
    from hdl.fc import GATEWARE
    cfg = FcConfig(batch=8, max_cols=128, max_rows=64)
    layers, data, counts, limit = [], {}, {}, 0
    for _ in range(16):
        rows, cols = int(rng.integers(1, 65)), int(rng.integers(1, 129))
        n = int(rng.integers(1, cfg.batch + 1))
        w = prune_random((rows, cols), float(rng.uniform(0.05, 0.6)), rng, cfg.w_fmt.width)
        x = rng.integers(cfg.x_fmt.min_code, cfg.x_fmt.max_code + 1, (cols, n))
        one, _, _ = fc_job(w, x, cfg)
        for src in one["sources"]:
            data.setdefault(src["port"], []).extend(src["data"])
        for snk in one["sinks"]:
            counts[snk["port"]] = counts.get(snk["port"], 0) + snk["count"]
        layers.append((w, x))
        limit += one["max_cycles"]
    reset = _reset(rng, job, 50)
    p, q, seed = _probs(rng), _probs(rng), int(rng.integers(1 << 31))
    full = make_job([(port, words, p) for port, words in data.items()],
                    [(port, count, q) for port, count in counts.items()], seed=seed,
                    reset_at=reset, max_cycles=int(limit / min(p, q)) + 200)
    result = run_job(GATEWARE, cfg, full, sim=sim, name="soak")
    if result.get("error"):
        raise RuntimeError(f"fc soak job failed: {result['error']}")
    y, at, bad = unpack_y(result["sinks"]["y"]["data"], cfg), 0, 0
    for w, x in layers:
        bad += int(np.sum(y[at:at + w.shape[0], :x.shape[1]] != ref_fc(w, x, cfg)))
        at += w.shape[0]
    return sum(x.shape[1] for _, x in layers), bad, reset is not None


def _lstm(rng, job, budget, sim):
    from gen.core.fixed import quantise
    from gen.lstm import (LstmConfig, LstmFloat, compile_lstm, prune_lstm, quantise_lstm,
                          ref_lstm)
    from gen.lstm.twin import rtl_lstm
    cfg = LstmConfig(pes=3, max_inputs=8, max_hidden=16, fifo_depth=4, mem_depth=1024,
                     segments=8)
    hidden, inputs = int(rng.integers(1, 17)), int(rng.integers(1, 9))
    m = LstmFloat(rng.uniform(-1, 1, (4 * hidden, inputs)),
                  rng.uniform(-1, 1, (4 * hidden, hidden)), rng.uniform(-1, 1, 4 * hidden))
    q = quantise_lstm(prune_lstm(m, float(rng.uniform(0.1, 0.9))), cfg)
    plan = compile_lstm(q, cfg)
    seqs = []
    for _ in range(max(1, min(24, budget // 3))):
        steps = int(rng.integers(1, 6))
        seqs.append((quantise(rng.uniform(-2, 2, (steps, inputs)), cfg.x_fmt),
                     quantise(rng.uniform(-1, 1, hidden), cfg.x_fmt),
                     quantise(rng.uniform(-3, 3, hidden), cfg.c_fmt)))
    reset = _reset(rng, job, 200)
    outs, _ = rtl_lstm(plan, seqs, sim, w_valid_prob=_probs(rng), x_valid_prob=_probs(rng),
                       o_ready_prob=_probs(rng), seed=int(rng.integers(1 << 31)),
                       reset_at=reset, name="soak")
    bad = sum(int(np.sum(out != ref_lstm(q, xs, cfg, h0, c0)[0]))
              for (xs, h0, c0), out in zip(seqs, outs))
    return sum(len(s[0]) for s in seqs), bad, reset is not None


def _conv(rng, job, budget, sim):
    from gen.conv import ConvLayer, ref_conv
    from gen.conv.banked import BankedConfig, make_job
    from gen.conv.twin import rtl_banked
    cfg = BankedConfig(rows=8, cols=4, bus_words=4, copies=2, feat_depth=64, weight_depth=64,
                       out_depth=64)
    items, vectors = [], 0
    while len(items) < 8 and vectors < budget:
        k = int(rng.choice([1, 2, 3, 5]))
        h, w = int(rng.integers(k, 10)), int(rng.integers(k, 10))
        b = int(rng.integers(1, 3))
        layer = ConvLayer(int(rng.integers(1, 13)), int(rng.integers(1, 5)), h, w, k, k,
                          int(rng.integers(1, 3)), int(rng.integers(0, min(2, k))), b)
        rs = int(rng.choice([d for d in range(1, layer.ho + 1) if layer.ho % d == 0]))
        segw = int(rng.choice([d for d in range(1, layer.wo + 1) if layer.wo % d == 0]))
        try:
            bj = make_job(layer, cfg, rs=rs, segw=segw, icq=int(rng.integers(1, layer.ic + 1)),
                          n=int(rng.choice([1, 2])))
        except ValueError:   # a random job that does not fit: draw again
            continue
        x = rng.integers(-128, 128, (b, layer.ic, layer.h, layer.w))
        wt = rng.integers(-128, 128, (layer.oc, layer.ic, k, k))
        items.append((x, wt, bj))
        vectors += b * layer.ho * layer.wo
    reset = _reset(rng, job, 500)
    outs, _, _ = rtl_banked(items, cfg, sim, valid=_probs(rng), ready=_probs(rng),
                            seed=int(rng.integers(1 << 31)), reset_at=reset, name="soak")
    bad = 0
    for (x, wt, bj), y in zip(items, outs):
        L = bj.layer
        bad += sum(int(np.sum(y[i] != ref_conv(x[i], wt, L.stride, L.pad)))
                   for i in range(L.batch))
    return vectors, bad, reset is not None


BLOCKS = {"pwl": _pwl, "spmv": _spmv, "fc": _fc, "lstm": _lstm, "conv": _conv}


def soak(block: str, n: int, sim: str = "verilator", seed: int = 0, log=print,
         progress=False) -> dict:
    """Stream at least ``n`` vectors through ``block`` (module docstring); the tally."""
    rng = np.random.default_rng(seed)
    step = BLOCKS[block]
    tally = {"block": block, "sim": sim, "seed": seed, "vectors": 0, "jobs": 0, "resets": 0,
             "mismatches": 0}
    t0 = time.perf_counter()
    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=n, unit="vector", desc=f"soak {block} (seed {seed})", leave=False)
    with using_engine("native"):
        while tally["vectors"] < n:
            done, bad, reset = step(rng, tally["jobs"], n - tally["vectors"], sim)
            tally["vectors"] += done
            tally["jobs"] += 1
            tally["resets"] += int(reset)
            tally["mismatches"] += bad
            if bar is not None:
                bar.update(min(done, n - bar.n))
            if bad:
                log(f"[soak] {block} job {tally['jobs'] - 1}: {bad} results differ from the "
                    f"golden model (seed {seed})")
    if bar is not None:
        bar.close()
    tally["seconds"] = time.perf_counter() - t0
    tally["vectors_per_second"] = tally["vectors"] / tally["seconds"]
    return tally


def _worker(args):
    return soak(*args)


def soak_parallel(block: str, n: int, sim: str, seed: int, workers: int,
                  progress=False) -> dict:
    """:func:`soak` split over ``workers`` processes (seeds ``seed``, ``seed + 1``, ...);
    the summed tally, ``vectors_per_second`` over the wall time."""
    if workers == 1:
        return soak(block, n, sim, seed, progress=progress)
    from concurrent.futures import ProcessPoolExecutor
    # build once before the workers start, so they do not all wait on the build lock
    soak(block, 1, sim, seed + workers)
    t0 = time.perf_counter()
    share = [n // workers + (k < n % workers) for k in range(workers)]
    with ProcessPoolExecutor(workers) as pool:
        parts = list(pool.map(_worker, [(block, m, sim, seed + k) for k, m in
                                        enumerate(share) if m]))
    tally = {"block": block, "sim": sim, "seed": seed, "workers": workers}
    for key in ("vectors", "jobs", "resets", "mismatches"):
        tally[key] = sum(p[key] for p in parts)
    tally["seconds"] = time.perf_counter() - t0
    tally["vectors_per_second"] = tally["vectors"] / tally["seconds"]
    return tally


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("block", choices=sorted(BLOCKS))
    ap.add_argument("-n", type=int, default=1_000_000, help="vectors (default 10^6)")
    ap.add_argument("--sim", default="verilator", choices=["verilator", "icarus"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("-j", "--workers", type=int, default=1,
                    help="processes, each with its own seed (default 1)")
    ap.add_argument("--report", help="write the tally as JSON here")
    args = ap.parse_args(argv)
    if args.n < 1:
        ap.error(f"-n must be at least 1, not {args.n}")
    if args.workers < 1:
        ap.error(f"--workers must be at least 1, not {args.workers}")
    tally = soak_parallel(args.block, args.n, args.sim, args.seed, args.workers,
                          progress=sys.stderr.isatty())
    print(f"[soak] {args.block}: {tally['vectors']:,} vectors in {tally['jobs']} jobs "
          f"({tally['resets']} with a reset), {tally['mismatches']} mismatches, "
          f"{tally['vectors_per_second']:,.0f} vectors/s under {args.sim}")
    if args.report:
        tmp = args.report + ".tmp"
        with open(tmp, "w") as handle:
            json.dump(tally, handle, indent=2)
        os.replace(tmp, args.report)
    return 1 if tally["mismatches"] else 0


if __name__ == "__main__":
    sys.exit(main())
