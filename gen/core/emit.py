# SPDX-License-Identifier: Apache-2.0
"""Deterministic Verilog and manifest emission.

Output is byte-identical on every machine: Amaranth's bundled Yosys is forced
(``AMARANTH_USE_YOSYS=builtin``), source attributes are stripped and the JSON
manifest is written with sorted keys and no paths or timestamps.
"""

import json
import os
import re
from pathlib import Path

os.environ["AMARANTH_USE_YOSYS"] = "builtin"

from amaranth.back import verilog  # noqa: E402
from amaranth.hdl import Shape  # noqa: E402
from amaranth.lib import wiring  # noqa: E402

from gen.core.block import Gateware  # noqa: E402
from gen.core.config import SpnnError, config_to_dict  # noqa: E402

__all__ = ["to_verilog", "verilog_ports", "manifest", "emit_files", "emit"]


def to_verilog(component, name: str) -> str:
    text = verilog.convert(component, name=name, emit_src=False, strip_internal_attrs=True)
    return compact_zero_init(text)


# One memory's initial block as Amaranth's Yosys back end writes it: a line per word.
_INIT_BLOCK = re.compile(
    r"^  initial begin\n"
    r"((?:    (?:\\\S+ |[A-Za-z_][A-Za-z0-9_$]*)\[\d+\] = \d+'[hdb][0-9a-fA-F_]+;\n)+)"
    r"  end\n", re.M)
_INIT_LINE = re.compile(r"^    (\\\S+ |[A-Za-z_][A-Za-z0-9_$]*)\[(\d+)\] = (\d+)'[hdb]([0-9a-fA-F_]+);$")


def compact_zero_init(text: str) -> str:
    """Replace each all-zero memory initialisation (one line per word) by a ``for`` loop.

    Amaranth writes every word of every memory's initial value, so a design with large
    run-time-loaded memories (SpMV/LSTM weight banks) becomes megabytes of ``mem[i] = 0;``.
    A block is rewritten only when it initialises words ``0 .. N-1`` of one memory, in
    order, all to zero; the loop (in a named block with its own ``integer``) gives the same
    initial state to simulators and synthesis tools.  Memories with other contents (tables)
    are left as written.
    """
    count = 0

    def replace(match):
        nonlocal count
        lines = match.group(1).splitlines()
        parsed = [_INIT_LINE.match(line) for line in lines]
        if not all(parsed) or len(parsed) < 4:
            return match.group(0)
        names = {m.group(1) for m in parsed}
        widths = {m.group(3) for m in parsed}
        if len(names) != 1 or len(widths) != 1:
            return match.group(0)
        if [int(m.group(2)) for m in parsed] != list(range(len(parsed))):
            return match.group(0)
        if any(m.group(4).strip("0_") for m in parsed):
            return match.group(0)
        name, width = names.pop(), widths.pop()
        label = f"spnn_zero_init_{count}"
        count += 1
        return (f"  initial begin : {label}\n"
                f"    integer i;\n"
                f"    for (i = 0; i < {len(parsed)}; i = i + 1)\n"
                f"      {name}[i] = {width}'d0;\n"
                f"  end\n")

    return _INIT_BLOCK.sub(replace, text)


def manifest(block: Gateware, cfg, component) -> dict:
    """Module name, parameters, ports (direction, width, format, protocol), timing."""
    component._MustUse__silence = True   # described, maybe never elaborated
    info = component.port_info()
    ports = [
        {"name": "clk", "direction": "input", "width": 1, "format": None,
         "protocol": "clock, rising edge"},
        {"name": "rst", "direction": "input", "width": 1, "format": None,
         "protocol": "synchronous reset, active high"},
    ]
    for path, member, value in component.signature.flatten(component):
        top = path[0]
        port_name = "__".join(str(p) for p in path)
        is_payload = path[-1] == "payload"
        ports.append({
            "name": port_name,
            "direction": "input" if member.flow == wiring.In else "output",
            "width": Shape.cast(member.shape).width,
            "signed": Shape.cast(member.shape).signed,
            "format": info[top]["format"] if is_payload else None,
            "protocol": info[top]["protocol"],
        })
    out = {
        "block": block.name,
        "module": block.module_name(cfg),
        "parameters": config_to_dict(cfg),
        "ports": ports,
        "latency": component.latency,
        "throughput": f"1 transfer per {component.ii} clock(s) per stream",
        "reset": "synchronous, active high, clears all valid state",
        "generator": "spnn",
    }
    if hasattr(component, "manifest_extra"):
        out.update(component.manifest_extra())
    return out


def gtkw_for(block: Gateware, cfg, component) -> str:
    """GTKWave save file: streams grouped per port, then the block's own signal groups.

    Both simulators dump the module's signals under ``<module>.`` (Verilator adds
    its top-level ports under ``$rootio``, which the view does not need).
    """
    from gen.core.traces import gtkw_text
    groups = component.wave_signals() if hasattr(component, "wave_signals") else {}
    return gtkw_text(block.module_name(cfg), manifest(block, cfg, component), groups)


def emit_files(block: Gateware, cfg) -> dict:
    """The files of one configuration, in memory: ``{file name: text}`` for
    ``<module>.v``, ``<module>.json`` (manifest), ``<module>.gtkw`` (GTKWave view) and any
    memory images."""
    component = block.build(cfg)
    name = block.module_name(cfg)
    files = {
        f"{name}.v": to_verilog(component, name),
        f"{name}.json": json.dumps(manifest(block, cfg, component), indent=2,
                                   sort_keys=True) + "\n",
        f"{name}.gtkw": gtkw_for(block, cfg, component),
    }
    if hasattr(component, "memory_images"):
        files.update(component.memory_images())
    return files


def emit(block: Gateware, cfg, out_dir, outputs=None) -> list:
    """Write (or, given an :class:`gen.core.outputs.Outputs`, stage) :func:`emit_files` into
    ``out_dir``; return the paths.  Without ``outputs`` the files are written at once, each
    through a temporary file and a rename."""
    from gen.core.outputs import Outputs
    stage = outputs if outputs is not None else Outputs()
    paths = []
    for fname, text in emit_files(block, cfg).items():
        path = Path(out_dir) / fname
        stage.text(path, text)
        paths.append(path)
    if outputs is None:
        stage.commit()
    return paths


_PORT_RE = re.compile(r"^\s*(input|output|inout)\s+(?:signed\s+)?(?:\[(\d+):(\d+)\]\s+)?"
                      r"\\?([A-Za-z_][\w$]*)\s*;", re.M)


def verilog_ports(text: str, module: str) -> list:
    """``[(name, direction, width)]`` of ``module`` in Amaranth's Verilog, in file order."""
    match = re.search(rf"^module\s+{re.escape(module)}\s*\(", text, re.M)
    if not match:
        raise SpnnError(f"module {module!r} not found in the emitted Verilog")
    body = text[match.start():text.index("endmodule", match.start())]
    ports = []
    for direction, msb, lsb, name in _PORT_RE.findall(body):
        width = abs(int(msb) - int(lsb)) + 1 if msb else 1
        ports.append((name, direction, width))
    return ports
