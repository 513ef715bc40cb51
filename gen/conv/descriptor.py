# SPDX-License-Identifier: Apache-2.0
"""The conv array's run-time layer descriptor (the ``c`` stream payload): its fields,
their values for a schedule, the packed word, and the check that a layer fits the
generated array."""

from gen.conv.config import ConvConfig
from gen.conv.layout import READ_POINTERS, pass_layout, stagger_delay
from gen.core.config import SpnnError

__all__ = ["descriptor_fields", "pack_descriptor", "check_fits"]


def descriptor_fields(cfg: ConvConfig):
    """``(name, width)`` of the layer descriptor (the ``c`` stream payload), LSB first."""
    dim = (cfg.max_dim + 64).bit_length() + 1
    f = [("oc", 16), ("h", dim), ("w", dim), ("kh", 8), ("kw", 8), ("stride", 8),
         ("ho", dim), ("wo", dim), ("hp", dim), ("wp", dim),
         ("hwp", cfg.feat_depth.bit_length() + 1),
         ("icq", 16), ("icq_last", 16), ("chunks", 16), ("pad", 8),
         ("kq", 24), ("kq_last", 24), ("dq", 24), ("dq_last", 24),
         ("qkh", 24), ("qkh_last", 24), ("swp", 24),
         ("batch", 16), ("imgw", 24), ("iwrap", cfg.feat_depth.bit_length() + 1),
         ("hos", 16)]
    for i in range(cfg.max_passes):
        f += [(f"p{i}_r", 16), (f"p{i}_n", 4), (f"p{i}_count", 16), (f"p{i}_tiles", 24),
              (f"p{i}_cend", 17), (f"p{i}_noc", 24), (f"p{i}_ns", 16), (f"p{i}_wvn", 16),
              (f"p{i}_wvns", 24), (f"p{i}_a", 16), (f"p{i}_as", 24), (f"p{i}_aswp", 24),
              (f"p{i}_bn", 16), (f"p{i}_bns", 24), (f"p{i}_ai", 16), (f"p{i}_aiis", 24),
              (f"p{i}_sib", 8), (f"p{i}_sia", 24)]
    f += [("npasses", 4), ("flat", 1), ("skip", 1)]
    return f


def descriptor(sched) -> dict:
    layer, cfg = sched.layer, sched.cfg
    if len(sched.passes) > cfg.max_passes:
        raise SpnnError(f"schedule needs {len(sched.passes)} passes, the array holds "
                        f"{cfg.max_passes}")
    hp, wp = layer.h + 2 * layer.pad, layer.w + 2 * layer.pad
    s, kk = layer.stride, layer.kh * layer.kw
    last = sched.chunk_sizes[-1]
    # Feature banks hold [input channel][image][Hp][Wp]: image stride imgw = Hp*Wp, channel
    # stride hwp = B*Hp*Wp; a wrap from the last output row of an image to the first of the
    # next moves the window base by iwrap = Hp*Wp - Ho*s*Wp (modulo the bank offset width).
    fwid = cfg.feat_depth.bit_length() + 1
    d = {"oc": layer.oc, "h": layer.h, "w": layer.w, "kh": layer.kh, "kw": layer.kw,
         "stride": s, "ho": layer.ho, "wo": layer.wo, "hp": hp, "wp": wp,
         "hwp": layer.batch * hp * wp, "batch": layer.batch, "imgw": hp * wp,
         "iwrap": (hp * wp - layer.ho * s * wp) % (1 << fwid),
         "hos": (layer.ho * s) % (1 << 16),
         "icq": sched.icq, "icq_last": last, "chunks": sched.chunks, "pad": layer.pad,
         "npasses": len(sched.passes), "kq": sched.icq * kk, "kq_last": last * kk,
         "dq": stagger_delay(layer, sched.icq), "dq_last": stagger_delay(layer, last),
         "qkh": sched.icq * layer.kh, "qkh_last": last * layer.kh,
         "swp": s * wp, "flat": int(sched.flat), "skip": int(sched.skip_pad)}
    cend = 0
    for i in range(cfg.max_passes):
        if i < len(sched.passes):
            p = sched.passes[i]
            _, wv, _ = pass_layout(layer, cfg.cols, p.n, sched.flat)
            a, b = divmod(cfg.cols, wv)
            # a tile advances a column by `a` output rows (+ b groups): ai whole images and
            # `a mod Ho` rows; an image of the output stream is Ho*wv groups = sia slot
            # rows (tiles * n * Oc words) + sib columns
            ai, a = divmod(a, layer.ho)
            sit, sib = divmod(layer.ho * wv, cfg.cols)
            cend += p.r * p.count
            d.update({f"p{i}_r": p.r, f"p{i}_n": p.n, f"p{i}_count": p.count,
                      f"p{i}_tiles": p.tiles, f"p{i}_cend": cend, f"p{i}_noc": p.n * layer.oc,
                      f"p{i}_ns": p.n * s, f"p{i}_wvn": wv * p.n, f"p{i}_wvns": wv * p.n * s,
                      f"p{i}_a": a, f"p{i}_as": a * s, f"p{i}_aswp": a * s * wp,
                      f"p{i}_bn": b * p.n, f"p{i}_bns": b * p.n * s,
                      f"p{i}_ai": ai, f"p{i}_aiis": ai * hp * wp,
                      f"p{i}_sib": sib, f"p{i}_sia": sit * p.n * layer.oc})
        else:
            d.update({f"{k}": 0 for k, _ in descriptor_fields(cfg) if k.startswith(f"p{i}_")})
    return d


def pack_descriptor(sched) -> int:
    d = descriptor(sched)
    word, shift = 0, 0
    for name, width in descriptor_fields(sched.cfg):
        v = int(d[name])
        if not 0 <= v < 1 << width:
            raise SpnnError(f"descriptor field {name}={v} does not fit {width} bits")
        word |= v << shift
        shift += width
    return word


def check_fits(sched):
    """One-line SpnnError when a layer does not fit the generated array."""
    layer, cfg = sched.layer, sched.cfg
    hp, wp = layer.h + 2 * layer.pad, layer.w + 2 * layer.pad
    if max(layer.h, layer.w) > cfg.max_dim:
        raise SpnnError(f"input {layer.h}x{layer.w} exceeds max_dim {cfg.max_dim}")
    if max(layer.kh, layer.kw) > 64 or layer.stride > 64 or layer.pad > 64:
        raise SpnnError("kernel, stride and pad must be at most 64")
    if sched.slots > cfg.max_slots:
        raise SpnnError(f"{sched.slots} output position slots exceed max_slots "
                        f"{cfg.max_slots}")
    if layer.batch >= 1 << 16:
        raise SpnnError(f"batch must be below 65536, not {layer.batch}")
    if sched.skip_pad and layer.pad > 7:
        raise SpnnError(f"skip_pad in the generated array needs pad <= 7, not {layer.pad}")
    maps = layer.batch * sched.icq
    if maps * hp * wp > cfg.feat_depth:
        raise SpnnError(f"{maps} padded input maps ({maps * hp * wp} words) exceed "
                        f"feat_depth {cfg.feat_depth}")
    blocks = sum(p.count for p in sched.passes)
    if blocks * sched.icq * layer.kh * layer.kw > cfg.weight_depth:
        raise SpnnError(f"weights of one chunk ({blocks} blocks x "
                        f"{sched.icq * layer.kh * layer.kw} words per row) exceed weight_depth "
                        f"{cfg.weight_depth}")
    srows = max(p.tiles * p.n for p in sched.passes)
    if srows * layer.oc > cfg.out_depth:
        raise SpnnError(f"{layer.oc} channels x {srows} slot rows exceed out_depth "
                        f"{cfg.out_depth}")
    share = max(READ_POINTERS, (READ_POINTERS - 1) * layer.kw // layer.stride + 1)
    for p in sched.passes:
        if p.n > min(share, cfg.max_groups):
            raise SpnnError(f"n = {p.n} copies cannot share the staggered feature stream of a "
                            f"{layer.kw}-wide kernel at stride {layer.stride} (at most "
                            f"{min(share, cfg.max_groups)}; plan with shared_stream=True)")
    if layer.oc >= 1 << 16:
        raise SpnnError(f"oc must be below 65536, not {layer.oc}")
    bound = layer.k * (1 << (cfg.data_width - 1)) * (1 << (cfg.weight_width - 1))
    if bound >= 1 << (cfg.acc_width - 1):
        raise SpnnError(f"K = {layer.k} products of {cfg.data_width}x{cfg.weight_width} bits "
                        f"may overflow the {cfg.acc_width}-bit accumulators")
