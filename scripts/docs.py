# SPDX-License-Identifier: Apache-2.0
"""Generated tables in README.md and docs/: the text between a pair of markers
``<!-- BEGIN <what> (<script> --docs) -->`` and ``<!-- END <what> -->`` is replaced by a
benchmark script's table (written to build/bench/ first), so every figure in the docs comes
from a script anyone can rerun."""

from pathlib import Path

__all__ = ["markers", "splice", "write_docs"]


def markers(what: str, script: str):
    """The ``(BEGIN, END)`` markers of one generated table."""
    return f"<!-- BEGIN {what} ({script} --docs) -->", f"<!-- END {what} -->"


def splice(path: Path, table: str, begin: str, end: str) -> bool:
    """Replace the text between ``begin`` and ``end`` in ``path`` by ``table``; False (the
    file untouched) when the file lacks the markers."""
    text = path.read_text()
    if begin not in text or end not in text:
        return False
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    path.write_text(f"{head}{begin}\n{table.strip(chr(10))}\n{end}{tail}")
    return True


def write_docs(table: str, what: str, script: str, files) -> None:
    """Splice ``table`` into every file of ``files`` that has the markers of ``what``."""
    begin, end = markers(what, script)
    for path in map(Path, files):
        if path.exists() and splice(path, table, begin, end):
            print(f"updated the {what} in {path}")
