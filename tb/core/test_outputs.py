# SPDX-License-Identifier: Apache-2.0
"""gen.core.outputs: output paths checked before work, staged files written all or nothing."""

import os

import numpy as np
import pytest

from gen.core.config import SpnnError
from gen.core.outputs import Outputs, check_output_file, check_output_folder, write_atomic


def test_commit_writes_every_file_and_creates_folders(tmp_path):
    out = Outputs()
    a = out.file(tmp_path / "new" / "deep" / "y.npy", "--out", suffix=".npy")
    b = out.file(tmp_path / "r.json", "--report")
    assert not (tmp_path / "new").exists()          # nothing is created by the checks
    out.npy(a, np.arange(3))
    out.json(b, {"x": np.float64(np.nan), "n": np.int64(3), "ok": np.bool_(True)})
    assert out.commit() == [a, b]
    np.testing.assert_array_equal(np.load(a), np.arange(3))
    assert b.read_text() == '{\n  "x": null,\n  "n": 3,\n  "ok": true\n}\n'
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["deep", "new", "r.json", "y.npy"]


def test_failed_commit_leaves_nothing_behind(tmp_path, monkeypatch):
    """A failure while writing: no temporary file, no created folder, old file intact."""
    old = tmp_path / "y.npy"
    old.write_bytes(b"the earlier good result")
    out = Outputs()
    out.npy(out.file(old, "--out"), np.arange(4))
    out.text(out.file(tmp_path / "sub" / "r.json", "--report"), "{}")
    real = os.fdopen
    calls = []

    def failing(fd, mode):
        calls.append(fd)
        if len(calls) == 2:
            os.close(fd)
            raise OSError("disk full")
        return real(fd, mode)

    monkeypatch.setattr(os, "fdopen", failing)
    with pytest.raises(OSError, match="disk full"):
        out.commit()
    assert old.read_bytes() == b"the earlier good result"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["y.npy"]


@pytest.mark.parametrize("make, message", [
    (lambda p: (p / "d").mkdir(), "--out: '{p}/d' is a folder; give a file name"),
    (lambda p: (p / "f").write_text("x"), "--out: cannot write '{p}/f/y.npy': '{p}/f' is a "
                                          "file, not a folder"),
])
def test_bad_output_files(tmp_path, make, message):
    make(tmp_path)
    target = tmp_path / ("d" if "folder;" in message else "f/y.npy")
    with pytest.raises(SpnnError) as err:
        check_output_file(target, "--out")
    assert str(err.value) == message.format(p=tmp_path)


def test_output_checks(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(SpnnError, match="must name a .npy file"):
        check_output_file(tmp_path / "y.txt", "--out", suffix=".npy")
    with pytest.raises(SpnnError, match="must name a file"):
        check_output_file("", "--out")
    with pytest.raises(SpnnError, match="is a file, not a folder"):
        check_output_folder(tmp_path / "f", "-o")
    with pytest.raises(SpnnError, match="is a file, not a folder"):
        check_output_folder(tmp_path / "f" / "sub", "-o")
    assert check_output_folder(tmp_path / "new" / "sub", "-o") == tmp_path / "new" / "sub"
    assert not (tmp_path / "new").exists()
    out = Outputs()
    out.file(tmp_path / "y.npy", "--out")
    with pytest.raises(SpnnError, match="--report names the same file as --out"):
        out.file(tmp_path / "." / "y.npy", "--report")


def test_write_atomic_replaces_whole_file(tmp_path):
    path = tmp_path / "a" / "r.json"
    write_atomic(path, b"one")
    write_atomic(path, b"two")
    assert path.read_bytes() == b"two" and sorted(p.name for p in path.parent.iterdir()) == \
        ["r.json"]
