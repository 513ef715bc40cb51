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

from amaranth.hdl import Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from gen.conv import ConvConfig, descriptor_fields
from hdl.conv._util import _any
from hdl.conv.columns import Columns
from hdl.conv.control import STAT_BUSY_BITS, Control
from hdl.conv.copy import Copy
from hdl.conv.drain import Drain
from hdl.conv.issue import COPY0, IssueControl
from hdl.conv.layouts import pass_regs_layout
from hdl.conv.loaders import Loaders, weight_layout
from hdl.conv.pipeline import MacPipeline
from hdl.conv.stall import IssueStall
from hdl.conv.streamer import OutputFifo, Streamer

__all__ = ["ConvArray", "STAT_BUSY_BITS"]

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
    w : In(stream.Signature(weight_layout(cfg)))
        Weights, integers: per chunk ``Oc x icq x kh x kw`` in C order, or (``w_lanes``
        ``L > 1``) beats of ``L`` weights, one row group of a pass at one bank address
        each (:mod:`gen.conv.wstream`).  The stream
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
            "w": In(stream.Signature(weight_layout(cfg))),
            "x": In(stream.Signature(signed(cfg.data_width))),
            "o": Out(stream.Signature(signed(cfg.acc_width))),
            "s": Out(stream.Signature(unsigned(STAT_BUSY_BITS + 32))),
        })

    latency = 0   # the array is job-oriented: see gen.conv.layer_cycles
    ii = 1

    def elaborate(self, platform):
        m = Module()
        cfg, NG = self.cfg, self.cfg.max_groups
        pl = pass_regs_layout(cfg)
        m.submodules.control = control = Control(cfg, self.desc_layout)
        wiring.connect(m, wiring.flipped(self.c), control.c)
        wiring.connect(m, control.s, wiring.flipped(self.s))
        # the FSM state at the top level, under its old name (waveform cases watch it)
        ctl_state = Signal(control.state.shape(), name="ctl_state")
        m.d.comb += ctl_state.eq(control.state)
        m.submodules.issue = issue = IssueControl(cfg, self.desc_layout, pl)
        m.submodules.stall = stall = IssueStall(cfg, len(issue.cp.r))
        m.submodules.columns = columns = Columns(cfg, self.desc_layout, pl)
        copies = [Copy(cfg, g, self.desc_layout, pl) for g in range(NG)]
        for g, copy in enumerate(copies):
            m.submodules[f"copy{g}"] = copy
        m.submodules.macs = macs = MacPipeline(cfg)
        m.submodules.drain = drain = Drain(cfg)
        m.submodules.streamer = streamer = Streamer(cfg, self.desc_layout)
        m.submodules.out_fifo = out_fifo = OutputFifo(cfg)
        m.submodules.loaders = loaders = Loaders(cfg, self.desc_layout)
        self._wire_issue(m, control, loaders, issue, stall, columns, copies)
        self._wire_compute(m, control, loaders, issue, stall, columns, copies, macs, drain)
        self._wire_output(m, control, drain, streamer, out_fifo)
        self._wire_loaders(m, control, loaders, macs)
        return m

    def _wire_issue(self, m, control, loaders, issue, stall, columns, copies):
        """The issue stage: issue control, stall, column states and the copies."""
        d, c0 = control.d, copies[0]
        m.d.comb += [issue.d.eq(d), issue.x_done.eq(loaders.x_done),
                     issue.iccl.eq(control.iccl), issue.kq.eq(control.kq),
                     issue.dq.eq(control.dq), issue.adv_iss.eq(stall.adv_iss),
                     issue.adv_box.eq(stall.adv_box), issue.adv_slot.eq(stall.adv_slot),
                     issue.adv_col.eq(stall.adv_col), issue.wblk0.eq(c0.wblk),
                     issue.cb0.eq(c0.cb), issue.w0.eq(stall.w[0]),
                     issue.done.eq(Cat(*[cp.done for cp in copies]))]
        m.d.comb += [getattr(issue.copy0, f).eq(getattr(c0, f)) for f in COPY0.members]
        m.d.comb += [stall.r.eq(issue.cp.r), stall.act.eq(Cat(*[cp.act for cp in copies])),
                     stall.lkx.eq(Cat(*[cp.lkx for cp in copies])), stall.stp.eq(issue.stp),
                     stall.setup_last.eq(issue.setup_last), stall.kq1.eq(issue.k.kq1),
                     stall.clear.eq(loaders.x_done)]
        m.d.comb += [columns.d.eq(d), columns.cp.eq(issue.cp), columns.e.eq(issue.e),
                     columns.sk_first.eq(issue.sk_first),
                     columns.pinit_load.eq(issue.pinit_load), columns.cqkh.eq(control.cqkh),
                     columns.fi_col.eq(issue.fi_col), columns.fi_box.eq(issue.fi_box),
                     columns.go_box.eq(issue.go_box), columns.go_slot.eq(issue.go_slot),
                     columns.go_col.eq(issue.go_col), columns.adv_box.eq(stall.adv_box),
                     columns.adv_slot.eq(stall.adv_slot), columns.adv_col.eq(stall.adv_col),
                     columns.tgt.eq(Mux(issue.setup_last, 0, ~c0.par))]
        for g, cp in enumerate(copies):
            m.d.comb += [cp.adv.eq(stall.adv_cp[g]), cp.start.eq(issue.start[g]),
                         cp.clear.eq(loaders.x_done if g == 0 else 0),
                         cp.stp.eq(issue.stp[g]), cp.d.eq(d), cp.cp.eq(issue.cp),
                         cp.k.eq(issue.k), cp.kq.eq(control.kq), cp.cqkh.eq(control.cqkh),
                         cp.ibox.eq(columns.ibox), cp.cbox.eq(columns.cbox),
                         cp.fi_box.eq(issue.fi_box)]
            m.d.comb += [x for p in range(2) for x in (cp.sbox[p].eq(columns.sbox[p]),
                                                       cp.lv[p].eq(columns.lv[g][p]))]

    def _wire_compute(self, m, control, loaders, issue, stall, columns, copies, macs, drain):
        """The MAC pipeline behind the issue stage, the drain and the end of the compute
        phase."""
        MR, MC, NG = self.cfg.rows, self.cfg.cols, self.cfg.max_groups
        m.d.comb += [macs.adv.eq(stall.adv_i), macs.setup.eq(issue.setup),
                     macs.r.eq(issue.cp.r), macs.n.eq(issue.cp.n),
                     macs.first.eq(copies[0].first)]
        for g, cp in enumerate(copies):
            m.d.comb += [macs.act[g].eq(cp.act), macs.last_k[g].eq(cp.last_k),
                         macs.fk[g].eq(cp.fk), macs.par[g].eq(cp.par),
                         macs.foff[g].eq(cp.foff), macs.waddr[g].eq(cp.waddr),
                         macs.gob[g].eq(cp.gob), macs.lanev[g].eq(cp.lanev)]
        m.d.comb += [macs.base[c][p].eq(columns.base[c][p]) for c in range(MC) for p in range(2)]
        m.d.comb += control.pc.eq(macs.pc)
        m.d.comb += [drain.cap_next.eq(macs.cap_next), drain.cap.eq(macs.cap),
                     drain.cap_n.eq(macs.cap_n), drain.cap_r.eq(macs.cap_r),
                     drain.cap_rle.eq(macs.cap_rle), drain.first_chunk.eq(control.first_chunk)]
        m.d.comb += [drain.cap_gob_next[g].eq(macs.cap_gob_next[g]) for g in range(NG)]
        m.d.comb += [drain.shadow[r][c].eq(macs.shadow[r][c]) for r in range(MR) for c in range(MC)]
        # The compute phase ends when nothing issues and the MAC pipeline, the captures and
        # the drain are empty ("empty" registered one clock ahead from their inputs).
        m.d.comb += [
            control.pipe_idle_n.eq(~_any(cp.act & stall.adv for cp in copies) & macs.idle),
            control.drain_idle_n.eq(drain.idle_n), control.issuing.eq(issue.issuing)]

    def _wire_output(self, m, control, drain, streamer, out_fifo):
        """The streamer (handoff of the output banks, stream order) and the output FIFO."""
        MC = self.cfg.cols
        m.d.comb += [streamer.d.eq(control.d), streamer.room.eq(out_fifo.room),
                     out_fifo.step.eq(streamer.step), out_fifo.col.eq(streamer.col),
                     out_fifo.bank.eq(streamer.bank)]
        wiring.connect(m, out_fifo.o, wiring.flipped(self.o))
        m.d.comb += [drain.own.eq(streamer.own), drain.st_addr.eq(streamer.addr)]
        m.d.comb += [out_fifo.words[b][c].eq(drain.words[b][c]) for b in range(2) for c in range(MC)]
        m.d.comb += [control.stream_busy.eq(streamer.busy),
                     streamer.stat_take.eq(control.stat_take),
                     streamer.in_handoff.eq(control.in_handoff)]

    def _wire_loaders(self, m, control, loaders, macs):
        """The weight and feature loaders and their bank writes."""
        MC = self.cfg.cols
        wiring.connect(m, wiring.flipped(self.w), loaders.w)
        wiring.connect(m, wiring.flipped(self.x), loaders.x)
        m.d.comb += [loaders.dsrc.eq(self.c.payload), loaders.d.eq(control.d),
                     loaders.take.eq(control.take), loaders.take_pass.eq(control.take_pass),
                     loaders.chunk_go.eq(control.chunk_go), loaders.chunk.eq(control.chunk),
                     loaders.last_chunk.eq(control.last_chunk),
                     loaders.wl_on.eq(control.wl_on), loaders.xl_on.eq(control.xl_on),
                     loaders.kq.eq(control.kq), loaders.cqkh.eq(control.cqkh)]
        m.d.comb += [macs.w_addr.eq(loaders.w_addr), macs.w_hit.eq(loaders.w_hit)]
        if self.cfg.w_lanes == 1:
            m.d.comb += macs.w_data.eq(loaders.w_data)
        else:
            m.d.comb += [a.eq(b) for a, b in zip(macs.w_data, loaders.w_data)]
        m.d.comb += [x for c in range(MC) for x in (macs.f_addr[c].eq(loaders.f_addr[c]),
                                                     macs.f_data[c].eq(loaders.f_data[c]),
                                                     macs.f_en[c].eq(loaders.f_en[c]))]
        m.d.comb += [control.x_start.eq(loaders.x_start), control.x_done.eq(loaders.x_done)]

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
