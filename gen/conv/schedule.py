# SPDX-License-Identifier: Apache-2.0
"""The conv mapper: a layer's :class:`Schedule` on an array under a mapping (passes of
channel blocks and their copies, input-channel chunks), and the per-network tables.

Mappings (see ``docs/conv.md`` for the derivations):

``naive``
    Rows = output channels, ``n = 1`` always (the last pass leaves ``rows - R`` rows
    idle); columns = output positions in *row strips* (each output row is padded to a
    multiple of ``cols``, so the last strip of every row leaves columns idle).
``seed``
    The seed's channel rule: as ``naive``, but the last pass (``R = Oc mod rows``
    channels) runs ``n = min(floor(rows / R), ceil(kw / stride))`` copies (the seed's
    reading).  Columns still in row strips.
``remainder`` (default)
    The remainder channels may be split into up to ``max_passes - 1`` sub-passes, each
    with its own ``(R_j, n_j)``, chosen to minimise the tiles (e.g. 96 channels on 128
    rows with ``n <= 3``: 64 channels x 2 copies, then 32 channels x 3 copies); columns
    take the output positions in raster order across output rows ("flat"), so only the
    very last tile of a pass has idle columns.

The number of copies ``n`` of a pass follows the n rule (:mod:`gen.conv.layout`).

Input channels are split into chunks of ``icq`` when the feature buffer (``icq`` padded
channel maps) or the weight buffer (``Oc * icq * kh * kw`` words) would overflow; the
partial sums of later chunks are added element-wise into the output buffer.
"""

from dataclasses import dataclass, field

from gen.conv.config import MAPPINGS, ConvConfig, ConvLayer
from gen.conv.cycles import compute_cycles
from gen.conv.layout import (Pass, _slots, _tile_list, column_bound, n_limit, n_rule,
                             pass_layout, skipped_beats, stagger_delay, tile_bound)
from gen.core.config import SpnnError

__all__ = ["Schedule", "plan", "network_table"]


@dataclass(frozen=True)
class Schedule:
    layer: ConvLayer
    cfg: ConvConfig
    mapping: str
    flat: bool          # columns: raster order across rows (True) or row strips (False)
    passes: tuple
    icq: int            # input channels per chunk
    slots: int          # position slots (strips: Ho * ceil(Wo/cols) * cols; flat: Ho * Wo)
    nlim: int = field(default=0)
    skip_pad: bool = field(default=False)   # drop kernel rows/cols that are padding for the tile

    @property
    def chunks(self):
        return -(-self.layer.ic // self.icq)

    @property
    def chunk_sizes(self):
        last = self.layer.ic - (self.chunks - 1) * self.icq
        return [self.icq] * (self.chunks - 1) + [last]

    @property
    def tiles(self):
        return sum(p.count * p.tiles for p in self.passes)

    @property
    def busy_mac_cycles(self):
        if not self.skip_pad:
            return self.layer.macs
        kk = sum(self.chunk_sizes)
        return sum(p.r * lanes * nky * nkx * kk
                   for p, (ky0, nky, kx0, nkx, lanes) in _tile_list(self))

    @property
    def compute_cycles(self):
        return compute_cycles(self)

    @property
    def utilisation(self):
        return self.busy_mac_cycles / (self.cfg.rows * self.cfg.cols * self.compute_cycles)

    @property
    def ideal_cycles(self):
        return -(-self.layer.macs // (self.cfg.rows * self.cfg.cols))

    def to_dict(self):
        return {"mapping": self.mapping, "columns": "flat" if self.flat else "strips",
                "passes": [{"channels_per_block": p.r, "n": p.n, "blocks": p.count,
                            "tiles_per_block": p.tiles} for p in self.passes],
                "n_per_pass": [p.n for p in self.passes for _ in range(p.count)],
                "n_limit": self.nlim, "input_channel_chunks": self.chunk_sizes,
                "slots": self.slots, "tiles": self.tiles, "skip_pad": self.skip_pad,
                "skipped_beats": skipped_beats(self),
                "busy_mac_cycles": self.busy_mac_cycles, "compute_cycles": self.compute_cycles,
                "utilisation": self.utilisation}


def _split_remainder(rem, layer, cfg, flat, entries):
    """Best split of ``rem`` channels into <= ``entries`` sub-passes (fewest beats)."""
    nlim = n_limit(layer, cfg)
    best = None

    def drain(r, n):
        return -(-(r * n) // cfg.drain_rows)

    def search(left, depth, acc, cost):
        nonlocal best
        if left == 0:
            key = (cost, len(acc))
            if best is None or key < best[0]:
                best = (key, list(acc))
            return
        if depth == entries:
            return
        for n in range(1, nlim + 1):
            r = min(left, cfg.rows // n)
            if r < 1:
                continue
            n_eff = n_rule(r, layer, cfg)
            t = pass_layout(layer, cfg.cols, n_eff, flat)[2]
            c = (t * max(layer.k, n_eff * drain(r, 1)) + (n_eff - 1) * stagger_delay(layer, layer.ic)
                 + cfg.cols + 1)
            search(left - r, depth + 1, acc + [Pass(r, n_eff, 1, t)], cost + c)

    search(rem, 0, [], 0)
    return best[1]


def _icq(layer, cfg, limit_buffers, blocks):
    if not limit_buffers:
        return layer.ic
    hp, wp = layer.h + 2 * layer.pad, layer.w + 2 * layer.pad
    per_ch_feat = layer.batch * hp * wp          # one padded map per image
    per_ch_w = blocks * layer.kh * layer.kw      # words per row bank and input channel
    icq = min(layer.ic, cfg.feat_depth // per_ch_feat, cfg.weight_depth // per_ch_w)
    if icq < 1:
        maps = "one padded map needs" if layer.batch == 1 else \
            f"{layer.batch} padded maps (one per image) need"
        raise SpnnError(
            f"layer does not fit the buffers even with one input channel per chunk: "
            f"{maps} {per_ch_feat} of {cfg.feat_depth} feature words and "
            f"{per_ch_w} of {cfg.weight_depth} words of each row's weight bank")
    return icq


def plan(layer: ConvLayer, cfg: ConvConfig, mapping: str = "remainder", *,
         limit_buffers: bool = True, icq: int | None = None,
         skip_pad: bool = False) -> Schedule:
    """The schedule of ``layer`` on ``cfg`` under ``mapping``.

    ``limit_buffers=False`` ignores the buffer depths (no input-channel split) - used for
    the network tables, whose arrays would be built with buffers sized for them.
    ``icq`` forces a chunk size (tests of the split).  ``skip_pad`` drops, per tile, the
    kernel rows and columns whose features are zero padding for every active lane (see
    :func:`tile_boxes`); it needs ``pad < min(kh, kw)`` so that every window keeps a beat.
    """
    if mapping not in MAPPINGS:
        raise SpnnError(f"mapping must be one of {', '.join(MAPPINGS)}, not {mapping!r}")
    flat = mapping == "remainder"
    slots = _slots(layer, cfg, flat)
    mr, mc = cfg.rows, cfg.cols
    full, rem = divmod(layer.oc, mr)
    passes = []
    if full:
        passes.append(Pass(mr, 1, full, pass_layout(layer, mc, 1, flat)[2]))
    if rem:
        if mapping == "naive":
            passes.append(Pass(rem, 1, 1, pass_layout(layer, mc, 1, flat)[2]))
        elif mapping == "seed":
            # the seed's reading: n = min(floor(rows / R), ceil(kw / stride))
            n = max(1, min(mr // rem, -(-layer.kw // layer.stride), cfg.max_groups))
            passes.append(Pass(rem, n, 1, pass_layout(layer, mc, n, flat)[2]))
        else:
            passes += _split_remainder(rem, layer, cfg, flat, cfg.max_passes - len(passes))
    if icq is None:
        icq = _icq(layer, cfg, limit_buffers, sum(p.count for p in passes))
    elif not 1 <= icq <= layer.ic:
        raise SpnnError(f"icq must be between 1 and {layer.ic}, not {icq}")
    if not isinstance(skip_pad, bool):
        raise TypeError(f"skip_pad must be a bool, not {skip_pad!r}")
    if skip_pad and layer.pad >= min(layer.kh, layer.kw):
        raise SpnnError(f"skip_pad needs pad < min(kh, kw), not pad {layer.pad} with a "
                        f"{layer.kh}x{layer.kw} kernel")
    return Schedule(layer, cfg, mapping, flat, tuple(passes), icq, slots, n_limit(layer, cfg),
                    skip_pad)


def network_table(layers, cfg: ConvConfig, mappings=MAPPINGS, batch: int = 1) -> dict:
    """Per-layer and network-level utilisation (MACs / (rows x cols x compute cycles)).

    ``batch`` images per layer (weights loaded once, reused over the batch).  Bounds per
    layer and network-level: ``bound`` (:func:`column_bound`), ``tile_bound``
    (:func:`tile_bound`) and ``bound_min`` (the smaller of the two per layer)."""
    rows, totals = [], {m: 0 for m in mappings}
    macs, bound_cycles = 0, 0.0
    tile_cycles = min_cycles = 0.0
    for name, oc, ic, h, w, k, s, p in layers:
        layer = ConvLayer(oc, ic, h, w, k, k, s, p, batch)
        entry = {"layer": name, "oc": oc, "ic": ic, "h": h, "w": w, "k": k, "stride": s,
                 "pad": p, "ho": layer.ho, "wo": layer.wo, "macs": layer.macs}
        if batch != 1:
            entry["batch"] = batch
        for m in mappings:
            sched = plan(layer, cfg, m, limit_buffers=False)
            cyc = sched.compute_cycles
            totals[m] += cyc
            entry[m] = {"cycles": cyc, "utilisation": sched.utilisation,
                        "passes": [[pp.r, pp.n, pp.count] for pp in sched.passes]}
        entry["bound"] = column_bound(layer, cfg)
        entry["tile_bound"] = tile_bound(layer, cfg)
        entry["bound_min"] = min(entry["bound"], entry["tile_bound"])
        bound_cycles += layer.macs / entry["bound"] / (cfg.rows * cfg.cols)
        tile_cycles += layer.macs / entry["tile_bound"] / (cfg.rows * cfg.cols)
        min_cycles += layer.macs / entry["bound_min"] / (cfg.rows * cfg.cols)
        macs += layer.macs
        rows.append(entry)
    net = {m: macs / (cfg.rows * cfg.cols * totals[m]) for m in mappings}
    net["bound"] = macs / (cfg.rows * cfg.cols * bound_cycles)
    net["tile_bound"] = macs / (cfg.rows * cfg.cols * tile_cycles)
    net["bound_min"] = macs / (cfg.rows * cfg.cols * min_cycles)
    return {"layers": rows, "network": net, "macs": macs,
            "cycles": totals}
