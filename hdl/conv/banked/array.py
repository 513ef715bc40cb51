# SPDX-License-Identifier: Apache-2.0
"""The banked MAC array: one job per descriptor, loads overlapped with compute, wide
streams (see :mod:`gen.conv.banked` for the job, the layouts and the cycle model)."""

from amaranth.hdl import Module, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from gen.conv.banked import BankedConfig, descriptor_widths
from hdl.conv.banked.banks import (FEATURE_READ_LATENCY, WEIGHT_READ_LATENCY, FeatureBanks,
                                   WeightBanks)
from hdl.conv.banked.grid import MacGrid
from hdl.conv.banked.loaders import FeatureLoader, WeightLoader, desc_layout
from hdl.conv.banked.outbanks import CaptureInfo, OutputBanks
from hdl.conv.banked.sequencer import Sequencer

__all__ = ["BankedArray", "STAT_LAYOUT"]

STAT_LAYOUT = data.StructLayout({"busy": unsigned(48), "beats": unsigned(32)})


class BankedArray(wiring.Component):
    """A ``rows x cols`` output-stationary MAC array with banked, double-buffered feature
    and weight memories and ``bus_words``-wide streams.

    Members
    -------
    c : In(stream.Signature(desc_layout(cfg)))
        One descriptor per job (:func:`gen.conv.banked.descriptor_value`); taken when no job
        is active.
    w : In(stream.Signature(ArrayLayout(signed(weight_width), bus_words)))
        Weights (:func:`gen.conv.banked.weight_beats`).
    x : In(stream.Signature(ArrayLayout(signed(data_width), bus_words)))
        Features (:func:`gen.conv.banked.feature_beats`).
    o : Out(stream.Signature(ArrayLayout(signed(acc_width), bus_words)))
        Sums, strip by strip (:func:`gen.conv.banked.assemble`).
    s : Out(stream.Signature(STAT_LAYOUT))
        One word per job once its last strip is in the output banks: busy MAC-cycles and
        beats issued; the job ends when it is taken.
    """

    latency = 0   # job-oriented: see gen.conv.banked.run_cycles
    ii = 1

    def __init__(self, cfg: BankedConfig):
        self.cfg = cfg
        super().__init__({
            "c": In(stream.Signature(desc_layout(cfg))),
            "w": In(stream.Signature(data.ArrayLayout(signed(cfg.weight_width),
                                                      cfg.bus_words))),
            "x": In(stream.Signature(data.ArrayLayout(signed(cfg.data_width),
                                                      cfg.bus_words))),
            "o": Out(stream.Signature(data.ArrayLayout(signed(cfg.acc_width),
                                                       cfg.bus_words))),
            "s": Out(stream.Signature(STAT_LAYOUT)),
        })

    def port_info(self) -> dict:
        """Per top-level member: format and protocol (for the manifest)."""
        cfg = self.cfg
        return {
            "c": {"format": None, "protocol": "valid/ready stream, one job descriptor per "
                  "job (fields: gen.conv.banked.descriptor_fields, first field in the LSBs)"},
            "w": {"format": f"{cfg.bus_words} x int{cfg.weight_width}",
                  "protocol": "valid/ready stream, bus_words weights a transfer "
                              "(gen.conv.banked.weight_beats)"},
            "x": {"format": f"{cfg.bus_words} x int{cfg.data_width}",
                  "protocol": "valid/ready stream, bus_words features a transfer, a beat "
                              "never spans two rows (gen.conv.banked.feature_beats)"},
            "o": {"format": f"{cfg.bus_words} x int{cfg.acc_width}",
                  "protocol": "valid/ready stream, per strip R x P exact sums in (channel, "
                              "position) order, the strip's last beat padded "
                              "(gen.conv.banked.assemble)"},
            "s": {"format": None, "protocol": "valid/ready stream, per job: busy MAC-cycles "
                  "(bits 0..47), beats issued (bits 48..79)"},
        }

    def manifest_extra(self) -> dict:
        cfg = self.cfg
        return {"descriptor": [{"name": n, "width": w}
                               for n, w in descriptor_widths(cfg).items()],
                "array": {"rows": cfg.rows, "cols": cfg.cols, "copies": cfg.copies,
                          "banks": cfg.nb, "bus_words": cfg.bus_words}}

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        cw = cfg.count_width
        assert FEATURE_READ_LATENCY == WEIGHT_READ_LATENCY
        m.submodules.wl = wl = WeightLoader(cfg)
        m.submodules.xl = xl = FeatureLoader(cfg)
        m.submodules.seq = seq = Sequencer(cfg)
        m.submodules.fbanks = fb = FeatureBanks(cfg)
        m.submodules.wbanks = wb = WeightBanks(cfg)
        m.submodules.grid = grid = MacGrid(cfg)
        m.submodules.out = ob = OutputBanks(cfg)
        d = Signal(desc_layout(cfg))
        run = Signal()
        start = Signal()
        drained_job = Signal(cw)
        busy = Signal(48)
        beats = Signal(32)
        # drained_job == d.gs as a flag registered from the count's next value (clock rate:
        # no compare between the count and the statistics' valid)
        jdone = Signal()
        m.d.comb += [start.eq(self.c.valid & ~run), self.c.ready.eq(~run)]
        with m.If(start):
            m.d.sync += [d.eq(self.c.payload), run.eq(1), drained_job.eq(0), busy.eq(0),
                         beats.eq(0), jdone.eq(self.c.payload.gs == 0)]
        with m.Else():
            with m.If(ob.drained):
                m.d.sync += [drained_job.eq(drained_job + 1),
                             jdone.eq((drained_job + 1)[:cw] == d.gs)]
            m.d.sync += [busy.eq(busy + seq.busy), beats.eq(beats + seq.v)]
        m.d.comb += [self.s.valid.eq(run & jdone),
                     self.s.payload.busy.eq(busy), self.s.payload.beats.eq(beats)]
        with m.If(self.s.valid & self.s.ready):
            m.d.sync += run.eq(0)
        for ld, src in ((wl, self.w), (xl, self.x)):
            wiring.connect(m, wiring.flipped(src), ld.src)
            m.d.comb += [ld.start.eq(start), ld.run.eq(run), ld.d.eq(d), ld.dn.eq(self.c.payload),
                         ld.fin.eq(seq.fin), ld.fin1.eq(seq.fin1),
                         ld.fin_inc.eq(seq.fin_inc)]
        m.d.comb += [seq.start.eq(start), seq.run.eq(run), seq.d.eq(d), seq.dn.eq(self.c.payload),
                     seq.wdone.eq(wl.done), seq.xdone.eq(xl.done), seq.streamed.eq(ob.streamed),
                     seq.sinc.eq(ob.sinc)]
        # loads into the banks
        m.d.comb += [wb.w_en.eq(wl.en), wb.w_addr.eq(wl.w_addr), wb.w_j.eq(wl.w_j),
                     wb.w_data.eq(self.w.payload), wb.nl.eq(d.nl), wb.R.eq(d.R),
                     fb.w_en.eq(xl.en), fb.w_set.eq(xl.w_set), fb.w_f.eq(xl.w_f),
                     fb.w_data.eq(self.x.payload)]
        # beats: issue registers (t + 1) -> bank data (t + 6) -> grid
        m.d.comb += [fb.r_set.eq(seq.fset), fb.r_f.eq(seq.fa), fb.r_x.eq(seq.fx),
                     wb.r_addr.eq(seq.wa)]
        flags = [seq.v, seq.first, seq.last]
        for _ in range(FEATURE_READ_LATENCY):
            nxt = [Signal() for _ in flags]
            m.d.sync += [n.eq(f) for n, f in zip(nxt, flags)]
            flags = nxt
        m.d.comb += [grid.v.eq(flags[0]), grid.first.eq(flags[1]), grid.last.eq(flags[2]),
                     grid.feat.eq(fb.r_data), grid.wt.eq(wb.r_data), grid.nl.eq(d.nl),
                     grid.shift.eq(ob.shift), grid.shift_n.eq(ob.shift_n)]
        # capture info travels with the last beat: issue registers (t + 1) -> cap (t + 10)
        # no reset (the drain reads it at cap only, which travels with it and resets):
        # fewer loads on the reset net
        info = seq.info
        for _ in range(FEATURE_READ_LATENCY + 4):
            nxt = Signal(CaptureInfo(cfg), reset_less=True)
            m.d.sync += nxt.eq(info)
            info = nxt
        m.d.comb += [ob.cap.eq(grid.cap), ob.info.eq(info), ob.taps.eq(grid.taps),
                     ob.obeats.eq(d.obeats), ob.oset_load.eq(seq.oset_load),
                     ob.oset.eq(seq.oset)]
        wiring.connect(m, ob.o, wiring.flipped(self.o))
        return m
