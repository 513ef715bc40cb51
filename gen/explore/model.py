# SPDX-License-Identifier: Apache-2.0
"""Sparse convolution dataflow explorer (seed 003): unrollings, zero skipping, load imbalance.

A cycle-level model of four ways to unroll a convolution on ``P`` multipliers, with
skipping of zero weights, zero activations, both, or neither, evaluated on a layer's
*actual* weight and activation tensors.  ``docs/explore.md`` gives the derivations.

Notation: weights ``W[m, n, i, j]`` (``M`` output maps, ``N`` input maps, ``Kh x Kw``
kernel), input ``X[b, n, y, x]`` (``B`` images, zero padded by ``pad``), stride ``S``,
output ``Ho x Wo``.  A *MAC* is one product ``W[m, n, i, j] * X[b, n, oy*S+i, ox*S+j]``;
there are ``M N Kh Kw B Ho Wo`` of them ("dense MACs"); the *useful* ones have both
operands non-zero (a padding zero counts as a zero activation).

The common model (every unrolling)
----------------------------------
Work is split into **steps** (the seed's "window step").  In a step every PE ``p`` has a
*queue* of candidate MACs, at most one per *slot* ``t`` of the step's dense timeline.
Skipping removes a MAC from a queue when an operand it skips is zero.  Each PE does one
MAC per cycle; the step ends when the longest queue is empty (the seed's Fig. 4: at every
window slide all queues wait for the longest), so::

    cycles(step) = max(max_p |queue_p|, floor)    (0 if every queue is empty, floor 0)

``floor`` is 0 except for ``array``, whose tiles last at least their accumulator drain.

Steps do not overlap; pipeline fill/drain and operand-fetch stalls are not modelled
(a constant per layer for the dense dataflows; see the ``array`` cross-check for the
one array whose fill/drain is known exactly).  A PE is *active* in a step if it holds any
valid MAC of the step (a PE of a partial tile, a kernel position outside the kernel, ...
is inactive).  The ``P x cycles`` PE-cycles of a run split exactly into::

    performed MACs                   MACs executed (useful + wasted on a zero operand)
    imbalance idle = sum (active_s * cycles_s - performed_s)   active PEs waiting for the
                                     longest queue of their step (the load-imbalance loss)
    mapping idle   = sum ((P - active_s) * cycles_s)   PEs with nothing mapped (tile edges)
    drain idle     = sum (active_s * (cycles_s - longest_s))   ``array`` only: the tile
                                     waits for the previous tile's drain

``parallel_efficiency = performed / (P cycles)``; ``imbalance_loss = imbalance idle /
(P cycles)``; ``mapping_loss``, ``drain_loss`` likewise: the four sum to 1.
``utilisation = useful / (P cycles)``.  ``ideal_cycles = ceil(useful / P)`` (every zero
skipped, perfect balance); ``dense_cycles`` = the same unrolling with ``skip="none"``.

Skipping is decided per *operand fetch*, so PEs sharing an operand skip together and their
queues stay equal; the number of independent queue lengths is the parallel degree of
freedom (DoF) of the seed, measured by :func:`measured_dof`.  ``lockstep=True`` instead
keeps all PEs of a step on one timeline and skips a slot only when no PE needs it (DoF 1,
no imbalance, but MACs on zero operands are executed): the cheap hardware variant.

The unrollings (``pe = (a, b)``, ``P = a * b``)
-----------------------------------------------
``synapse`` (a, b) = (Kx, Ky): seed Fig. 5(a), a weight-stationary systolic array.
    PE ``(row u, column v)`` holds ``W[m, n, ty*Ky+u, tx*Kx+v]`` for one ``(m, n)`` pair and
    kernel tile ``(ty, tx)`` (kernels larger than the array are tiled; smaller ones leave
    PEs inactive).  The padded map ``X[b, n]`` streams in raster order, one activation per
    cycle, *broadcast to all PEs* (the FIFOs of depth Wo between PE rows align partial sums
    one output row apart, so every PE sees the same activation).  A step is one streamed
    activation ``X[b, n, y, x]``, one slot: PE ``(u, v)`` has a MAC iff output
    ``((y-i)/S, (x-j)/S)`` exists (``i, j`` = its kernel position).  Activations no PE uses
    are not streamed.  Skip acts: a zero activation is skipped by all PEs (DoF 1).
    Skip weights: a PE with a zero weight idles, the step still takes a cycle unless every
    weight of the array is zero (DoF Kx*Ky).  Both: DoF Kx*Ky.
``neuron`` (a, b) = (Tr, Tc): seed Fig. 5(b), a 2-D map of output neurons.
    PE ``(r, c)`` computes output ``(ty*Tr+r, tx*Tc+c)`` of map ``m``.  A step is one
    ``(b, m, n, tile)``; its ``Kh*Kw`` slots are the kernel positions, the weight
    ``W[m, n, i, j]`` broadcast to all PEs, each PE using its own activation (passed between
    neighbours).  Skip weights: all PEs skip together (DoF 1); skip acts or both: each PE
    its own zeros (DoF Tr*Tc).
``fmap`` (a, b) = (Tn, Tm): seed Fig. 5(c), Tn input x Tm output maps, adder trees.
    Multiplier ``(u, v)`` multiplies input map ``nt*Tn+u`` for output map ``mt*Tm+v``; the
    ``Tn`` products of output ``v`` go through one adder tree into one accumulator, so the
    lanes of a tree may work on different kernel positions in the same cycle.  A step is one
    ``(b, output position, mt, nt)``; its ``Kh*Kw`` slots are the kernel positions.  The
    activation of lane ``u`` is shared by the ``Tm`` trees: skip acts gives DoF Tn.  A tree
    reads its ``Tn`` weights of one kernel position as one word and skips the word when all
    ``Tn`` are zero: skip weights gives DoF Tm (per-multiplier weight skipping would give
    Tn*Tm).  Both: each multiplier skips its own zero products, DoF Tn*Tm.
``array`` (a, b) = (rows, cols): the seed-002 im2col MAC array (``gen/conv.py``).
    Rows = output channels, columns = output positions, output stationary: MAC
    ``(row, col)`` accumulates one (channel, position) over ``K = N Kh Kw`` beats, the weight
    broadcast along the row, the feature along the column.  It is the ``fmap`` unrolling
    with ``Tn = 1`` (``Tm = rows`` channels share each feature) times the ``neuron`` unrolling
    (``cols`` positions share each weight).  Steps follow ``gen.conv.plan``: per input-channel
    chunk, per pass entry ``(R, n)``, per block of ``R`` channels, per tile; ``n`` groups of
    ``R`` rows each take ``cols`` position slots (row strips or flat raster, as the mapping
    says); the ``kq = q Kh Kw`` beats of the chunk are the slots; a tile lasts at least
    ``ceil(R n / drain_rows)`` cycles (its accumulators drain while the next tile runs).
    Skip weights: DoF rows, skip acts: DoF cols, both: rows*cols.  With ``skip="none"``
    the cycles equal ``gen.conv.compute_cycles`` minus, per chunk, the issue-to-accumulator
    pipeline, one controller cycle and the last tile's drain (tested exactly).
"""

from dataclasses import dataclass

import numpy as np

from gen.core.config import SpnnError

__all__ = ["UNROLLS", "SKIPS", "ExploreConfig", "parse_pe", "prepare", "explore",
           "explore_modes", "queue_lengths", "measured_dof", "seed_dof", "array_plan",
           "dense_cycles_formula"]

UNROLLS = ("synapse", "neuron", "fmap", "array")
SKIPS = ("none", "weights", "acts", "both")
PE_NAMES = {"synapse": ("Kx", "Ky"), "neuron": ("Tr", "Tc"), "fmap": ("Tn", "Tm"),
            "array": ("rows", "cols")}
_BLOCK = 1 << 20          # gathered entries per numpy block (memory bound)


@dataclass(frozen=True)
class ExploreConfig:
    """One unrolling of the explorer.

    Parameters
    ----------
    unroll : str
        ``synapse``, ``neuron``, ``fmap`` or ``array``.
    a, b : int
        Parallel degrees, 1..1024 each: (Kx, Ky), (Tr, Tc), (Tn, Tm) or (rows, cols).
    stride, pad : int
        Convolution stride (1..64) and zero padding (0..64).
    mapping : str
        ``array`` only: ``naive``, ``seed`` or ``remainder`` (see ``gen.conv.plan``).
    max_groups : int
        ``array`` only: feature lanes per column (largest ``n``), capped at ``rows``.
    drain_rows : int
        ``array`` only: accumulator rows written out per clock (``gen.conv``'s
        ``drain_rows``); a tile of ``R x n`` rows lasts at least ``ceil(R n / drain_rows)``
        cycles.  ``0`` (default) = ``rows``, i.e. a tile lasts at least one cycle.
    """

    unroll: str
    a: int
    b: int
    stride: int = 1
    pad: int = 0
    mapping: str = "naive"
    max_groups: int = 4
    drain_rows: int = 0

    def __post_init__(self):
        if self.unroll not in UNROLLS:
            raise ValueError(f"unroll must be one of {', '.join(UNROLLS)}, not {self.unroll!r}")
        for name, lo, hi in (("a", 1, 1024), ("b", 1, 1024), ("stride", 1, 64),
                             ("pad", 0, 64), ("max_groups", 1, 8), ("drain_rows", 0, 1024)):
            v = getattr(self, name)
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
                raise TypeError(f"{name} must be an integer, not {v!r}")
            if not lo <= v <= hi:
                raise ValueError(f"{name} must be between {lo} and {hi}, not {v}")
        if self.mapping not in ("naive", "seed", "remainder"):
            raise ValueError(f"mapping must be one of naive, seed, remainder, "
                             f"not {self.mapping!r}")

    @property
    def pes(self) -> int:
        return self.a * self.b

    @property
    def pe_label(self) -> str:
        na, nb = PE_NAMES[self.unroll]
        return f"{na}x{nb}={self.a}x{self.b}"


def parse_pe(text: str):
    """``"3x3"`` -> ``(3, 3)``; SpnnError otherwise."""
    parts = str(text).lower().split("x")
    try:
        a, b = (int(p) for p in parts)
    except ValueError:
        raise SpnnError(f"--pe must be AxB with positive integers (e.g. 3x3), "
                        f"not {text!r}") from None
    if not (1 <= a <= 1024 and 1 <= b <= 1024):
        raise SpnnError(f"--pe sizes must be between 1 and 1024, not {text!r}")
    return a, b


# ------------------------------------------------------------------ layer preparation

@dataclass
class _Layer:
    wnz: np.ndarray        # (M, K) bool, K = N*Kh*Kw in (n, i, j) order
    xnz: np.ndarray        # (K, B*Ho*Wo) bool, im2col of the padded input's non-zeros
    xpad: np.ndarray       # (B, N, Hp, Wp) bool
    m: int
    n: int
    kh: int
    kw: int
    b: int
    h: int
    w: int
    ho: int
    wo: int
    stride: int
    pad: int

    @property
    def kk(self):
        return self.kh * self.kw

    @property
    def po(self):
        return self.ho * self.wo

    @property
    def dense_macs(self):
        return self.m * self.n * self.kk * self.b * self.po


def prepare(weights, acts, stride=1, pad=0) -> _Layer:
    """Validate ``weights (M, N, Kh, Kw)`` and ``acts (N, H, W)`` or ``(B, N, H, W)``.

    Only the zero pattern matters (exact ``== 0``).  Raises ``SpnnError`` (one line).
    """
    w = np.asarray(weights)
    x = np.asarray(acts)
    if w.ndim != 4:
        raise SpnnError(f"--weights must be a 4-D array (M, N, Kh, Kw), not {w.ndim}-D "
                        f"{tuple(w.shape)}")
    if x.ndim == 3:
        x = x[None]
    if x.ndim != 4:
        raise SpnnError(f"--input must be a 3-D (N, H, W) or 4-D (B, N, H, W) array, not "
                        f"{x.ndim}-D {tuple(x.shape)}")
    if w.size == 0 or x.size == 0:
        raise SpnnError("--weights and --input must not be empty")
    for arr, name in ((w, "--weights"), (x, "--input")):
        if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
            raise SpnnError(f"{name}: values must be finite")
    m, n, kh, kw = w.shape
    b, n2, h, wd = x.shape
    if n != n2:
        raise SpnnError(f"--weights have {n} input channels but --input has {n2}")
    if not isinstance(stride, (int, np.integer)) or not 1 <= stride <= 64:
        raise SpnnError(f"--stride must be between 1 and 64, not {stride!r}")
    if not isinstance(pad, (int, np.integer)) or not 0 <= pad <= 64:
        raise SpnnError(f"--pad must be between 0 and 64, not {pad!r}")
    hp, wp = h + 2 * pad, wd + 2 * pad
    if kh > hp or kw > wp:
        raise SpnnError(f"kernel {kh}x{kw} is larger than the padded input {hp}x{wp}")
    ho, wo = (hp - kh) // stride + 1, (wp - kw) // stride + 1
    xpad = np.zeros((b, n, hp, wp), dtype=bool)
    xpad[:, :, pad:pad + h, pad:pad + wd] = x != 0
    cols = np.empty((n, kh, kw, b, ho, wo), dtype=bool)
    for i in range(kh):
        for j in range(kw):
            cols[:, i, j] = xpad[:, :, i: i + stride * (ho - 1) + 1: stride,
                                 j: j + stride * (wo - 1) + 1: stride].transpose(1, 0, 2, 3)
    return _Layer(wnz=(w != 0).reshape(m, -1), xnz=cols.reshape(n * kh * kw, -1), xpad=xpad,
                  m=m, n=n, kh=kh, kw=kw, b=b, h=h, w=wd, ho=ho, wo=wo, stride=stride, pad=pad)


# ------------------------------------------------------------------ step enumeration
#
# Each generator yields blocks (m, k, pos, valid, floor): integer index arrays
# broadcastable to (steps, P, L), a bool array broadcastable to the same shape and the
# minimum cycles of a step.  Invalid entries carry in-range indices (clamped), valid False.

def _chunks(total, per_step):
    step = max(1, _BLOCK // max(1, per_step))
    for lo in range(0, total, step):
        yield lo, min(total, lo + step)


def _grid(*sizes):
    """Flattened index arrays of the Cartesian product (first size outermost)."""
    idx = np.indices(sizes).reshape(len(sizes), -1)
    return [idx[d] for d in range(len(sizes))]


def _steps_neuron(L, tr, tc):
    ty, tx = -(-L.ho // tr), -(-L.wo // tc)
    pr, pc = _grid(tr, tc)
    t = np.arange(L.kk)
    total = L.b * L.m * L.n * ty * tx
    for lo, hi in _chunks(total, tr * tc * L.kk):
        b, m, n, sy, sx = np.unravel_index(np.arange(lo, hi), (L.b, L.m, L.n, ty, tx))
        oy = sy[:, None] * tr + pr[None, :]
        ox = sx[:, None] * tc + pc[None, :]
        valid = (oy < L.ho) & (ox < L.wo)
        pos = b[:, None] * L.po + np.minimum(oy, L.ho - 1) * L.wo + np.minimum(ox, L.wo - 1)
        yield (m[:, None, None], n[:, None, None] * L.kk + t[None, None, :],
               pos[:, :, None], valid[:, :, None], 0)


def _steps_fmap(L, tn, tm):
    nmt, nnt = -(-L.m // tm), -(-L.n // tn)
    pu, pv = _grid(tn, tm)          # PE p = u * Tm + v (lane u, tree v)
    t = np.arange(L.kk)
    total = L.b * L.po * nmt * nnt
    for lo, hi in _chunks(total, tn * tm * L.kk):
        b, p, mt, nt = np.unravel_index(np.arange(lo, hi), (L.b, L.po, nmt, nnt))
        n = nt[:, None] * tn + pu[None, :]
        m = mt[:, None] * tm + pv[None, :]
        valid = (n < L.n) & (m < L.m)
        yield (np.minimum(m, L.m - 1)[:, :, None],
               np.minimum(n, L.n - 1)[:, :, None] * L.kk + t[None, None, :],
               (b * L.po + p)[:, None, None], valid[:, :, None], 0)


def _steps_synapse(L, kx, ky):
    nty, ntx = -(-L.kh // ky), -(-L.kw // kx)
    hp, wp = L.xpad.shape[2:]
    pu, pv = _grid(ky, kx)          # PE p = u * Kx + v (row u = kernel row)
    s = L.stride
    total = L.b * L.m * L.n * nty * ntx * hp * wp
    for lo, hi in _chunks(total, ky * kx):
        b, m, n, ty, tx, y, x = np.unravel_index(np.arange(lo, hi),
                                                 (L.b, L.m, L.n, nty, ntx, hp, wp))
        i = ty[:, None] * ky + pu[None, :]
        j = tx[:, None] * kx + pv[None, :]
        dy, dx = y[:, None] - i, x[:, None] - j
        oy, ox = dy // s, dx // s
        valid = ((i < L.kh) & (j < L.kw) & (dy >= 0) & (dx >= 0) & (dy % s == 0)
                 & (dx % s == 0) & (oy < L.ho) & (ox < L.wo))
        i, j = np.minimum(i, L.kh - 1), np.minimum(j, L.kw - 1)
        oy, ox = np.clip(oy, 0, L.ho - 1), np.clip(ox, 0, L.wo - 1)
        k = (n[:, None] * L.kh + i) * L.kw + j
        pos = b[:, None] * L.po + oy * L.wo + ox
        yield m[:, None, None], k[:, :, None], pos[:, :, None], valid[:, :, None], 0


def array_plan(L, cfg: ExploreConfig):
    """The ``gen.conv`` schedule of this layer on a ``rows x cols`` array (no buffer split)."""
    try:
        from gen.conv import ConvConfig, ConvLayer, plan
    except ImportError as exc:  # pragma: no cover - gen/conv.py is part of the project
        raise SpnnError(f"--unroll array needs gen.conv ({exc})") from None
    try:
        ccfg = ConvConfig(rows=cfg.a, cols=cfg.b, max_groups=min(cfg.max_groups, cfg.a, 8),
                          drain_rows=cfg.drain_rows or cfg.a)
    except (TypeError, ValueError) as exc:
        raise SpnnError(f"--pe for --unroll array: {exc}") from None
    layer = ConvLayer(L.m, L.n, L.h, L.w, L.kh, L.kw, L.stride, L.pad)
    return plan(layer, ccfg, cfg.mapping, limit_buffers=False)


def _steps_array(L, sched):
    """The array's steps with the lanes of ``gen.conv.pass_lanes`` (the RTL's layout:
    column ``c`` of a tile takes a window group, copy ``g`` an adjacent window of it)."""
    from gen.conv import pass_lanes
    rows, cols = sched.cfg.rows, sched.cfg.cols
    start = 0
    for q in sched.chunk_sizes:
        t = np.arange(q * L.kk) + start * L.kk
        cb = 0
        for ps in sched.passes:
            r, n = ps.r, ps.n
            prow, pcol = _grid(rows, cols)
            g, rr = prow // r, prow % r
            pe_ok = g < n
            gi = np.minimum(g, n - 1)
            lane_oy, lane_ox, lane_ok = pass_lanes(sched, ps)
            drain = -(-(r * n) // sched.cfg.drain_rows)
            total = L.b * ps.count * ps.tiles
            for lo, hi in _chunks(total, rows * cols * len(t)):
                b, blk, tile = np.unravel_index(np.arange(lo, hi), (L.b, ps.count, ps.tiles))
                lane = (tile[:, None], gi[None, :], pcol[None, :])
                oy, ox, ok = lane_oy[lane], lane_ox[lane], lane_ok[lane]
                pos = np.minimum(oy, L.ho - 1) * L.wo + np.minimum(ox, L.wo - 1)
                m = cb + blk[:, None] * r + rr[None, :]
                valid = ok & pe_ok[None, :] & (m < L.m)
                yield (np.minimum(m, L.m - 1)[:, :, None], t[None, None, :],
                       (b[:, None] * L.po + pos)[:, :, None], valid[:, :, None], drain)
            cb += r * ps.count
        start += q


def _blocks(L, cfg, sched=None):
    if cfg.unroll == "neuron":
        return _steps_neuron(L, cfg.a, cfg.b)
    if cfg.unroll == "fmap":
        return _steps_fmap(L, cfg.a, cfg.b)
    if cfg.unroll == "synapse":
        return _steps_synapse(L, cfg.a, cfg.b)
    return _steps_array(L, sched if sched is not None else array_plan(L, cfg))


def _needs(L, cfg, m, k, pos, valid):
    """Per-mode bool arrays (s, P, L): the MACs each PE must execute; plus the useful ones."""
    shape = np.broadcast_shapes(m.shape, k.shape, pos.shape, valid.shape)
    valid = np.broadcast_to(valid, shape)
    wv = L.wnz[m, k] & valid
    xv = L.xnz[k, pos] & valid
    wv = np.broadcast_to(wv, shape)
    xv = np.broadcast_to(xv, shape)
    both = wv & xv
    wneed = wv
    if cfg.unroll == "fmap":
        # one Tn-wide weight word per tree and kernel position: skipped only if all zero
        s, p, sl = shape
        w4 = wv.reshape(s, cfg.a, cfg.b, sl).any(axis=1, keepdims=True)
        wneed = (w4 & valid.reshape(s, cfg.a, cfg.b, sl)).reshape(shape)
    return {"none": valid, "weights": wneed, "acts": xv, "both": both}, both, valid


# ------------------------------------------------------------------ evaluation

def _evaluate(L, cfg, skips, lockstep, sched=None):
    P = cfg.pes
    acc = {s: dict(cycles=0, performed=0, imbalance_idle=0, mapping_idle=0, drain_idle=0,
                   steps=0) for s in skips}
    useful = 0
    for m, k, pos, valid, floor in _blocks(L, cfg, sched):
        needs, both, vfull = _needs(L, cfg, m, k, pos, valid)
        useful += int(both.sum())
        active = vfull.any(axis=2).sum(axis=1).astype(np.int64)
        for s in skips:
            need = needs[s]
            if lockstep:
                ex = need.any(axis=1)                                  # (steps, slots)
                cyc = ex.sum(axis=1).astype(np.int64)
                perf = (ex[:, None, :] & vfull).sum(axis=(1, 2)).astype(np.int64)
            else:
                q = need.sum(axis=2).astype(np.int64)                  # (steps, P)
                cyc = q.max(axis=1)
                perf = q.sum(axis=1)
            longest = cyc
            cyc = np.maximum(cyc, floor)            # array: a tile lasts >= its drain
            a = acc[s]
            a["cycles"] += int(cyc.sum())
            a["performed"] += int(perf.sum())
            a["imbalance_idle"] += int((active * longest - perf).sum())
            a["drain_idle"] += int((active * (cyc - longest)).sum())
            a["mapping_idle"] += int(((P - active) * cyc).sum())
            a["steps"] += int((cyc > 0).sum())
    return acc, useful


def _report(L, cfg, skip, lockstep, a, dense, useful, sched):
    P = cfg.pes
    cyc = a["cycles"]
    budget = P * cyc
    ideal = -(-useful // P)
    w_density = float(L.wnz.mean())
    # activation density of the (unpadded) input, and over all MAC operands
    x_density = float(L.xpad[:, :, L.pad:L.pad + L.h, L.pad:L.pad + L.w].mean())
    rep = {
        "unroll": cfg.unroll, "pe": [cfg.a, cfg.b], "pe_names": list(PE_NAMES[cfg.unroll]),
        "pes": P, "skip": skip, "lockstep": bool(lockstep),
        "layer": {"m": L.m, "n": L.n, "kh": L.kh, "kw": L.kw, "h": L.h, "w": L.w,
                  "ho": L.ho, "wo": L.wo, "stride": L.stride, "pad": L.pad, "images": L.b},
        "weight_density": w_density, "activation_density": x_density,
        "dense_macs": L.dense_macs, "useful_macs": useful, "performed_macs": a["performed"],
        "wasted_macs": a["performed"] - useful,
        "cycles": cyc, "dense_cycles": dense, "ideal_cycles": ideal,
        "steps": a["steps"],
        "speedup_vs_dense": dense / cyc if cyc else None,
        "efficiency": ideal / cyc if cyc else None,
        "parallel_efficiency": a["performed"] / budget if budget else None,
        "utilisation": useful / budget if budget else None,
        "imbalance_loss": a["imbalance_idle"] / budget if budget else None,
        "mapping_loss": a["mapping_idle"] / budget if budget else None,
        "drain_loss": a["drain_idle"] / budget if budget else None,
        "imbalance_idle_pe_cycles": a["imbalance_idle"],
        "mapping_idle_pe_cycles": a["mapping_idle"],
        "drain_idle_pe_cycles": a["drain_idle"],
        "imbalance_cycles": a["imbalance_idle"] / P,
        "dof_seed": 1 if lockstep else seed_dof(cfg.unroll, cfg.a, cfg.b, skip),
    }
    if cfg.unroll == "array":
        rep["array_schedule"] = {"mapping": sched.mapping,
                                 "passes": [[p.r, p.n, p.count, p.tiles] for p in sched.passes],
                                 "flat": bool(sched.flat),
                                 "chunks": list(sched.chunk_sizes)}
    return rep


def explore_modes(weights, acts, cfg: ExploreConfig, skips=SKIPS, lockstep=False,
                  sched=None) -> dict:
    """Reports for several skip modes of one unrolling (one pass over the data).

    ``sched`` (``array`` only) overrides the ``gen.conv`` schedule, e.g. with input-channel
    chunks.  Returns ``{skip: report}`` (see :func:`explore`).
    """
    for s in skips:
        if s not in SKIPS:
            raise SpnnError(f"--skip must be one of {', '.join(SKIPS)}, not {s!r}")
    L = prepare(weights, acts, cfg.stride, cfg.pad)
    if cfg.unroll == "array" and sched is None:
        sched = array_plan(L, cfg)
    want = tuple(dict.fromkeys(("none",) + tuple(skips)))
    acc, useful = _evaluate(L, cfg, want, lockstep, sched)
    dense = acc["none"]["cycles"]
    return {s: _report(L, cfg, s, lockstep, acc[s], dense, useful, sched) for s in skips}


def explore(weights, acts, cfg: ExploreConfig, skip="both", lockstep=False, sched=None) -> dict:
    """Cycle-level report of one layer on one unrolling with one skip mode.

    Keys: ``cycles``, ``dense_cycles``, ``ideal_cycles``, ``dense_macs``, ``useful_macs``,
    ``performed_macs``, ``parallel_efficiency``, ``utilisation``, ``imbalance_loss``,
    ``mapping_loss``, ``imbalance_cycles``, ``speedup_vs_dense``, ``efficiency`` (ideal /
    cycles), ``dof_seed``, the layer and the densities (module docstring for definitions).
    """
    return explore_modes(weights, acts, cfg, (skip,), lockstep, sched)[skip]


def dense_cycles_formula(L_or_shape, cfg: ExploreConfig, sched=None) -> int:
    """Closed-form dense cycles (``skip="none"``), independent of the step enumeration.

    ``L_or_shape``: a prepared layer.  synapse: streamed activations (those some PE of the
    kernel tile uses) x M x N; neuron: ``B M N ceil(Ho/Tr) ceil(Wo/Tc) Kh Kw``; fmap:
    ``B Ho Wo ceil(M/Tm) ceil(N/Tn) Kh Kw``; array: ``B sum_pass count tiles K``.
    """
    L = L_or_shape
    if cfg.unroll == "neuron":
        return L.b * L.m * L.n * -(-L.ho // cfg.a) * -(-L.wo // cfg.b) * L.kk
    if cfg.unroll == "fmap":
        return L.b * L.po * -(-L.m // cfg.b) * -(-L.n // cfg.a) * L.kk
    if cfg.unroll == "array":
        sched = sched if sched is not None else array_plan(L, cfg)
        drain = sched.cfg.drain_rows
        return L.b * sum(p.count * p.tiles * max(q * L.kk, -(-(p.r * p.n) // drain))
                         for p in sched.passes for q in sched.chunk_sizes)
    # synapse: per kernel tile, the set of padded rows/cols used by some kernel row/col
    hp, wp = L.xpad.shape[2:]
    total = 0
    for ty in range(-(-L.kh // cfg.b)):
        rows = _used(hp, L.ho, L.stride, range(ty * cfg.b, min(L.kh, (ty + 1) * cfg.b)))
        for tx in range(-(-L.kw // cfg.a)):
            cols = _used(wp, L.wo, L.stride, range(tx * cfg.a, min(L.kw, (tx + 1) * cfg.a)))
            total += rows * cols
    return L.b * L.m * L.n * total


def _used(size, out, stride, kernel_positions):
    used = set()
    for i in kernel_positions:
        used.update(o * stride + i for o in range(out))
    return len([u for u in used if u < size])


# ------------------------------------------------------------------ degree of freedom

def seed_dof(unroll: str, a: int, b: int, skip: str) -> int:
    """The seed's parallel degree of freedom (Table of Fig. 5; ``array`` derived likewise)."""
    if skip == "none":
        return 1
    table = {
        "synapse": {"acts": 1, "weights": a * b, "both": a * b},
        "neuron": {"acts": a * b, "weights": 1, "both": a * b},
        "fmap": {"acts": a, "weights": b, "both": a * b},
        "array": {"acts": b, "weights": a, "both": a * b},
    }
    return table[unroll][skip]


def queue_lengths(weights, acts, cfg: ExploreConfig, skip: str, sched=None):
    """``(q, full)``: queue length per step and PE ``(steps, P)`` and a mask of the steps in
    which every PE is active (used by :func:`measured_dof`)."""
    L = prepare(weights, acts, cfg.stride, cfg.pad)
    if cfg.unroll == "array" and sched is None:
        sched = array_plan(L, cfg)
    qs, fulls = [], []
    for m, k, pos, valid, _ in _blocks(L, cfg, sched):
        needs, _, vfull = _needs(L, cfg, m, k, pos, valid)
        qs.append(needs[skip].sum(axis=2))
        fulls.append(vfull.any(axis=2).all(axis=1))
    return np.concatenate(qs), np.concatenate(fulls)


def measured_dof(unroll: str, a: int, b: int, skip: str, density=0.5, seed=0) -> int:
    """Independent queue lengths of the model, measured on random data.

    Builds a random layer whose sizes fill every tile (weight and activation density
    ``density``; for ``fmap`` the weight density makes a tree's ``Tn``-wide word non-zero
    with probability ``density``), keeps the steps in which every PE is active, and counts
    the distinct columns of the step x PE queue-length matrix: PEs that share the skipped
    operand always have equal queues and fall into one class.
    """
    rng = np.random.default_rng(seed)
    if unroll == "synapse":
        m, n, kh, kw, h, w = 4, 4, b, a, b + 5, a + 5
    elif unroll == "neuron":
        m, n, kh, kw, h, w = 3, 4, 3, 3, 2 * a + 2, 2 * b + 2
    elif unroll == "fmap":
        m, n, kh, kw, h, w = 4 * b, 4 * a, 3, 3, 5, 5
    else:
        m, n, kh, kw, h, w = 6 * a, 3, 3, 3, 4, b + 2
    cfg = ExploreConfig(unroll, a, b)
    # fmap trees skip a Tn-wide weight word: keep P(word non-zero) = density
    wdens = 1 - (1 - density) ** (1 / a) if unroll == "fmap" else density
    wts = rng.integers(1, 5, (m, n, kh, kw)) * (rng.random((m, n, kh, kw)) < wdens)
    x = rng.integers(1, 5, (2, n, h, w)) * (rng.random((2, n, h, w)) < density)
    q, full = queue_lengths(wts, x, cfg, skip)
    q = q[full]
    return int(len(np.unique(q.T, axis=0)))
