# SPDX-License-Identifier: Apache-2.0
"""The conv array's exact cycle model: the compute phase of each chunk (staggered copies,
captures waiting for the drain) and the whole layer's timeline under unstalled streams."""

import numpy as np

from gen.conv.layout import _tile_list, stagger_delay
from gen.conv.wstream import chunk_weight_beats
from gen.core.fixed import REQUANT_LATENCY

__all__ = ["pass_setup_cycles", "compute_cycles", "stall_free_cycles", "stagger_cycles",
           "layer_cycles", "layers_timeline", "shell_cycles", "SHELL_EXTRA_CYCLES"]

# The accelerator shell (hdl/conv/shell.py) at full rate adds 3 clocks to the array's own
# timeline (descriptor from the registers, the AXI4-Stream adapters on the way in and out),
# whatever ``bus_words`` (checked at 1, 3 and 4 words per beat) and ``w_lanes`` (whose
# direct weight port passes a skid buffer instead of the beat-to-word adapter).
SHELL_EXTRA_CYCLES = 3


# Pipeline of the array (hdl/conv.py, "pipeline"): a beat issued in cycle t registers its
# copy's offsets (t+1), the read-port offsets (t+2), the bank addresses (t+3: the banks
# are read), the bank data next to the banks (t+5), the selected feature and the weight
# multiples (t+6), the multiplier's partial products (t+7) and the product (t+8), which
# reaches the accumulators, where a tile's last beat is captured.
ISSUE_TO_ACC = 8
# Pass set-up: the controller walks the window groups of the pass's first tile (one column
# per clock) and loads the pass registers before the first beat.
def pass_setup_cycles(cfg) -> int:
    return cfg.cols + 6


# Clocks from the last drain step of a chunk (its shadow rows read) to the end of its
# compute phase (the rows selected in two steps, the bank read, the add and write, the
# registered end flag).
_DRAIN_TO_END = 6


def _chunk_events(sched, q):
    """Nominal (stall-free) capture clock of every (tile, copy) of one chunk, in order:
    ``(clock, group, pass index, first of pass, drain clocks)``, and the issue length."""
    layer, cfg = sched.layer, sched.cfg
    kk = layer.kh * layer.kw
    dly = stagger_delay(layer, q)
    tiles = _tile_list(sched)
    events = []
    clk, at = 0, 0
    for pi, p in enumerate(sched.passes):
        m = p.count * p.tiles
        ks = [q * b[1] * b[3] for _, b in tiles[at:at + m]]
        at += m
        p0 = clk + pass_setup_cycles(cfg)
        cum = np.cumsum(ks)
        dg = -(-p.r // cfg.drain_rows)
        for t in range(m):
            for g in range(p.n):
                events.append((p0 + g * dly + int(cum[t]) - 1 + ISSUE_TO_ACC, g, pi,
                               t == 0 and g == 0, dg))
        clk = p0 + (p.n - 1) * dly + int(cum[-1])
    return events


def _chunk_compute_cycles(sched, q):
    """Cycles of one chunk's compute phase, exact for the RTL.

    The copies of a pass are staggered by :func:`stagger_delay` beats; each (tile, copy)
    ends with a *capture* of the copy's ``R`` accumulator rows into their shadow registers,
    which the drain writes out ``drain_rows`` per clock (``ceil(R / drain_rows)`` clocks),
    one capture after the other in capture order.  A capture waits (the whole array stalls)
    while the same copy's previous capture is not yet drained; the first capture of a pass
    waits until everything before it is drained (the rows change groups between passes).
    """
    events = _chunk_events(sched, q)
    shift, df_last = 0, -1
    df_group = {}                     # (pass, group) -> last drain clock of its latest capture
    i = 0
    while i < len(events):
        j = i
        while j < len(events) and events[j][0] == events[i][0]:
            j += 1
        clock = events[i][0] + shift
        for nominal, g, pi, first, dg in events[i:j]:
            need = df_last if first else df_group.get((pi, g), -1)
            clock = max(clock, need)
        shift = clock - events[i][0]
        for nominal, g, pi, first, dg in events[i:j]:
            start = max(clock + 1, df_last + 1)
            df_last = start + dg - 1
            df_group[(pi, g)] = df_last
        i = j
    return df_last + _DRAIN_TO_END


def compute_cycles(sched) -> int:
    """Compute-phase cycles of the whole layer (all chunks), as counted by the RTL."""
    return sum(_chunk_compute_cycles(sched, q) for q in sched.chunk_sizes)


def stall_free_cycles(sched) -> int:
    """Closed form of :func:`compute_cycles` when no capture ever waits for the drain:
    per chunk, per pass ``set-up + (n - 1) D_q + sum of the tiles' beats``, plus the
    pipeline, the last copy's drain and the end of the phase.  Equal to
    :func:`compute_cycles` unless a tile is shorter than the drain of its copies."""
    layer, cfg = sched.layer, sched.cfg
    tiles = _tile_list(sched)
    total = 0
    for q in sched.chunk_sizes:
        total += sum(q * b[1] * b[3] for _, b in tiles)
        total += sum(pass_setup_cycles(cfg) + (p.n - 1) * stagger_delay(layer, q)
                     for p in sched.passes)
        total += -(-sched.passes[-1].r // cfg.drain_rows) + ISSUE_TO_ACC - 1 + _DRAIN_TO_END
    return total


def stagger_cycles(sched) -> int:
    """Issue clocks the stagger adds to the layer: ``(n - 1) * D`` per pass and chunk."""
    return sum((p.n - 1) * stagger_delay(sched.layer, q)
               for q in sched.chunk_sizes for p in sched.passes)


# FSM overheads in cycles (measured once, then pinned by tests): see hdl/conv.py.
_CFG_TO_CHUNK = 1
_STAT_TO_OUT = 5   # stats -> handoff -> first step, then 3 clocks through the output FIFO


def layer_cycles(sched) -> dict:
    """Exact RTL timeline with streams that are never idle and never back-pressured
    (per chunk: its weight transfers, :func:`gen.conv.chunk_weight_beats`, then the
    ``B x q`` padded maps of the batch).

    Returns cycle offsets relative to the config transfer: ``stat`` (the stats transfer),
    ``first_out`` (first output transfer) and ``last_out``.
    """
    layer = sched.layer
    hp, wp = layer.h + 2 * layer.pad, layer.w + 2 * layer.pad
    t = _CFG_TO_CHUNK
    kk = layer.kh * layer.kw
    for q in sched.chunk_sizes:
        t += 1                                 # chunk set-up state
        t += chunk_weight_beats(sched, q)      # weight load (one transfer per clock)
        t += layer.batch * q * hp * wp         # feature load (padding written as zeros)
        t += _chunk_compute_cycles(sched, q)
    stat = t
    first_out = stat + _STAT_TO_OUT
    last_out = first_out + layer.oc * layer.positions - 1
    return {"stat": stat, "first_out": first_out, "last_out": last_out}


# Layers back to back (ping-pong output banks): after a layer's STAT the FSM waits in HANDOFF
# until the streamer has sent the previous layer's last sum, then takes the next descriptor
# (IDLE); the streamer starts the layer after the handoff.
_STAT_TO_NEXT = 2        # stat -> next descriptor transfer, streamer idle
_LAST_TO_NEXT = -1       # previous layer's last sum -> next descriptor, streamer busy
_LAST_TO_FIRST = 2       # previous layer's last sum -> this layer's first, streamer busy


def layers_timeline(scheds) -> list:
    """Exact RTL timeline of layers run back to back with streams that are never idle and
    never back-pressured: per layer ``{"cfg", "stat", "first_out", "last_out"}`` in clocks
    from the first layer's descriptor transfer.

    A layer's loads and compute overlap the previous layer's output stream (the ping-pong
    output banks): its descriptor is taken two clocks after the previous layer's ``stat``,
    or, when the streamer is still sending the layer before that, one clock before that
    layer's last sum; its own stream starts five clocks after its ``stat`` or two clocks
    after the previous layer's last sum, whichever is later.
    """
    out, cfg, prev_last, memo = [], 0, None, {}
    for sched in scheds:
        if id(sched) not in memo:
            memo[id(sched)] = layer_cycles(sched)
        one = memo[id(sched)]
        stat = cfg + one["stat"]
        first = stat + _STAT_TO_OUT
        if prev_last is not None:
            first = max(first, prev_last + _LAST_TO_FIRST)
        last = first + sched.layer.oc * sched.layer.positions - 1
        out.append({"cfg": cfg, "stat": stat, "first_out": first, "last_out": last})
        # the next descriptor: after this layer's handoff, which waits for the streamer
        cfg = stat + _STAT_TO_NEXT
        if prev_last is not None:
            cfg = max(cfg, prev_last + _LAST_TO_NEXT)
        prev_last = last
    return out


def shell_cycles(sched, layers: int = 1) -> int:
    """End-to-end clocks of one job through the accelerator shell at full rate (every
    AXI4-Stream beat offered and taken at once): from its first input beat to its last
    output beat, both counted; the shell's ``CYCLES`` counter reads one more (it counts from
    the clock after the start).  A job runs ``layers`` layers of ``sched`` back to back
    (the ``LAYERS`` register; :func:`layers_timeline`).  Exact (tb/conv/test_shell.py), for
    any ``bus_words``: the shell still moves one feature and one output word per clock into
    and out of the array (and one weight transfer: ``w_lanes`` weights); a requantisation
    stage (``rq_width``) adds its ``REQUANT_LATENCY`` when the biases arrive before the
    first sum.  Idle inputs and back-pressure add clocks this does not model."""
    rq = REQUANT_LATENCY if sched.cfg.rq_width else 0
    return layers_timeline([sched] * layers)[-1]["last_out"] + SHELL_EXTRA_CYCLES + rq
