# SPDX-License-Identifier: Apache-2.0
"""The conv array's control: the main FSM (IDLE, CHUNK, WLOAD, XLOAD, COMPUTE, STAT,
HANDOFF), the descriptor register, the per-chunk constants and the stats counters."""

from amaranth.hdl import Cat, Module, Mux, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from gen.conv import ConvConfig
from hdl.conv._util import _S, _bits, _replicate

__all__ = ["Control", "STAT_BUSY_BITS", "FSM_STATES"]

STAT_BUSY_BITS = 48
FSM_STATES = ("IDLE", "CHUNK", "WLOAD", "XLOAD", "COMPUTE", "STAT", "HANDOFF")

# The IDLE state as one-hot flags, replicated for fan-out (the descriptor load reaches about
# 2000 flip-flops): copies 0..NDG-1 enable one slice of d each, copy NDG the other loads of
# a descriptor transfer and the layer's loader constants, copy NDG + 1 the passes'
# constants, copy NDG + 2 the CHUNK flags.
NDG = 12


class Control(wiring.Component):
    """Layer and chunk sequencing of the conv array.

    A descriptor is taken in IDLE (``c.ready`` is the IDLE state) into the register ``d``;
    then per input-channel chunk: CHUNK (the chunk's constants load), WLOAD (until the
    loaders' ``x_start``), XLOAD (until ``x_done``), COMPUTE (until the issue stage, the
    MAC pipeline and the drain are idle); after the last chunk STAT (the stats word on
    ``s``) and HANDOFF (until the streamer is idle: it then takes the layer).

    Parameters
    ----------
    cfg : :class:`gen.conv.ConvConfig`
    desc_layout : :class:`amaranth.lib.data.StructLayout`

    Members
    -------
    c : In(stream.Signature(desc_layout))
        Layer descriptors (``c.ready`` = IDLE).
    s : Out(stream.Signature(unsigned(80)))
        Per layer: busy MAC-cycles (bits 0..47), compute cycles (bits 48..79); ``s.valid``
        = STAT.
    x_start, x_done : In(1)
        From :class:`hdl.conv.loaders.Loaders`: WLOAD / XLOAD end.
    issuing : In(1)
        The issue stage runs (set at ``x_done``, cleared after the last pass).
    pipe_idle_n, drain_idle_n : In(1)
        Next values of "the MAC pipeline is empty" / "the drain is empty" (registered here).
    stream_busy : In(1)
        The streamer is busy (HANDOFF waits for it).
    pc : In(unsigned(bits(rows * cols)))
        MAC enables of this clock (the busy count's increment).
    d : Out(desc_layout)
        The descriptor register (loaded in slices, each by its own IDLE replica).
    take, take_pass : Out(1)
        The descriptor is taken (two replicas, for the loaders).
    chunk_go : Out(1)
        The next clock is CHUNK.
    chunk : Out(4)
        CHUNK replicas for the loaders (weights, weight flags, passes, features).
    last_chunk, first_chunk : Out(1)
        The chunk is the layer's last / first.
    wl_on, xl_on, computing : Out(1)
        One-hot flags of WLOAD, XLOAD, COMPUTE.
    iccl : Out(16)
        Input channels of the chunk, less one.
    kq, dq, cqkh : Out(24)
        Beats per tile, stagger between copies and ``icq * kh`` of the chunk.
    stat_take, in_handoff : Out(1)
        STAT with ``s.ready``; the HANDOFF state (for the streamer).
    state : Out(3)
        The FSM state, indices of :data:`FSM_STATES`.

    Latency/throughput
    ------------------
    One clock in CHUNK; ``c_end`` one clock after the compute phase is empty; STAT waits
    for ``s.ready``.
    """

    def __init__(self, cfg: ConvConfig, desc_layout: data.StructLayout):
        if not isinstance(cfg, ConvConfig):
            raise TypeError(f"cfg must be a ConvConfig, not {cfg!r}")
        self.cfg = cfg
        self.desc_layout = desc_layout
        super().__init__({
            "c": In(stream.Signature(desc_layout)),
            "s": Out(stream.Signature(unsigned(STAT_BUSY_BITS + 32))),
            "x_start": In(1), "x_done": In(1), "issuing": In(1),
            "pipe_idle_n": In(1), "drain_idle_n": In(1), "stream_busy": In(1),
            "pc": In(_bits(cfg.rows * cfg.cols)),
            "d": Out(desc_layout),
            "take": Out(1), "take_pass": Out(1), "chunk_go": Out(1), "chunk": Out(4),
            "last_chunk": Out(1), "first_chunk": Out(1),
            "wl_on": Out(1), "xl_on": Out(1), "computing": Out(1),
            "iccl": Out(16), "kq": Out(24), "dq": Out(24), "cqkh": Out(24),
            "stat_take": Out(1), "in_handoff": Out(1), "state": Out(3),
        })

    def elaborate(self, platform):
        m = Module()
        x_start, x_done, issuing, st_busy = (self.x_start, self.x_done, self.issuing,
                                             self.stream_busy)
        d = _S(self.desc_layout, name="d")
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
        # The IDLE state as one-hot flags, replicated for fan-out: each copy is loaded from
        # its own value (stay idle while no descriptor comes, enter from HANDOFF; see the
        # end), so no two have the same input and Yosys keeps them apart; all are 1 after a
        # reset, like the FSM.
        idle_r = [_S(init=1, name=f"idle_r{k}", reset_less=False) for k in range(NDG + 3)]
        c_take = [_S(name=f"c_take{k}") for k in range(NDG + 3)]
        m.d.comb += [c_take[k].eq(idle_r[k] & self.c.valid) for k in range(NDG + 3)]
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
        # (the upper half takes the carry one clock later: the count is complete five
        # clocks after the last accumulation, and the stats leave at least five clocks after
        # it: the last beat's capture drains for three clocks, then one clock to STAT)
        busy_sum = busy_lo + self.pc
        m.d.sync += [busy_lo.eq(busy_sum[:24]), busy_cy.eq(busy_sum[24]),
                     busy_hi.eq(busy_hi + busy_cy)]
        m.d.comb += self.s.payload.eq(Cat(busy_lo, busy_hi, ccyc))
        # the FSM's one-hot flags and the loads of its transitions in the loaders' region
        # (conditions on registered flags, not on the state decode)
        with m.If(chunk_on):
            m.d.sync += [iccl.eq(Mux(last_chunk, d.icq_last, d.icq) - 1),
                         kq.eq(Mux(last_chunk, d.kq_last, d.kq)),
                         dq.eq(Mux(last_chunk, d.dq_last, d.dq)),
                         cqkh.eq(Mux(last_chunk, d.qkh_last, d.qkh)), wl_on.eq(1)]
        with m.If(x_start):
            m.d.sync += [wl_on.eq(0), xl_on.eq(1)]
        with m.If(x_done):
            m.d.sync += xl_on.eq(0)
        # The compute phase ends when nothing issues and the MAC pipeline, the captures and
        # the drain are empty ("empty" registered one clock ahead from their inputs: see
        # pipe_idle_n / drain_idle_n in hdl.conv.array; reset: all of them are 0).
        pipe_idle = _S(init=1, name="pipe_idle", reset_less=False)
        drain_idle = _S(init=1, name="drain_idle", reset_less=False)
        m.d.sync += [pipe_idle.eq(self.pipe_idle_n), drain_idle.eq(self.drain_idle_n)]
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
        enter_idle = fsm.ongoing("HANDOFF") & ~st_busy
        m.d.sync += [r.eq((r & ~self.c.valid) | enter_idle) for r in idle_r]
        m.d.comb += [in_compute.eq(cmp_on),
                     self.c.ready.eq(fsm.ongoing("IDLE")),
                     self.s.valid.eq(fsm.ongoing("STAT"))]
        m.d.comb += [self.stat_take.eq(fsm.ongoing("STAT") & self.s.ready),
                     self.in_handoff.eq(fsm.ongoing("HANDOFF")), self.state.eq(fsm.state)]
        m.d.comb += [self.d.eq(d), self.take.eq(c_take[NDG]), self.take_pass.eq(c_take[NDG + 1]),
                     self.chunk_go.eq(chunk_go), self.chunk.eq(Cat(ch_w, ch_a, ch_p, ch_x)),
                     self.last_chunk.eq(last_chunk), self.first_chunk.eq(first_chunk),
                     self.wl_on.eq(wl_on), self.xl_on.eq(xl_on), self.computing.eq(cmp_on),
                     self.iccl.eq(iccl), self.kq.eq(kq), self.dq.eq(dq), self.cqkh.eq(cqkh)]
        return m
