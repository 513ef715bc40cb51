# SPDX-License-Identifier: Apache-2.0
"""The padding box of a tile (descriptor bit ``skip``, ``n = 1`` passes): the kernel rows
and columns that are not padding for at least one lane of the tile (see
:func:`gen.conv.tile_boxes`), computed in a pipeline from the tile's column states."""

from types import SimpleNamespace

from amaranth.hdl import Const, Module, Mux, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from gen.conv import ConvConfig
from gen.conv.layout import MIN_BOX
from hdl.conv._util import _S, _any, _bits, _sel

__all__ = ["TileBox", "box_fields", "BOX_STATE"]

# the column-state fields the box reads: image, output row, first input row (oy * stride),
# window group (first output column) and its first input column (jn * stride)
BOX_STATE = data.StructLayout({"img": 16, "jn": 16, "ty": 16, "jns": 24})


def box_fields(cfg: ConvConfig) -> dict:
    """Widths of a tile box's fields: first kernel row / column ``ky0`` / ``kx0``, sizes
    less one ``kyl`` / ``kxl`` (and less two ``kym``, ``kxm``, less three ``kym1``, ``kxm1``),
    the flags ``kyz`` (one row), ``kxz``, ``kym0`` (two rows), ``kxm0``, and the bank
    offsets of the box's first beat ``fbox = ky0 Wp + kx0``, ``wbox = kx0 q kh + ky0``."""
    FW = _bits(cfg.feat_depth) + 1
    WW = _bits(cfg.weight_depth) + 1
    return {"ky0": 8, "kyl": 8, "kx0": 8, "kxl": 8, "fbox": FW, "wbox": WW,
            "kym": 8, "kxm": 8, "kyz": 1, "kxz": 1,   # kyl - 1, kxl - 1, kyl == 0, kxl == 0
            "kym0": 1, "kxm0": 1, "kym1": 8, "kxm1": 8}   # kym == 0, kxm == 0, kym - 1, kxm - 1


class TileBox(wiring.Component):
    """The box of two tiles: the next tile (from the columns' states ``cur``) and the
    block's first tile (from the walk, each column's stage A loaded in its own set-up
    clock).  Without ``skip`` (or with ``n > 1``) the box is the whole kernel, and so is a
    box of fewer than ``MIN_BOX`` kernel positions.

    Parameters
    ----------
    cfg : :class:`gen.conv.ConvConfig`
    desc_layout : :class:`amaranth.lib.data.StructLayout`

    Members
    -------
    d : In(desc_layout)
        The layer descriptor register (fields skip, batch, wo, pad, h, w, kh, kw, wp).
    n : In(4)
        Copies of the running pass (the box applies to ``n == 1`` only).
    cqkh : In(24)
        ``icq * kh`` of the chunk (the weight bank's kernel-column stride).
    cur : In(BOX_STATE).array(cols)
        Per column the state of the next tile (image, oy, ty, jn, jns).
    walk : In(BOX_STATE)
        The set-up walk's state (the block's first tile of column ``c`` while
        ``walk_load[c]``).
    walk_load : In(cols)
        Column ``c``'s first-tile state is on ``walk`` (stage A loads it).
    cbox, ibox : Out(StructLayout(box_fields(cfg)))
        The box of ``cur`` and of the block's first tile (registers; see
        :func:`box_fields`).

    Latency/throughput
    ------------------
    Five register stages: a box is ready 5 clocks after its states (``cbox`` 6 clocks after
    ``cur`` changes, counting the descriptor-constant registers), one box per clock.
    """

    def __init__(self, cfg: ConvConfig, desc_layout: data.StructLayout):
        if not isinstance(cfg, ConvConfig):
            raise TypeError(f"cfg must be a ConvConfig, not {cfg!r}")
        self.cfg = cfg
        bx = data.StructLayout(box_fields(cfg))
        super().__init__({
            "d": In(desc_layout), "n": In(4), "cqkh": In(24),
            "cur": In(BOX_STATE).array(cfg.cols), "walk": In(BOX_STATE),
            "walk_load": In(cfg.cols),
            "cbox": Out(bx), "ibox": Out(bx),
        })

    def elaborate(self, platform):
        m = Module()
        k = self._consts(m)
        MC = self.cfg.cols
        cur = [{f: getattr(self.cur[c], f) for f in ("img", "jn", "ty", "jns")}
               for c in range(MC)]
        ws = {f: getattr(self.walk, f) for f in ("img", "jn", "ty", "jns")}
        cbox = self._box_stages(m, k, cur, "cbox")
        # the block's first tile: stage A loads from the walk with pinit (set-up clock
        # c + 1 for column c), one clock earlier than from pinit, so that the box is ready
        # in the last set-up clock (cols + 5)
        ibox = self._box_stages(m, k, [ws] * MC, "ibox",
                                [self.walk_load[c] for c in range(MC)])
        for f in box_fields(self.cfg):
            m.d.comb += [getattr(self.cbox, f).eq(cbox[f]), getattr(self.ibox, f).eq(ibox[f])]
        return m

    def _consts(self, m):
        """Per-layer constants of the box stages."""
        d, cqkh, BX = self.d, self.cqkh, box_fields(self.cfg)
        FW = _bits(self.cfg.feat_depth) + 1
        WW = _bits(self.cfg.weight_depth) + 1
        DIMW = (self.cfg.max_dim + 64).bit_length() + 1
        cp = {"n": self.n}
        # Padding box of a tile (skip_pad, n = 1 passes): five register stages per source
        # (the next tile's column states `cur`, the block's first tile from the walk), so the
        # box of `cur` is ready 6 clocks after `cur` changes; tiles of such passes last at
        # least 6 beats because a box of fewer than MIN_BOX = 6 kernel positions runs the
        # whole kernel (a kernel of fewer, 2 x 2, has no box of 6 or more: all its tiles run
        # it whole).
        skipbox = _S(name="skipbox")
        m.d.sync += skipbox.eq(d.skip & (cp["n"] == 1))

        # k * Wp and k * q * kh for k = 0..7 (shift-and-add, registered; the box offsets
        # ky0, kx0 are at most pad, and check_fits limits skip_pad to pad <= 7)
        def multiples(x, width, tag):
            out = [Const(0, width)]
            for k in range(1, 8):
                sig = _S(width, name=f"{tag}{k}")
                terms = {1: x, 2: x << 1, 3: (x << 1) + x, 4: x << 2, 5: (x << 2) + x,
                         6: (x << 2) + (x << 1), 7: (x << 3) - x}[k]
                m.d.sync += sig.eq(terms)
                out.append(sig)
            return out
        mul_wp = multiples(d.wp, FW, "mul_wp")
        mul_qkh = multiples(cqkh, WW, "mul_qkh")

        # descriptor sums for the box stage A, registered: pad + h, pad + w and (signed)
        # pad + h - kh, pad + w - kw (so (pad + h) < ty + kh is bx_hk < ty)
        bx_padh, bx_padw = _S(DIMW + 1, name="bx_padh"), _S(DIMW + 1, name="bx_padw")
        bx_hk = _S(signed(DIMW + 2), name="bx_hk")
        bx_wk = _S(signed(DIMW + 2), name="bx_wk")
        m.d.sync += [bx_padh.eq(d.pad + d.h), bx_padw.eq(d.pad + d.w),
                     bx_hk.eq(d.pad + d.h - d.kh), bx_wk.eq(d.pad + d.w - d.kw)]

        # the box fields of the whole kernel (per layer, registered)
        kfull = {k: _S(BX[k], name=f"kfull_{k}") for k in
                 ("kyl", "kym", "kym1", "kyz", "kym0", "kxl", "kxm", "kxm1", "kxz", "kxm0")}
        for ax, n in (("y", d.kh), ("x", d.kw)):
            m.d.sync += [kfull[f"k{ax}l"].eq(n - 1), kfull[f"k{ax}m"].eq(n - 2),
                         kfull[f"k{ax}m1"].eq(n - 3), kfull[f"k{ax}z"].eq(n == 1),
                         kfull[f"k{ax}m0"].eq(n == 2)]

        return SimpleNamespace(skipbox=skipbox, mul_wp=mul_wp, mul_qkh=mul_qkh, bx_padh=bx_padh,
                               bx_padw=bx_padw, bx_hk=bx_hk, bx_wk=bx_wk, kfull=kfull)

    def _box_stages(self, m, kc, states, tag, loads=None):
        """The box pipeline of ``states`` (one column state per column): stage A per
        column, B1 and B2 the min / max trees, C the box sizes and offsets of both
        variants, D the choice.  ``loads``: per column, the enable of stage A (None:
        every clock)."""
        d, BX = self.d, box_fields(self.cfg)
        DIMW = (self.cfg.max_dim + 64).bit_length() + 1
        skipbox, mul_wp, mul_qkh, kfull = kc.skipbox, kc.mul_wp, kc.mul_qkh, kc.kfull
        bx_padh, bx_padw, bx_hk, bx_wk = kc.bx_padh, kc.bx_padw, kc.bx_hk, kc.bx_wk
        ylo, yhi, xlo, xhi = [], [], [], []
        for c, st in enumerate(states):
            ok = _S(name=f"{tag}A{c}_ok")
            regs = [_S(8, name=f"{tag}A{c}_{k}") for k in ("ylo", "yhi", "xlo", "xhi")]
            end_y = (bx_padh - st["ty"])[:DIMW + 1]
            end_x = (bx_padw - st["jns"])[:DIMW + 1]
            with m.If(1 if loads is None else loads[c]):
                m.d.sync += [
                    ok.eq((st["img"] < d.batch) & (st["jn"] < d.wo)),
                    regs[0].eq(Mux(d.pad > st["ty"], d.pad - st["ty"], 0)),
                    regs[1].eq(Mux(bx_hk < st["ty"], end_y, d.kh)),
                    regs[2].eq(Mux(d.pad > st["jns"], d.pad - st["jns"], 0)),
                    regs[3].eq(Mux(bx_wk < st["jns"], end_x, d.kw))]
            ylo.append(Mux(ok, regs[0], 255))
            yhi.append(Mux(ok, regs[1], 0))
            xlo.append(Mux(ok, regs[2], 255))
            xhi.append(Mux(ok, regs[3], 0))

        def tree(vals, op, levels):
            for _ in range(levels):
                if len(vals) == 1:
                    break
                nxt = [op(vals[i], vals[i + 1]) for i in range(0, len(vals) - 1, 2)]
                vals = nxt + ([vals[-1]] if len(vals) % 2 else [])
            return vals
        lo = lambda a, b: Mux(a < b, a, b)   # noqa: E731
        hi = lambda a, b: Mux(a > b, a, b)   # noqa: E731
        # stage B1: the first half of the min / max trees over the columns (registered)
        depth = max(1, (len(states) - 1).bit_length())
        half = (depth + 1) // 2
        b1 = {}
        for k, vals, op in (("ylo", ylo, lo), ("yhi", yhi, hi), ("xlo", xlo, lo),
                            ("xhi", xhi, hi)):
            part = tree(vals, op, half)
            b1[k] = [_S(8, name=f"{tag}B1_{k}{i}") for i in range(len(part))]
            m.d.sync += [r.eq(v) for r, v in zip(b1[k], part)]
        # stage B2: the rest of the trees and the box sizes
        bb = {k: _S(8, name=f"{tag}B_{k}") for k in ("ky0", "nky", "kx0", "nkx")}
        y0, x0 = tree(b1["ylo"], lo, depth)[0], tree(b1["xlo"], lo, depth)[0]
        m.d.sync += [bb["ky0"].eq(y0), bb["nky"].eq(tree(b1["yhi"], hi, depth)[0] - y0),
                     bb["kx0"].eq(x0), bb["nkx"].eq(tree(b1["xhi"], hi, depth)[0] - x0)]
        # stage C: boxes of fewer than MIN_BOX kernel positions run the whole kernel (the
        # flag `full`, registered), and the box's own fields
        small = _any([(bb[u] == a) & (bb[v] <= (MIN_BOX - 1) // a)
                      for a in range(1, MIN_BOX) for u, v in (("nky", "nkx"), ("nkx", "nky"))])
        full = _S(name=f"{tag}C_full")
        m.d.sync += full.eq(~skipbox | small)

        def sizes(n, ax):
            """The box fields of one axis: nk - 1, nk - 2, nk - 3, nk == 1, nk == 2."""
            return {f"k{ax}l": n - 1, f"k{ax}m": n - 2, f"k{ax}m1": n - 3,
                    f"k{ax}z": n == 1, f"k{ax}m0": n == 2}
        part = {**sizes(bb["nky"], "y"), **sizes(bb["nkx"], "x"),
                "ky0": bb["ky0"], "kx0": bb["kx0"],
                # ky0 Wp and kx0 q kh from the tables of multiples (ky0, kx0 <= pad <= 7)
                "fbox": _sel(mul_wp, bb["ky0"][:3]), "wbox": _sel(mul_qkh, bb["kx0"][:3])}
        cpart = {k: _S(BX[k], name=f"{tag}C_{k}") for k in part}
        m.d.sync += [cpart[k].eq(v) for k, v in part.items()]
        # stage D: the whole kernel's fields (registered constants) or the box's, the
        # box offsets completed: fbox = ky0 Wp + kx0, wbox = kx0 q kh + ky0
        box = {**cpart, "fbox": cpart["fbox"] + cpart["kx0"],
               "wbox": cpart["wbox"] + cpart["ky0"]}
        cc = {k: _S(wd, name=f"{tag}D_{k}") for k, wd in BX.items()}
        whole = {**kfull, "ky0": 0, "kx0": 0, "fbox": 0, "wbox": 0}
        m.d.sync += [cc[k].eq(Mux(full, whole[k], box[k])) for k in BX]
        return cc
