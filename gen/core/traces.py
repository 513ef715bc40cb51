# SPDX-License-Identifier: Apache-2.0
"""Cycle-level golden traces: record, compare, diff; and GTKWave save files.

A trace is a small text file, one event per line, in cycle order::

    # spnn trace v1 case=pwl_sigmoid module=pwl_sigmoid
    0 i 0x8000          <- a transfer on stream ``i`` with its payload (hex)
    9 o 0x10            <- a transfer on stream ``o``
    3 advance 0         <- a watched signal changed value
    25 reset 1          <- the bench pulsed reset here

Cycle numbers come from the generic cocotb bench (:mod:`gen.core.cocotb_bench`), so a
change that keeps every result right but moves one handshake by one cycle
changes the trace.  :func:`compare` names the first differing cycle and signal.
"""

import difflib
from pathlib import Path

__all__ = ["trace_lines", "compare", "TraceMismatch", "gtkw_text", "write_diff"]

HEADER = "# spnn trace v1"


class TraceMismatch(AssertionError):
    """Raised by :func:`compare`; ``str()`` names the first differing cycle and signal."""

    def __init__(self, message, cycle, signal, diff):
        super().__init__(message)
        self.cycle, self.signal, self.diff = cycle, signal, diff


def trace_lines(result: dict, ports_order, watch_order=(), title="") -> list:
    """Turn a :func:`gen.core.sim.run_job` result into trace lines (header first)."""
    events = []
    order = {name: i for i, name in enumerate(["reset"] + list(ports_order) + list(watch_order))}
    for cycle in result.get("resets", []):
        events.append((cycle, 0, "reset", "1"))
    for port, log in result["log"].items():
        for cycle, value in log:
            events.append((cycle, order.get(port, 99), port, f"0x{value:x}"))
    for name in watch_order:
        previous = None
        for cycle, value in enumerate(result["trace"].get(name, [])):
            if value != previous:
                events.append((cycle, order.get(name, 99), name, value))
                previous = value
    events.sort()
    lines = [f"{HEADER} {title}".rstrip()]
    lines += [f"{cycle} {name} {value}" for cycle, _, name, value in events]
    return lines


def _events(lines):
    out = []
    for line in lines:
        if line.startswith("#") or not line.strip():
            continue
        cycle, name, value = line.split(" ", 2)
        out.append((int(cycle), name, value))
    return out


def compare(expected: list, actual: list, context: int = 3, max_diff_lines: int = 40):
    """Raise :class:`TraceMismatch` at the first differing event; return None if equal."""
    exp, act = _events(expected), _events(actual)
    if exp == act:
        return None
    index = next((i for i, (a, b) in enumerate(zip(exp, act)) if a != b), min(len(exp), len(act)))
    e = exp[index] if index < len(exp) else None
    a = act[index] if index < len(act) else None
    if e and a:
        cycle = min(e[0], a[0])
        signal = e[1] if e[0] <= a[0] else a[1]
        what = (f"expected '{e[1]} {e[2]}' at cycle {e[0]}, "
                f"got '{a[1]} {a[2]}' at cycle {a[0]}")
    elif e:
        cycle, signal, what = e[0], e[1], f"expected '{e[1]} {e[2]}' at cycle {e[0]}, trace ended"
    else:
        cycle, signal, what = a[0], a[1], f"unexpected '{a[1]} {a[2]}' at cycle {a[0]}"
    diff = list(difflib.unified_diff(expected, actual, "golden", "fresh", n=context,
                                     lineterm=""))
    if len(diff) > max_diff_lines:
        diff = diff[:max_diff_lines] + [f"... ({len(diff) - max_diff_lines} more diff lines)"]
    raise TraceMismatch(f"first difference at cycle {cycle}, signal {signal}: {what}",
                        cycle, signal, diff)


def gtkw_text(module: str, manifest: dict, groups: dict) -> str:
    """A GTKWave save file: clock/reset, one group per stream port, then ``groups``.

    ``module`` is the hierarchy path of the block in the dump (the module name under
    both Icarus and Verilator).
    """
    lines = ["[*] spnn GTKWave save file", f"[*] module {module}", "[timestart] 0",
             "@28", f"{module}.clk", f"{module}.rst"]
    streams = {}
    for port in manifest["ports"]:
        if "__" in port["name"]:
            streams.setdefault(port["name"].split("__")[0], []).append(port)
    for name, ports in streams.items():
        lines += ["@800200", f"-stream {name}"]
        order = {"valid": 0, "ready": 1, "payload": 2}
        for port in sorted(ports, key=lambda p: order.get(port_suffix(p["name"]), 3)):
            width = port["width"]
            fmt = "@28" if width == 1 else ("@24" if port.get("signed") else "@22")
            sel = f"[{width - 1}:0]" if width > 1 else ""
            lines += [fmt, f"{module}.{port['name']}{sel}"]
        lines += ["@1000200", f"-stream {name}"]
    for group, signals in groups.items():
        lines += ["@800200", f"-{group}"]
        for sig, width in signals:
            lines += ["@28" if width == 1 else "@22",
                      f"{module}.{sig}" + (f"[{width - 1}:0]" if width > 1 else "")]
        lines += ["@1000200", f"-{group}"]
    return "\n".join(lines) + "\n"


def port_suffix(name: str) -> str:
    return name.rsplit("__", 1)[-1]


def write_diff(path, mismatch: TraceMismatch):
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(str(mismatch) + "\n" + "\n".join(mismatch.diff) + "\n")
