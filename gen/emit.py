# SPDX-License-Identifier: Apache-2.0
"""Deterministic Verilog and manifest emission.

Output is byte-identical on every machine: Amaranth's bundled Yosys is forced
(``AMARANTH_USE_YOSYS=builtin``), source attributes are stripped and the JSON
manifest is written with sorted keys and no paths or timestamps.
"""

import json
import os
from pathlib import Path

os.environ["AMARANTH_USE_YOSYS"] = "builtin"

from amaranth.back import verilog  # noqa: E402
from amaranth.hdl import Shape  # noqa: E402
from amaranth.lib import wiring  # noqa: E402

from .blocks import Block  # noqa: E402
from .config import config_to_dict  # noqa: E402

__all__ = ["to_verilog", "manifest", "emit"]


def to_verilog(component, name: str) -> str:
    return verilog.convert(component, name=name, emit_src=False, strip_internal_attrs=True)


def manifest(block: Block, cfg, component) -> dict:
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


def gtkw_for(block: Block, cfg, component) -> str:
    """GTKWave save file: streams grouped per port, then the block's own signal groups.

    Both simulators dump the module's signals under ``<module>.`` (Verilator adds
    its top-level ports under ``$rootio``, which the view does not need).
    """
    from .traces import gtkw_text
    groups = component.wave_signals() if hasattr(component, "wave_signals") else {}
    return gtkw_text(block.module_name(cfg), manifest(block, cfg, component), groups)


def emit(block: Block, cfg, out_dir) -> list:
    """Write ``<module>.v``, ``<module>.json`` (manifest), ``<module>.gtkw`` (GTKWave view)
    and any memory images; return the paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    component = block.build(cfg)
    name = block.module_name(cfg)
    files = []
    vpath = out_dir / f"{name}.v"
    vpath.write_text(to_verilog(component, name))
    files.append(vpath)
    mpath = out_dir / f"{name}.json"
    mpath.write_text(json.dumps(manifest(block, cfg, component), indent=2, sort_keys=True) + "\n")
    files.append(mpath)
    gpath = out_dir / f"{name}.gtkw"
    gpath.write_text(gtkw_for(block, cfg, component))
    files.append(gpath)
    if hasattr(component, "memory_images"):
        for fname, text in component.memory_images().items():
            path = out_dir / fname
            path.write_text(text)
            files.append(path)
    return files
