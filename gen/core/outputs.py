# SPDX-License-Identifier: Apache-2.0
"""Output files of one ``spnn`` command: checked before any work, written all at once.

Every command that writes files follows the same rules (docs/cli.md, "Outputs"):

* every output path is checked **before any work**: a path that is an existing folder,
  whose parent (or any ancestor) is a file, or whose nearest existing folder cannot be
  written to is refused with one line naming the flag;
* missing parent folders **are created**, but only when the outputs are written, so a
  refused or failed run creates none;
* outputs are written at the very end, each first to a temporary file in its own folder,
  then renamed into place (``os.replace``) once all of them were written: a failed run
  leaves nothing behind and an existing file is never half-overwritten.

Example::

    out = Outputs()
    out.file(args.out, "--out", suffix=".npy")     # checked now
    out.file(args.report, "--report")
    ...                                            # the work
    out.npy(args.out, y); out.json(args.report, report)
    out.commit()                                   # temporary files, then renames
"""

import io
import json
import os
import tempfile
from pathlib import Path

import numpy as np

from gen.core.config import SpnnError

__all__ = ["Outputs", "check_output_file", "check_output_folder", "write_atomic", "output_flag"]


def _ancestor_problem(path: Path):
    """The first ancestor of ``path`` that exists and is not a folder, or the nearest
    existing folder when it cannot be written to; ``None`` when ``path`` can be created."""
    for parent in reversed(path.parents):
        if parent.exists() and not parent.is_dir():
            return f"{str(parent)!r} is a file, not a folder"
    existing = next((p for p in path.parents if p.exists()), Path("."))
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"the folder {str(existing)!r} cannot be written to"
    return None


def check_output_file(path, flag: str, suffix=None) -> Path:
    """Refuse (one line naming ``flag``) an output file path that cannot be written."""
    text = str(path)
    if not text.strip():
        raise SpnnError(f"{flag} must name a file, not {text!r}")
    p = Path(path)
    if suffix is not None and p.suffix.lower() != suffix:
        raise SpnnError(f"{flag} must name a {suffix} file, not {text!r}")
    if p.is_dir():
        raise SpnnError(f"{flag}: {text!r} is a folder; give a file name")
    problem = _ancestor_problem(p)
    if problem:
        raise SpnnError(f"{flag}: cannot write {text!r}: {problem}")
    if p.exists() and not os.access(p, os.W_OK):
        raise SpnnError(f"{flag}: cannot write {text!r}: the file is read-only")
    return p


def check_output_folder(path, flag: str) -> Path:
    """Refuse (one line naming ``flag``) an output folder that is a file or cannot be
    created; missing folders are fine (they are created when something is written)."""
    text = str(path)
    if not text.strip():
        raise SpnnError(f"{flag} must name a folder, not {text!r}")
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise SpnnError(f"{flag}: {text!r} is a file, not a folder")
    problem = _ancestor_problem(p / "x")
    if problem:
        raise SpnnError(f"{flag}: cannot write into {text!r}: {problem}")
    return p


def write_atomic(path, data: bytes):
    """Write ``data`` to ``path`` through a temporary file in the same folder and a rename
    (for files written one at a time, e.g. synthesis reports); creates missing folders."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temp_beside(p, data)
    os.replace(tmp, p)


def _temp_beside(p: Path, data: bytes) -> Path:
    fd, name = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
    except BaseException:
        os.unlink(name)
        raise
    return Path(name)


class Outputs:
    """The output files of one command (see the module docstring).

    ``file()`` / ``folder()`` check a path at once; ``npy()``, ``json()``, ``text()`` and
    ``data()`` stage content in memory; ``commit()`` writes everything.  A path given as
    ``None`` (an optional output that was not asked for) is ignored everywhere.
    """

    def __init__(self):
        self._flags = {}     # resolved path -> flag, for duplicate detection
        self._staged = {}    # Path -> bytes, in staging order

    def file(self, path, flag: str, suffix=None):
        """Check an output file path now; returns it as a Path (``None`` stays ``None``)."""
        if path is None:
            return None
        p = check_output_file(path, flag, suffix)
        key = p.resolve()
        if key in self._flags:
            raise SpnnError(f"{flag} names the same file as {self._flags[key]}: {str(path)!r}")
        self._flags[key] = flag
        return p

    def folder(self, path, flag: str) -> Path:
        """Check an output folder now; files staged under it with ``data()`` go there."""
        return check_output_folder(path, flag)

    def data(self, path, content: bytes):
        if path is not None:
            self._staged[Path(path)] = bytes(content)

    def text(self, path, content: str):
        self.data(path, content.encode())

    def json(self, path, obj):
        """Stage ``obj`` as indented JSON (NaN and infinities as ``null``)."""
        self.text(path, json.dumps(jsonable(obj), indent=2) + "\n")

    def npy(self, path, arr):
        if path is None:
            return
        buf = io.BytesIO()
        np.save(buf, np.asarray(arr), allow_pickle=False)
        self.data(path, buf.getvalue())

    def staged_text(self, path) -> str:
        """The text staged for ``path`` (not yet written)."""
        return self._staged[Path(path)].decode()

    @property
    def paths(self) -> list:
        return list(self._staged)

    def commit(self) -> list:
        """Write every staged file (temporary files first, then the renames); on any
        failure remove the temporary files and the folders this call created."""
        made, temps = [], []
        try:
            for p in self._staged:
                for parent in reversed(p.parents):
                    if not parent.exists():
                        parent.mkdir()
                        made.append(parent)
            for p, content in self._staged.items():
                temps.append((_temp_beside(p, content), p))
        except BaseException:
            for tmp, _ in temps:
                tmp.unlink(missing_ok=True)
            for folder in reversed(made):
                try:
                    folder.rmdir()
                except OSError:
                    pass
            raise
        for tmp, p in temps:
            os.replace(tmp, p)
        return list(self._staged)


def jsonable(obj):
    """``obj`` with numpy scalars/arrays as Python values and non-finite floats as None."""
    import math
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist())
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, (np.floating, float)):
        return None if not math.isfinite(float(obj)) else float(obj)
    return obj


def output_flag(args, short="-o", long="--output") -> str:
    """The spelling of an output flag the user typed (for messages)."""
    argv = getattr(args, "argv", None) or []
    return long if any(a == long or a.startswith(long + "=") for a in argv) else short
