# SPDX-License-Identifier: Apache-2.0
"""The FC engine's stream job: ``W @ X`` as the packed payloads of its six ports
(:func:`fc_job`) and the unpacking of its results and memory requests."""

import numpy as np

from gen.core.fixed import check_codes
from gen.core.stimulus import make_job, pattern_for
from gen.fc.config import FcConfig
from gen.fc.cycles import FC_SINKS, FC_SOURCES
from gen.fc.fdcsr import encode
from gen.fc.schedule import _beats, fc_schedule

__all__ = ["fc_job", "unpack_y", "unpack_requests"]


def _pack(fields):
    """[(value, width), ...] -> int, first field in the LSBs."""
    out, pos = 0, 0
    for value, width in fields:
        out |= (int(value) & ((1 << width) - 1)) << pos
        pos += width
    return out


def _unpack_signed(word, width, count):
    mask = (1 << width) - 1
    vals = [(word >> (i * width)) & mask for i in range(count)]
    return [v - (1 << width) if v >> (width - 1) else v for v in vals]


def fc_job(w, x, cfg: FcConfig, *, valid_prob=1.0, ready_prob=1.0, seed=0, reset_at=None,
           patterns=None):
    """The stream job (see :func:`gen.core.sim.run_job`) computing ``W @ X`` on the engine.

    Parameters
    ----------
    w, x : array
        Integer codes, ``rows x cols`` and ``cols x N`` (``N <= batch``, zero-padded).
    cfg : FcConfig
    valid_prob, ready_prob : float or Pattern
        The pattern of every source (``cmd``, ``x``, ``meta``, ``vdata``) / sink
        (``vaddr``, ``y``); a probability is a Bernoulli pattern seeded per port
        (:func:`gen.core.stimulus.make_job`).
    seed : int
        The job seed (per-port seeds, :func:`gen.core.stimulus.port_seed`).
    reset_at : int, optional
        Clock of a mid-job reset.
    patterns : dict, optional
        ``{port: Pattern or probability}`` overriding ``valid_prob`` / ``ready_prob`` for
        the ports named.

    Returns
    -------
    tuple
        ``(job, schedule, fd)``: the job dict, :func:`fc_schedule` (the unstalled timing;
        :func:`fc_cycle_model` with the job's patterns gives any other) and the FD-CSR
        matrix.
    """
    pats = dict(patterns or {})
    unknown = set(pats) - set(FC_SOURCES + FC_SINKS)
    if unknown:
        raise ValueError(f"unknown FC ports {sorted(unknown)}; the ports are "
                         f"{', '.join(FC_SOURCES + FC_SINKS)}")
    spec = {p: pats.get(p, valid_prob) for p in FC_SOURCES}
    spec.update({p: pats.get(p, ready_prob) for p in FC_SINKS})
    w = check_codes(w, cfg.w_fmt, "weights")
    x = check_codes(x, cfg.x_fmt, "activations")
    if w.ndim != 2 or x.ndim != 2 or w.shape[1] != x.shape[0]:
        raise ValueError(f"weights (rows x cols) and activations (cols x N) must agree, "
                         f"not {w.shape} and {x.shape}")
    rows, cols = w.shape
    if not 1 <= cols <= cfg.max_cols:
        raise ValueError(f"cols must be between 1 and max_cols={cfg.max_cols}, not {cols}")
    if not 1 <= rows <= cfg.max_rows:
        raise ValueError(f"rows must be between 1 and max_rows={cfg.max_rows}, not {rows}")
    if x.shape[1] > cfg.batch:
        raise ValueError(f"activations must have at most batch={cfg.batch} columns, "
                         f"not {x.shape[1]}")
    fd = encode(w, cfg.row_width)
    if fd.nnz >= 1 << cfg.addr_width:
        raise ValueError(f"non-zeros must be fewer than 2**addr_width={1 << cfg.addr_width}, "
                         f"not {fd.nnz}")
    xs = np.zeros((cols, cfg.batch), dtype=np.int64)
    xs[:, :x.shape[1]] = x
    masks, offsets, _ = _beats(fd, cfg)
    sched = fc_schedule(fd, cfg)
    xw, ww, aw = cfg.x_fmt.width, cfg.w_fmt.width, cfg.addr_width
    cmd = [_pack([(rows, 16), (cols, 17)])]
    xdata = [_pack([(v, xw) for v in xs[c]]) for c in range(cols)]
    meta = []
    for r in range(masks.shape[0]):
        for b in range(masks.shape[1]):
            meta.append(_pack([(m, cfg.row_width) for m in masks[r, b]]
                              + [(o, aw) for o in offsets[r, b]]))
    vdata = []
    for addr, n in sched["requests"]:
        vdata.append(_pack([(fd.values[addr + i] if i < n else 0, ww)
                            for i in range(cfg.nz_per_clock)]))
    slow = 1.0 / max(min(pattern_for(v, seed, p).rate for p, v in spec.items()), 0.05)
    job = make_job([("cmd", cmd, spec["cmd"]), ("x", xdata, spec["x"]),
                    ("meta", meta, spec["meta"]), ("vdata", vdata, spec["vdata"])],
                   [("vaddr", len(sched["requests"]), spec["vaddr"]), ("y", rows, spec["y"])],
                   seed=seed, reset_at=reset_at,
                   max_cycles=int(200 + 3 * slow * (sched["cycles"] + len(vdata))))
    return job, sched, fd


def unpack_y(words, cfg: FcConfig):
    return np.array([_unpack_signed(wd, cfg.acc_width, cfg.batch) for wd in words],
                    dtype=np.int64).reshape(-1, cfg.batch)


def unpack_requests(words, cfg: FcConfig):
    cw = cfg.nz_per_clock.bit_length()
    mask = (1 << cfg.addr_width) - 1
    return [(wd & mask, (wd >> cfg.addr_width) & ((1 << cw) - 1)) for wd in words]
