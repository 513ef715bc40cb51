# SPDX-License-Identifier: Apache-2.0
"""The IP-XACT 1685-2014 ``component.xml`` of an accelerator shell.

The register map (``memoryMaps``) comes from PeakRDL-ipxact (:func:`gen.core.regmap.ipxact`),
so it is the one SystemRDL description's.  The ports come from the emitted Verilog itself
(:func:`gen.core.emit.verilog_ports`) and the bus interfaces are inferred from the port
names the shells use, as Vivado's IP packager infers them:

* ``s_axis_<n>_t*`` / ``m_axis_<n>_t*``: AXI4-Stream receiver / transmitter
  (``xilinx.com:interface:axis:1.0``),
* ``s_axi_*``: AXI4-Lite subordinate (``xilinx.com:interface:aximm:1.0``, the memory map),
* ``aclk`` (``ASSOCIATED_BUSIF`` every bus, ``ASSOCIATED_RESET aresetn``), ``aresetn``
  (``POLARITY ACTIVE_LOW``), ``irq`` (``SENSITIVITY LEVEL_HIGH``).

No timestamps or paths: the text depends on the Verilog and the map alone.
"""

import re
import xml.etree.ElementTree as ET

__all__ = ["component_xml", "bus_interfaces"]

NS = "http://www.accellera.org/XMLSchema/IPXACT/1685-2014"
SCHEMA = f"{NS} {NS}/index.xsd"


def _q(tag):
    return f"{{{NS}}}{tag}"


def bus_interfaces(ports) -> list:
    """``[(name, kind, mode, {logical: physical})]`` inferred from ``[(name, dir, width)]``;
    ``kind`` is ``axis``, ``aximm``, ``clock``, ``reset`` or ``interrupt``."""
    names = [name for name, _, _ in ports]
    out, streams = [], {}
    for name in names:
        match = re.fullmatch(r"([sm])_axis_(\w+?)_(t\w+)", name)
        if match:
            side, stream, signal = match.groups()
            key = f"{side}_axis_{stream}"
            streams.setdefault(key, ("slave" if side == "s" else "master", {}))[1][
                signal.upper()] = name
    for key, (mode, portmap) in streams.items():
        out.append((key, "axis", mode, portmap))
    axil = {n[len("s_axi_"):].upper(): n for n in names if n.startswith("s_axi_")}
    if axil:
        out.append(("s_axi", "aximm", "slave", axil))
    if "aclk" in names:
        out.append(("aclk", "clock", "slave", {"CLK": "aclk"}))
    if "aresetn" in names:
        out.append(("aresetn", "reset", "slave", {"RST": "aresetn"}))
    if "irq" in names:
        out.append(("irq", "interrupt", "master", {"INTERRUPT": "irq"}))
    return out


_VLNV = {"axis": ("interface", "axis"), "aximm": ("interface", "aximm"),
         "clock": ("signal", "clock"), "reset": ("signal", "reset"),
         "interrupt": ("signal", "interrupt")}


def _sub(parent, tag, text=None, **attrs):
    node = ET.SubElement(parent, _q(tag), attrs)
    if text is not None:
        node.text = str(text)
    return node


def _vlnv(parent, tag, library, name):
    return _sub(parent, tag, vendor="xilinx.com", library=library, name=name, version="1.0")


def _parameters(parent, params):
    block = _sub(parent, "parameters")
    for key, value in params:
        param = _sub(block, "parameter", parameterId=key, resolve="immediate")
        _sub(param, "name", key)
        _sub(param, "value", value)


def _bus(parent, name, kind, mode, portmap, buses, memory_map):
    bus = _sub(parent, "busInterface")
    _sub(bus, "name", name)
    library, bname = _VLNV[kind]
    _vlnv(bus, "busType", library, bname)
    abstraction = _sub(_sub(bus, "abstractionTypes"), "abstractionType")
    _vlnv(abstraction, "abstractionRef", library, f"{bname}_rtl")
    maps = _sub(abstraction, "portMaps")
    for logical, physical in sorted(portmap.items()):
        pm = _sub(maps, "portMap")
        _sub(_sub(pm, "logicalPort"), "name", logical)
        _sub(_sub(pm, "physicalPort"), "name", physical)
    if mode == "slave" and kind == "aximm":
        _sub(_sub(bus, "slave"), "memoryMapRef", memoryMapRef=memory_map)
    else:
        _sub(bus, mode)
    if kind == "clock":
        others = ":".join(b for b, k, _, _ in buses if k in ("axis", "aximm"))
        _parameters(bus, [("ASSOCIATED_BUSIF", others), ("ASSOCIATED_RESET", "aresetn")])
    elif kind == "reset":
        _parameters(bus, [("POLARITY", "ACTIVE_LOW")])
    elif kind == "interrupt":
        _parameters(bus, [("SENSITIVITY", "LEVEL_HIGH")])


def component_xml(module: str, ports, regmap_xml: str, *, vendor="spnn", library="spnn",
                  version="1.0", description="") -> str:
    """The component of ``module`` with ``ports`` (``[(name, direction, width)]``, from
    the Verilog), its bus interfaces and the memory map of ``regmap_xml`` (PeakRDL-ipxact's
    component text)."""
    ET.register_namespace("ipxact", NS)
    ET.register_namespace("xsi", "http://www.w3.org/2001/XMLSchema-instance")
    root = ET.Element(_q("component"),
                      {"{http://www.w3.org/2001/XMLSchema-instance}schemaLocation": SCHEMA})
    for tag, text in (("vendor", vendor), ("library", library), ("name", module),
                      ("version", version)):
        _sub(root, tag, text)
    if description:
        _sub(root, "description", description)
    buses = bus_interfaces(ports)
    maps = ET.fromstring(regmap_xml).find(_q("memoryMaps"))
    memory_map = maps.find(f"{_q('memoryMap')}/{_q('name')}").text
    interfaces = _sub(root, "busInterfaces")
    for name, kind, mode, portmap in buses:
        _bus(interfaces, name, kind, mode, portmap, buses, memory_map)
    root.append(maps)
    model = _sub(root, "model")
    views = _sub(model, "views")
    view = _sub(views, "view")
    _sub(view, "name", "rtl")
    _sub(view, "envIdentifier", ":vivado.xilinx.com:synthesis")
    _sub(view, "componentInstantiationRef", "rtl")
    inst = _sub(_sub(model, "instantiations"), "componentInstantiation")
    _sub(inst, "name", "rtl")
    _sub(inst, "language", "Verilog")
    _sub(inst, "moduleName", module)
    _sub(inst, "fileSetRef").append(_leaf("localName", "rtl"))
    wires = _sub(model, "ports")
    for name, direction, width in ports:
        port = _sub(wires, "port")
        _sub(port, "name", name)
        wire = _sub(port, "wire")
        _sub(wire, "direction", {"input": "in", "output": "out", "inout": "inout"}[direction])
        if width > 1:
            vector = _sub(_sub(wire, "vectors"), "vector")
            _sub(vector, "left", width - 1)
            _sub(vector, "right", 0)
    files = _sub(_sub(root, "fileSets"), "fileSet")
    _sub(files, "name", "rtl")
    file = _sub(files, "file")
    _sub(file, "name", f"{module}.v")
    _sub(file, "fileType", "verilogSource")
    ET.indent(root, "  ")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, "unicode") + "\n"


def _leaf(tag, text):
    node = ET.Element(_q(tag))
    node.text = text
    return node
