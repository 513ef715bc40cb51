# SPDX-License-Identifier: Apache-2.0
"""Checks shared by the accelerator shells' tests (tb/<block>/test_shell.py)."""

__all__ = ["assert_cleared_by_reset", "run_native_beats", "assert_record_is_model",
           "RECORD_KEYS"]


def assert_cleared_by_reset(cut: dict) -> None:
    """A job cut by ``aresetn`` (:mod:`gen.core.cocotb_axi`, ``reset_after``) began (some
    input beats went in) and left the registers at their reset values: STATUS idle, no
    interrupt pending, every performance counter 0."""
    assert cut["reset"]
    assert cut["beats_in"] > 0, "the reset came before the job's first input beat"
    assert (cut["status"], cut["irq"], cut["irq_status"]) == (0, 0, 0)
    assert cut["counters"] == {"cycles": 0, "busy": 0, "stall_in": 0, "stall_out": 0}


RECORD_KEYS = ("start_ack", "first_in", "end", "beats_in", "beats_out", "stall_in",
               "stall_out", "stall_in_any", "stall_out_any", "counters")


def run_native_beats(shell, cfg, jobs, sources, sinks, sim, name, max_cycles):
    """Run the shell's AXI jobs on the native engine (:mod:`gen.core.native_axi`); return
    ``(records, beats)``: the bench's per-job records and, per job, ``{sink port: [clock of
    every beat it took]}`` read from the run's event file (``K<k> <clock> <beat>`` lines
    after the job's ``J``), which the records do not keep."""
    from pathlib import Path
    from gen.core.native_axi import run_native_axi
    from gen.core.sim import build_root, verilog_for
    spec = {"jobs": jobs, "max_cycles": int(max_cycles),
            "sources": [{"port": p, "word_bytes": wb, "pattern": pat.to_json()}
                        for p, wb, pat in sources],
            "sinks": [{"port": p, "word_bytes": wb, "pattern": pat.to_json()}
                      for p, wb, pat in sinks]}
    module, text = verilog_for(shell, cfg)
    out = run_native_axi(module, text, spec, sim, build_root().resolve(), name=name)
    beats = []
    for line in (Path(out["test_dir"]) / "events.txt").read_text().splitlines():
        tag, *rest = line.split()
        if tag == "J":
            beats.append({p: [] for p, _, _ in sinks})
        elif tag[0] == "K" and len(tag) > 1:
            beats[-1][sinks[int(tag[1:])][0]].append(int(rest[0]))
    # (the event file's format is gen.core.native_axi's: a change there must show here)
    assert len(beats) == len(out["jobs"]), "native_axi's event file: one J line per job"
    for record, got in zip(out["jobs"], beats):
        if not record.get("reset"):
            assert sum(len(c) for c in got.values()) >= record["beats_out"], \
                "native_axi's event file lacks the K lines of the sink beats"
    return out["jobs"], beats


RESET_KEYS = ("reset", "counters", "status", "irq", "irq_status", "beats_out_before_reset",
              "beats_in")


def assert_record_is_model(record: dict, model: dict, what: str = "",
                           keys=RECORD_KEYS) -> None:
    """The bench's record of a job equals the cycle model's prediction in every clock and
    count of ``keys`` (of :data:`RESET_KEYS` for a job cut by a reset; a message naming
    every key that differs)."""
    if record.get("reset"):
        keys = RESET_KEYS
    bad = {k: (record[k], model.get(k)) for k in keys if record[k] != model.get(k)}
    assert not bad, f"RTL != model {what}: {{key: (rtl, model)}} = {bad}"
