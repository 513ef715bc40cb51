# SPDX-License-Identifier: Apache-2.0
"""The LSTM engine's exact cycle model.

Cycle model
-----------
:func:`cycle_model` steps the same registers as the RTL clock by clock (loader,
bias initialisation, feeders, per-PE FIFOs and MAC pipelines, element-wise sweep,
output drain), reading each port's own handshake pattern (:mod:`gen.core.stimulus`: idle
inputs and back-pressure), so it predicts the cycle of every transfer exactly.
:func:`lstm_shell_cycle_model` steps the same registers inside the accelerator shell's ports
(:mod:`gen.core.flow`) under the AXI bench's per-port patterns.
"""

from collections import deque

import numpy as np

from gen.core.fixed import REQUANT_LATENCY
from gen.core.stimulus import ModelSource, pattern_for
from gen.lstm.compile import LstmPlan, plan_quant
from gen.lstm.config import XK_X
from gen.lstm.golden import ref_lstm
from gen.lstm.words import seq_words, weight_beats

__all__ = ["cycle_model", "step_cycles", "shell_cycles", "lstm_shell_cycle_model"]


LOAD, INIT, IDLE, SEQ, SEQW, XFEED, HFEED, EW, EWW = range(9)


def cycle_model(plan: LstmPlan, seqs, *, w_valid_prob=1.0, x_valid_prob=1.0,
                o_ready_prob=1.0, seed=0, max_cycles=100_000_000):
    """Predict the RTL's transfer cycles for sequences ``[(xs, h0, c0), ...]`` (codes).

    Mirrors :class:`hdl.lstm.LstmEngine` register by register and the stream testbench
    port by port: ``w``, ``x`` and ``o`` each have their own pattern (a probability gives
    the port's own seeded Bernoulli pattern, as in :func:`rtl_lstm`); cycle 0 is the
    first clock after reset.  Returns ``{"w", "x", "o": transfer cycles, "steps":
    [{"start": first input accepted, "ew_start", "end": last h written}, ...]}``; one
    step's period is ``end - start + 2`` when inputs are always available.
    """
    cfg = plan.cfg
    wsrc = ModelSource(weight_beats(plan), pattern_for(w_valid_prob, seed, "w"))
    o_pat = pattern_for(o_ready_prob, seed, "o")
    xsrc = ModelSource(_x_words(plan, seqs), pattern_for(x_valid_prob, seed, "x"))
    nsteps = sum(len(np.asarray(xs).reshape(-1, plan.inputs)) for xs, _, _ in seqs)
    model = _LstmModel(plan, seqs, wsrc, xsrc, o_pat)
    n_out = nsteps * plan.hidden
    cycle = 0
    while not (wsrc.idx >= wsrc.n and xsrc.idx >= xsrc.n and len(model.o_cycles) >= n_out
               and model.idle):
        if cycle >= max_cycles:
            raise RuntimeError("lstm cycle model: timeout")
        wsrc.drive(cycle)
        xsrc.drive(cycle)
        model.clock(cycle)
        cycle += 1
    return {"w": wsrc.cycles, "x": xsrc.cycles, "o": model.o_cycles, "steps": model.steps,
            "cycles_run": cycle}


def _x_words(plan: LstmPlan, seqs) -> list:
    """The ``x`` stream's words of ``seqs`` as the model reads them: ``(kind, word)``."""
    cfg = plan.cfg
    return [(w >> cfg.xv_width, w) for xs, h0, c0 in seqs
            for w in seq_words(plan, xs, h0, c0)]


class _LstmModel:
    """The registers of :class:`hdl.lstm.LstmEngine` that decide a hand-shake (loader,
    bias initialisation, feeders, per-PE FIFOs and MAC pipelines, element-wise sweep,
    output drain), stepped one clock at a time (:meth:`clock`) against the ``w`` source
    (``take``), the ``x`` source (``valid``, ``data[idx]``: the word on offer, ``take``;
    after the caller's ``drive``) and the ``o`` sink (``at``: its ``ready``; ``put``, when
    it has one, on every transfer).  The sources and the sink may be replaced between
    clocks (a shell's ports, job by job)."""

    def __init__(self, plan: LstmPlan, seqs, wsrc, xsrc, osink):
        self.plan, self.cfg = plan, plan.cfg
        self.wsrc, self.xsrc, self.osink = wsrc, xsrc, osink
        P = self.cfg.pes
        # h values as the broadcaster sees them: only whether they are zero matters, so
        # the golden model gives them (per step); x values come from the stream.
        self.hz = _h_nonzero(plan, seqs)
        self.o_cycles, self.steps, self.cur = [], [], None
        self.state, self.cnt = LOAD, 0
        self.nw, self.nd = 0, 0                 # h halves written / drained (mod 4)
        self.out_flag = [False, False]
        self.col, self.qn, self.t_glob, self.lcnt, self.ewcnt = 0, 0, 0, 0, 0
        self.s1 = (False, False, 0)             # registered broadcast: valid, nz, column
        self.fifo = [deque() for _ in range(P)]
        self.rem = [0] * P
        self.mac = tuple([False] * P for _ in range(5))    # MAC stage valid bits
        self.dr = (False, 0, False, False, False)          # the drain's state

    @property
    def idle(self) -> bool:
        """The controller idle, no drain active or pending."""
        return self.state == IDLE and not self.dr[0] and self.nw == self.nd

    @property
    def o_valid(self) -> bool:
        """The engine's ``o.valid`` (the drain's output register), a register."""
        return self.dr[0] and self.dr[4]

    def clock(self, cycle: int):
        """One clock: every hand-shake from the registers, then the rising edge."""
        o_ready = self.osink.at(cycle)
        pending = (self.nw - self.nd) & 3
        sent = len(self.o_cycles)
        # ---- drain (independent)
        *dr, self.nd = _drain_step(self.dr, self.nd, pending, self.out_flag,
                                   self.plan.hidden, o_ready, self.o_cycles, cycle)
        self.dr = tuple(dr)
        if len(self.o_cycles) > sent and hasattr(self.osink, "put"):
            self.osink.put(cycle)
        # ---- PEs (state at the start of the cycle)
        all_idle, advance = _pe_step(self.fifo, self.rem, self.mac, self.plan.counts,
                                     self.s1, self.cfg.fifo_depth)
        issue = self._controller(cycle, pending, all_idle, advance)
        if advance:
            self.s1 = issue

    def _controller(self, cycle, pending, all_idle, advance):
        """The controller's clock; returns the broadcast ``(valid, nz, column)`` issued."""
        cfg, plan, xsrc = self.cfg, self.plan, self.xsrc
        H, X, R, S = plan.hidden, plan.inputs, plan.r_run, plan.slots
        n_state, issue = self.state, (False, False, 0)
        if self.state == LOAD:
            if self.wsrc.take(True, cycle) and self.wsrc.idx == self.wsrc.n:
                n_state, self.cnt = INIT, 0
        elif self.state == INIT:
            if self.cnt == cfg.rows_per_pe - 1:
                n_state = IDLE
            self.cnt += 1
        elif self.state == IDLE:
            if xsrc.valid:
                if xsrc.data[xsrc.idx][0] == XK_X:
                    n_state, self.col = XFEED, 0
                    self.cur = {"start": None}
                    self.steps.append(self.cur)
                elif pending < 2:
                    n_state, self.cnt = SEQ, 0
        elif self.state == SEQ:
            if xsrc.take(True, cycle):
                if self.cnt == 2 * H - 1:
                    n_state = SEQW
                self.cnt += 1
        elif self.state == SEQW:
            self.out_flag[self.nw & 1] = False
            self.nw = (self.nw + 1) & 3
            n_state = IDLE
        elif self.state == XFEED:
            if xsrc.take(advance and self.col < X, cycle):
                if self.cur["start"] is None:
                    self.cur["start"] = cycle
                value = xsrc.data[xsrc.idx - 1][1] & ((1 << cfg.x_fmt.width) - 1)
                issue = (True, value != 0, self.col)
                if self.col == X - 1:
                    n_state, self.qn = HFEED, 0
                self.col += 1
        elif self.state == HFEED:
            if self.qn == S and not self.s1[0] and all_idle and pending < 2:
                n_state, self.lcnt = EW, 0
                self.cur["ew_start"] = cycle + 1
            if advance and self.qn < S:
                issue = (True, self.hz[self.t_glob][self.qn], self.col)
                self.qn += 1
                self.col += 1
        elif self.state == EW:
            if self.lcnt == R - 1:
                n_state, self.ewcnt = EWW, cfg.ew_latency - 1
            self.lcnt += 1
        elif self.state == EWW:
            if self.ewcnt == 0:
                self.out_flag[self.nw & 1] = True
                self.nw = (self.nw + 1) & 3
                self.cur["end"] = cycle
                self.t_glob += 1
                n_state = IDLE
            self.ewcnt -= 1
        self.state = n_state
        return issue


def _drain_step(dr, nd, pending, out_flag, H, o_ready, o_cycles, cycle):
    """One clock of the output drain, independent of the controller: ``dr`` is its state
    ``(active, issued rows, the two result-pipeline valid bits, output valid)``; appends to
    ``o_cycles`` and returns the next state and ``nd`` (h halves drained, mod 4)."""
    dr_active, dk, dv0, dv1, dov = dr
    if dr_active:
        if dov and o_ready:
            o_cycles.append(cycle)
        adv = (not dov) or o_ready
        fin = dk == H and not (dv0 or dv1 or dov)
        if adv:
            issue = dk < H
            dov, dv1, dv0 = dv1, dv0, issue
            dk += issue
        if fin:
            dr_active = False
            nd = (nd + 1) & 3
    elif pending:
        if out_flag[nd & 1]:
            dr_active, dk, dv0, dv1, dov = True, 0, False, False, False
        else:
            nd = (nd + 1) & 3
    return dr_active, dk, dv0, dv1, dov, nd


def _pe_step(fifo, rem, mac, counts, s1, D):
    """One clock of the PEs, from their state at the start of the cycle: issue from the
    FIFOs into the MAC stages ``mac`` (valid bits, updated in place) and push the
    registered broadcast ``s1 = (valid, non-zero, column)`` unless a FIFO it feeds is full.
    Returns ``(all_idle, advance)``."""
    vb, vc, vo, vd, ve = mac
    s1v, s1nz, s1col = s1
    P = len(fifo)
    all_idle = (not any(fifo) and not any(rem) and not any(vb) and not any(vc)
                and not any(vo) and not any(vd) and not any(ve))
    stall = s1v and s1nz and any(counts[p, s1col] > 0 and len(fifo[p]) == D
                                 for p in range(P))
    advance = not stall
    for p in range(P):
        ve[p] = vd[p]
        vd[p] = vo[p]
        vo[p] = vc[p]
        vc[p] = vb[p]
        if rem[p] > 0:
            rem[p] -= 1
            vb[p] = True
        elif fifo[p]:
            rem[p] = fifo[p].popleft() - 1
            vb[p] = True
        else:
            vb[p] = False
    if advance and s1v and s1nz:
        for p in range(P):
            if counts[p, s1col] > 0:
                fifo[p].append(int(counts[p, s1col]))
    return all_idle, advance


def _h_nonzero(plan: LstmPlan, seqs) -> list:
    """Per global step: which h slots (of h_{t-1}) the broadcaster sees as non-zero."""
    cfg = plan.cfg
    out = []
    quant = plan_quant(plan)
    for xs, h0, c0 in seqs:
        xs = np.asarray(xs, np.int64).reshape(-1, plan.inputs)
        hseq, _ = ref_lstm(quant, xs, cfg, h0, c0)
        prev = np.zeros(plan.hidden, np.int64) if h0 is None else np.asarray(h0).ravel()
        for t in range(len(xs)):
            nz = np.zeros(plan.slots, bool)
            ok = plan.slot_unit >= 0
            nz[ok] = prev[plan.slot_unit[ok]] != 0
            out.append(nz)
            prev = hseq[t]
    return out


def step_cycles(model: dict) -> list:
    """Per step: cycles from its first input to the element-wise stage's last ``h`` write,
    plus the 2 clocks to the next step's first input (the step period at full rate)."""
    return [s["end"] + 2 - s["start"] for s in model["steps"]]


def shell_cycles(plan: LstmPlan, seqs) -> int:
    """End-to-end clocks of one job carrying the weights and the sequences ``seqs`` through
    the accelerator shell at full rate, from its first input beat to its last ``h`` beat,
    both counted: the engine's last ``h`` transfer (:func:`cycle_model`) + 1, + 1 (the
    weights enter through the shell's beat-to-word adapter, or its skid buffer with
    ``w_lanes`` > 1), + 2 (the ``h`` words are packed into beats), + ``REQUANT_LATENCY``
    with a requantisation stage (``rq_width``; its biases in before the first ``h``).
    Exact (tb/lstm/test_shell.py); idle inputs and back-pressure add clocks it does not
    model."""
    rq = REQUANT_LATENCY if plan.cfg.rq_width else 0
    return cycle_model(plan, seqs)["o"][-1] + 4 + rq


def _shell_ports(plan: LstmPlan, jobs, xwords, patterns: dict, engine, stage, bias_loads, k,
                 start, before):
    """Job ``k``'s :class:`hdl.lstm.LstmShell` ports (:mod:`gen.core.flow` twins; ``k``
    None: the idle ports before the first start), attached to the engine's model; the
    adapters carry over from ``before``."""
    from gen.core.flow import ShellInput, ShellOutput, packet_beats
    cfg = plan.cfg
    weights, seqs = (False, []) if k is None else jobs[k]
    n_w = len(weight_beats(plan)) if weights else 0
    n_x = sum(len(seq_words(plan, *seq)) for seq in seqs)
    first_x = sum(len(seq_words(plan, *seq)) for _, job in jobs[:k or 0] for seq in job)
    steps = sum(len(np.asarray(xs).reshape(-1, plan.inputs)) for xs, _, _ in seqs)
    w_beats = (packet_beats(n_w, cfg.bus_words) if cfg.w_lanes == 1
               else [(1, i == n_w - 1) for i in range(n_w)])
    w = ShellInput(w_beats, patterns["s_axis_w"], start or 0, packed=cfg.w_lanes == 1,
                   enabled=weights, adapter=before and before["w"].adapter)
    x = ShellInput(packet_beats(n_x, cfg.bus_words), patterns["s_axis_x"], start or 0,
                   packed=True, enabled=bool(seqs), first=first_x,
                   adapter=before and before["x"].adapter)
    x.data = xwords
    h = ShellOutput(patterns["m_axis_h"], None if k is None else steps * plan.hidden,
                    words=cfg.bus_words, packer=before and before["h"].packer)
    engine.wsrc, engine.xsrc, engine.osink = w, x, h
    ports = {"w": w, "x": x, "h": h, "ins": [("s_axis_w", w), ("s_axis_x", x)],
             "outs": [("m_axis_h", h)], "regs": []}
    if stage is not None:          # the requantisation stage between o and its port
        engine.osink = stage
        b, q = stage.ports(k, start, before, h, patterns["s_axis_b"], cfg.bus_words,
                           k is not None and bool(bias_loads[k]), plan.hidden)
        ports["b"] = b[1]
        ports["ins"].append(b)
        ports["regs"].append(q)
    return ports


def lstm_shell_cycle_model(plan: LstmPlan, jobs, patterns: dict, starts=None, *, writes=3,
                           bias_loads=None, resets=None, reads: int = 0,
                           max_cycles: int = 10_000_000) -> list:
    """Exact cycle model of jobs of the LSTM shell (:class:`hdl.lstm.LstmShell`) under the
    bench's per-port patterns.

    The engine's registers (:class:`_LstmModel`, :func:`cycle_model`'s) are stepped from
    reset with the shell's ports around them (:func:`gen.core.flow.run_shell_jobs`): the
    weight words through the two-slot :class:`hdl.lib.axis.AxisToWords` (``w_lanes`` 1)
    or one engine beat a bus beat through a skid buffer; the sequence words through
    ``AxisToWords``; ``h`` packed by :class:`hdl.lib.axis.WordsToAxis`, ``tlast`` on the
    ``H_WORDS``-th word.  A job's inputs are its ``JOB_INPUTS`` (the weights, its
    sequences: each port enabled when the job sends on it), open while busy and before
    their ``tlast``; a job ends with its last ``h`` beat, or (no sequence: the weight load)
    the clock after the END word entered the engine.  The bench's sources open at
    ``start + 2``; its sink is ready by its pattern one clock late; after a job without
    results it polls ``STATUS`` (:func:`gen.core.flow.bench_window_end`).

    With ``rq_width`` > 0 the requantisation stage sits between the engine's ``h`` and
    ``m_axis_h`` (:class:`gen.core.flow.RequantTwin`: one channel per hidden unit, the
    biases on ``s_axis_b`` when the job loads them).

    Parameters
    ----------
    plan : LstmPlan
    jobs : list
        Per shell job ``(weights, seqs)``: whether it streams the weights, and its
        sequences ``[(xs, h0, c0), ...]`` (codes).
    patterns : dict
        ``{bus port: Pattern}`` for ``s_axis_w``, ``s_axis_x`` (valid) and ``m_axis_h``
        (ready), as :func:`gen.lstm.twin.axi_ports` gives them.
    starts : sequence of int, optional
        Per job the clock of the start write's response (the records' ``start_ack``);
        None: predicted from ``writes`` (:func:`gen.core.flow.bench_start`).
    writes : int or sequence of int
        Per job the registers the bench writes before its start (3: those of
        :func:`gen.lstm.twin.axi_jobs`, JOB_INPUTS, H_WORDS, IRQ_ENABLE).
    bias_loads : sequence of bool, optional
        ``rq_width`` > 0: per job whether it loads the biases (default none does).
    resets : sequence, optional
        Per job the bench's ``reset_after`` (None: not cut): the shell and the engine
        restart from their reset state (the weights must be streamed again); the job's
        record is the bench's record of a cut job.
    reads : int
        Registers the bench reads after each job besides the counters.
    max_cycles : int
        Guard against a stimulus that never ends a job.

    Returns
    -------
    list of dict
        Per job as :func:`gen.pwl.shell_cycle_model`: the bench record's clocks and
        counts, ``counters``, ``job_end``, ``out_cycles`` (``{"m_axis_h": every beat's
        clock}``).
    """
    from gen.core.flow import RequantTwin, run_shell_jobs
    xwords = _x_words(plan, [seq for _, job in jobs for seq in job])
    bias_loads = list(bias_loads) if bias_loads is not None else [False] * len(jobs)
    box = {}

    def rebuild(k=-1):
        """The engine (for the sequences of the jobs after job ``k``) and the stage in
        their reset state."""
        seqs = [seq for _, job in jobs[k + 1:] for seq in job]
        box["engine"] = _LstmModel(plan, seqs, None, None, None)
        box["stage"] = RequantTwin(REQUANT_LATENCY) if plan.cfg.rq_width else None
        return clock

    def make_ports(k, start, before):
        return _shell_ports(plan, jobs, xwords, patterns, box["engine"], box["stage"],
                            bias_loads, k, start, before)

    def clock(cycle):
        box["engine"].clock(cycle)
        if box["stage"] is not None:
            box["stage"].clock(cycle)

    if isinstance(writes, int):
        writes = [writes] * len(jobs)
    mons = run_shell_jobs(None if starts is None else list(starts), make_ports, rebuild(),
                          writes=writes, resets=resets, rebuild=rebuild, reads=reads,
                          max_cycles=max_cycles)
    return [mon.record() for mon in mons]
