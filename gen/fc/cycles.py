# SPDX-License-Identifier: Apache-2.0
"""The FC engine's exact clock-by-clock cycle model under any per-port stimulus
(:func:`fc_cycle_model`): the registers of :class:`hdl.fc.FcEngine` that decide every
hand-shake, stepped against the testbench's sources and sinks; and the same registers inside
the accelerator shell's ports (:func:`fc_shell_cycle_model`, on :mod:`gen.core.flow`)."""

from collections import deque

import numpy as np

from gen.core.flow import Skid as _Skid
from gen.core.stimulus import ModelSource, Pattern, job_patterns
from gen.fc.config import FcConfig
from gen.fc.fdcsr import FdCsr
from gen.fc.schedule import _beats, decode_walk

__all__ = ["fc_cycle_model", "fc_shell_cycle_model"]


FC_SOURCES = ("cmd", "x", "meta", "vdata")
FC_SINKS = ("vaddr", "y")


class _FcModel:
    """The registers of :class:`hdl.fc.FcEngine` that decide *when* things move, stepped
    one clock at a time against the testbench's sources and sinks (:func:`fc_cycle_model`).

    State: job control (``idle``, ``loading``, ``meta_open``, the ``x`` / beat / row
    counters and the job sizes minus one); the ``meta`` input register ``s0`` and its skid
    buffer (entries: ``(nnz, last, job)``); the decoder (``has``, ``cnt`` = non-zeros left
    in the held beat, its ``last`` flag, the output register ``dout`` = ``(count, last,
    job)``); the group skid buffer, the group FIFO and the ``vaddr`` skid buffer; the four
    datapath stages (``None`` or the group's ``last`` flag) and ``y.valid``.  Payload
    values (masks, weights, activations, sums) never decide a hand-shake and are not kept.
    """

    def __init__(self, jobs, cfg: FcConfig, patterns: dict, ports: dict = None):
        self.cfg, self.k, self.jobs = cfg, cfg.nz_per_clock, jobs
        self.beats = [(n, j) for j, job in enumerate(jobs) for n in job["nnz"]]
        n_req = sum(job["requests"] for job in jobs)
        counts = {"cmd": len(jobs), "x": sum(job["cols"] for job in jobs),
                  "meta": len(self.beats), "vdata": n_req}
        if ports is None:
            self.src = {p: ModelSource(counts[p], patterns[p]) for p in FC_SOURCES}
            self.sink_pat = {p: patterns[p] for p in FC_SINKS}
        else:       # a shell's ports (gen.core.flow), attached by the shell's model
            self.src, self.sink_pat = {}, {}
        self.want = {"vaddr": n_req, "y": sum(job["rows"] for job in jobs)}
        self.sinks = {p: [] for p in FC_SINKS}
        self.requests, self.addr = [], [0] * len(jobs)
        # job control
        self.idle, self.loading, self.meta_open = True, False, False
        self.rows_m1 = self.cols_m1 = self.bpr_m1 = 0
        self.x_count = self.beat = self.meta_rows = self.y_rows = 0
        # meta front end and decoder
        self.s0, self.mskid = None, _Skid()
        self.has, self.cnt, self.last, self.hjob = False, 0, False, 0
        self.dout = None
        # back end and datapath
        self.gskid, self.vskid, self.fifo = _Skid(), _Skid(), deque()
        self.stages = [None] * 4          # s1, x, o, p: None or the group's `last`
        self.y_valid = False

    @property
    def done(self) -> bool:
        return (all(s.idx >= s.n for s in self.src.values())
                and all(len(self.sinks[p]) >= self.want[p] for p in FC_SINKS))

    def _decoder(self, out_ready):
        """The decoder's combinational step (:class:`hdl.fdcsr.FdcsrDecoder`) from its
        registers, the skid head (``i``) and ``o.ready``."""
        k, cnt, head = self.k, self.cnt, self.mskid.main
        iv = head is not None
        nnz = head[0] if iv else 0
        finishing = cnt <= k
        merging = finishing and self.has and not self.last and iv
        deficit = k - cnt
        short = nnz < deficit
        from_next = (nnz if short else deficit) if merging else 0
        count = cnt + from_next if finishing else k
        emit = cnt != 0 or (merging and nnz != 0) or (self.last and finishing)
        can_step = self.dout is None or out_ready
        need_next = not self.last and cnt < k
        step = self.has and can_step and (not need_next or iv)
        i_ready = not self.has or (step and finishing)
        return {"can_step": can_step, "step": step, "finishing": finishing,
                "emit": emit, "count": count, "i_ready": i_ready, "load": iv and i_ready,
                "cnt_load": ((0 if short else nnz - deficit) if merging else nnz)}

    def _decoder_clock(self, d):
        """The decoder's registers at the rising edge, from :meth:`_decoder`'s signals."""
        if d["can_step"]:
            if d["step"] and d["emit"]:
                self.dout = (d["count"], self.last and d["finishing"], self.hjob)
            else:
                self.dout = None
        if d["step"]:
            self.cnt = 0 if d["finishing"] else self.cnt - self.k
            if d["finishing"]:
                self.has = False
        if d["load"]:
            _, last, job = self.mskid.main
            self.has, self.cnt, self.last, self.hjob = True, d["cnt_load"], last, job

    def _job_control(self, c):
        """``cmd``, ``x`` and ``meta`` transfers and the counters of :class:`FcEngine`'s
        job control and ``meta`` input register; returns the ``meta`` skid push."""
        cmd, x, meta = self.src["cmd"], self.src["x"], self.src["meta"]
        job = self.jobs[cmd.idx] if cmd.idx < cmd.n else None
        beat = self.beats[meta.idx] if meta.idx < meta.n else None
        meta_ready = self.meta_open and (self.s0 is None or self.mskid.ready)
        push = self.s0 if self.s0 is not None and self.mskid.ready else None
        took_x = x.take(self.loading, c)           # every ready from the registers
        if cmd.take(self.idle, c):
            self.rows_m1, self.cols_m1 = job["rows"] - 1, job["cols"] - 1
            self.bpr_m1 = len(job["nnz"]) // job["rows"] - 1
            self.x_count, self.idle, self.loading = 0, False, True
        if took_x:
            if self.x_count == self.cols_m1:
                self.beat = self.meta_rows = self.y_rows = 0
                self.loading, self.meta_open = False, True
            self.x_count += 1
        if meta.take(meta_ready, c):
            last = self.beat == self.bpr_m1
            self.s0 = (beat[0], last, beat[1])
            self.beat = 0 if last else self.beat + 1
            if last:
                if self.meta_rows == self.rows_m1:
                    self.meta_open = False
                self.meta_rows += 1
        elif push is not None:
            self.s0 = None
        return push

    def _put(self, port, c):
        self.sinks[port].append(c)
        put = getattr(self.sink_pat[port], "put", None)
        if put is not None:
            put(c)

    def clock(self, c):
        """One clock: the sources drive, every hand-shake is decided from the registers
        and the ports' patterns, transfers are recorded, then the registers update."""
        for s in self.src.values():
            s.drive(c)
        vaddr_ready, y_ready = (self.sink_pat[p].at(c) for p in FC_SINKS)
        dec = self._decoder(self.gskid.ready)
        gpush = self.dout if self.dout is not None and self.gskid.ready else None
        group = self.gskid.main
        accept = (group is not None and len(self.fifo) < self.cfg.fifo_depth
                  and (group[0] == 0 or self.vskid.ready))
        vpush = group if accept and group[0] != 0 else None
        p_last = bool(self.stages[3])      # p_valid & p_last
        advance = not (p_last and self.y_valid and not y_ready)
        head = self.fifo[0] if self.fifo else None
        needs = head is not None and head[0] != 0
        took_v = self.src["vdata"].take(advance and needs, c)
        pop = advance and head is not None and (not needs or took_v)
        y_xfer = self.y_valid and y_ready
        if y_xfer:
            self._put("y", c)
        if self.vskid.main is not None and vaddr_ready:
            self._put("vaddr", c)
        # registers
        end_job = y_xfer and not self.idle and not self.loading and \
            self.y_rows == self.rows_m1
        mpush = self._job_control(c)
        self._decoder_clock(dec)            # loads from the skid head: before its edge
        self.mskid.clock(mpush, dec["i_ready"])
        self.gskid.clock(gpush, accept)
        if vpush is not None:
            count, _, job = vpush
            self.requests.append((self.addr[job], count))
            self.addr[job] += count
        self.vskid.clock(vpush, vaddr_ready)
        if pop:
            self.fifo.popleft()
        if accept:
            self.fifo.append(group)
        if y_xfer:
            self.y_valid = False
            self.y_rows += 1
        if advance:
            if p_last:
                self.y_valid = True
            self.stages = [head[1] if pop else None] + self.stages[:3]
        if end_job:
            self.idle = True


def _model_job(fd: FdCsr, cfg: FcConfig) -> dict:
    """What :class:`_FcModel` needs of one job: sizes, per-beat non-zero counts in stream
    order and the number of memory requests (non-empty groups, :func:`decode_walk`)."""
    _, _, beat_nnz = _beats(fd, cfg)
    _, groups = decode_walk(beat_nnz, cfg.nz_per_clock)
    return {"rows": fd.rows, "cols": fd.cols, "nnz": beat_nnz.reshape(-1).tolist(),
            "requests": len(groups)}


def _model_patterns(patterns) -> dict:
    """``{port: Pattern}`` for the six ports from a job dict, a mapping of ports to
    patterns (or their JSON form) or ``None``; a port left out transfers every clock."""
    if patterns is None:
        patterns = {}
    elif "sources" in patterns or "sinks" in patterns:
        patterns = job_patterns(patterns)
    unknown = set(patterns) - set(FC_SOURCES + FC_SINKS)
    if unknown:
        raise ValueError(f"unknown FC ports {sorted(unknown)}; the ports are "
                         f"{', '.join(FC_SOURCES + FC_SINKS)}")
    return {p: Pattern.from_json(patterns.get(p)) for p in FC_SOURCES + FC_SINKS}


def _run_model(jobs, cfg, patterns, start, stop, max_cycles) -> _FcModel:
    model = _FcModel(jobs, cfg, patterns)
    cycle = start
    while not model.done and (stop is None or cycle < stop):
        if cycle - start >= max_cycles:
            raise RuntimeError(f"FC cycle model: not done after {max_cycles} clocks")
        model.clock(cycle)
        cycle += 1
    model.end = cycle
    return model


def fc_cycle_model(fd, cfg: FcConfig, patterns=None, *, reset_at=None,
                   max_cycles=1_000_000) -> dict:
    """Exact clock-by-clock model of :class:`hdl.fc.FcEngine` under any stimulus.

    Steps the registers that decide every hand-shake (job control, ``meta`` input
    register and skid buffer, decoder, group skid buffer, group FIFO, ``vaddr`` skid
    buffer, the four datapath stages and ``y.valid``: :class:`_FcModel`) against the
    testbench's streams (:mod:`gen.core.stimulus`): each source raises ``valid`` in clock ``c``
    when its pattern allows ``c`` and holds it until accepted, each sink's ``ready`` is its
    pattern at ``c``.  ``vdata`` is such a source too, as in :func:`fc_job`: its words are
    the responses in request order, offered by the pattern alone (a response may be taken
    before its request has left on ``vaddr``; the engine accepts one whenever the FIFO's
    head group needs values).  With every pattern ``always`` the result equals
    :func:`fc_schedule`'s.

    Parameters
    ----------
    fd : FdCsr or sequence of FdCsr
        The job's weights; several matrices are jobs sent back to back on the same
        streams (the next ``cmd`` is accepted once the engine is idle again).
    cfg : FcConfig
    patterns : dict, optional
        The job dict of :func:`fc_job` / :func:`gen.core.stimulus.make_job` (its ports'
        patterns are read with :func:`gen.core.stimulus.job_patterns`), or ``{port: Pattern}``
        (or a pattern's JSON form) for the ports ``cmd``, ``x``, ``meta``, ``vdata``
        (valid) and ``vaddr``, ``y`` (ready); a port left out transfers every clock.
    reset_at : int, optional
        The job's ``reset_at``: the engine and the sources restart at that clock (the
        clock count runs on, so the patterns continue); must come before the job ends.
    max_cycles : int
        Guard against a stimulus that never completes the job.

    Returns
    -------
    dict
        ``sources`` / ``sinks``: ``{port: [cycle of every transfer]}``, as
        ``result["sources"][port]["cycles"]`` of :func:`gen.core.sim.run_job` (after the reset,
        if any); ``before_reset``: ``{"sinks": {port: cycles}}`` of the clocks before
        ``reset_at``, or ``None``; ``requests``: the ``(addr, count)`` of every ``vaddr``
        transfer, in order; ``y_cycles`` / ``meta_cycles`` (arrays); ``jobs``: per job its
        ``cmd`` cycle, ``y_cycles`` and ``cycles`` (``cmd`` to last ``y`` inclusive);
        ``cycles``: first ``cmd`` to last ``y`` inclusive; ``end``: the clock after the
        last transfer.
    """
    fds = [fd] if isinstance(fd, FdCsr) else list(fd)
    if not fds:
        raise ValueError("fc_cycle_model needs at least one matrix")
    jobs = [_model_job(f, cfg) for f in fds]
    pats = _model_patterns(patterns)
    before, start = None, 0
    if reset_at is not None:
        pre = _run_model(jobs, cfg, pats, 0, int(reset_at), max_cycles)
        if pre.done:
            raise ValueError(f"reset_at={reset_at} comes after the job's last transfer "
                             f"(clock {pre.end - 1})")
        before, start = {"sinks": {p: list(c) for p, c in pre.sinks.items()}}, int(reset_at)
    m = _run_model(jobs, cfg, pats, start, None, max_cycles)
    y, cmd = m.sinks["y"], m.src["cmd"].cycles
    out_jobs, first = [], 0
    for job, c0 in zip(jobs, cmd):
        ys = y[first:first + job["rows"]]
        first += job["rows"]
        out_jobs.append({"cmd": c0, "y_cycles": np.array(ys, dtype=np.int64),
                         "cycles": ys[-1] - c0 + 1})
    return {"sources": {p: list(s.cycles) for p, s in m.src.items()},
            "sinks": {p: list(c) for p, c in m.sinks.items()},
            "before_reset": before, "requests": m.requests,
            "y_cycles": np.array(y, dtype=np.int64),
            "meta_cycles": np.array(m.src["meta"].cycles, dtype=np.int64),
            "jobs": out_jobs, "cycles": y[-1] - cmd[0] + 1, "end": m.end}


def _shell_ports(cfg: FcConfig, jobs, fds, patterns: dict, engine, stage, bias_loads, k,
                 start, before):
    """Job ``k``'s :class:`hdl.fc.FcShell` ports (:mod:`gen.core.flow` twins; ``k`` None:
    the idle ports before the first start), attached to the engine's model ``engine``
    (read for the direct outputs' ``valid``); the adapters carry over from ``before``."""
    from gen.core.flow import ShellInput, ShellOutput, ShellRegister, packet_beats
    rows = cfg.rows_per_beat
    packed = rows > 1
    if k is None:
        fd, job, start, firsts = None, {"nnz": [], "requests": 0}, -2, (0, 0, 0)
        x_beats, target = [], None
    else:
        fd, job = fds[k], jobs[k]
        firsts = (sum(j["cols"] for j in jobs[:k]), sum(len(j["nnz"]) for j in jobs[:k]),
                  sum(j["requests"] for j in jobs[:k]))
        x_beats = (packet_beats(fd.cols, rows) if packed
                   else [(1, i == fd.cols - 1) for i in range(fd.cols)])
        target = fd.rows

    def beats(n):
        return [(1, i == n - 1) for i in range(n)]

    def carried(name):
        return None if before is None else before[name].adapter

    ports = {
        "cmd": ShellRegister(k or 0, pending=k is not None),
        "x": ShellInput(x_beats, patterns["s_axis_x"], start, packed=packed,
                        first=firsts[0], adapter=carried("x")),
        "meta": ShellInput(beats(len(job["nnz"])), patterns["s_axis_meta"], start,
                           packed=False, first=firsts[1], adapter=carried("meta")),
        "vdata": ShellInput(beats(job["requests"]), patterns["s_axis_vdata"], start,
                            packed=False, framed=False, first=firsts[2],
                            adapter=carried("vdata")),
        "vaddr": ShellOutput(patterns["m_axis_vaddr"], None,
                             valid=lambda: engine.vskid.main is not None),
        "y": ShellOutput(patterns["m_axis_y"], target, words=rows if packed else 0,
                         valid=(lambda: engine.y_valid) if stage is None else
                         (lambda: stage.out_valid),
                         packer=None if before is None else before["y"].packer),
    }
    engine.src = {p: ports[p] for p in FC_SOURCES}
    engine.sink_pat = {p: ports[p] for p in FC_SINKS}
    ports["ins"] = [("s_axis_x", ports["x"]), ("s_axis_meta", ports["meta"]),
                    ("s_axis_vdata", ports["vdata"])]
    ports["outs"] = [("m_axis_vaddr", ports["vaddr"]), ("m_axis_y", ports["y"])]
    ports["regs"] = [ports["cmd"]]
    if stage is not None:          # the requantisation stage between y and its port
        engine.sink_pat["y"] = stage
        b, q = stage.ports(k, start, before, ports["y"], patterns["s_axis_b"],
                           max(1, cfg.bus_words), k is not None and bool(bias_loads[k]),
                           1 if fd is None else fd.rows)
        ports["b"] = b[1]
        ports["ins"].append(b)
        ports["regs"].append(q)
    return ports


def fc_shell_cycle_model(fds, cfg: FcConfig, patterns: dict, starts=None, *, writes=None,
                         bias_loads=None, resets=None, reads: int = 0,
                         max_cycles: int = 1_000_000):
    """Exact cycle model of jobs of the FC shell (:class:`hdl.fc.FcShell`) under the
    bench's per-port patterns.

    The engine's registers (:class:`_FcModel`, the model of :func:`fc_cycle_model`) are
    stepped with the shell's ports around them (:func:`gen.core.flow.run_shell_jobs`):
    ``cmd`` from the ``ROWS`` / ``COLS`` descriptor (offered from the clock after the
    start); ``s_axis_x`` through a skid buffer (``rows_per_beat`` 1) or the two-slot
    :class:`hdl.lib.axis.AxisToWords` (rows of ``batch`` words as groups); ``s_axis_meta``
    and the unframed ``s_axis_vdata`` through skid buffers; ``m_axis_vaddr`` direct;
    ``m_axis_y`` direct or packed by :class:`hdl.lib.axis.WordsToAxis` (``rows_per_beat``
    rows a beat), ``tlast`` on the ``rows``-th row.  Framed inputs are ready only while
    the job is busy and before their ``tlast`` beat; the job ends in the clock its last
    event happens (the ``tlast`` row left, ``x`` and ``meta``'s last words entered a clock
    earlier, ``cmd`` taken).  The bench's sources open at ``start + 2``; its sinks are
    ready by their patterns one clock late.

    Between jobs: the engine takes a response as soon as its group needs it, which may be
    before the request has left the ``vaddr`` skid buffer, so a job can end with up to two
    requests still in it; they leave (on the side channel, open between jobs) when the
    sink is ready, possibly during the next job.  The model steps every clock from reset
    to the last job's bench window with one engine, and counts the bench's port statistics
    in its windows (``gen.core.flow.BENCH_BEFORE``, :func:`gen.core.flow.bench_after`): the
    unframed ``s_axis_vdata`` is ready (and idle) in every clock outside a job, which the
    bench counts as ``stall_in``.

    With ``rq_width`` > 0 the requantisation stage sits between the engine's ``y`` and its
    port (:class:`gen.core.flow.RequantTwin`: one channel per row, its parameters taken the
    clock after the start, the rows' biases on ``s_axis_b`` at ``bus_words`` a beat when the
    job loads them, no row into the stage before the last of them).

    Parameters
    ----------
    fds : FdCsr or sequence of FdCsr
        The jobs' weights (sizes and per-beat non-zero counts decide the timing).
    cfg : FcConfig
    patterns : dict
        ``{bus port: Pattern}`` for ``s_axis_x``, ``s_axis_meta``, ``s_axis_vdata`` (valid)
        and ``m_axis_vaddr``, ``m_axis_y`` (ready), as :func:`gen.core.sim.axi_ports` gives
        them for :func:`hdl.fc.shell.shell_ports`.
    starts : int or sequence of int, optional
        Per job the clock of the start write's response (the records' ``start_ack``);
        None: predicted from ``writes`` (:func:`gen.core.flow.bench_start`).
    writes : int or sequence of int, optional
        Per job the registers the bench writes before its start (its ``regs``).
    bias_loads : sequence of bool, optional
        ``rq_width`` > 0: per job whether it loads the rows' biases (``RQ_SCALE.bias``,
        ``JOB_INPUTS.b_en``; default none does); the patterns then name ``s_axis_b``.
    resets : sequence, optional
        Per job the bench's ``reset_after`` (None: not cut): the shell and the engine
        restart from their reset state (:func:`gen.core.flow.run_shell_jobs`); the job's
        record is the bench's record of a cut job.
    reads : int
        Registers the bench reads after each job besides the counters (its ``read``).
    max_cycles : int
        Guard against a stimulus that never ends a job.

    Returns
    -------
    list of dict (one dict for one FdCsr)
        Per job as :func:`gen.pwl.shell_cycle_model`: the bench record's clocks and
        counts, ``counters``, ``job_end``, ``out_cycles`` (``{"m_axis_vaddr": ...,
        "m_axis_y": ...}``, every beat's clock in the bench's window).
    """
    from gen.core.fixed import REQUANT_LATENCY
    from gen.core.flow import RequantTwin, run_shell_jobs
    one = isinstance(fds, FdCsr)
    fds = [fds] if one else list(fds)
    if starts is not None:
        starts = [starts] if one else list(starts)
    else:
        writes = [writes] * len(fds) if isinstance(writes, int) else list(writes)
    jobs = [_model_job(fd, cfg) for fd in fds]
    bias_loads = list(bias_loads) if bias_loads is not None else [False] * len(fds)
    box = {}

    def rebuild(k=None):
        """The engine and the stage in their reset state (the ports index every job)."""
        box["engine"] = _FcModel(jobs, cfg, None, ports={})
        box["stage"] = RequantTwin(REQUANT_LATENCY) if cfg.rq_width else None
        return clock

    def make_ports(k, start, before):
        return _shell_ports(cfg, jobs, fds, patterns, box["engine"], box["stage"],
                            bias_loads, k, start, before)

    def clock(cycle):
        box["engine"].clock(cycle)
        if box["stage"] is not None:
            box["stage"].clock(cycle)

    mons = run_shell_jobs(starts, make_ports, rebuild(), writes=writes, resets=resets,
                          rebuild=rebuild, reads=reads, max_cycles=max_cycles)
    out = [mon.record() for mon in mons]
    return out[0] if one else out
