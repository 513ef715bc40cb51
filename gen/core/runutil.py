# SPDX-License-Identifier: Apache-2.0
"""Shared pieces of the ``spnn run <block>`` commands: input loading, the report schema.

Every ``spnn run`` report has the same top-level fields (where a field does not
apply it is ``null``)::

    block, config, formats, sim, cycles, ideal_cycles, efficiency (= ideal / cycles),
    utilisation, samples, max_abs_error

then ``interface`` (``stream``: the bare block; ``axi``: its accelerator shell, with the
fields of :func:`roofline_fields`), followed by block-specific fields.  ``docs/reports.md``
documents them.
"""

import math
from pathlib import Path

import numpy as np

from gen.core.config import SpnnError, config_to_dict
from gen.core.fixed import parse_format
from gen.core.outputs import Outputs

__all__ = ["load_npy", "check_finite", "check_not_empty", "int_codes", "signed_bits",
           "quantise_checked", "codes_of", "config_or_error", "flag_message",
           "add_common_arguments", "make_report", "int_arg", "float_arg",
           "format_arg", "check_common", "run_outputs", "roofline_fields",
           "add_requant_arguments", "requant_args", "REPORT_FIELDS"]

REPORT_FIELDS = ("block", "config", "formats", "sim", "cycles", "ideal_cycles", "efficiency",
                 "utilisation", "samples", "max_abs_error")


def int_arg(text, name: str, lo=None, hi=None) -> int:
    """``text`` as an integer in ``lo..hi`` (either bound optional); otherwise a one-line
    SpnnError naming ``name`` (the flag as typed), the value and what is allowed."""
    if isinstance(text, bool):
        raise SpnnError(f"{name} must be an integer, not {text!r}")
    if isinstance(text, int):
        value = text
    else:
        try:
            value = int(str(text).strip())
        except (TypeError, ValueError):
            raise SpnnError(f"{name} must be an integer, not {text!r}") from None
    if lo is not None and hi is not None and not lo <= value <= hi:
        raise SpnnError(f"{name} must be between {lo} and {hi}, not {str(text).strip()}")
    if lo is not None and value < lo:
        raise SpnnError(f"{name} must be at least {lo}, not {str(text).strip()}")
    if hi is not None and value > hi:
        raise SpnnError(f"{name} must be at most {hi}, not {str(text).strip()}")
    return value


def float_arg(text, name: str, lo=None, hi=None, lo_open=False, unit="") -> float:
    """``text`` as a finite number in ``[lo, hi]`` (``(lo, hi]`` with ``lo_open``; bounds
    optional); otherwise a one-line SpnnError.  NaN and infinities are always refused."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise SpnnError(f"{name} must be a number, not {text!r}") from None
    if not math.isfinite(value):
        raise SpnnError(f"{name} must be a finite number, not {text!r}")
    ok_lo = lo is None or (value > lo if lo_open else value >= lo)
    ok_hi = hi is None or value <= hi
    if not (ok_lo and ok_hi):
        if lo is not None and hi is not None:
            what = f"between {lo:g} and {hi:g}{unit}" + (f", excluding {lo:g}" if lo_open
                                                          else "")
        elif lo is not None:
            what = f"{'above' if lo_open else 'at least'} {lo:g}"
        else:
            what = f"at most {hi:g}"
        raise SpnnError(f"{name} must be {what}, not {str(text).strip()}")
    return value


def format_arg(text, name: str, lo=None, hi=None):
    """``text`` (e.g. ``"Q4.12"``) as a :class:`gen.core.fixed.QFormat`, ``lo..hi`` bits wide if
    given; otherwise a one-line SpnnError naming ``name`` and the text."""
    try:
        fmt = parse_format(text, name)
    except (TypeError, ValueError) as exc:
        raise SpnnError(str(exc)) from None
    if lo is not None and not lo <= fmt.width <= hi:
        raise SpnnError(f"{name} must be {lo} to {hi} bits wide, not {text!r} "
                        f"({fmt.width} bits)")
    return fmt


def load_npy(path, name: str) -> np.ndarray:
    """Load a numeric ``.npy`` safely (``allow_pickle=False``); any problem (missing file,
    folder, ``.npz`` archive, pickled objects, corrupt or truncated file, non-numeric dtype)
    is a one-line SpnnError naming ``name``."""
    p = Path(path)
    if p.is_dir():
        raise SpnnError(f"{name}: {str(path)!r} is a folder, not a .npy file")
    if not p.is_file():
        raise SpnnError(f"{name}: no such file {str(path)!r}")
    try:
        arr = np.load(p, allow_pickle=False)
    except ValueError as exc:
        if "pickle" in str(exc).lower():
            raise SpnnError(f"{name}: {str(path)!r} holds pickled objects, which are not "
                            f"loaded; save a numeric array") from None
        raise SpnnError(f"{name}: {str(path)!r} is not a readable .npy file "
                        f"({_first_line(exc)})") from None
    except Exception as exc:  # noqa: BLE001 - any parse failure is a user error here
        raise SpnnError(f"{name}: {str(path)!r} is not a readable .npy file "
                        f"({_first_line(exc)})") from None
    if isinstance(arr, np.lib.npyio.NpzFile):
        arr.close()
        raise SpnnError(f"{name}: {str(path)!r} is an .npz archive; give one array as .npy")
    if not isinstance(arr, np.ndarray) or arr.dtype.kind not in "biuf":
        kind = arr.dtype if isinstance(arr, np.ndarray) else type(arr).__name__
        raise SpnnError(f"{name}: dtype must be integer or float, not {kind}")
    return arr


def _first_line(exc) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:160] if text else type(exc).__name__


def check_finite(arr: np.ndarray, name: str):
    """A float array with NaN or an infinity is a one-line SpnnError naming ``name``."""
    if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
        bad = "NaN" if np.any(np.isnan(arr)) else "Inf"
        raise SpnnError(f"{name}: values must be finite, found {bad}")


def check_not_empty(arr: np.ndarray, name: str):
    """An array with a zero-length axis is refused: no block runs an empty tensor (see
    docs/cli.md, 'Inputs')."""
    if arr.size == 0:
        raise SpnnError(f"{name} must not be empty, not shape {tuple(arr.shape)}")


def int_codes(arr: np.ndarray, name: str, lo: int, hi: int, what: str) -> np.ndarray:
    """An integer (or bool) array whose values lie in ``lo..hi`` as int64.

    The range is checked on the array's own dtype before any cast, so a ``uint64`` above
    2**63 is refused instead of wrapping.  ``what`` says what the range is (e.g.
    ``"codes of --w-fmt Q1.7"``)."""
    if arr.dtype.kind not in "biu":
        raise SpnnError(f"{name} must hold integers, not {arr.dtype}")
    if arr.size:
        amin, amax = int(arr.min()), int(arr.max())
        if amin < lo or amax > hi:
            bad = amin if amin < lo else amax
            raise SpnnError(f"{name}: value {bad} lies outside [{lo}, {hi}] ({what})")
    return arr.astype(np.int64)


def signed_bits(arr: np.ndarray) -> int:
    """Smallest signed width (>= 2) holding every value of an integer array (exact for any
    integer dtype, ``uint64`` included)."""
    if arr.size == 0:
        return 2
    lo, hi = int(arr.min()), int(arr.max())
    return max(2, max(hi, -lo - 1).bit_length() + 1)


def quantise_checked(arr: np.ndarray, fmt, name: str, fmt_name: str) -> np.ndarray:
    """Real values -> codes of ``fmt`` (round half up), refusing NaN, infinities and any
    value that would saturate: one line naming ``name``, the offending value, the format
    (given by ``fmt_name``) and its range."""
    check_finite(arr, name)
    v = np.asarray(arr, dtype=np.float64)
    scaled = np.floor(v * (2.0 ** fmt.frac_bits) + 0.5)
    out = (scaled < fmt.min_code) | (scaled > fmt.max_code)
    if np.any(out):
        bad = float(v.ravel()[int(np.flatnonzero(out.ravel())[0])])
        raise SpnnError(f"{name}: value {bad:.9g} lies outside the range of {fmt_name} {fmt}, "
                        f"[{fmt.min_value:g}, {fmt.max_value:g}]; scale the data or give a "
                        f"wider {fmt_name}")
    return scaled.astype(np.int64)


def codes_of(arr: np.ndarray, fmt, name: str, fmt_name: str) -> np.ndarray:
    """The one input rule of every ``spnn run`` block: an integer array holds codes of
    ``fmt`` (checked against its range), a float array holds real values (quantised,
    refused where it would saturate)."""
    if arr.dtype.kind in "biu":
        return int_codes(arr, name, fmt.min_code, fmt.max_code, f"codes of {fmt_name} {fmt}")
    return quantise_checked(arr, fmt, name, fmt_name)


def config_or_error(cls, flags: dict, **kwargs):
    """``cls(**kwargs)``; a TypeError/ValueError becomes a one-line SpnnError in which a
    leading config field name is replaced by the flag the user typed (``flags`` maps field
    -> flag text, e.g. ``{"pes": "--pes"}``).  The one place where CLI commands turn config
    messages into flag messages."""
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise SpnnError(flag_message(str(exc), flags)) from None


def flag_message(msg: str, flags: dict) -> str:
    """``msg`` with a leading config field name (``"pes must ..."``) replaced by its flag."""
    for field, flag in sorted(flags.items(), key=lambda kv: -len(kv[0])):
        if msg.startswith(field + " ") or msg.startswith(field + ":"):
            return flag + msg[len(field):]
    return msg


def add_common_arguments(parser):
    parser.add_argument("--sim", default="verilator", choices=["verilator", "icarus"],
                        help="simulator for the RTL run (default: verilator)")
    parser.add_argument("--report", metavar="R.json", help="write the JSON report here")
    parser.add_argument("--engine", default="native", choices=["native", "cocotb"],
                        help="how the RTL is driven: native (a generated testbench, no "
                        "Python per clock, for the bare blocks and the AXI shells; the default) "
                        "or cocotb (the verification suite's bench; used anyway for --waves)")
    parser.add_argument("--waves", action="store_true",
                        help="dump waveforms of the RTL run (under build/sim/...)")
    parser.add_argument("--seed", default="0",
                        help="stimulus seed, 0..2**32-1 (default 0)")


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
    report.setdefault("interface", "stream")      # the bare block unless a shell ran
    from gen.core.sim import current_stats
    stats = current_stats()
    if stats is not None and stats["runs"]:
        rate = stats["clocks"] / stats["sim_seconds"] if stats["sim_seconds"] else None
        report.update(engine=stats["engine"], build_seconds=round(stats["build_seconds"], 3),
                      sim_seconds=round(stats["sim_seconds"], 6),
                      simulated_clocks=stats["clocks"],
                      clocks_per_second=round(rate, 1) if rate else None)
    return report


def check_common(args):
    """Check the options every ``spnn run`` has (``--seed``); call before any work."""
    args.seed = int_arg(args.seed, "--seed", 0, 2**32 - 1)


def run_outputs(args) -> Outputs:
    """The outputs of a ``spnn run`` command (``--out`` as .npy, ``--report``), checked
    before any work; stage them with ``.npy(args.out, ...)`` / ``.json(args.report, ...)``
    and ``.commit()`` at the end."""
    out = Outputs()
    out.file(getattr(args, "out", None), "--out", suffix=".npy")
    out.file(args.report, "--report")
    return out


def roofline_fields(end_to_end: int, compute_bound: int, port_beats: dict,
                    latency: int = 0) -> dict:
    """The roofline part of a shell run's report.

    ``end_to_end`` clocks from the first input beat to the last output beat;
    ``compute_bound`` the clocks the block's arithmetic needs at full rate (e.g. MACs / MAC
    units); ``port_beats`` the AXI4-Stream beats each port must carry (words that must cross
    / words per beat); ``latency`` clocks that no overlap can hide (e.g. a pipeline's fill).
    Each port is its own stream, so the bandwidth bound is the busiest port's beats; the
    roofline is the larger bound plus ``latency``."""
    bandwidth = max(port_beats.values(), default=0)
    roof = max(compute_bound, bandwidth) + latency
    return {"end_to_end_cycles": end_to_end, "compute_bound_cycles": compute_bound,
            "bandwidth_bound_cycles": bandwidth, "bus_beats": dict(port_beats),
            "roofline_cycles": roof,
            "roofline_bound": "compute" if compute_bound >= bandwidth else "bandwidth",
            "efficiency_vs_roofline": roof / end_to_end if end_to_end else None}


def add_requant_arguments(parser, channels: str):
    """The shell's requantisation stage on the command line (``--bus-words`` runs only);
    ``channels`` names what a bias belongs to, for the help."""
    parser.add_argument("--requant", default=None, metavar="BITS",
                        help="requantise the results in the shell's output stage to BITS-bit "
                        "signed codes (2..32; needs --bus-words; docs/axi.md)")
    parser.add_argument("--bias", default=None, metavar="B.npy",
                        help=f"with --requant: integer biases, one per {channels}, in the "
                        "sums' fraction bits (default 0)")
    parser.add_argument("--mult", default="1",
                        help="with --requant: unsigned multiplier 0..65535 (default 1)")
    parser.add_argument("--shift", default="0",
                        help="with --requant: right shift 0..63, round half up (default 0)")
    parser.add_argument("--relu", action="store_true",
                        help="with --requant: clamp the results at 0")


def requant_args(args, channels: int, acc_width: int):
    """``(rq_width, Requant or None)`` from :func:`add_requant_arguments`'s flags, checked
    (one-line errors naming the flag) before any work."""
    from gen.core.fixed import Requant
    given = [flag for flag, on in (("--bias", args.bias is not None),
                                   ("--mult", str(args.mult) != "1"),
                                   ("--shift", str(args.shift) != "0"),
                                   ("--relu", args.relu)) if on]
    if args.requant is None:
        if given:
            raise SpnnError(f"{given[0]} needs --requant BITS (the shell's output stage)")
        return 0, None
    if args.bus_words is None:
        raise SpnnError("--requant needs --bus-words N (the stage is in the accelerator shell)")
    width = int_arg(args.requant, "--requant", 2, 32)
    mult = int_arg(args.mult, "--mult", 0, 65535)
    shift = int_arg(args.shift, "--shift", 0, 63)
    bias = np.zeros(channels, dtype=np.int64)
    if args.bias is not None:
        bias = load_npy(args.bias, "--bias")
        if bias.shape != (channels,):
            raise SpnnError(f"--bias must have shape ({channels},), one per channel, not "
                            f"{bias.shape}")
        lim = 1 << (acc_width - 1)
        bias = int_codes(bias, "--bias", -lim, lim - 1, f"{acc_width}-bit signed codes")
    return width, Requant(mult=mult, shift=shift, relu=bool(args.relu), bias=bias)
