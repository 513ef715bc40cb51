# SPDX-License-Identifier: Apache-2.0
"""The PWL unit's exact cycle model: transfer clocks under any handshake patterns, for the
bare unit (:func:`cycle_model`) and its accelerator shell (:func:`shell_cycle_model`)."""

from gen.pwl.config import PwlConfig

__all__ = ["cycle_model", "shell_cycle_model"]


def cycle_model(n: int, cfg: PwlConfig, *, valid=None, ready=None, seed=0) -> dict:
    """Transfer cycles of ``n`` samples through the unit under any handshake patterns.

    The unit (:class:`hdl.pwl.PwlUnit`) is a pipeline of :attr:`PwlConfig.latency`
    registers that stalls as a whole while its output register is full and not accepted
    (``advance = ~o.valid | o.ready``, also ``i.ready``).  ``valid`` / ``ready`` are the
    patterns of ports ``i`` and ``o`` (:mod:`gen.core.stimulus`: a probability gives the port's
    own seeded pattern, as :func:`rtl_pwl` does; ``None`` every clock).  Returns
    ``{"i": [...], "o": [...]}``, the clock of every transfer, exactly as the RTL.
    """
    from gen.core.stimulus import ModelSource, pattern_for
    src = ModelSource(n, pattern_for(valid, seed, "i"))
    o_pat = pattern_for(ready, seed, "o")
    pipe = [False] * cfg.latency        # valid bit of each register; pipe[-1] is o.valid
    out, cycle = [], 0
    while len(out) < n:
        src.drive(cycle)
        o_ready = o_pat.at(cycle)
        if pipe[-1] and o_ready:
            out.append(cycle)
        advance = not pipe[-1] or o_ready
        took = src.take(advance, cycle)
        if advance:
            pipe = [took] + pipe[:-1]
        cycle += 1
    return {"i": src.cycles, "o": out}


def shell_cycle_model(words, cfg: PwlConfig, valid, ready, start=None, *, writes=1,
                      resets=None):
    """Exact cycle model of jobs of the PWL shell (:class:`hdl.pwl.PwlShell`) under the
    bench's patterns: :func:`_shell_job` for each.

    ``words`` is one job's word count (``start`` then an int or None) or a list of them,
    one job each (``start`` a list or None); ``start`` None: the start responses'
    clocks predicted from the bench's ``writes`` registers per job (1:
    :func:`gen.pwl.twin.axi_job`'s ``IRQ_ENABLE``; :func:`gen.core.flow.bench_start`) and
    each job's window (:func:`gen.core.flow.bench_window_end`).  ``resets``: per job the
    bench's ``reset_after`` (None: not cut; :func:`gen.core.flow.bench_reset`): the job
    stops when ``aresetn`` falls (the shell empties; every job starts from an empty pipeline
    anyway) and its record is the bench's record of a cut job.  Returns one record (see
    :func:`_shell_job`) or a list.
    """
    from gen.core.flow import bench_reset, bench_start, bench_window_end
    one = not isinstance(words, (list, tuple))
    jobs = [words] if one else list(words)
    starts = None if start is None else ([start] if one else list(start))
    resets = [None] * len(jobs) if resets is None else list(resets)
    out, after = [], None
    for k, n in enumerate(jobs):
        at = bench_start(writes, after) if starts is None else starts[k]
        if resets[k] is None:
            record = _shell_job(n, cfg, valid, ready, at)
            after = bench_window_end(at, record["end"], record["job_end"])
        else:
            fall, after = bench_reset(at, resets[k])
            record = _shell_job(n, cfg, valid, ready, at, stop=fall)
        out.append(record)
    return out[0] if one else out


def _shell_job(words, cfg: PwlConfig, valid, ready, start: int, stop=None) -> dict:
    """Exact cycle model of one job of the PWL shell (:class:`hdl.pwl.PwlShell`) under the
    bench's patterns.

    The shell takes a whole beat per clock into ``bus_words`` units side by side, which
    stall together (:func:`cycle_model`'s pipeline of ``cfg.latency`` registers); the
    beats' ``keep``/``last`` ride beside them in a queue of ``latency + 2`` entries, which
    holds at most the ``latency`` beats in the pipeline and so never refuses one.  Rules,
    clock by clock from ``start + 1`` (the job is busy from the clock after the start
    pulse, which is the clock of the start write's response):

    * ``s_axis_x_tready = busy & ~in_done & (~o.valid | m_axis_y_tready)``: the units'
      ``advance``; ``in_done`` is set the clock after the ``tlast`` beat was taken;
    * the bench source offers beats from ``start + 2`` (:class:`gen.core.flow.BenchSource`),
      the sink is ready by its pattern one clock late (:func:`gen.core.flow.bench_ready`);
    * an output beat leaves when the last stage holds one and ``tready`` is high; the job
      ends with the beat of the input's ``tlast`` (``CYCLES = end - start``);
    * ``BUSY`` counts the clocks a beat was taken, ``STALL_IN`` those with ``tready`` and
      no ``tvalid``, ``STALL_OUT`` those with ``m_axis_y_tvalid`` and no ``tready``.

    The words' values and the partial last beat's ``tkeep`` change nothing.

    Parameters
    ----------
    words : int
        The job's input words (at least 1).
    cfg : PwlConfig
        ``bus_words`` and the unit (its ``latency``).
    valid, ready : Pattern
        The bench's patterns of ``s_axis_x`` (valid) and ``m_axis_y`` (ready), as
        :func:`gen.pwl.twin.axi_ports` gives them.
    start : int
        The clock of the start write's response (the bench record's ``start_ack``).
    stop : int, optional
        The clock ``aresetn`` falls (a job cut by the bench): the record is a cut job's.

    Returns
    -------
    dict
        The bench record's clocks and counts (:meth:`gen.core.flow.Monitor.record`):
        ``start_ack``, ``first_in``, ``end``, ``beats_in``, ``beats_out``, ``stall_in``,
        ``stall_out``, ``stall_in_any``, ``stall_out_any``, ``counters`` (``cycles``,
        ``busy``, ``stall_in``, ``stall_out``), ``out_cycles`` (``{"m_axis_y": clock of
        every output beat}``) and ``in_cycles`` (clock of every input beat).
    """
    from gen.core.flow import BenchSource, Monitor, bench_ready, packet_beats
    if words < 1:
        raise ValueError("a PWL shell job takes at least one word")
    beats = packet_beats(words, cfg.bus_words)
    src = BenchSource(beats, valid, start + 2)
    mon = Monitor(start)
    pipe = [None] * cfg.latency          # each stage: None or the beat's tlast
    in_done, cycle = False, start + 1
    while mon.end is None and cycle != stop:
        src.drive(cycle)
        o_ready = bench_ready(ready, cycle)
        o_valid = pipe[-1] is not None
        advance = not o_valid or o_ready
        tready = not in_done and advance
        tvalid, beat = src.valid, src.beat if src.valid else None
        mon.source(tvalid, tready, cycle)
        mon.sink("m_axis_y", o_valid, o_ready, o_valid and pipe[-1], cycle)
        mon.tick()
        mon.clock(tvalid and tready, tready and not tvalid, o_valid and not o_ready)
        took = src.take(tready, cycle)
        if took and beat[1]:
            in_done = True
        if advance:
            pipe = [beat[1] if took else None] + pipe[:-1]
        cycle += 1
    if stop is not None:            # (a job ending before the reset is cut all the same)
        mon.reset_at, mon.beats_out_before_reset = stop, mon.beats_out
    mon.job_end = mon.end           # (the ports are closed outside the job)
    out = mon.record()
    out["in_cycles"] = list(src.cycles)
    return out
