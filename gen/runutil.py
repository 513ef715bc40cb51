# SPDX-License-Identifier: Apache-2.0
"""Shared pieces of the ``spnn run <block>`` commands: input loading, the report schema.

Every ``spnn run`` report has the same top-level fields (where a field does not
apply it is ``null``)::

    block, config, formats, sim, cycles, ideal_cycles, efficiency (= ideal / cycles),
    utilisation, samples, max_abs_error

followed by block-specific fields.  ``docs/reports.md`` documents them.
"""

import json
import math
from pathlib import Path

import numpy as np

from .config import SpnnError, config_to_dict
from .fixed import parse_format

__all__ = ["load_npy", "check_finite", "add_common_arguments", "make_report", "write_report",
           "write_npy", "int_arg", "float_arg", "format_arg", "REPORT_FIELDS"]

REPORT_FIELDS = ("block", "config", "formats", "sim", "cycles", "ideal_cycles", "efficiency",
                 "utilisation", "samples", "max_abs_error")


def int_arg(text, name: str, lo=None) -> int:
    """``text`` as an integer (at least ``lo`` if given); otherwise a one-line SpnnError."""
    try:
        value = int(text)
    except (TypeError, ValueError):
        raise SpnnError(f"{name} must be an integer, not {text!r}") from None
    if lo is not None and value < lo:
        raise SpnnError(f"{name} must be at least {lo}, not {value}")
    return value


def float_arg(text, name: str) -> float:
    """``text`` as a number; otherwise a one-line SpnnError (range checks are the caller's)."""
    try:
        return float(text)
    except (TypeError, ValueError):
        raise SpnnError(f"{name} must be a number, not {text!r}") from None


def format_arg(text, name: str):
    """``text`` (e.g. ``"Q4.12"``) as a :class:`gen.fixed.QFormat`; otherwise a SpnnError."""
    try:
        return parse_format(text, name)
    except (TypeError, ValueError) as exc:
        raise SpnnError(str(exc)) from None


def load_npy(path, name: str) -> np.ndarray:
    """Load a ``.npy`` safely (``allow_pickle=False``); any problem is a one-line SpnnError."""
    p = Path(path)
    if not p.is_file():
        raise SpnnError(f"{name}: no such file {str(path)!r}")
    try:
        arr = np.load(p, allow_pickle=False)
    except ValueError as exc:
        if "pickle" in str(exc).lower():
            raise SpnnError(f"{name}: {str(path)!r} holds pickled objects, which are not "
                            f"loaded; save a numeric array") from None
        raise SpnnError(f"{name}: {str(path)!r} is not a readable .npy file ({exc})") from None
    except Exception as exc:  # noqa: BLE001 - any parse failure is a user error here
        raise SpnnError(f"{name}: {str(path)!r} is not a readable .npy file ({exc})") from None
    if not isinstance(arr, np.ndarray) or arr.dtype.kind not in "biuf":
        raise SpnnError(f"{name}: dtype must be integer or float, not {arr.dtype}")
    return arr


def check_finite(arr: np.ndarray, name: str):
    if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
        bad = "NaN" if np.any(np.isnan(arr)) else "Inf"
        raise SpnnError(f"{name}: values must be finite, found {bad}")


def add_common_arguments(parser):
    parser.add_argument("--sim", default="verilator", choices=["verilator", "icarus"],
                        help="simulator for the RTL run (default: verilator)")
    parser.add_argument("--report", metavar="R.json", help="write the JSON report here")
    parser.add_argument("--waves", action="store_true",
                        help="dump waveforms of the RTL run (under build/sim/...)")
    parser.add_argument("--seed", type=int, default=0, help="stimulus seed (default 0)")


def make_report(block, cfg, formats, sim, cycles, ideal_cycles, samples, max_abs_error,
                utilisation=None, **extra) -> dict:
    efficiency = (ideal_cycles / cycles) if cycles and ideal_cycles is not None else None
    report = {
        "block": block,
        "config": config_to_dict(cfg) if cfg is not None else None,
        "formats": formats,
        "sim": sim,
        "cycles": cycles,
        "ideal_cycles": ideal_cycles,
        "efficiency": efficiency,
        "utilisation": utilisation,
        "samples": samples,
        "max_abs_error": max_abs_error,
    }
    report.update(extra)
    return report


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist())
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, (np.floating, float)):
        return None if not math.isfinite(float(obj)) else float(obj)
    return obj


def write_report(path, report: dict):
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(_jsonable(report), indent=2) + "\n")


def write_npy(path, arr):
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    np.save(path, arr, allow_pickle=False)
