# SPDX-License-Identifier: Apache-2.0
"""``spnn vivado`` IP folders: component.xml against the emitted Verilog and the register
map, without Vivado."""

import re
import xml.etree.ElementTree as ET

import pytest

from gen.cli import main
from gen.core.emit import verilog_ports
from gen.core.ipxact import NS
from gen.registry import BLOCKS

Q = {"ipxact": NS}
SHELLS = sorted(name for name, block in BLOCKS.items() if block.shell is not None)


def _sets(name, words):
    """``--set`` arguments: ``bus_words`` for the blocks whose shell has a bus width."""
    fields = BLOCKS[name].config_cls.__dataclass_fields__
    return {"bus_words": str(words)} if "bus_words" in fields else {}


def _package(tmp_path, name, *sets):
    argv = ["vivado", name, "-o", str(tmp_path)] + [a for s in sets for a in ("--set", s)]
    assert main(argv) == 0
    block = BLOCKS[name]
    from gen.core.config import config_from_strings
    cfg = config_from_strings(block.config_cls, dict(s.split("=") for s in sets))
    module = block.shell.module_name(cfg)
    return module, tmp_path / module


def _text(node, path):
    return node.find(path, Q).text


# one bus width per block, both for the PWL shell (each conversion of a large block's
# default config costs seconds)
# (fc at 8: two rows of its default batch 4 per beat, the grouped ports)
# (and the FC shell with its requantisation stage: the s_axis_b port and the RQ_* registers)
@pytest.mark.parametrize("name, words, extra",
                         [("pwl", 1, {})] + [(name, 4, {}) for name in SHELLS]
                         + [("fc", 8, {}), ("fc", 4, {"rq_width": 8})])
def test_component_matches_verilog(tmp_path, name, words, extra):
    sets = _sets(name, words) | extra
    module, folder = _package(tmp_path, name, *(f"{k}={v}" for k, v in sets.items()))
    verilog = (folder / f"{module}.v").read_text()
    root = ET.parse(folder / "component.xml").getroot()
    assert _text(root, "ipxact:name") == module
    ports = []
    for port in root.findall("ipxact:model/ipxact:ports/ipxact:port", Q):
        direction = {"in": "input", "out": "output"}[_text(port, "ipxact:wire/ipxact:direction")]
        left = port.find("ipxact:wire/ipxact:vectors/ipxact:vector/ipxact:left", Q)
        ports.append((_text(port, "ipxact:name"), direction,
                      int(left.text) + 1 if left is not None else 1))
    assert ports == verilog_ports(verilog, module)            # exactly, in order
    # every bus interface maps existing ports; every port belongs to one interface
    names, mapped = {p for p, _, _ in ports}, []
    buses = {}
    for bus in root.findall("ipxact:busInterfaces/ipxact:busInterface", Q):
        physical = [_text(pm, "ipxact:physicalPort/ipxact:name")
                    for pm in bus.findall(".//ipxact:portMap", Q)]
        assert set(physical) <= names
        mapped += physical
        buses[_text(bus, "ipxact:name")] = bus.find("ipxact:busType", Q).get("name")
    assert sorted(mapped) == sorted(names)
    assert buses["s_axi"] == "aximm" and buses["aclk"] == "clock"
    streams = {m.group(1) for p, _, _ in ports
               for m in [re.fullmatch(r"([sm]_axis_\w+?)_tdata", p)] if m}
    assert {b for b, kind in buses.items() if kind == "axis"} == streams
    assert "s_axis_x" in streams and any(s.startswith("m_axis_") for s in streams)
    data = next(p for p in ports if p[0] == "s_axis_x_tdata")
    assert data[2] % (8 * (words if sets else 1)) == 0          # whole bytes per word
    # the register map is the shell's SystemRDL one
    from gen.core.config import config_from_strings
    block = BLOCKS[name]
    regmap = block.shell.build(config_from_strings(block.config_cls, sets)).regmap
    regs = {}
    for r in root.findall(".//ipxact:register", Q):
        name, offset = _text(r, "ipxact:name"), int(_text(r, "ipxact:addressOffset")[2:], 16)
        dim = r.find("ipxact:dim", Q)
        if dim is None:
            regs[name] = offset
        else:                                    # an array DESC[n]: DESC_0 .. DESC_<n-1>
            regs.update({f"{name}_{k}": offset + 4 * k for k in range(int(dim.text))})
    assert regs == {r.name: r.offset for r in regmap.registers}
    ref = root.find(".//ipxact:slave/ipxact:memoryMapRef", Q).get("memoryMapRef")
    assert ref == _text(root, "ipxact:memoryMaps/ipxact:memoryMap/ipxact:name")


# small arrays where the default one takes seconds to convert
SMALL = {"spmv": ("pes=4",), "conv": ("rows=4", "cols=2")}


@pytest.mark.parametrize("name", SHELLS)
def test_ip_folder_is_complete_and_deterministic(tmp_path, name):
    module, folder = _package(tmp_path / "a", name, *SMALL.get(name, ()))
    again, folder2 = _package(tmp_path / "b", name, *SMALL.get(name, ()))
    files = sorted(p.name for p in folder.iterdir())
    assert files == sorted(["component.xml", f"{module}.v", f"{module}_package.tcl",
                            f"{module}_regs.h", f"{module}_regs.md", f"{module}.core"])
    for f in files:
        assert (folder / f).read_bytes() == (folder2 / f).read_bytes(), f
        assert str(tmp_path) not in (folder / f).read_text(), f
    tcl = (folder / f"{module}_package.tcl").read_text()
    assert "ipx::package_project" in tcl and f"set_property top {module}" in tcl
    assert re.search(rf"read_verilog \[file join \$here {module}\.v\]", tcl)
    prefix = BLOCKS[name].shell.build(BLOCKS[name].config_cls()).regmap.name.upper()
    assert f"#define {prefix}__CTRL__START_bm 0x1" in (folder / f"{module}_regs.h").read_text()


def test_bad_bus_words_is_refused(capsys):
    assert main(["vivado", "pwl", "--set", "bus_words=0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--set bus_words must be an integer between 1 and 32" in err
