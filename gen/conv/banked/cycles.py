# SPDX-License-Identifier: Apache-2.0
"""Exact cycle model of the banked MAC array (:class:`hdl.conv.banked.BankedArray`).

:func:`run_cycles` predicts, from the jobs and each port's explicit pattern (the stream
bench's: a source raises ``valid`` in a clock its pattern allows and holds the beat until
it is taken; a sink is ready in the clocks its pattern allows), the clock of every transfer
on ``c``, ``w``, ``x``, ``o`` and ``s`` and the statistics words.  Clocks are the bench's
(clock 0 is the first after reset).  The rules, each one a register of the RTL:

* **Descriptor**: taken in clock ``T0`` when no job is active (``run`` low); the job's
  counters restart at the end of ``T0`` and the loaders act from ``T0 + 1``; the sequencer
  first walks the ``copies x cols`` window columns' starting positions, one a clock, and
  starts rounds from ``T0 + 1 + copies x cols``.
* **Loaders** (weights, features; independent): blocks in order (a step's weights or
  features; with ``res`` the weights of chunk ``q`` of group ``g`` once), ``ready`` from the
  clock after the previous block's last beat, but not before the block's set is free: a
  step ``l`` block needs ``fin >= l - 1`` (a resident block ``(g, q)``, ``g > 0``:
  ``fin >= (g S - 1) Q + q + 1``, the previous group's last step of chunk ``q``), where
  ``fin`` counts a step two clocks after its last beat leaves the beat counters.
* **Rounds**: round ``j`` starts (``go``) in clock ``u_j``: its ``K`` beats are in the
  counters in ``u_j + 1 .. u_j + K``; ``u_j >= u_{j-1} + P_{j-1}`` with
  ``P = K + max(0, max(dr, 2) - K_next)`` (``dr = R`` channels to drain, one a clock; and a
  sum that the next chunk reads back must be written first); a step's
  first round also waits for the clock after its weights' and features' last beats and,
  for a strip's first chunk, for the clock after the streamer's last read of the strip two
  before (its output set), or of the strip before when this strip or that one fills both
  sets (``span``).
* **Capture and drain**: the shadow rows hold round ``j``'s sums from ``C = u_j + K + 11``
  (``CAPTURE``: the beat's issue registers, the feature banks' offset and address
  registers, the bank read, the words' and the rotated window's registers, the grid's
  operand, partial-product and product registers, the accumulator, the capture); row ``k`` is drained in
  clock ``C + k`` and written at the end of ``C + k + 3``; a strip's last round counts it
  drained at the end of ``W = C + dr + 1``.
* **Streamer**: strip by strip (all jobs in order), started in the clock after it is
  drained and after the previous strip's last read; from the next clock it reads a beat in
  every clock in which the beats read and not yet taken at ``o`` are fewer than
  :data:`hdl.conv.banked.outbanks.OUT_FIFO_DEPTH`; a beat read in clock ``v`` enters the
  output FIFO at the end of ``v + 4`` and is offered at ``o`` from ``v + 6`` (or the clock
  after the previous beat is taken).
* **Statistics**: ``s`` is valid from the clock after the job's last strip is drained; the
  job ends when it is taken, and the next descriptor may be taken the clock after.
"""

from gen.core.stimulus import Pattern

from gen.conv.banked.job import BankedConfig, BankedJob, steps

__all__ = ["run_cycles", "shell_job_cycles", "CAPTURE", "STREAM_OFFER", "FIFO_DEPTH"]

CAPTURE = 11         # go + K (last beat in the counters) -> shadow rows hold the sums
STREAM_OFFER = 6     # streamer read in clock v -> offered at o from v + 6
FIFO_DEPTH = 8       # hdl.conv.banked.outbanks.OUT_FIFO_DEPTH


class _Source:
    """The bench's source: raises ``valid`` by its pattern when not holding a beat, holds it
    until taken."""

    def __init__(self, pattern: Pattern, record: bool):
        self.pattern, self.last, self.record = pattern, -1, record
        self.cycles, self.first = [], None

    def take(self, start: int, n: int) -> int:
        """``ready`` from clock ``start`` until ``n`` beats are taken; the last one's clock."""
        t = self.last
        if self.pattern.kind == "always":
            first = max(t + 1, start)
            t = first + n - 1
            if self.record:
                self.cycles += range(first, t + 1)
        else:
            first = None
            for _ in range(n):
                t = max(_next(self.pattern, t + 1), start)
                first = t if first is None else first
                self.cycles.append(t)
        if self.first is None and n:
            self.first = first
        self.last = t
        return t


class _Streamer:
    """The streamer and the output FIFO against the ``o`` sink's pattern."""

    def __init__(self, pattern: Pattern, record: bool):
        self.pattern, self.record = pattern, record
        self.free_at = 0           # the clock the streamer may start its next strip
        self.reads, self.taken = [], []
        self.count, self.last_take = 0, None

    def stream(self, drained: int, beats: int) -> int:
        """Stream a strip counted drained from clock ``drained``; return its last read."""
        c = max(drained, self.free_at) + 1
        if self.pattern.kind == "always":
            # a beat is taken STREAM_OFFER clocks after its read: the FIFO never fills
            if self.record:
                self.reads += range(c, c + beats)
                self.taken += range(c + STREAM_OFFER, c + beats + STREAM_OFFER)
            self.count += beats
            self.last_take = c + beats - 1 + STREAM_OFFER
            self.free_at = c + beats
            return c + beats - 1
        for _ in range(beats):
            k = len(self.reads)
            if k >= FIFO_DEPTH:         # room: fewer than FIFO_DEPTH read and not taken
                c = max(c, self.taken[k - FIFO_DEPTH] + 1)
            self.reads.append(c)
            offer = c + STREAM_OFFER
            if k:
                offer = max(offer, self.taken[k - 1] + 1)
            self.taken.append(_next(self.pattern, offer))
            c += 1
        self.count += beats
        self.last_take = self.taken[-1]
        self.free_at = self.reads[-1] + 1
        return self.reads[-1]


def _next(pattern: Pattern, c: int) -> int:
    """The first clock ``>= c`` that ``pattern`` allows."""
    if pattern.kind != "always":
        while not pattern.at(c):
            c += 1
    return c


def _rounds(job: BankedJob, cfg: BankedConfig, q: int):
    """``(K, dr, busy cells)`` of each round of a step of chunk ``q``."""
    K = job.k_of(q)
    return [(K, job.R, job.R * (job.lastw if j == job.rounds - 1 else job.W))
            for j in range(job.rounds)]


def run_cycles(jobs, cfg: BankedConfig, patterns: dict | None = None,
               record: bool = True, inputs_from: int = 0) -> dict:
    """The transfer clocks of ``jobs`` (a list of :class:`BankedJob`) run back to back.

    ``patterns``: ``{port: Pattern}`` for ``c``, ``w``, ``x`` (valid) and ``o``, ``s``
    (ready); a missing port transfers whenever it can.  ``inputs_from``: ``w`` and ``x``
    raise ``valid`` no earlier than this clock.  Returns ``{"c", "w", "x", "o",
    "s": [clock of every transfer], "stats": [(busy, beats) per job], "jobs": [per job
    {"T0", "stat", "out_beats"}], "first_in", "last_out", "beats": {port: transfers}}``;
    with ``record`` False the per-transfer lists of ``w``, ``x`` and ``o`` stay empty (at
    full rate the model then takes time per round, not per beat)."""
    pat = {p: (patterns or {}).get(p) or Pattern.always() for p in "cwxos"}
    src = {p: _Source(pat[p], record or p == "c") for p in "cwx"}
    for p in "wx":
        src[p].last = inputs_from - 1
    out = _Streamer(pat["o"], record)
    s_taken, stats, per_job = [], [], []
    ts_read_end = []           # per global strip: its streamer's last read
    ts_span = []               # per global strip: its sums fill both output sets
    end = -1                   # clock the previous job's statistics were taken
    for job in jobs:
        T0 = src["c"].take(end + 1, 1)
        W_last, strips = _job_timeline(job, cfg, T0, src, ts_read_end, ts_span, out)
        z = _next(pat["s"], W_last + 1)
        s_taken.append(z)
        end = z
        busy = sum(b * K for _i, _g, _t, q in steps(job) for K, _dr, b in _rounds(job, cfg, q))
        beats = sum(K for _i, _g, _t, q in steps(job) for K, _dr, _b in _rounds(job, cfg, q))
        stats.append((busy, beats))
        per_job.append({"T0": T0, "stat": z, "strips": strips})
    for rec in per_job:
        rec["out_beats"] = sum(rec.pop("strips"))
    firsts = [v for v in (src["w"].first, src["x"].first) if v is not None]
    return {"c": src["c"].cycles, "w": src["w"].cycles, "x": src["x"].cycles, "o": out.taken,
            "s": s_taken, "stats": stats, "jobs": per_job,
            "first_in": min(firsts) if firsts else None, "last_out": out.last_take,
            "beats": {"w": sum(job.weight_beat_count for job in jobs),
                      "x": sum(job.feature_beat_count for job in jobs), "o": out.count}}


def _job_timeline(job, cfg, T0, src, ts_read_end, ts_span, out):
    """One job: loads, rounds, drains and the streaming of its strips; returns the clock
    of its last drained strip (``W``) and its strips' beat counts."""
    st = list(steps(job))
    nst = len(st)
    fin = [None] * nst                  # clock from which fin counts the step
    wdone, xdone = {}, {}
    last_u, last_P = None, 0
    W_last = T0
    beats = []
    wl = {"next": 0, "last": T0}        # weight loader: next block, last beat clock
    xl = {"next": 0, "last": T0}

    def perm(need_steps):
        return T0 + 1 if need_steps <= 0 else fin[need_steps - 1]

    def wblock(i):                      # the weight block step ``i`` reads
        return st[i][1] * job.Q + st[i][3] if job.resident else i

    def load_w(upto):                   # weight blocks up to the one step ``upto`` reads
        while wl["next"] <= wblock(upto):
            b = wl["next"]
            if job.resident:            # chunk q of group g: after group g - 1's last read
                g, q = divmod(b, job.Q)
                n, need = job.wbeats(q), (0 if g == 0 else (g * job.S - 1) * job.Q + q + 1)
            else:
                n, need = job.wbeats(st[b][3]), b - 1
            start = max(T0 + 1, wl["last"] + 1, perm(need))
            wl["last"] = src["w"].take(start, n)
            wdone[b] = wl["last"] + 1
            wl["next"] += 1

    def load_x(upto):
        while xl["next"] <= upto:
            b = xl["next"]
            start = max(T0 + 1, xl["last"] + 1, perm(b - 1))
            xl["last"] = src["x"].take(start, job.xbeats(st[b][3]))
            xdone[b] = xl["last"] + 1
            xl["next"] += 1

    for i, g, t, q in st:
        load_w(i)
        load_x(i)
        gstrip = len(ts_read_end)             # strips before this one (all jobs)
        u = max(T0 + 1 + cfg.window, wdone[wblock(i)], xdone[i])
        if last_u is not None:
            u = max(u, last_u + last_P)
        if q == 0:
            if gstrip and (job.span or ts_span[-1]):
                u = max(u, ts_read_end[gstrip - 1] + 1)
            elif gstrip >= 2:
                u = max(u, ts_read_end[gstrip - 2] + 1)
        rounds = _rounds(job, cfg, q)
        for j, (K, dr, _b) in enumerate(rounds):
            if j:
                u = last_u + last_P
            knext = K if j < len(rounds) - 1 else job.k_of((q + 1) % job.Q)
            last_u, last_P = u, K + max(0, max(dr, 2) - knext)
            C = u + K + CAPTURE
            W = C + dr + 1
        fin[i] = u + K + 2
        if q == job.Q - 1:
            ts_read_end.append(out.stream(W + 1, job.obeats))
            ts_span.append(job.span)
            beats.append(job.obeats)
            W_last = W
    return W_last, beats


def shell_job_cycles(job: BankedJob, cfg: BankedConfig) -> int:
    """Clocks of one job through the accelerator shell at full rate (every bus source valid,
    every sink ready), from its first input beat to its last output beat, both counted:
    what :func:`gen.conv.banked.shell_cycles.banked_shell_cycle_model` gives for each job of
    a sequence of AXI jobs, in time per round.  The shell's skid buffers hand the array its
    first weight and feature beats in the clock after the descriptor's first clock of
    loading (the array's ``T0 + 2`` instead of ``T0 + 1``), the first bus beat arrives in
    ``T0 + 1`` and ``m_axis_o`` carries the array's ``o`` unregistered, so the job takes the
    array's last-output clock of :func:`run_cycles` with inputs from clock 2; a
    requantisation stage (``rq_width`` > 0) adds its latency
    (:data:`gen.core.fixed.REQUANT_LATENCY`).  ``tb/conv/test_banked.py`` checks it against
    the clock-stepped shell model."""
    from gen.core.fixed import REQUANT_LATENCY
    t = run_cycles([job], cfg, record=False, inputs_from=2)
    return t["last_out"] + (REQUANT_LATENCY if cfg.rq_width else 0)
