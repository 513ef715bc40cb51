# SPDX-License-Identifier: Apache-2.0
"""The clock of a plan from measured place-and-route results (``spnn run model --fmax-from``).

Every block of a deployed network shares one clock, so the plan runs at the slowest block's
Fmax: per block the median ``fmax_mhz`` of its ``spnn synth`` reports (one per seed), then
the smallest over the blocks the plan's layers run on.  The reports are the JSON files
``spnn synth BLOCK [--shell] --target ecp5|ice40 [--seed N] -o DIR`` writes under
``DIR/synth/``; their configurations are recorded beside the figure, not matched against
the plan's (synthesise the configurations you deploy)."""

import json
from pathlib import Path
from statistics import median

from gen.core.config import SpnnError

__all__ = ["fmax_from_reports"]


def _reports(path: Path, flag: str) -> list:
    files = sorted(path.rglob("*.json")) if path.is_dir() else [path]
    out = []
    for f in files:
        try:
            r = json.loads(f.read_text())
        except (OSError, ValueError):
            if path.is_dir():
                continue
            raise SpnnError(f"{flag} {path}: not a JSON synthesis report") from None
        if isinstance(r, dict) and r.get("fmax_mhz") and r.get("block"):
            out.append(r)
    return out


def fmax_from_reports(path, blocks, flag: str = "--fmax-from"):
    """``(fmax_mhz, source)`` for a plan whose layers run on ``blocks`` from the place-and-
    route reports in ``path`` (a report file or a folder searched recursively); a one-line
    :class:`SpnnError` naming ``flag`` when ``path`` holds none for one of the blocks."""
    path = Path(path)
    if not path.exists():
        raise SpnnError(f"{flag} {path}: no such file or folder")
    found = {}
    for r in _reports(path, flag):
        found.setdefault(r["block"], []).append(r)
    per_block = {}
    for block in sorted(blocks):
        if block not in found:
            raise SpnnError(f"{flag} {path}: no place-and-route report of block {block!r} "
                            f"(spnn synth {block} --shell --target ecp5 -o {path})")
        rs = found[block]
        per_block[block] = {"fmax_mhz": median(float(r["fmax_mhz"]) for r in rs),
                            "reports": len(rs),
                            "modules": sorted({r.get("module", "") for r in rs}),
                            "seeds": sorted({r.get("seed") for r in rs if r.get("seed")
                                             is not None}),
                            "target": sorted({r.get("target", "") for r in rs})}
    if not per_block:
        raise SpnnError(f"{flag}: the plan runs no block layer, so no clock to measure")
    slowest = min(per_block, key=lambda b: per_block[b]["fmax_mhz"])
    return per_block[slowest]["fmax_mhz"], {
        "rule": "the slowest block's median Fmax over its reports (one clock for every "
                "block)", "slowest": slowest, "per_block": per_block}
