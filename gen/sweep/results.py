# SPDX-License-Identifier: Apache-2.0
"""``OUT/results.csv``: the sweep's crash-safe log, one row per finished task.

Each row is written (and flushed to disk) the moment its task finishes, so a sweep that is
stopped, crashes or loses its machine keeps every result it had; the next run reads the
file and skips every key already there with status ``ok`` or ``failed`` (a ``failed`` point
fails the same way again: ``--retry-failed`` runs those too).  Rows with status ``lost`` (the
task's workers died more often than Dask allows) are always run again.

Columns: ``key`` (the task's results key), ``point_id``, ``block``, every config field of
the block, its options, ``workload``, ``stage``, ``target``, ``seed``, ``status``,
``error``, the stages' figures, ``seconds`` (the task's own run time on its worker).  Rows
appear in the order tasks finish; the summary files are in point order.  A file written by
another spec (other columns) is rewritten with the union of both column lists first (to a
temporary file, then renamed); a torn last line (a crash mid-write) is dropped.
"""

import csv
import io
import os
from pathlib import Path

from gen.core.outputs import write_atomic

__all__ = ["ResultsLog", "STATUSES", "columns_for", "read_rows"]

STATUSES = ("ok", "failed", "lost")
HEAD = ("key", "point_id", "block")
TAIL = ("workload", "stage", "target", "seed", "status", "error")


def columns_for(config_fields, options, figures) -> list:
    """The column list of a block's results (module docstring)."""
    return [*HEAD, *config_fields, *options, *TAIL, *figures, "seconds"]


def _valid(row) -> bool:
    key = row.get("key") or ""
    return len(key) == 64 and all(c in "0123456789abcdef" for c in key) and \
        row.get("status") in STATUSES and None not in row and \
        all(v is not None for v in row.values())


def read_rows(path) -> tuple:
    """``(columns, {key: row})`` of a results file (the last row of a key wins); rows that
    are not whole (a torn last line) are left out."""
    p = Path(path)
    if not p.exists():
        return [], {}
    with open(p, newline="") as handle:
        reader = csv.DictReader(handle)
        rows = {row["key"]: row for row in reader if _valid(row)}
        return list(reader.fieldnames or []), rows


def _text(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(round(value, 6))
    return str(value)


class ResultsLog:
    """The results file of one sweep, open for appending.

    Parameters
    ----------
    path : Path
        ``OUT/results.csv``.
    columns : list
        :func:`columns_for` of this sweep.
    """

    def __init__(self, path, columns):
        self.path = Path(path)
        self.columns = list(columns)
        self.rows = {}
        self._handle = None
        self._writer = None

    def open(self):
        """Read what is there, rewrite it if its columns or lines need it, open to append."""
        old_cols, rows = read_rows(self.path)
        self.rows = rows
        cols = self.columns + [c for c in old_cols if c not in self.columns]
        whole = self.path.exists() and self._line_count() == len(rows) + 1
        if cols != old_cols or not whole:
            self.columns = cols
            buf = io.StringIO()
            w = csv.DictWriter(buf, cols, lineterminator="\n", extrasaction="ignore")
            w.writeheader()
            for row in rows.values():
                w.writerow(row)
            write_atomic(self.path, buf.getvalue().encode())
        else:
            self.columns = cols
        self._handle = open(self.path, "a", newline="")
        self._writer = csv.DictWriter(self._handle, self.columns, lineterminator="\n",
                                      extrasaction="ignore")
        return self

    def _line_count(self) -> int:
        with open(self.path, newline="") as handle:
            return sum(1 for _ in csv.reader(handle))

    def done(self, retry_failed=False) -> set:
        """Keys that need no new run."""
        keep = ("ok",) if retry_failed else ("ok", "failed")
        return {k for k, row in self.rows.items() if row["status"] in keep}

    def append(self, row: dict):
        """Write one row now (flushed and synced to disk)."""
        text = {k: _text(v) for k, v in row.items()}
        self._writer.writerow(text)
        self._handle.flush()
        os.fsync(self._handle.fileno())
        self.rows[text["key"]] = {c: text.get(c, "") for c in self.columns}

    def close(self):
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def __enter__(self):
        return self.open()

    def __exit__(self, *exc):
        self.close()
