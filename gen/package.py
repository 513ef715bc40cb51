# SPDX-License-Identifier: Apache-2.0
"""IP packaging of a block's accelerator shell (``spnn vivado``).

For a block with a shell (:attr:`gen.core.block.Block.shell`), ``spnn vivado`` writes one
folder ``<out>/<shell module>/`` that Vivado can use as an IP repository:

* ``<shell>.v`` -- the shell and the block inside it,
* ``component.xml`` -- IP-XACT 1685-2014: bus interfaces (AXI4-Stream, AXI4-Lite with the
  register map, clock, reset, interrupt), ports exactly as in ``<shell>.v``, the register
  map generated from SystemRDL (:mod:`gen.core.ipxact`),
* ``<shell>_package.tcl`` -- packages the folder with ``ipx::package_project`` (run
  ``vivado -mode batch -source <shell>_package.tcl``), for users who prefer Vivado's own
  component.xml,
* ``<shell>_regs.h`` / ``<shell>_regs.md`` -- C header and register reference (PeakRDL),
* ``<shell>.core`` -- FuseSoC CAPI2 core.
"""

from pathlib import Path

from gen.core.config import config_to_dict
from gen.core.emit import to_verilog, verilog_ports
from gen.core.ipxact import component_xml
from gen.core.regmap import c_header, ipxact, markdown

__all__ = ["shell_files"]


def _tcl(module: str, part: str, block) -> str:
    return "\n".join([
        f"# spnn: package {module} (block {block.name}'s accelerator shell) as a Vivado IP.",
        f"# Run from any folder: vivado -mode batch -source {module}_package.tcl",
        "# The packaged IP goes to vivado_ip/ next to this script; add that folder to the",
        "# project's IP repositories (or use this folder and its component.xml directly).",
        "set here [file dirname [file normalize [info script]]]",
        f"create_project -in_memory -part {part}",
        f"read_verilog [file join $here {module}.v]",
        f"set_property top {module} [current_fileset]",
        "ipx::package_project -root_dir [file join $here vivado_ip] -vendor spnn "
        "-library spnn -taxonomy /spnn -import_files -force",
        "set core [ipx::current_core]",
        "set_property version 1.0 $core",
        f"set_property description {{spnn {block.name}: {block.summary}}} $core",
        "ipx::associate_bus_interfaces -busif s_axi -clock aclk $core",
        "ipx::create_xgui_files $core",
        "ipx::update_checksums $core",
        "ipx::check_integrity $core",
        "ipx::save_core $core",
    ]) + "\n"


def _core(module: str, block, cfg, version: str) -> str:
    return "\n".join([
        "CAPI=2:",
        f"# spnn: FuseSoC core for {module} (block {block.name}'s accelerator shell).",
        f"name: spnn:spnn:{module}:{version}",
        f"description: \"spnn {block.name} shell: AXI4-Stream"
        + (f" at {cfg.bus_words} words per beat" if hasattr(cfg, "bus_words") else "")
        + ", AXI4-Lite control\"",
        "",
        "filesets:",
        "  rtl:",
        "    files:",
        f"      - {module}.v",
        "    file_type: verilogSource",
        "  headers:",
        "    files:",
        f"      - {module}_regs.h: {{is_include_file: true}}",
        "    file_type: cSource",
        "",
        "targets:",
        "  default:",
        "    filesets: [rtl, headers]",
        f"    toplevel: {module}",
    ]) + "\n"


def shell_files(block, cfg, out_dir, stage, part: str, version: str) -> list:
    """Stage the shell's IP folder in ``stage`` (:class:`gen.core.outputs.Outputs`);
    return the paths.  Nothing for a block without a shell."""
    if block.shell is None:
        return []
    module = block.shell.module_name(cfg)
    folder = Path(out_dir) / module
    shell = block.shell.build(cfg)
    regmap = shell.regmap
    text = to_verilog(shell, module)
    summary = ", ".join(f"{k}={v}" for k, v in config_to_dict(cfg).items())
    files = {
        f"{module}.v": text,
        "component.xml": component_xml(module, verilog_ports(text, module), ipxact(regmap),
                                       description=f"spnn {block.name}: {block.summary} "
                                       f"({summary})"),
        f"{module}_package.tcl": _tcl(module, part, block),
        f"{module}_regs.h": c_header(regmap),
        f"{module}_regs.md": markdown(regmap),
        f"{module}.core": _core(module, block, cfg, version),
    }
    paths = []
    for name, body in files.items():
        stage.text(folder / name, body)
        paths.append(folder / name)
    return paths
