# SPDX-License-Identifier: Apache-2.0
"""Helpers shared by the per-block config dataclasses.

Every block has one small frozen dataclass (``PwlConfig``, ...) validated once in
``__post_init__`` and shared by the gateware, the golden model, the CLI and the
tests.  This module turns ``key=value`` strings from the command line into such
a config and configs back into plain dicts for manifests and reports.
"""

import dataclasses
import math
import types
import typing

from gen.core.fixed import QFormat, parse_format

__all__ = ["SpnnError", "config_from_strings", "config_to_dict", "check_int", "check_format"]


class SpnnError(ValueError):
    """A user-facing error: one line, naming the parameter, the value and what is allowed."""


def check_int(config, name: str, lo=None, hi=None) -> int:
    """Validate the integer field ``name`` of a block config (``lo <= value <= hi`` if given).

    Raises TypeError for a non-integer (bool included) and ValueError out of range, with the
    messages the config docstrings promise ("pes must be between 1 and 256, not 300").
    """
    value = getattr(config, name)
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, not {value!r}")
    if lo is not None and not lo <= value <= hi:
        raise ValueError(f"{name} must be between {lo} and {hi}, not {value}")
    return value


def check_requant(config) -> None:
    """Validate a shell's requantisation fields ``rq_width`` (0: no stage, else 2..32 bits
    of a result) and ``rq_depth`` (biases held, 1..65536)."""
    if check_int(config, "rq_width") and not 2 <= config.rq_width <= 32:
        raise ValueError(f"rq_width must be 0 (no requantisation stage) or between 2 and 32, "
                         f"not {config.rq_width}")
    check_int(config, "rq_depth", 1, 65536)


def check_format(config, name: str, lo: int, hi: int) -> QFormat:
    """Validate the QFormat field ``name`` of a block config: ``lo..hi`` bits wide."""
    fmt = getattr(config, name)
    if not isinstance(fmt, QFormat):
        raise TypeError(f"{name} must be a QFormat, not {fmt!r}")
    if not lo <= fmt.width <= hi:
        raise ValueError(f"{name} must be {lo} to {hi} bits wide, not {fmt.width} ({fmt})")
    return fmt


def _convert(name, text, kind):
    if kind is QFormat:
        return parse_format(text, name)
    if kind is bool:
        if str(text).lower() in ("1", "true", "yes", "on"):
            return True
        if str(text).lower() in ("0", "false", "no", "off"):
            return False
        raise SpnnError(f"{name} must be true or false, not {text!r}")
    if kind is int:
        try:
            return int(str(text).strip(), 0 if str(text).strip()[:2].lower() in
                       ("0x", "0b", "0o") else 10)
        except ValueError:
            raise SpnnError(f"{name} must be an integer, not {text!r}") from None
    if kind is float:
        try:
            value = float(text)
        except ValueError:
            raise SpnnError(f"{name} must be a number, not {text!r}") from None
        if not math.isfinite(value):
            raise SpnnError(f"{name} must be a finite number, not {text!r}")
        return value
    if kind is str:
        return str(text)
    raise SpnnError(f"{name} cannot be set from the command line")


def config_from_strings(cls, pairs: dict, base=None, flag=None):
    """Build ``cls`` from ``{"field": "text"}``; unknown keys and bad values raise SpnnError.

    With ``flag`` (e.g. ``"--set"``) every message starts with the flag and the field as
    the user typed them (``"--set segments must be ..."``)."""
    try:
        return _config_from_strings(cls, pairs, base)
    except SpnnError as exc:
        msg = str(exc)
        if flag is None:
            raise
        if msg.startswith("unknown parameter"):
            raise SpnnError(f"{flag} {msg}") from None
        key = next((k for k in sorted(pairs, key=len, reverse=True)
                    if msg.startswith(k + " ")), None)
        raise SpnnError(f"{flag} {msg}" if key else msg) from None


def _config_from_strings(cls, pairs: dict, base=None):
    hints = typing.get_type_hints(cls)
    fields = {f.name for f in dataclasses.fields(cls)}
    kwargs = {}
    for key, text in pairs.items():
        if key not in fields:
            raise SpnnError(f"unknown parameter {key!r}; allowed: {', '.join(sorted(fields))}")
        kind = hints[key]
        # Optional fields, written ``X | None`` (types.UnionType) or ``Optional[X]``.
        if typing.get_origin(kind) in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(kind) if a is not type(None)]
            if len(args) != 1:
                raise SpnnError(f"{key} cannot be set from the command line")
            kind = args[0]
            if str(text).strip().lower() in ("none", ""):
                kwargs[key] = None
                continue
        try:
            kwargs[key] = _convert(key, text, kind)
        except ValueError as exc:
            raise SpnnError(str(exc)) from None
    try:
        if base is not None:
            return dataclasses.replace(base, **kwargs)
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise SpnnError(str(exc)) from None


def config_to_dict(cfg) -> dict:
    """A JSON-ready dict of a config (formats as their ``Qm.n`` names)."""
    out = {}
    for field in dataclasses.fields(cfg):
        value = getattr(cfg, field.name)
        out[field.name] = str(value) if isinstance(value, QFormat) else value
    return out
