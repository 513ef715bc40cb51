# SPDX-License-Identifier: Apache-2.0
"""Helpers of the CLI contract tests: bad ``--set`` values per config annotation, and
stand-ins for the RTL runs where a test checks the command layer only."""

import dataclasses
import typing

__all__ = ["bad_values", "default_strings", "fake_fc", "fake_pwl"]

# Values that no field of that annotation accepts (every config's ranges are narrower).
_BAD = {
    int: ["abc", "1.5", "-99999", str(10 ** 12), ""],
    float: ["abc", "nan", "inf", "-1e9"],
    bool: ["maybe", "2"],
    str: ["nosuch"],
    "QFormat": ["Q4", "Q0.0", "Q40.40", "int0", "abc"],
}


def _kind(annotation):
    """The base type of a config annotation (``X | None`` -> ``X``)."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    kind = args[0] if args else annotation
    return "QFormat" if getattr(kind, "__name__", "") == "QFormat" else kind


def bad_values(cls) -> dict:
    """``{field: [bad texts]}`` for every field of a config dataclass."""
    hints = typing.get_type_hints(cls)
    return {f.name: _BAD[_kind(hints[f.name])] for f in dataclasses.fields(cls)}


def default_strings(cfg) -> dict:
    """``{field: text}`` that ``--set`` turns back into ``cfg``'s own values."""
    out = {}
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        out[f.name] = "none" if value is None else str(value)
    return out


def fake_pwl(codes, cfg, sim, seed=0, waves=False):
    """rtl_pwl's result as the golden model gives it, one sample per clock."""
    from gen.pwl import fit_table, ref_pwl
    n = len(codes)
    return ref_pwl(codes, fit_table(cfg)), {
        "sources": {"i": {"cycles": list(range(n))}},
        "sinks": {"o": {"cycles": [c + cfg.latency for c in range(n)]}}}


def fake_fc(wc, xc, cfg, sim, seed=0, waves=False, name="run"):
    """rtl_fc's result as the golden and cycle models give it."""
    from gen.fc import encode, fc_schedule, ref_fc
    cycles = fc_schedule(encode(wc, cfg.row_width), cfg)["cycles"]
    return ref_fc(wc, xc, cfg), {"sources": {"cmd": {"cycles": [0]}},
                                 "sinks": {"y": {"cycles": [cycles - 1]}}}
