# SPDX-License-Identifier: Apache-2.0
"""Remainder-aware output-stationary MAC array for im2col convolution (seed 002).

The ``n`` copies (groups of ``R`` rows) of a pass run *staggered*, as in the seed: copy
``g`` of column ``c`` computes the window one stride right of copy ``g - 1`` and runs
``D = min(stride, kw) * q * kh`` beats behind it (beats in <kernel column, input channel,
kernel row> order), so all copies working on one tile read the same feature word each
beat.  Each column therefore has two feature banks (identical copies of the padded maps,
one synchronous read port each: the tile in flight and the next one); each row has its
own weight bank (one synchronous read port) filled by the weight mapping; the output
banks (one per column, ping-pong) are synchronous too.  See ``docs/conv.md`` for the derivation and :mod:`gen.conv` for the exact cycle model.
"""

from amaranth.hdl import Cat, Const, Module, Mux, ResetSignal, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from gen.conv.layout import MIN_BOX
from gen.conv import ConvConfig, descriptor_fields
from gen.core.fixed import index_bits
from hdl.lib.skid import SkidBuffer
from hdl.lib.arith import radix4_product

__all__ = ["ConvArray", "STAT_BUSY_BITS"]

STAT_BUSY_BITS = 48

# per-pass descriptor fields the array keeps in registers while the pass runs
_PASS_FIELDS = ("r", "n", "count", "tiles", "noc", "ns", "wvn", "wvns", "a", "as", "aswp",
                "bn", "bns", "ai", "aiis")


def _bits(n):
    return max(1, int(n).bit_length())


def _index(n):
    """Shape of an index over ``n`` items, at least 1 bit: ``range(1)`` would be a 0-bit
    signal, which Verilog declares as ``[-1:0]`` (e.g. the copy index of a 1-row array)."""
    return unsigned(index_bits(n))


def _depth(n):
    """Words of a memory holding ``n``: at least 2, since a one-word memory has a 0-bit
    address port (``[-1:0]`` in Verilog); the spare word is never addressed."""
    return max(2, n)


def _sel(items, idx):
    """``items[idx]`` as a tree of 2-way multiplexers (continuous assignments in Verilog,
    which Icarus evaluates at time 0; out-of-range indices give the last item)."""
    items = list(items)
    if len(items) == 1:
        return items[0]
    nbits = (len(items) - 1).bit_length()
    items = items + [items[-1]] * ((1 << nbits) - len(items))
    level = items
    for b in range(nbits):
        level = [Mux(idx[b], level[2 * i + 1], level[2 * i]) for i in range(len(level) // 2)]
    out = level[0]
    if len(idx) > nbits:
        out = Mux(idx[nbits:].any(), items[len(list(items)) - 1], out)
    return out


def _S(*args, **kwargs):
    """A register (or wire) WITHOUT synchronous reset unless ``reset_less=False`` is given.

    Only the control state that decides what the array does after a reset (FSM, valid and
    enable bits of the pipeline, the drain's pending flags, the stall) keeps the reset;
    counters, addresses, descriptor copies and the whole datapath are (re)loaded before they
    are used, so the reset net reaches a few hundred flip-flops instead of all of them."""
    kwargs.setdefault("reset_less", True)
    return Signal(*args, src_loc_at=1, **kwargs)   # named after the caller's variable


def _replicate(value, replicas):
    """Statements that load every register of ``replicas`` with ``value``: copies of one
    register for fan-out.  While the reset is high each copy loads its neighbour in a ring
    instead (the copies are unused then), so no two have the same input and Yosys's
    ``opt_merge`` keeps them apart (a ``keep`` attribute does not stop it)."""
    return [r.eq(Mux(ResetSignal(), replicas[i - 1], value)) for i, r in enumerate(replicas)]


class _Only:
    """``m.d.sync`` restricted to the statements that assign one of ``signals`` (the same
    if-tree written once, its registers split between several enables)."""

    def __init__(self, m, signals):
        self.m, self.keep = m, {id(x) for x in signals}

    def __iadd__(self, stmts):
        stmts = stmts if isinstance(stmts, (list, tuple)) else [stmts]
        self.m.d.sync += [st for st in stmts if id(st.lhs) in self.keep]
        return self


def _any(sigs):
    sigs = list(sigs)
    return Cat(*sigs).any() if sigs else Const(0, 1)


class ConvArray(wiring.Component):
    """An ``rows x cols`` MAC array running one convolution layer per descriptor.

    The host (:func:`gen.conv.plan`) maps each layer to *passes*: ``count`` blocks of
    ``R`` output channels, each run as ``n`` staggered copies (groups of ``R`` rows).
    Column ``c`` of tile ``t`` takes the window group ``t * cols + c`` of the pass layout
    (:func:`gen.conv.pass_layout`); copy ``g`` takes window ``j * n + g`` of that group's
    output row and starts ``g * D`` beats after copy 0, ``D`` = descriptor ``dq``.  Per
    input-channel chunk: weight load (the weight mapping writes each weight into the banks
    of the rows that use it), feature load (padding inserted, one copy per column and read
    port), compute (a pass set-up of ``cols + 6`` clocks, then the staggered tiles; with the
    descriptor bit ``skip`` the tiles of ``n = 1`` passes run only their box of kernel
    rows/columns that are not padding for every lane, see :func:`gen.conv.tile_boxes`),
    the partial sums of later chunks added into the output banks; finally a stats word and
    the outputs (ping-pong banks: the next layer computes while this one drains).  A layer
    may hold a batch of ``B`` images (descriptor ``batch``): the window groups run in
    raster order over ``(image, oy, ox)``, the feature banks hold ``[ic][image][Hp][Wp]``,
    the weights come once per chunk and the outputs leave image by image.

    Parameters
    ----------
    cfg : :class:`gen.conv.ConvConfig`

    Members
    -------
    c : In(stream.Signature(unsigned(D)))
        Layer descriptors (``D`` = sum of :func:`gen.conv.descriptor_fields` widths, first
        field in the LSBs), one transfer per layer.
    w : In(stream.Signature(signed(weight_width)))
        Weights, integers: per chunk ``Oc x icq x kh x kw`` in C order.  The stream
        enters a two-entry skid buffer (:class:`hdl.skid.SkidBuffer`): ``w.ready`` is a
        register, and up to two weights are taken before the loader wants them (also
        while the array waits for a descriptor).
    x : In(stream.Signature(signed(data_width)))
        Features, integers: per chunk ``B x icq x H x W`` in C order (unpadded; ``B`` =
        descriptor ``batch``, images run with the same weights).
    o : Out(stream.Signature(signed(acc_width)))
        Outputs, exact integer sums: ``B x Oc x Ho x Wo`` in C order per layer, from a
        5-word FIFO (``o.valid`` is a register; ``o.ready`` reaches only the FIFO).
    s : Out(stream.Signature(unsigned(48 + 32)))
        Per layer, after its compute phase: busy MAC-cycles (bits 0..47, the number of MAC
        enables counted in the array) and compute cycles (bits 48..79).

    Latency/throughput
    ------------------
    Exact timeline in :func:`gen.conv.layer_cycles` (streams never idle): per chunk one
    weight and one padded feature word per clock, then the compute phase of
    :func:`gen.conv.compute_cycles` (one beat per clock per copy; the issue stage stalls,
    sending bubbles, only when a copy finishes a tile before its last tile drained).  The
    output stream runs one value per clock in parallel with the next layer.
    """

    def __init__(self, cfg: ConvConfig):
        if not isinstance(cfg, ConvConfig):
            raise TypeError(f"cfg must be a ConvConfig, not {cfg!r}")
        self.cfg = cfg
        self.desc_layout = data.StructLayout({n: unsigned(w) for n, w in descriptor_fields(cfg)})
        super().__init__({
            "c": In(stream.Signature(self.desc_layout)),
            "w": In(stream.Signature(signed(cfg.weight_width))),
            "x": In(stream.Signature(signed(cfg.data_width))),
            "o": Out(stream.Signature(signed(cfg.acc_width))),
            "s": Out(stream.Signature(unsigned(STAT_BUSY_BITS + 32))),
        })

    latency = 0   # the array is job-oriented: see gen.conv.layer_cycles
    ii = 1

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        MR, MC, NG, NP, DR = cfg.rows, cfg.cols, cfg.max_groups, cfg.max_passes, cfg.drain_rows
        AW = cfg.acc_width
        DIMW = (cfg.max_dim + 64).bit_length() + 1
        fw = dict(descriptor_fields(cfg))
        FW = _bits(cfg.feat_depth) + 1       # feature bank offsets (modulo 2**FW)
        WW = _bits(cfg.weight_depth) + 1     # weight bank offsets

        d = _S(self.desc_layout, name="d")
        pvl = {f: [getattr(d, f"p{i}_{f}") for i in range(NP)] for f in _PASS_FIELDS}

        # ---------------------------------------------------------------- memories
        fmem = [[Memory(shape=signed(cfg.data_width), depth=_depth(cfg.feat_depth), init=[])
                 for _ in range(2)] for _ in range(MC)]
        wmem = [Memory(shape=signed(cfg.weight_width), depth=_depth(cfg.weight_depth),
                       init=[]) for _ in range(MR)]
        omem = [[Memory(shape=signed(AW), depth=_depth(cfg.out_depth), init=[])
                 for _ in range(MC)] for _ in range(2)]
        for c in range(MC):
            for p in range(2):
                m.submodules[f"fmem{c}_{p}"] = fmem[c][p]
        for r in range(MR):
            m.submodules[f"wmem{r}"] = wmem[r]
        for b in range(2):
            for c in range(MC):
                m.submodules[f"omem{b}_{c}"] = omem[b][c]

        # ---------------------------------------------------------------- control state
        sel = _S(reset_less=False)               # output buffer written by the compute side
        qrem = _S(16, name="qrem")  # chunks after this one
        first_chunk = _S()
        iccl = _S(16)              # icc - 1
        kq = _S(24)                # beats per tile in this chunk
        dq = _S(24)                # stagger between copies
        cqkh = _S(24)              # icc * kh
        # busy MAC-cycles, a 48-bit count in two halves with a registered carry between
        busy_lo, busy_cy, busy_hi = _S(24, name="busy_lo"), _S(name="busy_cy"), _S(24, name="busy_hi")
        ccyc = _S(32)
        in_compute = _S()

        # pass registers (loaded in the first set-up clock of a pass)
        e = _S(range(NP + 1))
        cp = {f: _S(fw[f"p0_{f}"], name=f"cp_{f}") for f in _PASS_FIELDS}
        issuing = _S(reset_less=False)
        setup = _S(reset_less=False)
        isu = _S(name="isu", reset_less=False)       # issuing & ~setup, as its own register
        sk = _S(range(MC + 6))
        # sk one-hot beside it (sk_oh[i] == (sk == i)): set-up decodes from single flags
        sk_oh = _S(MC + 6, init=1, name="sk_oh")
        # issuing & setup & sk_oh[0] (the pass's first set-up clock) as its own register:
        # the pass registers load then (the set-up never stalls, see the issue control)
        sk_first = _S(name="sk_first", reset_less=False)
        adv_i, adv_pd = _S(init=1, name="adv_i"), _S(init=1, name="adv_pd")
        setup_last = _S(reset_less=False)        # registered: the last set-up clock (sk == cols + 5)

        # ------------------------------------------------ column states (window groups)
        def cstate(name):
            return {"img": _S(16, name=f"{name}_img"),
                    "oy": _S(16, name=f"{name}_oy"), "ty": _S(16, name=f"{name}_ty"),
                    "jn": _S(16, name=f"{name}_jn"), "jns": _S(24, name=f"{name}_jns"),
                    "base": _S(FW, name=f"{name}_base")}

        # Advance of a column state by one tile (``cols`` window groups: ``ai`` images,
        # ``a`` rows and ``b`` groups, with at most one row wrap and one image wrap): the
        # four sums computed in parallel from per-pass constants, then selected.
        thr = _S(16, name="adv_thr")                       # wrap iff jn >= wvn - bn
        thi = [_S(16, name=f"adv_thi{j}") for j in range(2)]   # image wrap iff oy >= thi
        k0 = {k: Signal.like(v, name=f"adv_k0_{k}") for k, v in cstate("t").items()}
        k1 = {k: Signal.like(v, name=f"adv_k1_{k}") for k, v in cstate("t").items()}
        k0i = {k: Signal.like(v, name=f"adv_k0i_{k}") for k, v in cstate("t").items()}
        k1i = {k: Signal.like(v, name=f"adv_k1i_{k}") for k, v in cstate("t").items()}
        # The wrap decisions as sign bits: the states that advance (pinit, cur) also keep
        # the distances to the thresholds, djn = jn - thr, doy<j> = oy - thi<j> (signed, 17
        # bits, exact), advanced by the same (signed) steps as jn and oy, so that no compare
        # sits in the column-advance loop.
        # Lane validity likewise: dimg = img - B, dwo<g> = jn - (Wo - g), lane g valid iff
        # both are negative.
        # The three wrap distances are kept twice (the twins sjn, soy0, soy1 advance exactly
        # like djn, doy0, doy1): the offsets' wrap selects come from the first, the other
        # fields' from the twins, so that each sign bit drives half a column state's muxes.
        OFFS = {"djn": "jn", "doy0": "oy", "doy1": "oy", "dimg": "img",
                **{f"dwo{g}": "jn" for g in range(NG)},
                "sjn": "jn", "soy0": "oy", "soy1": "oy"}
        TWIN = {"djn": "sjn", "doy0": "soy0", "doy1": "soy1"}
        BY_TWIN = ("img", "oy", "ty", "jn", "jns", "base", "sjn", "soy0", "soy1")
        for kk in (k0, k1, k0i, k1i):
            kk.update({o: _S(signed(17), name=f"{kk['jn'].name[:-3]}_{o}") for o in OFFS})

        def with_offsets(st, name):
            st.update({o: _S(signed(17), name=f"{name}_{o}") for o in OFFS})
            return st

        def wrap_flags(dist):
            """An advance's row wrap (jn >= thr) and its image wrap with (oy >= thi[1]) and
            without (oy >= thi[0]) a row wrap, from the wrap distances' sign bits."""
            return ~dist["djn"][-1], ~dist["doy0"][-1], ~dist["doy1"][-1]

        def advance(cs, flags=None):
            """The column state after one tile; ``flags``: its wraps, if registered.  Each
            field is a select on the row wrap of two selects on the image wraps (no decode
            of the image wrap before the muxes)."""
            out = {}
            for k in cs:
                wrap, iw0, iw1 = flags if flags is not None else wrap_flags(
                    {o: cs[TWIN[o] if k in BY_TWIN else o] for o in TWIN})
                out[k] = Mux(wrap, Mux(iw1, cs[k] + k1i[k], cs[k] + k1[k]),
                             Mux(iw0, cs[k] + k0i[k], cs[k] + k0[k]))
            return out

        ws = cstate("walk")
        ws_rb = _S(24, name="walk_rb")
        # walk wrap thresholds: jn + n >= wvn iff jn >= wvn - n; oy + 1 == ho iff oy == ho - 1
        # as sign bit / flag: walk_djn = jn - (wvn - n) (last group of the row iff >= 0),
        # walk_olast = (oy == ho - 1) from a count-down walk_oyr = ho - 1 - oy (oy + 1 is the
        # last row iff oyr == 1); per-pass n - wvn and ho - 1 registered from the
        # descriptor, so no subtraction and no compare of two registers sits in the walk
        walk_djn, walk_nthr = _S(signed(17), name="walk_djn"), _S(signed(17), name="walk_nthr")
        walk_olast, walk_ho1, walk_hom1 = (_S(name="walk_olast"), _S(name="walk_ho1"),
                                           _S(16, name="walk_hom1"))
        walk_oyr = _S(16, name="walk_oyr")
        pnthr = [_S(signed(17), name=f"walk_pnthr{i}") for i in range(NP)]
        m.d.sync += [walk_ho1.eq(d.ho == 1), walk_hom1.eq(d.ho - 1)]
        m.d.sync += [pnthr[i].eq(getattr(d, f"p{i}_n") - getattr(d, f"p{i}_wvn"))
                     for i in range(NP)]
        swpi = _S(24, name="walk_swpi")        # row step across an image boundary
        m.d.sync += swpi.eq(d.swp + d.iwrap)
        pinit = [cstate(f"pinit{c}") for c in range(MC)]
        pinit_adv = [with_offsets(cstate(f"pinit_adv{c}"), f"pinit_adv{c}") for c in range(MC)]
        cur = [with_offsets(cstate(f"cur{c}"), f"cur{c}") for c in range(MC)]
        SL = {"base": FW, "img": 16, "jn": 16, "lv": NG}   # lv: lane g valid (img < B, jn + g < Wo)
        slot = [[{k: _S(wd, name=f"slot{p}_{c}_{k}") for k, wd in SL.items()}
                 for c in range(MC)] for p in range(2)]
        BX = {"ky0": 8, "kyl": 8, "kx0": 8, "kxl": 8, "fbox": FW, "wbox": WW,
              "kym": 8, "kxm": 8, "kyz": 1, "kxz": 1,   # kyl - 1, kxl - 1, kyl == 0, kxl == 0
              "kym0": 1, "kxm0": 1, "kym1": 8, "kxm1": 8}   # kym == 0, kxm == 0, kym - 1, kxm - 1
        sbox = [{k: _S(wd, name=f"box{p}_{k}") for k, wd in BX.items()} for p in range(2)]

        # ------------------------------------------------ groups (copies)
        def gsig(name, width, reset_less=True):
            return [_S(width, name=f"g{g}_{name}", reset_less=reset_less) for g in range(NG)]
        act, par = gsig("act", 1, reset_less=False), gsig("par", 1)
        kx, ky, ic = gsig("kx", 8), gsig("ky", 8), gsig("ic", 16)
        # beat offsets kept as running sums (one adder per update): feature fx = kernel
        # column + window offset, fxc = fx + ic * hwp, fo = fxc + ky * wp; weight
        # wbx = block + kx * q * kh, wbxc = wbx + ic * kh, wo = wbxc + ky
        fx, fxc, fo_g = gsig("fx", FW), gsig("fxc", FW), gsig("fo", FW)
        wbx, wbxc, wo_g = gsig("wbx", WW), gsig("wbxc", WW), gsig("wo", WW)
        tt, blk = gsig("t", 24), gsig("blk", 16)
        glt, glb = gsig("lt", 1), gsig("lb", 1)      # in the last tile / last block
        gltb = gsig("ltb", 1)                        # glt & glb, as its own register
        tiles1, count1 = _S(name="tiles1"), _S(name="count1")
        # per copy, registered: tt == tiles - 2 (the next tile is the block's last)
        ttq = gsig("ttq", 1)
        tiles_is2, tiles3 = _S(name="tiles_is2"), _S(24, name="tiles3")
        # per copy, registered: blk == count - 2 (the next block is the pass's last)
        blkq = gsig("blkq", 1)
        count_is2, count3 = _S(name="count_is2"), _S(16, name="count3")
        wblk, cb, gob = gsig("wblk", WW), gsig("cb", 16), gsig("gob", 24)
        gs, goc = gsig("gs", 16), gsig("goc", 24)
        # the next copy (sg) starts when the pass's issue clock reaches its start clock:
        # st_dist = start clock - issue clock, at_st = (st_dist == 0) as a register
        sg = _S(range(NG + 1), name="sg")
        st_dist, at_st = _S(signed(25), name="st_dist"), _S(name="at_st")
        st1 = _S(name="st_one")          # st_dist == 1 as a register (at_st's next value)
        # per pass, registered: copy g is the last (g == n - 1); every copy has started
        lastc = [_S(name=f"lastc{g}") for g in range(NG)]
        sg_all = _S(name="sg_all")
        sg_oh = _S(NG + 1, name="sg_oh")     # one-hot of sg
        m.d.sync += [lastc[g].eq(cp["n"] == g + 1) for g in range(NG)]
        dq1 = _S(name="dq1")                 # dq == 1 (a start right after a start)
        dqm1 = _S(24, name="dqm1")           # dq - 1
        dq2 = _S(name="dq2")                 # dq == 2
        m.d.sync += [dq1.eq(dq == 1), dqm1.eq(dq - 1), dq2.eq(dq == 2)]
        sgs, sgoc = _S(16, name="sgs"), _S(24, name="sgoc")
        wpass, cbpass = _S(24, name="wpass"), _S(16, name="cbpass")
        # per copy, registered: the block offsets' values in the next block (wblk + kq,
        # cb + r, goc + cb + r), so that a block's change copies registers (no adder and no
        # choice of operands behind the copy's enable)
        wblk_nb, cb_nb, gob_nb = gsig("wblk_nb", WW), gsig("cb_nb", 16), gsig("gob_nb", 24)

        # The stall: only the issue stage stalls (as a whole), when a copy is about to issue
        # the last beat of a tile whose capture, ISSUE_TO_ACC clocks later, would find the
        # copy's previous capture not yet drained (the first capture of a pass: anything not
        # drained).  The drain's timing is predicted at issue time (the countdowns of the
        # issue-side drain model below), so the MAC pipeline behind the issue stage never
        # stalls: it runs free, its beats qualified by valid bits (bubbles while stalled).
        # adv: the issue stage advances, a register computed one clock ahead (from the next
        # state); replicas for the slots of each column, each copy's counters, the box and
        # the issue control (ring-loaded during the reset, see _replicate; nothing issues
        # then).
        adv = _S(init=1, name="adv_r", reset_less=False)
        adv_iss, adv_box = _S(init=1, name="adv_iss"), _S(init=1, name="adv_box")
        adv_slot = [_S(init=1, name=f"adv_slot{c}") for c in range(MC)]
        adv_col = [_S(init=1, name=f"adv_col{c}") for c in range(MC)]
        adv_cp = [[_S(init=1, name=f"adv_cp{g}_{j}") for j in range(3)] for g in range(NG)]
        adv_reps = ([adv_iss, adv_box, adv_i, adv_pd] + adv_slot + adv_col
                    + [r for reps in adv_cp for r in reps])
        last_k = gsig("lastk", 1)
        # fk[g]: this beat is the first of the copy's tile (the accumulators start from the
        # product instead of clearing on capture, so they need no reset)
        fk = gsig("fk", 1)
        # last_k[g] is a register: "this beat is the last of the tile", predicted one beat
        # ahead from the counters and the tile's box (decremented bounds kxm/kym, chunk
        # constants iccm = icc - 2, iccz = icc == 1, kq1 = kq == 1)
        iccm, iccz, kq1 = _S(16, name="iccm"), _S(name="iccz"), _S(name="kq1")
        m.d.sync += [iccm.eq(iccl - 1), iccz.eq(iccl == 0), kq1.eq(kq == 1)]
        iccm0, iccm1 = _S(name="iccm0"), _S(16, name="iccm1")     # iccm == 0, iccm - 1
        m.d.sync += [iccm0.eq(iccl == 1), iccm1.eq(iccl - 2)]
        # per copy, registered: ky / ic / kx at their last value in the tile
        kye, ice, kxe = gsig("kye", 1), gsig("ice", 1), gsig("kxe", 1)
        # per copy, registered: ky / ic / kx at the value before their last (kym, iccm, kxm),
        # so that "the next beat is the last" needs no compare
        kyq, icmq, kxq = gsig("kyq", 1), gsig("icmq", 1), gsig("kxq", 1)
        # per copy, registered: the beat after this one is the last of its tile (last_k
        # after an advance), loaded with its value two beats ahead, so that the
        # stall sees a flip-flop instead of the counters' flags
        lkn = gsig("lkn", 1)
        # per copy, registered: lkn & ~(last_k & ltb), "the beat after this one is the last
        # of a tile, and this one is not the copy's very last" (the stall's W_n if it advances)
        lkx = gsig("lkx", 1)

        # "The next beat is the last" from a copy's loop flags f (kye, ice, kxe, kyq, icmq,
        # kxq; kyz: the tile's kernel box has one row) in each case of the next step: a
        # new kx (ky and ic at their last), a new ic (ky at its last), a new ky.
        def last_terms(f, kyz):
            return {"kx": f["kxq"] & iccz & kyz, "ic": f["icmq"] & f["kxe"] & kyz,
                    "ky": f["kyq"] & f["ice"] & f["kxe"]}

        def next_last(f, kyz):
            t = last_terms(f, kyz)
            return Mux(f["kye"], Mux(f["ice"], t["kx"], t["ic"]), t["ky"])

        def box_flags(box):      # the loop flags of a tile's first beat, from its box
            return {"kye": box["kyz"], "ice": iccz, "kxe": box["kxz"], "kyq": box["kym0"],
                    "icmq": iccm0, "kxq": box["kxm0"]}

        def lkn_after(lk, f, kyz):
            """lkn after a beat that loads last_k = lk and the loop flags f: a tile's
            first beat follows a last one (its last_k is kq1, one-beat tiles)."""
            return Mux(lk, kq1, next_last(f, kyz))

        def lkn_first(box):      # lkn at a tile's first beat: its flags loaded from box
            return lkn_after(kq1, box_flags(box), box["kyz"])

        def lkx_first(box, starts=None):
            # lkx at a copy's first beat (that beat is its very last if the copy has one
            # tile, block and beat in all); ``starts``: 0 unless the copy is about to start
            lkn = lkn_first(box) if starts is None else starts & lkn_first(box)
            return lkn & ~(kq1 & tiles1 & count1)
        gdone = gsig("done", 1)
        foff = gsig("foff", FW)
        waddr = gsig("waddr", WW)
        gbox = []
        for g in range(NG):
            bx = {k: Mux(par[g], sbox[1][k], sbox[0][k]) for k in BX}
            gbox.append(bx)
            m.d.comb += [
                gdone[g].eq(act[g] & last_k[g] & gltb[g]),
                foff[g].eq(fo_g[g] + bx["fbox"]),
                waddr[g].eq(wo_g[g] + bx["wbox"]),
            ]

        # rows -> groups (registered per pass)
        row_g = [_S(_index(NG), name=f"row{r}_g") for r in range(MR)]
        row_act = [_S(name=f"row{r}_act") for r in range(MR)]
        # (a register stage per step: cp from set-up clock 1, r_q / n_q 2, mulR 3, nR 4,
        # row_g / row_act loaded in every set-up clock, right from clock 5 on)
        mulR = [_S(20, name=f"mulR{j}") for j in range(NG + 1)]
        r_q, n_q, nR = _S(16, name="row_rq"), _S(4, name="row_nq"), _S(20, name="row_nR")
        m.d.sync += [r_q.eq(cp["r"]), n_q.eq(cp["n"]), nR.eq(_sel(mulR, n_q))]
        for j in range(NG + 1):      # r * j as shift-and-add (no multiplier)
            m.d.sync += mulR[j].eq(sum((r_q << b for b in range(j.bit_length()) if (j >> b) & 1),
                                       Const(0, 20)))
        with m.If(setup):
            for r in range(MR):
                m.d.sync += [row_g[r].eq(sum((Const(r) >= mulR[j]).as_unsigned()
                                             for j in range(1, NG))),
                             row_act[r].eq(Const(r) < nR)]

        # lane validity per group and column: copy g of column c is window jn + g
        lanev = [[_S(name=f"lane{g}_{c}") for c in range(MC)] for g in range(NG)]
        for g in range(NG):
            for c in range(MC):
                m.d.comb += lanev[g][c].eq(act[g] & Mux(par[g], slot[1][c]["lv"][g],
                                                        slot[0][c]["lv"][g]))

        # feature read ports: port p serves the copies on tiles of parity p; all of them
        # read the same word, take the address of the lowest such copy
        # i2: the issue stage's per-copy outputs registered (offsets, lanes, flags)
        i_fk = gsig("i_fk", 1)
        i_act, i_lk, i_par = (gsig("i_act", 1, reset_less=False),
                              gsig("i_lk", 1, reset_less=False), gsig("i_par", 1))
        i_foff, i_waddr = gsig("i_foff", FW), gsig("i_waddr", WW)
        i_gob = gsig("i_gob", 24)
        i_lanev = [_S(MC, name=f"i_lanev{g}") for g in range(NG)]
        i_first, i_R, i_N = _S(name="i_first"), _S(16, name="i_R"), _S(4, name="i_N")
        i_base = [[_S(FW, name=f"i_base{c}_{p}") for p in range(2)] for c in range(MC)]
        # (free-running: a stalled issue stage sends bubbles)
        m.d.sync += [i_act[g].eq(act[g] & adv_i) for g in range(NG)]
        m.d.sync += [i_lk[g].eq(act[g] & last_k[g] & adv_i) for g in range(NG)]
        m.d.sync += [i_fk[g].eq(act[g] & fk[g] & adv_i) for g in range(NG)]
        m.d.sync += [i_par[g].eq(par[g]) for g in range(NG)]
        m.d.sync += [i_foff[g].eq(foff[g]) for g in range(NG)]
        m.d.sync += [i_waddr[g].eq(waddr[g]) for g in range(NG)]
        m.d.sync += [i_gob[g].eq(gob[g]) for g in range(NG)]
        m.d.sync += [i_lanev[g].eq(Cat(*[lanev[g][c] for c in range(MC)])) for g in range(NG)]
        m.d.sync += [i_first.eq(act[0] & (tt[0] == 0) & (blk[0] == 0) & adv_i),
                     i_R.eq(cp["r"]), i_N.eq(cp["n"])]
        m.d.sync += [i_base[c][p].eq(slot[p][c]["base"]) for c in range(MC) for p in range(2)]
        fo = [_S(FW, name=f"fo{p}") for p in range(2)]
        for p in range(2):
            expr = Const(0, FW)
            for g in reversed(range(NG)):
                expr = Mux(i_act[g] & (i_par[g] == p), i_foff[g], expr)
            m.d.comb += fo[p].eq(expr)
        fread = [[fmem[c][p].read_port(domain="sync") for p in range(2)] for c in range(MC)]
        wread = [wmem[r].read_port(domain="sync") for r in range(MR)]

        # ---------------------------------------------------------------- pipeline
        # A beat issued at clock t (the edges at which each register loads):
        #   t+1 i_*    the copy's offsets, lanes and flags (above)
        #   t+2 sa     per-row valid / last / parity / first flags and per-MAC enables;
        #              fo_r the feature offset of each read port, a_wad0 the row's weight
        #              offset
        #   t+3 sb     a_base (window base + offset) and a_wad: the bank addresses
        #   t+4 s1     (the banks read their addresses)
        #   t+5 s1b    fd / wr1: the bank data, registered next to the banks
        #   t+6 xs     fsel (feature selected by tile parity and gated per MAC), wr / w3 / wn
        #              (the row's weight, 3 w and -w): the multiplier operands
        #   t+7 x2     the multiplier's partial-product pairs (radix 4, in LUTs)
        #   t+8 s2     prod
        #   t+9        acc (and the capture into the shadow registers)
        # so the accumulators see the beat ISSUE_TO_ACC = 8 clocks after its issue.
        def stage(name):
            return {"en": [_S(MC, name=f"{name}_en{r}") for r in range(MR)],
                    "rv": _S(MR, name=f"{name}_rv"), "rl": _S(MR, name=f"{name}_rl"),
                    "rp": _S(MR, name=f"{name}_rp"), "rf": _S(MR, name=f"{name}_rf"),
                    "gl": _S(NG, name=f"{name}_gl", reset_less=False),
                    "first": _S(name=f"{name}_first"), "v": _S(name=f"{name}_v", reset_less=False),
                    "gob": gsig(f"{name}_gob", 24),
                    "R": _S(16, name=f"{name}_R"), "N": _S(4, name=f"{name}_N"),
                    "Rle": _S(name=f"{name}_Rle")}      # R <= drain_rows

        def copy_stage(dst, src):
            out = [dst[k].eq(src[k]) for k in ("rv", "rl", "rp", "rf", "gl", "first", "v", "R", "N",
                                               "Rle")]
            out += [dst["gob"][g].eq(src["gob"][g]) for g in range(NG)]
            out += [dst["en"][r].eq(src["en"][r]) for r in range(MR)]
            return out
        sa, sb, s1, s1b, xs, x2, s2 = (stage(n) for n in ("a", "b", "s1", "s1b", "xs", "x2", "s2"))
        pipe = [sa, sb, s1, s1b, xs, x2, s2]      # x2: the stage before s2
        for dst, src in zip(pipe[1:], pipe[:-1]):
            m.d.sync += copy_stage(dst, src)
        fo_r = [_S(FW, name=f"fo_r{p}") for p in range(2)]
        b_base = [[_S(FW, name=f"b_base{c}_{p}") for p in range(2)] for c in range(MC)]
        a_base = [[_S(FW, name=f"a_base{c}_{p}") for p in range(2)] for c in range(MC)]
        a_wad0 = [_S(WW, name=f"a_wad0_{r}") for r in range(MR)]
        a_wad = [_S(WW, name=f"a_wad{r}") for r in range(MR)]
        fd = [[_S(signed(cfg.data_width), name=f"fd{c}_{p}") for p in range(2)]
              for c in range(MC)]
        wr1 = [_S(signed(cfg.weight_width), name=f"wr1_{r}") for r in range(MR)]
        wr = [_S(signed(cfg.weight_width), name=f"wr{r}") for r in range(MR)]
        w3 = [_S(signed(cfg.weight_width + 2), name=f"w3_{r}") for r in range(MR)]
        wn = [_S(signed(cfg.weight_width + 1), name=f"wn{r}") for r in range(MR)]
        fsel = [[_S(signed(cfg.data_width), name=f"fsel{r}_{c}") for c in range(MC)]
                for r in range(MR)]
        prod = [[_S(signed(cfg.data_width + cfg.weight_width), name=f"prod{r}_{c}")
                 for c in range(MC)] for r in range(MR)]
        acc = [[_S(signed(AW), name=f"acc{r}_{c}") for c in range(MC)] for r in range(MR)]
        shadow = [[_S(signed(AW), name=f"sh{r}_{c}") for c in range(MC)] for r in range(MR)]
        s2_gl, s2_v, s2_en, s2_R, s2_N = s2["gl"], s2["v"], s2["en"], s2["R"], s2["N"]
        for c in range(MC):
            for p in range(2):
                m.d.comb += [fread[c][p].addr.eq(a_base[c][p]),
                             fread[c][p].en.eq(1)]
        for r in range(MR):
            m.d.comb += [wread[r].addr.eq(a_wad[r]), wread[r].en.eq(1)]

        rv, rl, rp, rf = [], [], [], []
        for r in range(MR):
            g = row_g[r]
            v = row_act[r] & _sel(i_act, g)
            rv.append(v)
            rl.append(row_act[r] & _sel(i_lk, g))
            rp.append(_sel(i_par, g))
            rf.append(_sel(i_fk, g))
            m.d.sync += sa["en"][r].eq(
                Cat(*[v & _sel([i_lanev[gg][c] for gg in range(NG)], g) for c in range(MC)]))
            m.d.sync += [a_wad0[r].eq(_sel(i_waddr, g)), a_wad[r].eq(a_wad0[r])]
        m.d.sync += [sa["rv"].eq(Cat(*rv)), sa["rl"].eq(Cat(*rl)), sa["rp"].eq(Cat(*rp)),
                     sa["rf"].eq(Cat(*rf)),
                     sa["gl"].eq(Cat(*i_lk)), sa["first"].eq(i_first),
                     sa["v"].eq(_any(i_act)), sa["R"].eq(i_R), sa["N"].eq(i_N),
                     sa["Rle"].eq(i_R <= DR)]
        m.d.sync += [sa["gob"][g].eq(i_gob[g]) for g in range(NG)]
        m.d.sync += [fo_r[p].eq(fo[p]) for p in range(2)]
        for c in range(MC):
            # the bank address registered as the sum (window base + beat offset)
            m.d.sync += [b_base[c][p].eq(i_base[c][p]) for p in range(2)]
            m.d.sync += [a_base[c][p].eq(b_base[c][p] + fo_r[p]) for p in range(2)]
            m.d.sync += [fd[c][p].eq(fread[c][p].data) for p in range(2)]
        for r in range(MR):
            # the row's weight and its multiples 3 w, -w (the multiplier's operands)
            m.d.sync += [wr1[r].eq(wread[r].data), wr[r].eq(wr1[r]),
                         w3[r].eq((wr1[r] << 1) + wr1[r]), wn[r].eq(-wr1[r])]
            for c in range(MC):
                # bank data selected (tile parity) and gated per MAC as it is registered
                m.d.sync += fsel[r][c].eq(Mux(s1b["en"][r][c],
                                              Mux(s1b["rp"][r], fd[c][1], fd[c][0]), 0))
                # w * x in LUTs over two clocks (x2: partial-product pairs, s2: sum)
                m.d.sync += prod[r][c].eq(radix4_product(m, fsel[r][c], wr[r], w3[r], wn[r],
                                                         name=f"pp{r}_{c}_"))

        # ---------------------------------------------------------------- drain
        pending = _S(NG, reset_less=False)
        dg = _S(_index(NG), reset_less=False)
        di = _S(16, reset_less=False)
        # cap_gob: output address of each copy's latest capture,
        # including a capture of this clock: loaded from the x2 stage one clock before the
        # capture (s2 is a plain copy of x2), so the drain's next step reads registers only
        cap_gob = gsig("cap_gob", 24)
        working = _S(reset_less=False)
        fin = _S(reset_less=False)
        d_R = _S(16, name="d_R")          # rows of the copy being drained (one pass)
        d_Rle = _S(name="d_Rle")          # d_R <= drain_rows
        drem = _S(16, name="drem")        # rows left of the copy being drained
        d_le2 = _S(name="d_le2")          # drem <= 2 * drain_rows
        cap_last = gsig("cap_last", 1)        # copy g is its pass's last copy (g + 1 == n)
        daddr = _S(24, name="daddr")      # output address of the drain step (gob + di)
        dlast = _S(name="dlast")          # this drain step is the copy's last one
        # working, fin and fin_g are registers holding exactly pending[dg], working & dlast
        # and fin & (dg == g): they are computed from the next state below (for the stall)
        fin_g = [_S(name=f"fin{g}", reset_less=False) for g in range(NG)]

        # accumulate / capture
        # (no reset, no valid bit: the first beat of a tile loads the product, a row with no
        # valid beat adds zero products, the gated features; only a capture is qualified)
        # (the row's first-beat and capture flags replicated per MAC, each driving 32 bits;
        # ring-loaded during the reset, see _replicate)
        for r in range(MR):
            mac_rf = [_S(name=f"rf{r}_{c}") for c in range(MC)]
            mac_rl = [_S(name=f"rl{r}_{c}") for c in range(MC)]
            m.d.sync += _replicate(x2["rf"][r], mac_rf) + _replicate(x2["rl"][r], mac_rl)
            for c in range(MC):
                total = Mux(mac_rf[c], prod[r][c], acc[r][c] + prod[r][c])
                m.d.sync += acc[r][c].eq(total)
                with m.If(mac_rl[c]):
                    m.d.sync += shadow[r][c].eq(total)
        # busy MAC-cycles: popcount of the enables, one register stage
        pc = _S(_bits(MR * MC), reset_less=False)
        # (per row registered, then per four rows, then the sum: the compute phase ends at
        # least four clocks after the last accumulation, so busy is complete before the
        # stats)
        pc_rows = [_S(_bits(MC), name=f"pc{r}", reset_less=False) for r in range(MR)]
        for r in range(MR):
            m.d.sync += pc_rows[r].eq(Mux(s2_v, sum(s2_en[r][c] for c in range(MC)), 0))
        pc_q = [_S(_bits(4 * MC), name=f"pcq{i}", reset_less=False) for i in range((MR + 3) // 4)]
        for i in range(len(pc_q)):
            m.d.sync += pc_q[i].eq(sum(pc_rows[4 * i:4 * i + 4]))
        m.d.sync += pc.eq(sum(pc_q))
        # (the upper half takes the carry one clock later: the count is complete five
        # clocks after the last accumulation, and the stats leave at least five clocks after
        # it: the last beat's capture drains for three clocks, then one clock to STAT)
        busy_sum = busy_lo + pc
        m.d.sync += [busy_lo.eq(busy_sum[:24]), busy_cy.eq(busy_sum[24]),
                     busy_hi.eq(busy_hi + busy_cy)]

        newpend = _S(NG)
        for g in range(NG):
            cap = s2_gl[g]
            with m.If(x2["gl"][g]):
                m.d.sync += cap_gob[g].eq(x2["gob"][g])
            with m.If(cap):
                m.d.sync += cap_last[g].eq(s2_N == g + 1)
            m.d.comb += newpend[g].eq(cap | (pending[g] & ~fin_g[g]))
        m.d.sync += pending.eq(newpend)
        any_cap = s2_gl.any()
        # The next copy to drain, dg_n, is dg, 0 (after the pass's last copy) or dg + 1;
        # pick(v) = v[dg_n] selects among the three candidates (v[dg + 1] as the list
        # shifted by one, selected by dg) instead of selecting by dg_n.
        dcl = _S(name="d_cl")       # the copy being drained is its pass's last (cap_last[dg])

        # (dg and di need no load at the start of a compute phase: they are 0 after a reset
        # and after every phase, whose last drain step is its last pass's last copy's)
        def pick(v):
            v = list(v)
            return Mux(fin, Mux(dcl, v[0], _sel(v[1:] + v[-1:], dg)), _sel(v, dg))
        dg_n, di_n = Signal.like(dg, name="dg_n"), Signal.like(di, name="di_n")
        dR_n, dlast_n = Signal.like(d_R, name="d_R_n"), _S(name="dlast_n")
        r_fin = _S(16, name="d_R_fin")
        m.d.comb += r_fin.eq(Mux(any_cap, s2_R, d_R))
        rle_fin = Mux(any_cap, s2["Rle"], d_Rle)
        m.d.comb += [
            dg_n.eq(Mux(fin, Mux(dcl, 0, dg + 1), dg)),
            di_n.eq(Mux(fin, 0, Mux(working, di + DR, di))),
            dR_n.eq(Mux(~working, s2_R, Mux(fin, r_fin, d_R))),
            dlast_n.eq(Mux(~working, s2["Rle"], Mux(fin, rle_fin, d_le2))),
        ]
        # registered from the next state: cap_last[dg] and drem <= 2 drain_rows
        m.d.sync += [dcl.eq(pick([Mux(s2_gl[g], s2_N == g + 1, cap_last[g])
                                  for g in range(NG)])),
                     d_le2.eq(Mux(~working, s2_R <= 2 * DR,
                                  Mux(fin, r_fin <= 2 * DR, drem <= 3 * DR)))]
        m.d.sync += [dg.eq(dg_n), di.eq(di_n), d_R.eq(dR_n), dlast.eq(dlast_n),
                     d_Rle.eq(Mux(~working, s2["Rle"], Mux(fin, rle_fin, d_Rle))),
                     drem.eq(Mux(~working, s2_R, Mux(fin, r_fin, drem - DR)))]
        # the next drain step's output address and shadow row (the captures of this clock
        # included); the shadow row also in one register per column (its low bits: the
        # row selects of the columns are wide), each counting from its own value so that
        # Yosys keeps the copies apart
        new_copy = fin | ~working
        RB = _bits(MR - 1)
        # (per column two copies, one per half of the rows)
        drow_c = [[_S(RB, name=f"drow{c}_{k}") for k in range(2)] for c in range(MC)]
        m.d.sync += daddr.eq(Mux(new_copy, pick(cap_gob), daddr + DR))
        # The shadow row base of copy g is g R (the drain never mixes passes: a pass's first
        # capture waits for the drain), so the copies' next row base is counted, not
        # selected among the captures: d_base = dg R, 0 after the pass's last copy
        d_base = _S(RB, name="d_base", reset_less=False)
        base_nx = Mux(dcl, 0, d_base + d_R[:RB])
        with m.If(fin):
            m.d.sync += d_base.eq(base_nx)
        row_new_c = Mux(fin, base_nx, d_base)
        m.d.sync += [r.eq(Mux(new_copy, row_new_c, r + DR)) for rc in drow_c for r in rc]

        # working next: copy dg_n pending; finishing: and its last step (per copy: no
        # select of the pending flags by dg_n)
        dg_is = [_S(name=f"d_is{g}") for g in range(NG)]            # dg_n == g
        m.d.comb += [dg_is[g].eq(pick([Const(h == g) for h in range(NG)])) for g in range(NG)]
        work_gn = [dg_is[g] & newpend[g] for g in range(NG)]
        work_n = _any(work_gn)
        fin_gn = [work_gn[g] & dlast_n for g in range(NG)]
        m.d.sync += [working.eq(work_n), fin.eq(work_n & dlast_n)]
        m.d.sync += [fin_g[g].eq(fin_gn[g]) for g in range(NG)]

        # ------------------------------------------------ issue-side drain model (the stall)
        # Exact twin of gen.conv._chunk_compute_cycles in countdowns, at issue time t (the
        # capture of a beat issued now happens ISSUE_TO_ACC clocks later, at C):
        # pd_L = max(0, last drain clock of all captures issued so far - C), pd_F[g] the
        # same for copy g's latest capture; a capture at C starts its drain at
        # max(C + 1, last + 1) and takes dg = ceil(R / drain_rows) clocks, so k captures
        # issued together (in copy order) set pd_L to pd_L + k dg.  All count down by one
        # per clock; zL / zF[g] are the registered flags "> 0".
        pd_dg = _S(16, name="pd_dg")
        if DR & (DR - 1) == 0:
            m.d.sync += pd_dg.eq((cp["r"] + (DR - 1)) >> (DR.bit_length() - 1))
        else:
            m.d.sync += pd_dg.eq((cp["r"] + (DR - 1)) // DR)
        # k dg - 1 for k = 1..NG (shift-and-add, registered once per pass), and the flags
        # dg >= 2, dg >= 3 (registered with them)
        pd_m1 = [Const(0, 16)] + [_S(16, name=f"pd_m{k}") for k in range(1, NG + 1)]
        for k in range(1, NG + 1):
            kdg = sum(pd_dg << b for b in range(k.bit_length()) if (k >> b) & 1)
            m.d.sync += pd_m1[k].eq(kdg - 1)
        dg_ge2, dg_ge3 = _S(name="pd_dg2"), _S(name="pd_dg3")
        m.d.sync += [dg_ge2.eq(pd_dg >= 2), dg_ge3.eq(pd_dg >= 3)]
        pd_L, zL = _S(16, name="pd_L"), _S(name="pd_zL")
        pd_F, zF = gsig("pd_F", 16), gsig("pd_zF", 1)
        ft0 = _S(name="pd_ft0")            # copy 0 is in the first tile of its pass
        # W[g] = act[g] & last_k[g] (this beat is the copy's last of a tile), a register
        # with its own next state: a start (pd_start), an advance (the new last_k, lkn;
        # act drops after the last tile of the copy's last block) or hold
        W = gsig("pd_W", 1, reset_less=False)
        pd_start = [_S(name=f"pd_start{g}") for g in range(NG)]
        # stp[g] == isu & start & sg_oh[g] (copy g >= 1 starts if the issue stage advances,
        # see the issue control), a register loaded with its value after an advance
        stp = [None] + [_S(name=f"stp{g}", reset_less=False) for g in range(1, NG)]
        capg = [W[g] & adv for g in range(NG)]
        # (the countdowns' data paths on their own replica, the flags on adv)
        capd = [W[g] & adv_pd for g in range(NG)]
        kcnt = []
        for g in range(NG):
            kc = _S(range(NG + 1), name=f"pd_k{g}")
            m.d.comb += kc.eq(sum(capd[h] for h in range(g + 1)))
            kcnt.append(kc)
        ktot = kcnt[-1]
        zL_n, zF_n = _S(name="pd_zL_n"), [_S(name=f"pd_zF_n{g}") for g in range(NG)]
        W_n = [_S(name=f"pd_W_n{g}") for g in range(NG)]
        ft0_n = _S(name="pd_ft0_n")
        # k dg >= 2 is true for every k >= 2 (dg >= 1), so of the captures issued together
        # only "more than one" and dg >= 2 matter; gt1 flags: registered pd_L > 1, pd_F > 1
        # (no compare and no count on the stall path)
        L_gt1, F_gt1 = _S(name="pd_Lgt1", reset_less=False), gsig("pd_Fgt1", 1, reset_less=False)
        def two_of(bits):          # at least two of bits
            return _any([bits[h] & bits[j] for h in range(NG) for j in range(h + 1, NG)])
        two = two_of(capg)
        # zLb == zL | (dg >= 2) as its own register (both load every clock)
        zLb = _S(name="pd_zLb")
        m.d.sync += zLb.eq(zL_n | (pd_dg >= 2))
        m.d.comb += zL_n.eq(Mux(_any(capg), zLb | two, L_gt1))
        # pd_L + (k dg - 1) for every k, in parallel with the counts that select one
        pd_Lk = [pd_L + pd_m1[k] for k in range(NG + 1)]
        # pd_L + k dg - 1 > 1, i.e. pd_L + k dg >= 3, from flags (dg >= 1 in a pass): pd_L >= 2,
        # or pd_L == 1 and k dg >= 2, or k dg >= 3
        kdg_ge2 = [None, dg_ge2] + [Const(1)] * (NG - 1)
        kdg_ge3 = [None, dg_ge3, dg_ge2] + [Const(1)] * (NG - 2)
        Lk_gt1 = [L_gt1] + [L_gt1 | (zL & kdg_ge2[k]) | kdg_ge3[k] for k in range(1, NG + 1)]
        m.d.sync += [pd_L.eq(Mux(ktot == 0, Mux(zL, pd_L - 1, 0), _sel(pd_Lk, ktot))),
                     L_gt1.eq(Mux(ktot == 0, zL & (pd_L > 2), _sel(Lk_gt1, ktot))),
                     zL.eq(zL_n), ft0.eq(ft0_n)]
        for g in range(NG):
            before = _any(capg[:g])          # another copy captures with this one, ahead
            m.d.comb += [zF_n[g].eq(Mux(capg[g], zLb | before, F_gt1[g])),
                         W_n[g].eq(Mux(pd_start[g], kq1,
                                       Mux(adv & act[g], lkx[g], W[g])))]
            m.d.sync += [pd_F[g].eq(Mux(capd[g], _sel(pd_Lk, kcnt[g]),
                                        Mux(zF[g], pd_F[g] - 1, 0))),
                         F_gt1[g].eq(Mux(capd[g], _sel(Lk_gt1, kcnt[g]), zF[g] & (pd_F[g] > 2))),
                         zF[g].eq(zF_n[g]), W[g].eq(W_n[g])]
        m.d.comb += ft0_n.eq(Mux(pd_start[0], 1, Mux(W[0] & adv, 0, ft0)))
        # The stall's next value computed both ways of this clock's adv and then selected
        # by it, so that adv, the loop's own flag, enters only the last level: B1 (the
        # issue stage advances: every W[g] captures, a starting copy loads kq1, an active
        # one lkn unless this is its last beat) and B0 (it stalls: only the countdowns
        # move).  (adv's replicas are equal outside the reset, when no copy starts.)
        # (W[g] implies act[g], and lkx[g] is 0 while the copy is idle unless it is about
        # to start, when stp selects kq1: so lkx alone is Mux(act, lkx, W))
        w1 = [Mux(stp[g] if g else setup_last, kq1, lkx[g]) for g in range(NG)]
        z1 = [Mux(W[g], zLb | _any(W[:g]), F_gt1[g]) for g in range(NG)]
        zL1 = Mux(_any(W), zLb | two_of(W), L_gt1)
        ft01 = setup_last | (~W[0] & ft0)
        b1 = _any([w1[g] & z1[g] for g in range(NG)] + [w1[0] & ft01 & zL1])
        w0 = [Mux(setup_last, kq1, W[0])] + W[1:]
        b0 = _any([w0[g] & F_gt1[g] for g in range(NG)] + [w0[0] & (setup_last | ft0) & L_gt1])
        blocked_n = Mux(adv, b1, b0)
        m.d.sync += adv.eq(~blocked_n)
        # each replica selects with its own value (all equal: after a reset b1 = b0 = 0 loads
        # 1 into every one), so no two have the same input and none needs a reset term
        m.d.sync += [r.eq(~Mux(r, b1, b0)) for r in adv_reps]

        # drain read (stage A: the shadow rows read, selected in two steps) -> bank read
        # (stage A2) -> add and write (stages B, C)
        wa_v = [_S(name=f"wa{j}_v", reset_less=False) for j in range(DR)]
        wa_addr = [_S(24, name=f"wa{j}_addr") for j in range(DR)]
        wb_v = [_S(name=f"wb{j}_v", reset_less=False) for j in range(DR)]
        wb_addr = [_S(24, name=f"wb{j}_addr") for j in range(DR)]
        wb_new = [[_S(signed(AW), name=f"wb{j}_{c}") for c in range(MC)] for j in range(DR)]
        # the rows' two halves (by the row's top bit): each half's row registered, then one
        HB = RB - 1
        halves = [list(range(MR))[:1 << HB], list(range(MR))[1 << HB:]]
        halves = [h for h in halves if h]
        oaddr = wa_addr        # the bank read address of a step (stage A2)
        for j in range(DR):
            m.d.sync += [wa_v[j].eq(working & (drem > j)), wa_addr[j].eq(daddr + j),
                         wb_v[j].eq(wa_v[j]), wb_addr[j].eq(wa_addr[j])]
            for c in range(MC):
                # (a valid step's row drow + j is below rows: the low bits select it)
                rr = [_S(RB, name=f"dr{j}_row{c}_{k}") for k in range(2)]
                m.d.comb += [x.eq(y + j) for x, y in zip(rr, drow_c[c])]
                part = [_S(signed(AW), name=f"wa{j}_{c}_{h}") for h in range(len(halves))]
                top = _S(name=f"wa{j}_{c}_top")
                m.d.sync += [p.eq(_sel([shadow[r][c] for r in rows], rr[h][:HB]))
                             for h, (p, rows) in enumerate(zip(part, halves))]
                m.d.sync += [top.eq(rr[0][HB]), wb_new[j][c].eq(_sel(part, top))]

        # ---------------------------------------------------------------- streamer
        # The streamer walks the output positions of the bank filled by the last layer in
        # stream order (image, channel, oy, ox), one per step.  A step only enables its
        # registers (st_step is a clock enable): what a step does is decided by registered
        # flags, and every next value and flag is computed from registers, assuming a step.
        st_busy, st_sel = _S(reset_less=False, name="st_busy"), _S(name="st_sel")
        st_flat = _S(name="st_flat")
        # the handoff (the FSM's HANDOFF state with the streamer idle: the banks swap, the
        # streamer loads the layer) and the step, each a register in copies for fan-out
        # (computed from the next state at the end, see _replicate): [0] the streamer's
        # position and flags, [1] (handoff) its per-pass values, the last one the rest
        handoff = [_S(name=f"handoff{k}", reset_less=False) for k in range(3)]
        st_go = [_S(name=f"st_go{k}", reset_less=False) for k in range(2)]
        st_step = st_go[1]
        go_n = Signal(name="st_go_n")          # the next clock steps
        # kinds of step as registered enables (go & F[...], from the next state): a new
        # image, a new pass (or image), a new channel; they enable the registers that change
        # only then (many, with the per-pass values)
        K = {k: _S(name=f"st_go_{k}", reset_less=False) for k in ("img", "pass", "ch")}
        # per pass, loaded at the handoff: n - 1, n * Oc, channels - 1, and the flags
        # n == 1, n == 2, channels == 1, channels == 2
        st_pn = [_S(4, name=f"st_pn{i}") for i in range(NP)]
        st_pnoc = [_S(24, name=f"st_pnoc{i}") for i in range(NP)]
        st_pcr = [_S(17, name=f"st_pcr{i}") for i in range(NP)]
        st_pnz, st_pn2 = ([_S(name=f"st_pn{k}_{i}") for i in range(NP)] for k in ("z", "2"))
        st_pc1, st_pc2 = ([_S(name=f"st_pc{k}_{i}") for i in range(NP)] for k in ("1", "2"))
        # layer constants: wo - 1, ho - 1, oc - 1, oc and the flags wo == 1, wo == 2, ...
        st_wo1, st_ho1 = _S(DIMW, name="st_wo1"), _S(DIMW, name="st_ho1")
        st_oc1, st_oc = _S(16, name="st_oc1"), _S(16, name="st_oc")
        lc = {k: _S(name=f"st_{k}") for k in ("wo_1", "wo_2", "ho_1", "ho_2", "oc_1", "oc_2")}
        # batch: per pass, the slot position where the current image starts (column sI_c,
        # address sI_a = tile * n * Oc) and where the next one starts (sN_c, sN_a); the
        # flags "column == cols - 1" of both (sIl, sNl)
        CW = max(1, (MC - 1).bit_length())
        sI_c = [_S(CW, name=f"st_ic{i}") for i in range(NP)]
        sI_a = [_S(24, name=f"st_ia{i}") for i in range(NP)]
        sN_c = [_S(CW, name=f"st_nc{i}") for i in range(NP)]
        sN_a = [_S(24, name=f"st_na{i}") for i in range(NP)]
        sIl = [_S(name=f"st_il{i}") for i in range(NP)]
        sIl_e, sIl_e1 = _S(name="st_il_e"), _S(name="st_il_e1")     # sIl[e], sIl[e + 1]
        sNl = [_S(name=f"st_nl{i}") for i in range(NP)]
        st_pib = [_S(CW, name=f"st_pib{i}") for i in range(NP)]
        st_pia = [_S(24, name=f"st_pia{i}") for i in range(NP)]
        # the next image start's column carry (sN_c + sib >= cols) registered, and the
        # address step with a carry (sia + n * Oc)
        sNcy = [_S(name=f"st_ncy{i}") for i in range(NP)]
        st_pic = [_S(24, name=f"st_pic{i}") for i in range(NP)]
        # stX[i] = sI_a[i] + o + 1: the address of the next output channel in pass i, with
        # the sums stXo = stX + Oc and stXw = stX + n * Oc; sNo0 / sNw0 the same sums of
        # sN_a[0] (the address sums below then add only registers)
        stX = [_S(24, name=f"st_x{i}") for i in range(NP)]
        stXo = [_S(24, name=f"st_xo{i}") for i in range(NP)]
        stXw = [_S(24, name=f"st_xw{i}") for i in range(NP)]
        sNo0, sNw0 = _S(24, name="st_no0"), _S(24, name="st_nw0")
        # The position: slot column c, pass e (and e + 1), the pass's n - 1 (and n == 1,
        # n == 2) and n * Oc, the slot address (st_addr) and its window group's base
        # (st_base), with the sums st_basew = st_base + n * Oc and st_addroc = st_addr + Oc
        # kept in registers; the other coordinates as down-counters, what is left of the row
        # (oxr = wo - 1 - ox), of the map (oyr), of the group's copies (gr = n - 1 - g), of
        # the pass's channels (cr), of the image's channels (or) and of the batch (ir), each
        # with a registered flag "== 1" (predicted with a compare against 2), so that every
        # end flag is predicted from flags.
        st = {"c": _S(range(MC) if MC > 1 else 1, name="st_c"),
              "e": _S(range(NP + 1), name="st_e"), "e1": _S(range(NP + 2), name="st_e1"),
              "n": _S(4, name="st_n"), "nz": _S(name="st_nz"), "n1": _S(name="st_n1"),
              "noc": _S(24, name="st_noc"),
              "base": _S(24, name="st_base"), "addr": _S(24, name="st_addr"),
              "basew": _S(24, name="st_basew"), "addroc": _S(24, name="st_addroc"),
              "oxr": _S(DIMW, name="st_oxr"), "oyr": _S(DIMW, name="st_oyr"),
              "gr": _S(4, name="st_gr"), "cr": _S(17, name="st_cr"),
              "or": _S(16, name="st_or"), "ir": _S(16, name="st_ir"),
              "ox1": _S(name="st_ox1"), "oy1": _S(name="st_oy1"), "g1": _S(name="st_g1"),
              "cr1": _S(name="st_cr1"), "or1": _S(name="st_or1"), "ir1": _S(name="st_ir1")}
        st_c, st_e, st_e1 = st["c"], st["e"], st["e1"]
        # registered flags of the position: ox == wo - 1, oy == ho - 1, g == n - 1,
        # c == cols - 1, the pass's last channel, the image's last channel, the last image
        fl = {k: _S(name=f"st_f{k}") for k in ("rowend", "lastrow", "glast", "clast",
                                                   "olastc", "olast", "imglast")}
        # what the next step does, as registered flags (from the flags above): F["chend"] a
        # new output channel, F["grp"] the next window group, F["cop"] the next copy,
        # F["wrap"] back to column 0, F["newe"] the next pass, F["iend"] the image's end,
        # F["imgnx"] the next image, F["lend"] the layer's end
        F = {k: _S(name=f"st_F{k}") for k in ("chend", "grp", "cop", "wrap", "newe",
                                                  "iend", "imgnx", "lend")}

        def step_flags(f, flat):
            chend = f["rowend"] & f["lastrow"]
            grp_ = ~chend & (f["glast"] | f["rowend"])
            iend = chend & f["olast"]
            return {"chend": chend, "grp": grp_, "cop": ~chend & ~grp_,
                    "wrap": grp_ & (f["clast"] | (~flat & f["rowend"])),
                    "newe": chend & f["olastc"], "iend": iend,
                    "imgnx": iend & ~f["imglast"], "lend": iend & f["imglast"]}

        # the state a handoff loads (the first position of the layer) ...
        hv = {"c": 0, "e": 0, "e1": 1, "n": d.p0_n - 1, "nz": d.p0_n == 1, "n1": d.p0_n == 2,
              "noc": d.p0_noc, "base": 0, "addr": 0, "basew": d.p0_noc, "addroc": d.oc,
              "oxr": d.wo - 1, "oyr": d.ho - 1, "gr": d.p0_n - 1, "cr": d.p0_cend - 1,
              "or": d.oc - 1, "ir": d.batch - 1,
              "ox1": d.wo == 2, "oy1": d.ho == 2, "g1": d.p0_n == 2, "cr1": d.p0_cend == 2,
              "or1": d.oc == 2, "ir1": d.batch == 2}
        hfl = {"rowend": d.wo == 1, "lastrow": d.ho == 1, "glast": d.p0_n == 1,
               "clast": Const(MC == 1), "olastc": d.p0_cend == 1, "olast": d.oc == 1,
               "imglast": d.batch == 1}
        # ... and the state after a step
        chend, grp, wrap, newe, imgnx = (F[k] for k in ("chend", "grp", "wrap", "newe",
                                                         "imgnx"))
        rowend = fl["rowend"]

        # the next pass's (e + 1) per-pass values, in registers (nxp)
        EB = _bits(NP - 1)           # (pass indices beyond the last pass are never used)
        pvals = {"n": st_pn, "nz": st_pnz, "n2": st_pn2, "noc": st_pnoc, "pcr": st_pcr,
                 "pc1": st_pc1, "pc2": st_pc2}
        nxp = {k: Signal.like(v[0], name=f"st_nx{k}") for k, v in pvals.items()}

        def by_pass(k, cur):         # a per-pass value after a step: pass 0 / e + 1 / same
            return Mux(imgnx, pvals[k][0], Mux(newe, nxp[k], cur))

        def new_ch(vals):            # at a new channel: pass e + 1's value or pass e's
            return Mux(newe, _sel(vals, st_e1[:EB]), _sel(vals, st_e[:EB]))
        ch_at = new_ch(stX)
        av = {
            "c": Mux(imgnx, sN_c[0], Mux(chend, new_ch(sI_c), Mux(wrap, 0, Mux(grp, st_c + 1,
                                                                                st_c)))),
            "e": Mux(imgnx, 0, Mux(newe, st_e1, st_e)),
            "e1": Mux(imgnx, 1, Mux(newe, st_e1 + 1, st_e1)),
            "n": by_pass("n", st["n"]), "nz": by_pass("nz", st["nz"]),
            "n1": by_pass("n2", st["n1"]), "noc": by_pass("noc", st["noc"]),
            "base": Mux(imgnx, sN_a[0], Mux(chend, ch_at, Mux(wrap, st["basew"],
                                                                st["base"]))),
            "addr": Mux(imgnx, sN_a[0], Mux(chend, ch_at, Mux(
                wrap, st["basew"], Mux(grp, st["base"], st["addroc"])))),
            "basew": Mux(imgnx, sNw0, Mux(chend, new_ch(stXw), Mux(
                wrap, st["basew"] + st["noc"], st["basew"]))),
            "addroc": Mux(imgnx, sNo0, Mux(chend, new_ch(stXo), Mux(
                wrap, st["basew"] + st_oc, Mux(grp, st["base"] + st_oc,
                                               st["addroc"] + st_oc)))),
            "oxr": Mux(chend | rowend, st_wo1, st["oxr"] - 1),
            "ox1": Mux(chend | rowend, lc["wo_2"], st["oxr"] == 2),
            "oyr": Mux(chend, st_ho1, Mux(rowend, st["oyr"] - 1, st["oyr"])),
            "oy1": Mux(chend, lc["ho_2"], Mux(rowend, st["oyr"] == 2, st["oy1"])),
            "g1": Mux(chend | grp, by_pass("n2", st["n1"]), st["gr"] == 2),
        }
        # (changed by a new channel / image only: enabled by K below)
        ch_v = {"cr": by_pass("pcr", st["cr"] - 1), "cr1": by_pass("pc2", st["cr"] == 2),
                "or": Mux(imgnx, st_oc1, st["or"] - 1),
                "or1": Mux(imgnx, lc["oc_2"], st["or"] == 2)}
        img_v = {"ir": st["ir"] - 1, "ir1": st["ir"] == 2}
        av["gr"] = Mux(chend | grp, av["n"], st["gr"] - 1)
        afl = {
            "rowend": Mux(chend | rowend, lc["wo_1"], st["ox1"]),
            "lastrow": Mux(chend, lc["ho_1"], Mux(rowend, st["oy1"], fl["lastrow"])),
            "glast": Mux(chend | grp, av["nz"], st["g1"]),
            "clast": Mux(imgnx, sNl[0], Mux(chend, Mux(newe, sIl_e1, sIl_e), Mux(
                wrap, Const(MC == 1), Mux(grp, st_c == MC - 2, fl["clast"])))),
            "olastc": Mux(chend, by_pass("pc1", st["cr1"]), fl["olastc"]),
            "olast": Mux(imgnx, lc["oc_1"], Mux(chend, st["or1"], fl["olast"])),
            "imglast": Mux(imgnx, st["ir1"], fl["imglast"]),
        }
        # pass 1's values from the descriptor (a handoff), from the registers (a new
        # image), pass e + 2's (a new pass)
        d_p1 = {"n": d.p1_n - 1, "nz": d.p1_n == 1, "n2": d.p1_n == 2, "noc": d.p1_noc,
                "pcr": d.p1_cend - d.p0_cend - 1, "pc1": d.p1_cend - d.p0_cend == 1,
                "pc2": d.p1_cend - d.p0_cend == 2}
        with m.If(handoff[0]):
            m.d.sync += [nxp[k].eq(v) for k, v in d_p1.items()]
            m.d.sync += [sIl_e.eq(MC == 1), sIl_e1.eq(MC == 1)]
        with m.Elif(K["img"]):
            m.d.sync += [nxp[k].eq(pvals[k][1]) for k in pvals]
            m.d.sync += [sIl_e.eq(sNl[0]), sIl_e1.eq(sNl[1])]
        with m.Elif(K["pass"]):
            m.d.sync += [nxp[k].eq(_sel(pvals[k], st_e1 + 1)) for k in pvals]
            m.d.sync += [sIl_e.eq(sIl_e1), sIl_e1.eq(_sel(sIl, st_e1 + 1))]
        with m.If(handoff[0]):
            m.d.sync += [st[k].eq(hv[k]) for k in list(ch_v) + list(img_v)]
        with m.Elif(K["ch"]):
            m.d.sync += [st[k].eq(v) for k, v in ch_v.items()]
            with m.If(imgnx):
                m.d.sync += [st[k].eq(v) for k, v in img_v.items()]
        F_n = {k: Signal(name=f"st_F{k}_n") for k in F}
        # the handoff's flags from the descriptor's compares, registered every clock (the
        # descriptor is loaded in IDLE, clocks before the layer's handoff)
        sf_h = {k: _S(name=f"st_hF{k}") for k in F}
        m.d.sync += [sf_h[k].eq(v) for k, v in step_flags(hfl, d.flat).items()]
        sf_a = step_flags(afl, st_flat)
        m.d.comb += [F_n[k].eq(Mux(handoff[0], sf_h[k], Mux(st_go[0], sf_a[k], F[k])))
                     for k in F]
        m.d.sync += [F[k].eq(F_n[k]) for k in F]
        m.d.sync += [K["img"].eq(go_n & F_n["imgnx"]),
                     K["pass"].eq(go_n & (F_n["imgnx"] | F_n["newe"])),
                     K["ch"].eq(go_n & F_n["chend"])]
        with m.If(handoff[0]):
            m.d.sync += [st[k].eq(v) for k, v in hv.items() if k in av]
            m.d.sync += [fl[k].eq(v) for k, v in hfl.items()]
        with m.Elif(st_go[0]):
            m.d.sync += [st[k].eq(v) for k, v in av.items()]
            m.d.sync += [fl[k].eq(v) for k, v in afl.items()]
        nx_busy = Signal(name="nx_busy")
        m.d.comb += nx_busy.eq(Mux(handoff[2], 1, Mux(st_step & F["lend"], 0, st_busy)))
        m.d.sync += st_busy.eq(nx_busy)
        # the bank being computed into, per bank (sel == b, flipped at a handoff)
        own = [_S(name=f"own{b}", init=int(b == 0), reset_less=False) for b in range(2)]
        with m.If(handoff[2]):
            m.d.sync += [st_sel.eq(sel), sel.eq(~sel), st_flat.eq(d.flat),
                         st_wo1.eq(d.wo - 1), st_ho1.eq(d.ho - 1), st_oc1.eq(d.oc - 1),
                         st_oc.eq(d.oc)]
            m.d.sync += [o.eq(~o) for o in own]
            m.d.sync += [lc[f"{k}_{v}"].eq(getattr(d, k) == v) for k in ("wo", "ho", "oc")
                         for v in (1, 2)]
        # per-pass values: loaded at a handoff, the image starts moved at a new image, the
        # next channel's addresses at a new channel
        with m.If(handoff[1]):
            for i in range(NP):
                pn = getattr(d, f"p{i}_n")
                pc = getattr(d, f"p{i}_cend") - (getattr(d, f"p{i - 1}_cend") if i else 0)
                pnoc, sib, sia = (getattr(d, f"p{i}_{k}") for k in ("noc", "sib", "sia"))
                m.d.sync += [st_pn[i].eq(pn - 1), st_pnz[i].eq(pn == 1), st_pn2[i].eq(pn == 2),
                             st_pnoc[i].eq(pnoc),
                             st_pcr[i].eq(pc - 1), st_pc1[i].eq(pc == 1), st_pc2[i].eq(pc == 2),
                             sI_c[i].eq(0), sI_a[i].eq(0), sIl[i].eq(MC == 1),
                             sN_c[i].eq(sib), sN_a[i].eq(sia), sNl[i].eq(sib == MC - 1),
                             st_pib[i].eq(sib), st_pia[i].eq(sia), st_pic[i].eq(sia + pnoc),
                             sNcy[i].eq(sib + sib >= MC),
                             stX[i].eq(1), stXo[i].eq(d.oc + 1), stXw[i].eq(pnoc + 1)]
            m.d.sync += [sNo0.eq(d.p0_sia + d.oc), sNw0.eq(d.p0_sia + d.p0_noc)]
        with m.Elif(K["img"]):
            for i in range(NP):
                csum = sN_c[i] + st_pib[i]
                nc = Mux(sNcy[i], csum - MC, csum)[:CW]
                inc = Mux(sNcy[i], st_pic[i], st_pia[i])
                m.d.sync += [sI_c[i].eq(sN_c[i]), sI_a[i].eq(sN_a[i]), sIl[i].eq(sNl[i]),
                             sN_c[i].eq(nc), sNl[i].eq(nc == MC - 1),
                             sNcy[i].eq(nc + st_pib[i] >= MC),
                             sN_a[i].eq(sN_a[i] + inc),
                             stX[i].eq(sN_a[i] + 1), stXo[i].eq(sN_a[i] + 1 + st_oc),
                             stXw[i].eq(sN_a[i] + 1 + st_pnoc[i])]
                if i == 0:
                    m.d.sync += [sNo0.eq(sNo0 + inc), sNw0.eq(sNw0 + inc)]
        with m.Elif(K["ch"]):
            m.d.sync += [x.eq(x + 1) for x in stX + stXo + stXw]

        # output banks: read port 0 is the drain's in the bank being computed into (sel), the
        # streamer's in the other one (st_sel: it never streams bank sel), at st_addr; the
        # data are the current stream position's one clock later
        rdata = [[[None] * MC for _ in range(DR)] for _ in range(2)]
        wports = [[[None] * MC for _ in range(DR)] for _ in range(2)]
        for b in range(2):
            for c in range(MC):
                for j in range(DR):
                    rp = omem[b][c].read_port(domain="sync")
                    wports[b][j][c] = omem[b][c].write_port()
                    m.d.comb += rp.addr.eq(Mux(own[b], oaddr[j], st["addr"]) if j == 0
                                           else oaddr[j])
                    rdata[b][j][c] = rp.data
        # stage C: the banks' read data registered as they are (per bank: no logic between
        # a block RAM and its register), then the old partial sum added and written back.
        # Port 0's registers (wco<b>_0_<c>) also hold the streamer's words.
        wc_v = [_S(name=f"wc{j}_v", reset_less=False) for j in range(DR)]
        wc_addr = [_S(24, name=f"wc{j}_addr") for j in range(DR)]
        wc_new = [[_S(signed(AW), name=f"wc{j}_{c}") for c in range(MC)] for j in range(DR)]
        wc_old = [[[_S(signed(AW), name=f"wco{b}_{j}_{c}") for c in range(MC)]
                   for j in range(DR)] for b in range(2)]
        for j in range(DR):
            m.d.sync += [wc_v[j].eq(wb_v[j]), wc_addr[j].eq(wb_addr[j])]
            for c in range(MC):
                m.d.sync += wc_new[j][c].eq(wb_new[j][c])
                for b in range(2):
                    m.d.sync += wc_old[b][j][c].eq(rdata[b][j][c])
                    wp = wports[b][j][c]
                    m.d.comb += [wp.addr.eq(wc_addr[j]),
                                 wp.data.eq(Mux(first_chunk, wc_new[j][c],
                                                wc_old[b][j][c] + wc_new[j][c])),
                                 wp.en.eq(wc_v[j] & own[b])]
        # Output FIFO (5 words): the streamer steps while the FIFO has room (the step, st_go,
        # is a register computed a clock ahead from the FIFO's count), so o.ready only
        # touches the FIFO.  A step's word is on the bank's read port
        # one clock later (of_p1), in wco<b>_0_<c> the clock after, when it is pushed
        # (of_push): three clocks from a step to the word at o.  The room is counted
        # without this clock's pop (registers only: o.ready reaches no step enable); with
        # a fifth word that still steps every clock while o is never back-pressured.
        OFD = 5
        of_p1 = _S(name="of_p1", reset_less=False)
        of_push = _S(name="of_push", reset_less=False)
        of_c1, of_c = Signal.like(st_c, name="of_c1"), Signal.like(st_c, name="of_c")
        of_sel1, of_sel = _S(name="of_sel1"), _S(name="of_sel")
        m.d.sync += [of_p1.eq(st_step), of_push.eq(of_p1), of_c1.eq(st_c), of_c.eq(of_c1),
                     of_sel1.eq(st_sel), of_sel.eq(of_sel1)]
        of_mem = [_S(signed(AW), name=f"of_q{i}") for i in range(OFD)]
        of_wp = _S(range(OFD), name="of_wp", reset_less=False)
        of_rp = _S(range(OFD), name="of_rp", reset_less=False)
        of_cnt = _S(range(OFD + 1), name="of_cnt", reset_less=False)
        of_ne = _S(name="of_ne", reset_less=False)
        of_pop = self.o.valid & self.o.ready
        of_cnt_n = _S(range(OFD + 2), name="of_cnt_n")
        m.d.comb += of_cnt_n.eq(of_cnt + of_push - of_pop)
        with m.If(of_push):
            for i in range(OFD):
                with m.If(of_wp == i):
                    m.d.sync += of_mem[i].eq(_sel([_sel(wc_old[b][0], of_c) for b in range(2)],
                                                  of_sel))
            m.d.sync += of_wp.eq(Mux(of_wp == OFD - 1, 0, of_wp + 1))
        with m.If(of_pop):
            m.d.sync += of_rp.eq(Mux(of_rp == OFD - 1, 0, of_rp + 1))
        # the next clock steps if the streamer is busy and the words in the FIFO and on
        # their way (this clock's pop not counted) leave room
        m.d.sync += [of_cnt.eq(of_cnt_n), of_ne.eq(of_cnt_n != 0)]
        m.d.comb += go_n.eq(nx_busy & (of_cnt + of_push + st_step + of_p1 < OFD))
        m.d.sync += _replicate(go_n, st_go)
        m.d.comb += [self.o.valid.eq(of_ne), self.o.payload.eq(_sel(of_mem, of_rp))]

        # ---------------------------------------------------------------- issue control
        # copy sg starts in this (issue) clock (unconditional assignments: continuous in
        # Verilog, evaluated by Icarus at time 0)
        # (sg < n iff not all started; sg == g from sg's one-hot twin; isu = issuing & ~setup)
        start = ~sg_all & at_st
        pass_end = sg_all & _any(lastc[g] & gdone[g] for g in range(NG))
        at_st_n = Mux(start, dq1, st1)
        # sgl == (sg + 1 == n) as a register (the started copy is the last): loaded with sg
        sgl = _S(name="sg_last")
        sg_all_n = Mux(start, sgl, sg_all)
        for g in range(1, NG):
            sg_oh_n = Mux(start, sg_oh[g - 1], sg_oh[g])
            with m.If(adv_iss & issuing):
                m.d.sync += stp[g].eq(Mux(setup, setup_last & ~lastc[0] & dq1 if g == 1 else 0,
                                          ~pass_end & at_st_n & ~sg_all_n & sg_oh_n))
        m.d.comb += [pd_start[g].eq(adv_iss & stp[g]) for g in range(1, NG)]
        # column c's first window group of the pass, in set-up clock c + 1
        pinit_load = [issuing & setup & sk_oh[c + 1] for c in range(MC)]
        for c in range(MC):
            with m.If(pinit_load[c]):
                m.d.sync += [pinit[c][k].eq(ws[k]) for k in ws if k != "base"]
                m.d.sync += pinit[c]["base"].eq(ws_rb + ws["jns"])
        with m.If(sk_first):
            m.d.sync += [cp[f].eq(_sel(pvl[f], e)) for f in _PASS_FIELDS]
            m.d.sync += [v.eq(0) for v in ws.values()] + [ws_rb.eq(0)]
            m.d.sync += [walk_nthr.eq(_sel(pnthr, e)), walk_djn.eq(_sel(pnthr, e)),
                         walk_olast.eq(walk_ho1), walk_oyr.eq(walk_hom1)]
        # The walk steps in every clock after the pass's first set-up clock (sk_first, its
        # reset), running on past the set-up: only the set-up's pinit loads (clocks 1 .. cols)
        # read it, and those see the same steps as a walk enabled by the set-up alone.
        with m.Else():
            # one window group to the right, wrapping to the next output row
            jn1 = ws["jn"] + cp["n"]
            with m.If(~walk_djn[-1]):                   # jn >= wvn - n
                m.d.sync += [ws["jn"].eq(0), ws["jns"].eq(0), walk_djn.eq(walk_nthr)]
                with m.If(walk_olast):                  # oy == ho - 1: next image
                    m.d.sync += [ws["oy"].eq(0), ws["ty"].eq(0),
                                 ws["img"].eq(ws["img"] + 1), ws_rb.eq(ws_rb + swpi),
                                 walk_olast.eq(walk_ho1), walk_oyr.eq(walk_hom1)]
                with m.Else():
                    m.d.sync += [ws["oy"].eq(ws["oy"] + 1),
                                 ws["ty"].eq(ws["ty"] + d.stride),
                                 ws_rb.eq(ws_rb + d.swp),
                                 walk_olast.eq(walk_oyr == 1), walk_oyr.eq(walk_oyr - 1)]
            with m.Else():
                m.d.sync += [ws["jn"].eq(jn1), ws["jns"].eq(ws["jns"] + cp["ns"]),
                             walk_djn.eq(walk_djn + cp["n"])]
        # The set-up never stalls (no copy is active then, so nothing can be blocked: the
        # stall flags are 1), so its steps do not wait for them.
        with m.If(issuing):
            with m.If(setup):
                m.d.sync += [sk.eq(sk + 1), sk_oh.eq(sk_oh << 1), sk_first.eq(0)]
                m.d.sync += setup_last.eq(sk_oh[MC + 4])
                with m.If(setup_last):
                    m.d.sync += [setup.eq(0), sk.eq(0), sk_oh.eq(1), isu.eq(1)]
            with m.Elif(adv_iss):
                m.d.sync += [st_dist.eq(Mux(start, st_dist + dqm1, st_dist - 1)),
                             at_st.eq(at_st_n), st1.eq(Mux(start, dq2, st_dist == 2))]
                with m.If(start):
                    m.d.sync += [sg.eq(sg + 1), sg_oh.eq(sg_oh << 1),
                                 sgl.eq(_any(sg_oh[g] & lastc[g + 1] for g in range(NG - 1))),
                                 sg_all.eq(sg_all_n),
                                 sgs.eq(sgs + d.stride),
                                 sgoc.eq(sgoc + d.oc)]
                    for g in range(1, NG):
                        with m.If(sg_oh[g]):
                            m.d.sync += act[g].eq(1)
                # pass end: every copy has started and the last one (n - 1, which runs
                # (n - 1) D beats behind copy 0, so finishes last) finishes
                with m.If(pass_end):
                    m.d.sync += isu.eq(0)
                    with m.If(e == d.npasses - 1):
                        m.d.sync += issuing.eq(0)
                    with m.Else():
                        m.d.sync += [e.eq(e + 1), setup.eq(1), sk.eq(0), sk_oh.eq(1),
                                     sk_first.eq(1)]
        # an idle copy (g >= 1) keeps loading the start values of the next copy to start
        # (sgs, sgoc belong to copy sg), so that its start only sets act[g] (the loads of
        # the counters' registers sit in the counters' if-tree, see idle_loads below)
        def idle_loads(g, sync):
            sync += [par[g].eq(0), fk[g].eq(1), tt[g].eq(0), ttq[g].eq(tiles_is2),
                     last_k[g].eq(kq1),
                     kye[g].eq(sbox[0]["kyz"]), ice[g].eq(iccz),
                     kxe[g].eq(sbox[0]["kxz"]), kyq[g].eq(sbox[0]["kym0"]),
                     kxq[g].eq(sbox[0]["kxm0"]), icmq[g].eq(iccm0),
                     lkn[g].eq(lkn_first(sbox[0])),
                     lkx[g].eq(lkx_first(sbox[0], stp[g])),
                     glt[g].eq(tiles1), glb[g].eq(count1), gltb[g].eq(tiles1 & count1),
                     blkq[g].eq(count_is2),
                     blk[g].eq(0), kx[g].eq(0), ky[g].eq(0), ic[g].eq(0),
                     fx[g].eq(sgs), fxc[g].eq(sgs), fo_g[g].eq(sgs),
                     wbx[g].eq(wpass), wbxc[g].eq(wpass), wo_g[g].eq(wpass),
                     wblk[g].eq(wpass), cb[g].eq(cbpass),
                     gob[g].eq(sgoc + cbpass),
                     wblk_nb[g].eq(wpass + kq), cb_nb[g].eq(cbpass + cp["r"]),
                     gob_nb[g].eq(sgoc + cbpass + cp["r"])]
        for g in range(1, NG):
            with m.If(~act[g]):
                m.d.sync += [gs[g].eq(sgs), goc[g].eq(sgoc)]

        # group 0 start (last set-up clock) and column-state / slot updates
        from_init = _S()
        m.d.comb += from_init.eq(setup_last | glt[0])
        # from_init registered one clock ahead (next values of setup_last and glt[0]), one
        # replica per column (slots, column state) and one for the box / copy 0's flags.
        # It and go below are computed for each value of this clock's adv (a = 1, 0) and
        # each replica selects with its own adv replica (equal to adv outside the reset, when
        # both values agree), so adv enters only the last level and no two replicas have
        # the same input.
        def glt0_n(a):
            return Mux(pd_start[0], tiles1,
                       Mux(a & act[0] & last_k[0], Mux(glt[0], tiles1, ttq[0]), glt[0]))
        setup_last_n = Mux(issuing & setup, sk_oh[MC + 4], setup_last)
        fi_col = [_S(name=f"fi_col{c}") for c in range(MC)]
        fi_box = _S(name="fi_box")
        def load_by_adv(regs, advs, value_n):
            # each register loads value_n(1) or value_n(0) as its own adv replica says
            v0, v1 = value_n(0), value_n(1)
            m.d.sync += [r.eq(Mux(a, v1, v0)) for r, a in zip(regs, advs)]
        load_by_adv(fi_col + [fi_box], adv_col + [adv_box], lambda a: setup_last_n | glt0_n(a))
        # go: copy 0 enters a tile (or the pass's first), registered from the next state
        # (W[0] == act[0] & last_k[0]; not in the block's last tile), one replica each for
        # the box, every column's slots and every column's state
        def tile_go_n(a):
            glb0_n = Mux(pd_start[0], count1, Mux(a & act[0] & last_k[0] & glt[0],
                                                  blkq[0], glb[0]))
            W0_n = Mux(pd_start[0], kq1, Mux(a & act[0], lkx[0], W[0]))
            return setup_last_n | (W0_n & ~(glt0_n(a) & glb0_n))
        go_box = _S(name="go_box")
        go_slot = [_S(name=f"go_slot{c}") for c in range(MC)]
        go_col = [_S(name=f"go_col{c}") for c in range(MC)]
        load_by_adv([go_box] + go_slot + go_col, [adv_box] + adv_slot + adv_col, tile_go_n)
        m.d.sync += [tiles1.eq(cp["tiles"] == 1), count1.eq(cp["count"] == 1),
                     tiles_is2.eq(cp["tiles"] == 2), tiles3.eq(cp["tiles"] - 3),
                     count_is2.eq(cp["count"] == 2), count3.eq(cp["count"] - 3)]
        # per-pass advance constants (stable from the second set-up clock on)
        # (three register stages: partial sums (and a - ho, as - hos), kb, then the four
        # constant sets; stable from the fourth set-up clock on; pinit_adv, recomputed every
        # clock, is used only in the last set-up clock)
        kb0 = _S(FW, name="adv_kb0")
        kb1 = _S(FW, name="adv_kb1")
        kbp = [_S(FW, name=f"adv_kbp{i}") for i in range(3)]
        m.d.sync += [kbp[0].eq(cp["aswp"] + cp["bns"]), kbp[1].eq(cp["aswp"] + d.swp + cp["bns"]),
                     kbp[2].eq(cp["aiis"] - cp["wvns"])]
        # a - ho and as - hos registered (the image wraps' steps add one more term)
        a_ho = _S((cp["a"] - d.ho).shape(), name="adv_a_ho")
        as_hos = _S((cp["as"] - d.hos).shape(), name="adv_as_hos")
        m.d.sync += [a_ho.eq(cp["a"] - d.ho), as_hos.eq(cp["as"] - d.hos)]
        m.d.sync += [thr.eq(cp["wvn"] - cp["bn"]),
                     thi[0].eq(d.ho - cp["a"]), thi[1].eq(d.ho - cp["a"] - 1),
                     kb0.eq(kbp[0] + cp["aiis"]), kb1.eq(kbp[1] + kbp[2]),
                     k0["oy"].eq(cp["a"]), k1["oy"].eq(cp["a"] + 1),
                     k0["ty"].eq(cp["as"]), k1["ty"].eq(cp["as"] + d.stride),
                     k0["jn"].eq(cp["bn"]), k1["jn"].eq(cp["bn"] - cp["wvn"]),
                     k0["jns"].eq(cp["bns"]), k1["jns"].eq(cp["bns"] - cp["wvns"]),
                     k0["img"].eq(cp["ai"]), k1["img"].eq(cp["ai"]),
                     k0["base"].eq(kb0), k1["base"].eq(kb1),
                     k0i["oy"].eq(a_ho), k1i["oy"].eq(a_ho + 1),
                     k0i["ty"].eq(as_hos), k1i["ty"].eq(as_hos + d.stride),
                     k0i["jn"].eq(cp["bn"]), k1i["jn"].eq(cp["bn"] - cp["wvn"]),
                     k0i["jns"].eq(cp["bns"]), k1i["jns"].eq(cp["bns"] - cp["wvns"]),
                     k0i["img"].eq(cp["ai"] + 1), k1i["img"].eq(cp["ai"] + 1),
                     k0i["base"].eq(kb0 + d.iwrap), k1i["base"].eq(kb1 + d.iwrap)]
        lv_wo = [_S(signed(DIMW + 1), name=f"lv_wo{g}") for g in range(NG)]
        m.d.sync += [lv_wo[g].eq(d.wo - g) for g in range(NG)]
        # signed steps of the offsets (true values, no modulo: they fit 17 bits)
        for kk, wraps, img in ((k0, False, False), (k1, True, False), (k0i, False, True),
                               (k1i, True, True)):
            oy_step = (a_ho if img else cp["a"]) + int(wraps)
            jn_step = cp["bn"] - (cp["wvn"] if wraps else 0)
            img_step = cp["ai"] + int(img)
            for o in ("djn", TWIN["djn"]):
                m.d.sync += kk[o].eq(jn_step)
            for o in ("doy0", "doy1", TWIN["doy0"], TWIN["doy1"]):
                m.d.sync += kk[o].eq(oy_step)
            m.d.sync += kk["dimg"].eq(img_step)
            m.d.sync += [kk[f"dwo{g}"].eq(jn_step) for g in range(NG)]
        # pinit's offsets, registered from pinit and the thresholds (pinit[c] loads at set-up
        # clock c + 1, thr / thi are valid from clock 2: the offsets from c + 3), its wraps
        # registered from them (from c + 4), and pinit_adv (from c + 5, by the last set-up
        # clock cols + 5 that uses it)
        for c in range(MC):
            pin = dict(pinit[c])
            with_offsets(pin, f"pinit{c}")
            dists = {"djn": pinit[c]["jn"] - thr, "doy0": pinit[c]["oy"] - thi[0],
                     "doy1": pinit[c]["oy"] - thi[1]}
            m.d.sync += [pin[o].eq(v) for o, v in dists.items()]
            m.d.sync += [pin[TWIN[o]].eq(v) for o, v in dists.items()]
            m.d.sync += pin["dimg"].eq(pinit[c]["img"] - d.batch)
            m.d.sync += [pin[f"dwo{g}"].eq(pinit[c]["jn"] - lv_wo[g]) for g in range(NG)]
            pwr = tuple(_S(name=f"pinit{c}_{k}") for k in ("wrap", "iw0", "iw1"))
            m.d.sync += [r.eq(v) for r, v in zip(pwr, wrap_flags(pin))]
            nxt = advance(pin, pwr)
            m.d.sync += [pinit_adv[c][k].eq(nxt[k]) for k in nxt]
        src = [{k: Mux(fi_col[c], pinit[c][k], cur[c][k]) for k in ws} for c in range(MC)]
        # lane-valid bits of a slot (image < B, window jn + g < Wo): for the block's first
        # tile (pinit, static during the pass) compares against Wo - g, registered; for the
        # next tile (cur) the sign bits of its offsets

        def lane_valid(st):
            return Cat(*[(st["img"] < d.batch) & (st["jn"] < lv_wo[g]) for g in range(NG)])
        pinit_lv = [_S(NG, name=f"pinit{c}_lv") for c in range(MC)]
        for c in range(MC):
            m.d.sync += pinit_lv[c].eq(lane_valid(pinit[c]))
            cur_lv = Cat(*[cur[c]["dimg"][-1] & cur[c][f"dwo{g}"][-1] for g in range(NG)])
            src[c]["lv"] = Mux(fi_col[c], pinit_lv[c], cur_lv)
        m.d.comb += pd_start[0].eq(setup_last)
        with m.If(setup_last):
            m.d.sync += [act[0].eq(1), par[0].eq(0), fk[0].eq(1), tt[0].eq(0), ttq[0].eq(tiles_is2),
                         blk[0].eq(0), kx[0].eq(0),
                         last_k[0].eq(kq1),
                         glt[0].eq(tiles1), glb[0].eq(count1), gltb[0].eq(tiles1 & count1),
                         blkq[0].eq(count_is2),
                         ky[0].eq(0), ic[0].eq(0), fx[0].eq(0), fxc[0].eq(0), fo_g[0].eq(0),
                         wbx[0].eq(wblk[0]), wbxc[0].eq(wblk[0]), wo_g[0].eq(wblk[0]),
                         gob[0].eq(cb[0]), wblk_nb[0].eq(wblk[0] + kq),
                         cb_nb[0].eq(cb[0] + cp["r"]), gob_nb[0].eq(cb[0] + cp["r"]),
                         gs[0].eq(0), goc[0].eq(0),
                         wpass.eq(wblk[0]), cbpass.eq(cb[0]), sg.eq(1), sg_oh.eq(2),
                         sgl.eq(lastc[1] if NG > 1 else 0),
                         sg_all.eq(lastc[0]),
                         st_dist.eq(dq - 1), at_st.eq(dq1), st1.eq(dq2), sgs.eq(d.stride),
                         sgoc.eq(d.oc)]
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

        def box_stages(states, tag, loads=None):
            """The box pipeline of ``states`` (one column state per column): stage A per
            column, B1 and B2 the min / max trees, C the box sizes and offsets of both
            variants, D the choice.  ``loads``: per column, the enable of stage A (None:
            every clock)."""
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
        cbox = box_stages(cur, "cbox")
        # the block's first tile: stage A loads from the walk with pinit (set-up clock
        # c + 1 for column c), one clock earlier than from pinit, so that the box is ready
        # in the last set-up clock (cols + 5)
        ibox = box_stages([ws] * MC, "ibox", pinit_load)

        # copy 0 enters a tile: per column its own enable (own stall replica), so that no
        # single net reaches every column's slot and state registers
        tgt = Mux(setup_last, 0, ~par[0])
        with m.If(adv_box & go_box):
            for p in range(2):
                with m.If(tgt == p):
                    m.d.sync += [sbox[p][k].eq(Mux(fi_box, ibox[k], cbox[k])) for k in BX]
        for c in range(MC):
            with m.If(adv_slot[c] & go_slot[c]):
                for p in range(2):
                    with m.If(tgt == p):
                        m.d.sync += [slot[p][c][k].eq(src[c][k]) for k in SL]
            with m.If(adv_col[c] & go_col[c]):
                nxt = advance(cur[c])
                m.d.sync += [cur[c][k].eq(Mux(fi_col[c], pinit_adv[c][k], nxt[k]))
                             for k in cur[c]]

        with m.If(setup_last):                # copy 0 starts: flags of its first tile
            m.d.sync += [kye[0].eq(ibox["kyz"]), ice[0].eq(iccz), kxe[0].eq(ibox["kxz"]),
                         kyq[0].eq(ibox["kym0"]), kxq[0].eq(ibox["kxm0"]), icmq[0].eq(iccm0),
                         lkn[0].eq(lkn_first(ibox)), lkx[0].eq(lkx_first(ibox))]
        # per-group beat counters (selects are registered flags)
        for g in range(NG):
            bx = gbox[g]
            # the box of the copy's next tile: copy 0 writes it now, the others read it
            nbk = ("kyz", "kxz", "kym0", "kxm0")
            nb = ({k: Mux(fi_box, ibox[k], cbox[k]) for k in nbk} if g == 0
                  else {k: Mux(par[g], sbox[0][k], sbox[1][k]) for k in nbk})
            flags = {"kye": kye, "ice": ice, "kxe": kxe, "kyq": kyq, "icmq": icmq, "kxq": kxq}
            f = {k: v[g] for k, v in flags.items()}
            lk = last_terms(f, bx["kyz"])        # the next last_k in each case
            # the loop flags after a beat of each case
            after = {"kx": {**f, "kye": bx["kyz"], "kyq": bx["kym0"], "ice": iccz,
                            "icmq": iccm0, "kxe": kxq[g], "kxq": kx[g] == bx["kxm1"]},
                     "ic": {**f, "kye": bx["kyz"], "kyq": bx["kym0"], "ice": icmq[g],
                            "icmq": ic[g] == iccm1},
                     "ky": {**f, "kye": kyq[g], "kyq": ky[g] == bx["kym1"]}}

            def counters(g, sync, bx=bx, nb=nb, f=f, lk=lk, after=after):
                def step(new_lk, new_f, kyz, new_ltb):
                    # a beat: last_k, the loop flags that change, lkn (two beats ahead), lkx
                    nonlocal sync
                    new_lkn = lkn_after(new_lk, new_f, kyz)
                    sync += [last_k[g].eq(new_lk), lkn[g].eq(new_lkn),
                             lkx[g].eq(new_lkn & ~(new_lk & new_ltb))]
                    sync += [flags[k][g].eq(v) for k, v in new_f.items() if v is not f[k]]
                # one beat of copy g
                sync += fk[g].eq(last_k[g])
                with m.If(last_k[g]):
                    step(kq1, box_flags(nb), nb["kyz"],
                         Mux(glt[g], tiles1 & blkq[g], ttq[g] & glb[g]))
                with m.Elif(kye[g]):
                    with m.If(ice[g]):
                        step(lk["kx"], after["kx"], bx["kyz"], gltb[g])
                    with m.Else():
                        step(lk["ic"], after["ic"], bx["kyz"], gltb[g])
                with m.Else():
                    step(lk["ky"], after["ky"], bx["kyz"], gltb[g])
                with m.If(last_k[g]):
                    sync += [kx[g].eq(0), ky[g].eq(0), ic[g].eq(0), fx[g].eq(gs[g]),
                             fxc[g].eq(gs[g]), fo_g[g].eq(gs[g]), wbx[g].eq(wblk[g]),
                             wbxc[g].eq(wblk[g]), wo_g[g].eq(wblk[g]),
                             par[g].eq(~par[g])]
                    with m.If(glt[g]):
                        sync += [glt[g].eq(tiles1), glb[g].eq(blkq[g]),
                                 gltb[g].eq(tiles1 & blkq[g]),
                                 blkq[g].eq(blk[g] == count3)]
                        sync += [wbx[g].eq(wblk_nb[g]), wbxc[g].eq(wblk_nb[g]),
                                 wo_g[g].eq(wblk_nb[g])]
                        sync += [tt[g].eq(0), ttq[g].eq(tiles_is2), blk[g].eq(blk[g] + 1),
                                 wblk[g].eq(wblk_nb[g]), cb[g].eq(cb_nb[g]),
                                 gob[g].eq(gob_nb[g]), wblk_nb[g].eq(wblk_nb[g] + kq),
                                 cb_nb[g].eq(cb_nb[g] + cp["r"]),
                                 gob_nb[g].eq(gob_nb[g] + cp["r"])]
                        with m.If(glb[g]):
                            sync += [act[g].eq(0), lkx[g].eq(0)]
                    with m.Else():
                        sync += [tt[g].eq(tt[g] + 1), gob[g].eq(gob[g] + cp["noc"]),
                                 glt[g].eq(ttq[g]), gltb[g].eq(ttq[g] & glb[g]),
                                 ttq[g].eq(tt[g] == tiles3)]
                with m.Elif(kye[g]):
                    sync += ky[g].eq(0)
                    with m.If(ice[g]):
                        sync += [ic[g].eq(0), kx[g].eq(kx[g] + 1), fx[g].eq(fx[g] + 1),
                                 fxc[g].eq(fx[g] + 1), fo_g[g].eq(fx[g] + 1),
                                 wbx[g].eq(wbx[g] + cqkh), wbxc[g].eq(wbx[g] + cqkh),
                                 wo_g[g].eq(wbx[g] + cqkh)]
                    with m.Else():
                        sync += [ic[g].eq(ic[g] + 1), fxc[g].eq(fxc[g] + d.hwp),
                                 fo_g[g].eq(fxc[g] + d.hwp), wbxc[g].eq(wbxc[g] + d.kh),
                                 wo_g[g].eq(wbxc[g] + d.kh)]
                with m.Else():
                    sync += [ky[g].eq(ky[g] + 1), fo_g[g].eq(fo_g[g] + d.wp),
                             wo_g[g].eq(wo_g[g] + 1)]

            # three enables per copy, each from its own stall replica: offsets and loop
            # counters / flags, weight and output offsets, tile and block state
            parts = ([fk, last_k, lkn, lkx, kye, ice, kxe, kyq, icmq, kxq, kx, ky, ic, fx, fxc,
                      fo_g, par],
                     [wbx, wbxc, wo_g, wblk, cb, gob, wblk_nb, cb_nb, gob_nb],
                     [glt, glb, gltb, blkq, tt, ttq, blk, act])
            # (a copy is active only while the pass issues: act[g] implies isu)
            for part, rep in zip(parts, adv_cp[g]):
                sync = _Only(m, [v[g] for v in part])
                with m.If(act[g]):
                    with m.If(rep):
                        counters(g, sync)
                if g:
                    with m.Else():
                        idle_loads(g, sync)

        # ---------------------------------------------------------------- loaders
        # Both loaders walk nested counters, one word per transfer (weights: kx, ky, ic, row
        # of the block, block of the pass, output channel; features: xp, yp, ic, image).  So
        # that no enable or select is a deep function of the counters, every counter level
        # keeps two registered flags, e (at its last value) and p (one step before it), and
        # the ANDs of the e flags of the lower levels are registers too (tw*/tx*, each loaded
        # with the AND of the next e values): each counter's enable is then a transfer AND
        # one registered flag, and every wrap loads registered constants.
        # The IDLE state as one-hot flags, replicated for fan-out (the descriptor load reaches
        # about 2000 flip-flops): each copy is loaded from its own value (stay idle while no
        # descriptor comes, enter from HANDOFF; see the end), so no two have the same input
        # and Yosys keeps them apart; all are 1 after a reset, like the FSM.  Copies
        # 0..NDG-1 enable one slice of d each, copy NDG the other loads of a descriptor
        # transfer and the layer's loader constants, copy NDG + 1 the passes' constants,
        # copy NDG + 2 the CHUNK flags.
        NDG = 12
        idle_r = [_S(init=1, name=f"idle_r{k}", reset_less=False) for k in range(NDG + 3)]
        c_take = [_S(name=f"c_take{k}") for k in range(NDG + 3)]
        m.d.comb += [c_take[k].eq(idle_r[k] & self.c.valid) for k in range(NDG + 3)]
        dsrc = self.c.payload
        # The sizes' constants (size == 1, size == 2, size - 3) are registered from the
        # descriptor when it is taken (from the c payload, so they are valid in the CHUNK
        # state of the first chunk).

        def size_consts(size, width, tag, ce=c_take[NDG]):
            """Registers (size == 1, size == 2, size - 3): the e / p values of a level after
            a wrap, and the compare for p (cnt + 1 == size - 2 iff cnt == size - 3)."""
            regs = (_S(name=f"ld_{tag}_s1"), _S(name=f"ld_{tag}_s2"),
                    _S(width, name=f"ld_{tag}_m3"))
            with m.If(ce):
                m.d.sync += [regs[0].eq(size == 1), regs[1].eq(size == 2),
                             regs[2].eq((size - 3)[:width])]
            return regs

        def level(cnt, tag, adv, consts, init, wrap=None, top=False):
            """A counter level advancing when ``adv``: counts up to ``size - 1``, then wraps
            to 0 (a ``top`` level ends the load instead); ``consts`` = size_consts of the
            size (the compare for p), ``wrap`` = (e, p) after a wrap (default: consts'
            size == 1, size == 2; others for a size that changes at the wrap); ``init`` =
            (condition, (e, p)): start at 0.  Returns e and its next value when ``adv``."""
            e, p = _S(name=f"ld_e{tag}"), _S(name=f"ld_p{tag}")
            s1, s2 = wrap if wrap is not None else consts[:2]
            with m.If(init[0]):
                m.d.sync += [cnt.eq(0), e.eq(init[1][0]), p.eq(init[1][1])]
            with m.If(adv):
                if top:
                    m.d.sync += [cnt.eq(cnt + 1), e.eq(p), p.eq(cnt == consts[2])]
                else:
                    with m.If(e):
                        m.d.sync += [cnt.eq(0), e.eq(s1), p.eq(s2)]
                    with m.Else():
                        m.d.sync += [cnt.eq(cnt + 1), e.eq(p), p.eq(cnt == consts[2])]
            return e, (p if top else Mux(e, s1, p))

        # one-hot state flags of the FSM below (registered, loaded by its transitions)
        c_end = _S(name="c_end", reset_less=False)            # the compute phase ends
        last_chunk = _S(name="last_chunk")                    # qrem == 0
        chunk_go = c_take[NDG + 2] | (c_end & ~last_chunk)
        chunk_on = _S(name="ld_chunk_on", reset_less=False)   # state CHUNK
        m.d.sync += chunk_on.eq(chunk_go)
        # copies of chunk_on for the loaders' own registers (weight counters, pass
        # constants, feature counters; ring-loaded during the reset, see _replicate: a
        # spurious load after a reset only sets registers that CHUNK loads again)
        ch_w, ch_a, ch_p, ch_x, ch_s = (_S(name=f"ld_chunk_{k}") for k in "wapxs")
        m.d.sync += _replicate(chunk_go, [ch_w, ch_a, ch_p, ch_x, ch_s])
        wl_on = _S(name="ld_wl_on", reset_less=False)         # state WLOAD
        xl_on = _S(name="ld_xl_on", reset_less=False)         # state XLOAD
        kw_c = size_consts(dsrc.kw, 8, "kw")
        kh_c = size_consts(dsrc.kh, 8, "kh")
        oc_c = size_consts(dsrc.oc, 16, "oc")
        wp_c = size_consts(dsrc.wp, DIMW + 1, "wp")
        hp_c = size_consts(dsrc.hp, DIMW + 1, "hp")
        b_c = size_consts(dsrc.batch, 16, "b")
        icq_f = size_consts(dsrc.icq, 16, "icq")
        icq_l = size_consts(dsrc.icq_last, 16, "icql")
        # the chunk's input channels (loaded in CHUNK)
        icq_c = (_S(name="ld_ic_s1"), _S(name="ld_ic_s2"), _S(16, name="ld_ic_m3"))
        icq_n = [Mux(last_chunk, a, b) for a, b in zip(icq_l, icq_f)]
        with m.If(ch_w):
            m.d.sync += [r.eq(v) for r, v in zip(icq_c, icq_n)]

        # weight loader: C order (o, ic, ky, kx); row bank address
        # blk * kq + kx * q * kh + ic * kh + ky, the word written into the banks of rows
        # g * R + li of the copies g < n of its pass.  Per pass, registered from the
        # descriptor like the above: gR[g] = g * R (shift-and-add; n * R <= rows, so LIW
        # bits hold every row of a copy in use), n and size_consts of R and count; the
        # loader keeps copies of the current pass's (p0) and the next pass's (p1), loaded in
        # CHUNK and at a pass change (p1 from the pass after it, index lnx, saturating at
        # the last pass: the passes after it are not used).
        LIW = _bits(MR)
        # the weight stream enters through a skid buffer: w_take (the enable of every
        # loader counter) is the AND of two local flip-flops, and w.ready is a register
        # (the buffer fills while the loader waits, so a stream that never idles loses no
        # clock)
        m.submodules.w_skid = w_skid = SkidBuffer(signed(cfg.weight_width))
        wiring.connect(m, wiring.flipped(self.w), w_skid.i)
        w_take = _S(name="ld_w_take")
        m.d.comb += [w_take.eq(wl_on & w_skid.o.valid), w_skid.o.ready.eq(wl_on)]

        def pass_consts(i):
            r = getattr(dsrc, f"p{i}_r")
            r6 = r[:LIW + 1]
            grs = []
            ce = c_take[NDG + 1]
            for g in range(NG):
                reg = _S(LIW, name=f"ld_p{i}_gr{g}")
                with m.If(ce):
                    m.d.sync += reg.eq(sum(r6 << b for b in range(g.bit_length())
                                           if (g >> b) & 1) if g else 0)
                grs.append(reg)
            n = _S(4, name=f"ld_p{i}_n")
            with m.If(ce):
                m.d.sync += n.eq(getattr(dsrc, f"p{i}_n"))
            return (grs, n, size_consts(r, LIW, f"p{i}_r", ce),
                    size_consts(getattr(dsrc, f"p{i}_count"), 16, f"p{i}_c", ce))
        pk = [pass_consts(i) for i in range(NP)]
        pq = []
        for k in range(2):
            pq.append(([_S(LIW, name=f"ld_q{k}_gr{g}") for g in range(NG)],
                       _S(4, name=f"ld_q{k}_n"),
                       (_S(name=f"ld_q{k}_rs1"), _S(name=f"ld_q{k}_rs2"),
                        _S(LIW, name=f"ld_q{k}_rm3")),
                       (_S(name=f"ld_q{k}_cs1"), _S(name=f"ld_q{k}_cs2"),
                        _S(16, name=f"ld_q{k}_cm3"))))
        lnx = _S(range(max(NP, 2)), name="ld_lnx")

        def flat(entry):
            gr, n, rc, cc = entry
            return list(gr) + [n] + list(rc) + list(cc)

        lkx, lky, lic = _S(8, name="lkx"), _S(8, name="lky"), _S(16, name="lic")
        elb_hold, eoc_hold = _S(name="ld_elb_hold"), _S(name="ld_eoc_hold")
        li, lb, lo = _S(LIW, name="li"), _S(16, name="lb"), _S(16, name="lo")
        lbase, la_x, la_c = _S(WW, name="lbase"), _S(WW, name="la_x"), _S(WW, name="la_c")
        lrow = [_S(LIW, name=f"lrow{g}") for g in range(NG)]    # g * R + li
        # tw2 = ekx & eky, tw3 = tw2 & eic (an output channel's last word), tw4 = tw3 & eli
        # (a block's) as registers; a pass's last word tw4 & elb and the chunk's last weight
        # tw3 & eoc are ANDed into the enables (a LUT4: wl_on, w.valid and two flags)
        tw2, tw3, tw4 = (_S(name=f"ld_tw{k}") for k in ("2", "3", "4"))
        tw5, twx = tw4 & elb_hold, tw3 & eoc_hold
        # their values in CHUNK, registered with the descriptor (first / last chunk)
        ti2 = _S(name="ld_ti2")
        ti3, ti4 = ([_S(name=f"ld_ti{k}{c}") for c in "fl"] for k in (3, 4))
        with m.If(c_take[NDG]):
            t2 = (dsrc.kw == 1) & (dsrc.kh == 1)
            m.d.sync += ti2.eq(t2)
            for j, icq in enumerate((dsrc.icq, dsrc.icq_last)):
                m.d.sync += [ti3[j].eq(t2 & (icq == 1)),
                             ti4[j].eq(t2 & (icq == 1) & (dsrc.p0_r == 1))]
        p0, p1 = pq
        ekx, ekx_w = level(lkx, "kx", w_take, kw_c, (ch_w, kw_c))
        eky, eky_w = level(lky, "ky", w_take & ekx, kh_c, (ch_w, kh_c))
        eic, eic_w = level(lic, "ic", w_take & tw2, icq_c, (ch_w, icq_n))
        # a row wraps into the next block (same pass) or, if the block was the pass's last,
        # into the next pass (elb: the block level's e flag, defined below)
        eli, eli_w = level(li, "li", w_take & tw3, p0[2], (ch_w, pk[0][2]),
                           tuple(Mux(elb_hold, a, b) for a, b in zip(p1[2][:2], p0[2][:2])))
        elb, elb_w = level(lb, "lb", w_take & tw4, p0[3], (ch_w, pk[0][3]), p1[3][:2])
        m.d.comb += elb_hold.eq(elb)
        eoc, eoc_w = level(lo, "oc", w_take & tw3, oc_c, (ch_w, oc_c), top=True)
        m.d.comb += eoc_hold.eq(eoc)
        with m.If(ch_p):
            m.d.sync += [a.eq(b) for a, b in zip(flat(p0), flat(pk[0]))]
            m.d.sync += [lrow[g].eq(pk[0][0][g]) for g in range(NG)]
        with m.If(ch_p | (w_take & tw5)):
            # p1 <= pass lnx (set to 1 when a chunk starts)
            m.d.sync += [a.eq(_sel([flat(pk[i])[j] for i in range(NP)], lnx))
                         for j, a in enumerate(flat(p1))]
            m.d.sync += lnx.eq(Mux(lnx == NP - 1, lnx, lnx + 1))
        with m.If(chunk_go):
            m.d.sync += lnx.eq(min(1, NP - 1))
        with m.If(ch_a):
            m.d.sync += [tw2.eq(ti2), tw3.eq(Mux(last_chunk, ti3[1], ti3[0])),
                         tw4.eq(Mux(last_chunk, ti4[1], ti4[0]))]
            m.d.sync += [lbase.eq(0), la_x.eq(0), la_c.eq(0)]
        with m.Elif(w_take):
            # the next e of each level: its value after an advance where the lower levels
            # all end, else unchanged
            nx_kx = ekx_w
            nx_ky = Mux(ekx, eky_w, eky)
            nx_ic = Mux(tw2, eic_w, eic)
            nx_li = Mux(tw3, eli_w, eli)
            t2 = nx_kx & nx_ky
            t3 = t2 & nx_ic
            m.d.sync += [tw2.eq(t2), tw3.eq(t3), tw4.eq(t3 & nx_li)]
        with m.If(w_take):
            m.d.sync += la_x.eq(Mux(ekx, 0, la_x + cqkh))
        with m.If(w_take & tw2):
            m.d.sync += la_c.eq(Mux(eic, 0, la_c + d.kh))
        with m.If(w_take & tw3):
            # next row of the block: + 1; next block: the pass's g * R; next pass: its g * R
            m.d.sync += [lrow[g].eq(Mux(tw4, Mux(elb, p1[0][g], p0[0][g]), lrow[g] + 1))
                         for g in range(NG)]
        with m.If(w_take & tw4):
            m.d.sync += lbase.eq(lbase + kq)
        with m.If(w_take & tw5):
            m.d.sync += [a.eq(b) for a, b in zip(flat(p0), flat(p1))]
        w_en = _S()
        wl_addr = _S(WW, name="wl_addr")
        wl_data = _S(signed(cfg.weight_width), name="wl_data")
        wl_hit = _S(MR, name="wl_hit")
        m.d.comb += w_en.eq(w_take)
        m.d.sync += [wl_addr.eq(lbase + la_x + la_c + lky), wl_data.eq(w_skid.o.payload),
                     wl_hit.eq(Cat(*[w_en & _any((lrow[g] == r) & (g < p0[1])
                                                 for g in range(NG)) for r in range(MR)]))]
        for r in range(MR):
            wp = wmem[r].write_port()
            m.d.comb += [wp.addr.eq(wl_addr), wp.data.eq(wl_data), wp.en.eq(wl_hit[r])]

        # feature loader: a0 = xp, a1 = yp, a2 = ic, a3 = image over the padded maps,
        # borders written as zeros; stream order (image, ic, yp, xp), banks
        # [ic][image][Hp][Wp]; set to (0, 0, 0, 0) in CHUNK, runs after the chunk's last weight
        a0, a1 = _S(DIMW + 1, name="a0"), _S(DIMW + 1, name="a1")
        a2, a3 = _S(16, name="a2"), _S(16, name="a3")
        ximg = _S(FW, name="ximg")         # bank offset of the next image's first map
        xcst = _S(FW, name="xcst")         # next channel of the same image: (B-1)HpWp + 1
        addr = _S(FW, name="addr")
        padh, padw = _S(DIMW + 1, name="ld_padh"), _S(DIMW + 1, name="ld_padw")
        m.d.sync += [padh.eq(d.pad + d.h), padw.eq(d.pad + d.w)]
        # inx / iny: a0 / a1 inside the map; interior = inx & iny, its own register;
        # nx_in / ny_in: the same for a0 + 1 / a1 + 1 (the next position), so that the flags
        # load registers; in1x / in1y: position 1 inside (the value after a wrap)
        inx, iny = _S(name="ld_inx"), _S(name="ld_iny")
        nx_in, ny_in = _S(name="ld_nx_in"), _S(name="ld_ny_in")
        pad0, in1x, in1y = _S(name="ld_pad0"), _S(name="ld_in1x"), _S(name="ld_in1y")
        pad_d = dsrc.pad
        with m.If(c_take[NDG]):
            m.d.sync += [pad0.eq(pad_d == 0), in1x.eq((pad_d <= 1) & (pad_d + dsrc.w > 1)),
                         in1y.eq((pad_d <= 1) & (pad_d + dsrc.h > 1))]
        interior = _S(name="ld_interior")
        step = ~interior | self.x.valid
        x_take = _S(name="ld_x_take")
        m.d.comb += x_take.eq(xl_on & step)
        x_start = _S(name="ld_x_start")      # the chunk's last weight is taken
        m.d.comb += x_start.eq(w_take & twx)
        # txy = ex0 & ey1 (a map row's last word), txc = txy & ec2 (an image's last),
        # txb = txc & eb3 (the chunk's last)
        txy, txc, txb = (_S(name=f"ld_t{k}") for k in ("xy", "xc", "xb"))
        ex0, ex0_w = level(a0, "x", x_take, wp_c, (ch_x, wp_c))
        ey1, ey1_w = level(a1, "y", x_take & ex0, hp_c, (ch_x, hp_c))
        ec2, ec2_w = level(a2, "c", x_take & txy, icq_c, (ch_x, icq_n))
        eb3, eb3_w = level(a3, "b", x_take & txc, b_c, (ch_x, b_c), top=True)
        with m.If(ch_x):
            t = wp_c[0] & hp_c[0]
            m.d.sync += [txy.eq(t), txc.eq(t & icq_n[0]), txb.eq(t & icq_n[0] & b_c[0]),
                         inx.eq(pad0), iny.eq(pad0), interior.eq(pad0),
                         nx_in.eq(in1x), ny_in.eq(in1y)]
            m.d.sync += [addr.eq(0), ximg.eq(d.imgw), xcst.eq(d.hwp - d.imgw + 1)]
        with m.Elif(x_take):
            nx_y = Mux(ex0, ey1_w, ey1)
            nx_c = Mux(txy, ec2_w, ec2)
            nx_b = Mux(txc, eb3_w, eb3)
            t = ex0_w & nx_y
            m.d.sync += [txy.eq(t), txc.eq(t & nx_c), txb.eq(t & nx_c & nx_b)]
            inx_n = Mux(ex0, pad0, nx_in)
            iny_n = Mux(ex0, Mux(ey1, pad0, ny_in), iny)
            m.d.sync += [inx.eq(inx_n), iny.eq(iny_n), interior.eq(inx_n & iny_n),
                         nx_in.eq(Mux(ex0, in1x, (a0 + 2 >= d.pad) & (a0 + 2 < padw)))]
            with m.If(ex0):
                m.d.sync += ny_in.eq(Mux(ey1, in1y, (a1 + 2 >= d.pad) & (a1 + 2 < padh)))
            m.d.sync += addr.eq(Mux(txc, ximg, Mux(txy, addr + xcst, addr + 1)))
        with m.If(x_take & txc):
            m.d.sync += ximg.eq(ximg + d.imgw)
        f_addr, f_en = _S(FW, name="f_addr"), _S(name="f_en")
        f_data = _S(signed(cfg.data_width), name="f_data")
        m.d.comb += [f_en.eq(x_take), f_addr.eq(addr),
                     f_data.eq(Mux(interior, self.x.payload, 0))]
        # feature bank writes registered per column (one clock later; the banks are read
        # only after the pass set-up, cols + 6 clocks after the last write)
        for c in range(MC):
            fa_c = _S(FW, name=f"fw{c}_addr")
            fd_c = _S(signed(cfg.data_width), name=f"fw{c}_data")
            fe_c = _S(name=f"fw{c}_en")
            m.d.sync += [fa_c.eq(f_addr), fd_c.eq(f_data), fe_c.eq(f_en)]
            for p in range(2):
                wp = fmem[c][p].write_port()
                m.d.comb += [wp.addr.eq(fa_c), wp.data.eq(fd_c), wp.en.eq(fe_c)]

        # ---------------------------------------------------------------- main FSM
        m.d.comb += self.s.payload.eq(Cat(busy_lo, busy_hi, ccyc))
        # the FSM's one-hot flags and the loads of its transitions in the loaders' region
        # (conditions on registered flags, not on the state decode)
        x_done = _S(name="ld_x_done")          # the chunk's last feature word is taken
        m.d.comb += x_done.eq(x_take & txb)
        with m.If(chunk_on):
            m.d.sync += [iccl.eq(Mux(last_chunk, d.icq_last, d.icq) - 1),
                         kq.eq(Mux(last_chunk, d.kq_last, d.kq)),
                         dq.eq(Mux(last_chunk, d.dq_last, d.dq)),
                         cqkh.eq(Mux(last_chunk, d.qkh_last, d.qkh)), wl_on.eq(1)]
        with m.If(x_start):
            m.d.sync += [wl_on.eq(0), xl_on.eq(1)]
        with m.If(x_done):
            m.d.sync += [xl_on.eq(0), issuing.eq(1), setup.eq(1), sk.eq(0), sk_oh.eq(1),
                         sk_first.eq(1),
                         e.eq(0), wblk[0].eq(0), cb[0].eq(0), pd_L.eq(0), zL.eq(0), L_gt1.eq(0)]
            m.d.sync += [x.eq(0) for x in pd_F + zF + F_gt1]
        # The compute phase ends when nothing issues and the MAC pipeline, the captures and
        # the drain are empty.  Their valid bits and flags are chains of registers, each
        # loaded unconditionally, so "empty" is registered one clock ahead from their inputs
        # (keep these in step with the assignments of i_act, the pipeline stages' v, pending,
        # wa_v, wb_v and wc_v above): pipe_idle = none of i_act and the stages' v;
        # drain_idle = none of pending, wa_v, wb_v, wc_v (reset: all of them are 0).
        pipe_idle = _S(init=1, name="pipe_idle", reset_less=False)
        drain_idle = _S(init=1, name="drain_idle", reset_less=False)
        m.d.sync += [
            pipe_idle.eq(~_any(act[g] & adv for g in range(NG)) & ~_any(i_act)
                         & ~_any(st["v"] for st in pipe[:-1])),
            drain_idle.eq(~newpend.any() & ~_any(working & (drem > j) for j in range(DR))
                          & ~_any(wa_v) & ~_any(wb_v))]
        d_bits, p_bits = d.as_value(), self.c.payload.as_value()
        for k in range(NDG):
            lo, hi = len(d_bits) * k // NDG, len(d_bits) * (k + 1) // NDG
            with m.If(c_take[k]):
                m.d.sync += d_bits[lo:hi].eq(p_bits[lo:hi])
        with m.If(c_take[NDG]):
            m.d.sync += [qrem.eq(self.c.payload.chunks - 1),
                         last_chunk.eq(self.c.payload.chunks == 1),
                         first_chunk.eq(1)]
        # the COMPUTE state as a one-hot flag; the compute phase's end
        cmp_on = _S(name="cmp_on", reset_less=False)
        # (registered: one clock after the phase is empty, so that the loaders' CHUNK flags
        # and the FSM read a flip-flop, not the AND of four flags from four regions)
        m.d.sync += c_end.eq(cmp_on & ~c_end & ~issuing & pipe_idle & drain_idle)
        with m.If(x_done):
            m.d.sync += cmp_on.eq(1)
        with m.If(cmp_on):
            m.d.sync += ccyc.eq(ccyc + 1)
        # the stats counters start in the clock after the layer's first CHUNK state (the
        # previous layer's MAC pipeline has been idle for a few clocks by then, its count
        # sent; nothing counts in WLOAD), from a register: the clear's reset net is long
        stat_clr = _S(name="stat_clr", reset_less=False)
        m.d.sync += stat_clr.eq(ch_s & first_chunk)
        with m.If(stat_clr):
            m.d.sync += [busy_lo.eq(0), busy_cy.eq(0), busy_hi.eq(0), ccyc.eq(0)]
        with m.If(c_end):
            m.d.sync += cmp_on.eq(0)
            with m.If(~last_chunk):
                m.d.sync += [qrem.eq(qrem - 1), first_chunk.eq(0), last_chunk.eq(qrem == 1)]
        with m.FSM(name="ctl") as fsm:
            with m.State("IDLE"):
                with m.If(self.c.valid):
                    m.next = "CHUNK"
            with m.State("CHUNK"):
                m.next = "WLOAD"
            with m.State("WLOAD"):
                with m.If(x_start):
                    m.next = "XLOAD"
            with m.State("XLOAD"):
                with m.If(x_done):
                    m.next = "COMPUTE"
            with m.State("COMPUTE"):
                with m.If(c_end):
                    with m.If(last_chunk):
                        m.next = "STAT"
                    with m.Else():
                        m.next = "CHUNK"
            with m.State("STAT"):
                with m.If(self.s.ready):
                    m.next = "HANDOFF"
            with m.State("HANDOFF"):
                # (the streamer's loads and the bank swap: `handoff` in the streamer)
                with m.If(~st_busy):
                    m.next = "IDLE"
        # Port handshakes as plain assignments (Icarus does not evaluate an always @*
        # block at time 0 if none of its inputs ever changes).
        # handoff (HANDOFF state and the streamer idle) as a register, from the next state:
        # the FSM enters HANDOFF from STAT when s is taken and stays while the streamer is
        # busy; the streamer is busy in the clock after a handoff
        m.d.sync += _replicate(((fsm.ongoing("STAT") & self.s.ready)
                                | (fsm.ongoing("HANDOFF") & st_busy)) & ~nx_busy, handoff)
        enter_idle = fsm.ongoing("HANDOFF") & ~st_busy
        m.d.sync += [r.eq((r & ~self.c.valid) | enter_idle) for r in idle_r]
        m.d.comb += [in_compute.eq(cmp_on),
                     self.c.ready.eq(fsm.ongoing("IDLE")),
                     self.x.ready.eq(xl_on & interior),
                     self.s.valid.eq(fsm.ongoing("STAT"))]
        return m

    def port_info(self) -> dict:
        """Per top-level member: format and protocol (for the manifest)."""
        cfg = self.cfg
        return {
            "c": {"format": None, "protocol": "valid/ready stream, one layer descriptor per "
                  "layer (fields: gen.conv.descriptor_fields, first field in the LSBs)"},
            "w": {"format": f"int{cfg.weight_width}",
                  "protocol": "valid/ready stream, per chunk Oc x icq x kh x kw weights, C order"},
            "x": {"format": f"int{cfg.data_width}",
                  "protocol": "valid/ready stream, per chunk B x icq x H x W features, "
                              "C order"},
            "o": {"format": f"int{cfg.acc_width}",
                  "protocol": "valid/ready stream, B x Oc x Ho x Wo exact sums per layer, "
                              "C order"},
            "s": {"format": None, "protocol": "valid/ready stream, per layer: busy MAC-cycles "
                  "(bits 0..47), compute cycles (bits 48..79)"},
        }

    def manifest_extra(self) -> dict:
        return {"descriptor": [{"name": n, "width": w} for n, w in descriptor_fields(self.cfg)],
                "array": {"rows": self.cfg.rows, "cols": self.cfg.cols,
                          "max_groups": self.cfg.max_groups}}
