# SPDX-License-Identifier: Apache-2.0
"""Running a sweep's tasks on Dask (``dask.distributed``), or one after another.

* By default an embedded :class:`distributed.LocalCluster`: one single-threaded worker
  process per core (``--workers N`` to choose), each offering the resource ``synth=1`` when
  the machine has :data:`SYNTH_MEMORY_GB` of memory per worker for it.
* ``--scheduler tcp://HOST:8786``: an existing cluster (``dask scheduler`` and ``dask
  worker``, or dask-jobqueue on SLURM/PBS; docs/sweep.md).  Its workers declare what
  place and route they can run with ``--resources synth=N``.
* ``--serial``: every task in this process, in order (a reference run, and for debugging);
  no Dask.

Dask schedules: every task is a future (``client.submit``) with ``retries`` (a task that
raises outside the point's own work is run again), ``resources={"synth": 1}`` for synthesis
(a worker never runs more place-and-route jobs at once than it declares) and a priority
(synthesis first: the long tasks start early).  A worker that dies takes no result with
it: the scheduler reruns its tasks on the others (``distributed.scheduler.allowed-failures``
deaths per task, then the task is reported ``lost`` and the next run tries it again).
Results come back in completion order (``as_completed``) and each is written to
``results.csv`` at once.
"""

import logging
import os
import sys
import time
import warnings

from gen.core.config import SpnnError
from gen.sweep.tasks import run_task, workload_data

__all__ = ["execute", "open_client", "warm_workers", "SYNTH_MEMORY_GB", "Progress"]

SYNTH_MEMORY_GB = 4


class Progress:
    """Points done / running / failed and the ETA, on stderr: rewritten in place on a
    terminal, a line every ``every`` seconds otherwise."""

    def __init__(self, total: int, stream=None, every: float = 5.0, quiet: bool = False):
        self.total, self.stream, self.every, self.quiet = total, stream or sys.stderr, every, \
            quiet
        self.done = self.failed = self.lost = 0
        self.start = time.monotonic()
        self._last = 0.0
        self._tty = hasattr(self.stream, "isatty") and self.stream.isatty()

    def update(self, status: str, running: int = 0):
        self.done += 1
        self.failed += status == "failed"
        self.lost += status == "lost"
        now = time.monotonic()
        if self.quiet or (not self._tty and now - self._last < self.every
                          and self.done < self.total):
            return
        self._last = now
        self.stream.write(("\r" if self._tty else "") + self.line(running)
                          + ("" if self._tty and self.done < self.total else "\n"))
        self.stream.flush()

    def line(self, running: int = 0) -> str:
        elapsed = time.monotonic() - self.start
        left = self.total - self.done
        eta = elapsed / self.done * left if self.done else None
        text = (f"sweep: {self.done}/{self.total} done, {running} running, "
                f"{self.failed} failed" + (f", {self.lost} lost" if self.lost else ""))
        return text + (f", ETA {_clock(eta)}" if eta is not None and left else
                       f" in {_clock(elapsed)}" if not left else "")


def _clock(seconds) -> str:
    s = int(round(seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else \
        f"{s // 60}:{s % 60:02d}"


def _memory_gb() -> float:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2 ** 30
    except (ValueError, OSError, AttributeError):
        return 0.0


def open_client(scheduler=None, workers=None, flag="--scheduler", timeout: float = 15.0):
    """``(client, cluster or None)``: connected to ``scheduler``, or an embedded
    :class:`LocalCluster` of ``workers`` single-threaded worker processes (default: one per
    core).  A scheduler that cannot be reached within ``timeout`` seconds is a one-line
    :class:`SpnnError`."""
    from dask.distributed import Client, LocalCluster
    if scheduler:
        try:
            return Client(scheduler, timeout=f"{timeout:g}s"), None
        except (OSError, TimeoutError, ValueError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else \
                type(exc).__name__
            raise SpnnError(f"{flag} {scheduler!r}: cannot connect to a Dask scheduler "
                            f"({first})") from None
    n = workers or os.cpu_count() or 1
    synth = 1 if _memory_gb() >= SYNTH_MEMORY_GB * n else 0
    cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                           dashboard_address=None, silence_logs=logging.ERROR,
                           resources={"synth": synth} if synth else None)
    return Client(cluster), cluster


def _warm():
    """Import what every task needs (the registry and its blocks' gateware: about a second
    per process), so that the first tasks of each worker do not pay it."""
    import gen.registry  # noqa: F401
    import gen.sweep.blocks  # noqa: F401
    return True


def warm_workers(client):
    """Run :func:`_warm` on every worker now (``client.run``)."""
    client.run(_warm)


def _synth_capacity(client, wait: float = 10.0) -> int:
    """The ``synth`` resource the cluster's workers offer (waiting up to ``wait`` s for a
    worker to join)."""
    deadline = time.monotonic() + wait
    while True:
        workers = client.scheduler_info().get("workers", {})
        total = sum(w.get("resources", {}).get("synth", 0) for w in workers.values())
        if total or time.monotonic() > deadline:
            return int(total)
        time.sleep(0.2)


def _row(task, out):
    return {"key": task.key, "workload": task.workload, "stage": task.stage,
            "target": task.target, "seed": task.seed, "status": out["status"],
            "error": out["error"], "seconds": out["seconds"], **out["figures"]}


def _serial(tasks, workloads, emit):
    cache = {}
    for task in tasks:
        data = None
        if task.workload:
            if task.workload not in cache:
                cache[task.workload] = workload_data(workloads[task.workload])
            data = cache[task.workload]
        emit(task, run_task(task.payload, data), 0)


_PRIORITY = {"synth": 20, "rtl": 10, "model": 0}


def _dask(client, tasks, workloads, emit, retries):
    from dask.distributed import as_completed
    if any(t.stage == "synth" for t in tasks) and not _synth_capacity(client):
        raise SpnnError("no Dask worker offers the 'synth' resource, so synthesis tasks "
                        "could never start; start workers with --resources synth=1 (one "
                        f"per {SYNTH_MEMORY_GB} GB and core), or give the embedded cluster "
                        f"fewer --workers (it offers synth with {SYNTH_MEMORY_GB} GB of "
                        "memory per worker)")
    used = {t.workload for t in tasks if t.workload}
    wfut = {name: client.submit(workload_data, workloads[name], pure=False, retries=retries,
                                key=f"spnn-workload-{workloads[name].digest[:24]}",
                                priority=30)
            for name in sorted(used)}
    futures = {}
    for t in tasks:
        args = (t.payload, wfut[t.workload]) if t.workload else (t.payload,)
        fut = client.submit(run_task, *args, key=f"spnn-{t.stage}-{t.key[:32]}",
                            pure=False, retries=retries, priority=_PRIORITY[t.stage],
                            resources={"synth": 1} if t.stage == "synth" else None)
        futures[fut.key] = (fut, t)
    for fut in as_completed([f for f, _ in futures.values()]):
        task = futures.pop(fut.key)[1]
        try:
            out = fut.result()
        except Exception as exc:   # noqa: BLE001 - KilledWorker and the like: lost
            text = str(exc).strip().splitlines()
            out = {"status": "lost", "figures": {}, "seconds": None,
                   "error": f"{type(exc).__name__}: {text[0] if text else ''}"[:300]}
        fut.release()
        emit(task, out, len(futures))


def execute(tasks, workloads: dict, log, fixed: dict, *, client=None, retries: int = 2,
            progress=None) -> dict:
    """Run ``tasks`` (on ``client``, or serially when it is ``None``), append each result
    to ``log`` (:class:`gen.sweep.results.ResultsLog`) as it finishes, with the config and
    option columns of ``fixed[task.key]``; returns ``{key: output}``."""
    results = {}

    def emit(task, out, pending):
        results[task.key] = out
        log.append({**fixed[task.key], **_row(task, out)})
        if progress is not None:
            running = min(pending, progress.slots) if hasattr(progress, "slots") else 0
            progress.update(out["status"], running)

    if client is None:
        _serial(tasks, workloads, emit)
        return results
    if progress is not None:
        info = client.scheduler_info().get("workers", {})
        progress.slots = sum(w.get("nthreads", 1) for w in info.values()) or 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)   # "large graph" for inline workloads
        _dask(client, tasks, workloads, emit, retries)
    return results
