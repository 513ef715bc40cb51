# SPDX-License-Identifier: Apache-2.0
"""Fixtures of the sweep tests: spec files, and a real Dask cluster of separate processes
(``dask scheduler`` + two ``dask worker`` on 127.0.0.1, killed at teardown)."""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

# A small matrix: model tasks take milliseconds.
SMALL = {"name": "small", "generate": {"rows": 48, "cols": 24, "density": 0.25, "seed": 1}}
SKEWED = {"name": "skewed", "generate": {"rows": 48, "cols": 24, "density": 0.25,
                                         "skew": True, "seed": 2}}


def spmv_spec(**over) -> dict:
    """A 2 x 2 x 2 spmv grid over two small matrices, model stage."""
    spec = {"block": "spmv", "base": {"rows_per_pe": 16, "max_cols": 32, "mem_depth": 64},
            "grid": {"pes": [2, 4], "fifo_depth": [2, 8], "alloc": ["zigzag", "balanced"]},
            "workloads": [SMALL, SKEWED], "stages": ["model"]}
    spec.update(over)
    return spec


def write_spec(folder: Path, spec: dict, name="spec.yaml") -> Path:
    path = Path(folder) / name
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _dask(*args):
    """The venv's ``dask`` command (beside the interpreter), else ``python -m dask``."""
    exe = Path(sys.executable).parent / "dask"
    return [str(exe), *args] if exe.exists() else [sys.executable, "-m", "dask", *args]


class LocalDask:
    """``dask scheduler`` and ``dask worker`` processes on 127.0.0.1."""

    def __init__(self, tmp: Path, workers: int = 2, env=None):
        self.port = _free_port()
        self.address = f"tcp://127.0.0.1:{self.port}"
        self.env = {**os.environ, **(env or {})}
        self.tmp = tmp
        self.scheduler = self._start(_dask("scheduler", "--host", "127.0.0.1", "--port",
                                           str(self.port), "--no-dashboard"), "scheduler")
        self.workers = [self.start_worker(i) for i in range(workers)]
        self.wait_for(workers)

    def _start(self, cmd, name):
        log = open(self.tmp / f"{name}.log", "w")
        return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=self.env,
                                start_new_session=True)

    def start_worker(self, i):
        return self._start(_dask("worker", self.address, "--nthreads", "1", "--no-nanny",
                                 "--no-dashboard", "--host", "127.0.0.1", "--resources",
                                 "synth=1", "--name", f"w{i}", "--death-timeout", "60"),
                           f"worker{i}")

    def wait_for(self, n, timeout=60.0):
        from dask.distributed import Client
        with Client(self.address, timeout="30s") as client:
            client.wait_for_workers(n, timeout=timeout)

    def kill_worker(self, i):
        os.killpg(self.workers[i].pid, signal.SIGKILL)
        self.workers[i].wait(10)

    def close(self):
        for proc in [*self.workers, self.scheduler]:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                    proc.wait(10)
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(10)


@pytest.fixture
def local_dask(tmp_path):
    """A scheduler and two workers (separate processes); each task sleeps 0.4 s."""
    cluster = LocalDask(tmp_path, env={"SPNN_SWEEP_SLEEP": "0.4"})
    try:
        yield cluster
    finally:
        cluster.close()


def wait_rows(path: Path, n: int, timeout: float = 60.0):
    """Wait until results.csv holds ``n`` data rows."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and len(path.read_text().splitlines()) > n:
            return
        time.sleep(0.05)
    raise TimeoutError(f"{path} has not {n} rows after {timeout} s")
