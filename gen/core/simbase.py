# SPDX-License-Identifier: Apache-2.0
"""What both simulation engines share (:mod:`gen.core.sim`, :mod:`gen.core.native`): the
error type, the build-folder lock and the progress switch."""

from contextlib import contextmanager
import contextvars
import fcntl
from pathlib import Path
import resource
import sys

__all__ = ["SimError", "showing_progress", "children_cpu"]


def children_cpu() -> float:
    """User + system CPU seconds of this process's finished (waited-for) children so far:
    the difference around a simulator run is that run's CPU time, which other load on the
    machine does not inflate as it does the wall time."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class SimError(RuntimeError):
    """The simulation did not complete (timeout, simulator failure)."""


@contextmanager
def _locked(path: Path):
    """An exclusive lock on ``path`` (created): one build per folder at a time, also
    across ``pytest -n`` workers."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


_PROGRESS = contextvars.ContextVar("spnn_progress", default=False)


@contextmanager
def showing_progress(on: bool = True):
    """Within this block :func:`gen.core.sim.run_job` tells what it does on stderr: a line
    per phase (Verilog conversion, simulator build, each only when not cached) and a progress
    bar while a native simulation runs.  ``spnn run`` turns it on when stderr is a terminal."""
    token = _PROGRESS.set(bool(on))
    try:
        yield
    finally:
        _PROGRESS.reset(token)


def _say(text):
    if _PROGRESS.get():
        sys.stderr.write(f"spnn: {text}\n")
        sys.stderr.flush()
