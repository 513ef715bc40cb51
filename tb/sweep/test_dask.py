# SPDX-License-Identifier: Apache-2.0
"""``spnn sweep`` on real Dask clusters: an embedded LocalCluster of 2 workers, and a
``dask scheduler`` with 2 ``dask worker`` processes on 127.0.0.1.  Results equal the serial
run's; a worker killed mid-sweep loses no point; a rerun computes nothing; a failing point
is recorded while the rest completes."""

import csv
import subprocess
import sys

from gen.cli import main
from gen.sweep.results import read_rows
from tb.sweep.conftest import spmv_spec, wait_rows, write_spec

# columns that depend on where and how long a task ran
_TIMING = ("seconds",)


def _rows(out):
    header, rows = read_rows(out / "results.csv")
    return {k: {c: v for c, v in r.items() if c not in _TIMING} for k, r in rows.items()}


def _data_lines(out):
    return (out / "results.csv").read_text().splitlines()[1:]


def _serial(tmp_path, spec):
    out = tmp_path / "serial"
    assert main(["sweep", str(spec), "-o", str(out), "--serial", "-q"]) == 0
    return out


def test_local_cluster_equals_serial_and_rerun_computes_nothing(tmp_path, capsys):
    spec = write_spec(tmp_path, spmv_spec(grid={"pes": [2, 4], "fifo_depth": [2, 8],
                                                "mem_depth": [2, 64]}))
    ref = _serial(tmp_path, spec)
    out = tmp_path / "local"
    assert main(["sweep", str(spec), "-o", str(out), "--workers", "2", "-q"]) == 0
    assert _rows(out) == _rows(ref) and len(_rows(ref)) == 16
    assert (out / "summary.csv").read_bytes() == (ref / "summary.csv").read_bytes()
    assert (out / "summary.md").read_bytes() == (ref / "summary.md").read_bytes()
    assert (out / "pareto.png").read_bytes() == (ref / "pareto.png").read_bytes()
    # the failing points (mem_depth 2 holds no column) are recorded, the rest completed
    rows = _rows(out).values()
    assert sum(r["status"] == "failed" for r in rows) == 8
    assert all(r["status"] == "ok" for r in rows if r["mem_depth"] == "64")
    before = (out / "results.csv").read_bytes()
    capsys.readouterr()
    assert main(["sweep", str(spec), "-o", str(out), "--workers", "2"]) == 0
    assert "total 16, reused 16, run 0" in capsys.readouterr().out
    assert (out / "results.csv").read_bytes() == before          # nothing new computed


def test_scheduler_and_workers_equal_serial(tmp_path, local_dask):
    spec = write_spec(tmp_path, spmv_spec())
    ref = _serial(tmp_path, spec)
    out = tmp_path / "cluster"
    assert main(["sweep", str(spec), "-o", str(out), "--scheduler", local_dask.address,
                 "-q"]) == 0
    assert _rows(out) == _rows(ref) and len(_rows(ref)) == 16
    assert (out / "summary.csv").read_bytes() == (ref / "summary.csv").read_bytes()


def test_killing_a_worker_loses_no_point(tmp_path, local_dask):
    spec = write_spec(tmp_path, spmv_spec())
    out = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, "-m", "gen.cli", "sweep", str(spec), "-o",
                             str(out), "--scheduler", local_dask.address, "-q"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_rows(out / "results.csv", 2)
        local_dask.kill_worker(0)              # mid-sweep: 16 tasks of 0.4 s on 2 workers
        assert len(_data_lines(out)) < 16
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr
    keys = [line.split(",", 1)[0] for line in _data_lines(out)]
    assert len(keys) == len(set(keys)) == 16                    # every point exactly once
    with open(out / "results.csv") as handle:
        assert {r["status"] for r in csv.DictReader(handle)} == {"ok"}
    ref = _serial(tmp_path, spec)
    assert _rows(out) == _rows(ref)
