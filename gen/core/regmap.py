# SPDX-License-Identifier: Apache-2.0
"""Register maps described once, in SystemRDL, and everything generated from them.

A block's control and status registers are written in SystemRDL (``hdl/lib/control.rdl``
holds the ones every shell has).  :func:`compile_rdl` runs ``systemrdl-compiler`` on the
description and returns a :class:`RegMap`: registers, offsets and fields with the one
behaviour each has in hardware.  From that one object:

* :class:`hdl.lib.axil.AxiLiteRegisters` builds the AXI4-Lite register file (gateware),
* :func:`c_header`, :func:`ipxact` and :func:`markdown` write the C header, the IP-XACT
  1685-2014 register map and the Markdown reference through the PeakRDL exporters.

Field kinds (anything else in the description is refused with the field's name):

========== ====================================== ==========================================
kind       SystemRDL                              hardware
========== ====================================== ==========================================
``const``  ``sw = r; hw = na``                    reads its reset value
``status`` ``sw = r; hw = w``                     reads an input driven by the block
``control````sw = rw; hw = r``                    a register the block reads (byte strobes)
``pulse``  ``sw = rw; hw = r; singlepulse``       one-clock pulse when written with 1s;
                                                  reads 0
``w1c``    ``sw = rw; hw = w; hwset;              sticky: set by a block input, cleared by
           onwrite = woclr``                      writing 1 (a set in the same clock wins)
========== ====================================== ==========================================

Registers are 32 bits wide at 32-bit aligned offsets (AXI4-Lite with 32-bit data); an
array ``DESC[n]`` becomes the registers ``DESC_0 .. DESC_<n-1>``.  An ``include``
directive finds the shared fragments of ``hdl/lib/`` (``control_regs.rdl``: the registers
every shell starts with).
"""

from dataclasses import dataclass
from pathlib import Path
import tempfile

from gen.core.config import SpnnError

__all__ = ["Field", "Register", "RegMap", "compile_rdl", "c_header", "ipxact", "markdown",
           "requant_regs", "CONTROL_RDL"]

HDL_LIB = Path(__file__).resolve().parents[2] / "hdl" / "lib"
CONTROL_RDL = HDL_LIB / "control.rdl"

KINDS = ("const", "status", "control", "pulse", "w1c")


@dataclass(frozen=True)
class Field:
    """One field: ``name``, bits ``lsb .. lsb + width - 1``, its :data:`KINDS` entry,
    reset value and description."""

    name: str
    lsb: int
    width: int
    kind: str
    reset: int
    desc: str = ""

    @property
    def mask(self) -> int:
        return ((1 << self.width) - 1) << self.lsb


@dataclass(frozen=True)
class Register:
    name: str
    offset: int
    fields: tuple
    desc: str = ""


@dataclass(frozen=True)
class RegMap:
    """A compiled register map: ``name`` (the addrmap's type name), its registers in
    address order, and ``size`` (bytes spanned)."""

    name: str
    registers: tuple
    size: int
    _root: object = None

    @property
    def addr_width(self) -> int:
        """Byte-address bits that decode the map (at least 4)."""
        return max(4, (self.size - 1).bit_length())

    def register(self, name: str) -> Register:
        for reg in self.registers:
            if reg.name == name:
                return reg
        raise KeyError(name)

    def offset(self, name: str) -> int:
        return self.register(name).offset


def _kind(field) -> str:
    sw = field.get_property("sw").name
    hw = field.get_property("hw").name
    woclr = str(field.get_property("onwrite")).endswith("woclr")
    if sw == "r" and hw == "na":
        return "const"
    if sw == "r" and hw == "w":
        return "status"
    if sw == "rw" and hw == "r" and field.get_property("singlepulse"):
        return "pulse"
    if sw == "rw" and hw == "r":
        return "control"
    if sw == "rw" and hw == "w" and woclr and field.get_property("hwset"):
        return "w1c"
    raise SpnnError(f"register field {field.get_path()}: sw = {sw}, hw = {hw} is not one of "
                    f"the supported kinds ({', '.join(KINDS)}; see gen/core/regmap.py)")


def compile_rdl(path=CONTROL_RDL, top: str = "spnn_control", parameters=None,
                defines=None, include_dirs=()) -> RegMap:
    """Compile and elaborate the SystemRDL file ``path`` (addrmap ``top`` with
    ``parameters``; Verilog-style ``defines`` for its preprocessor, e.g. ``{"RQ": ""}``;
    ``include_dirs`` searched before ``hdl/lib`` for its includes) into a :class:`RegMap`;
    an error in the description is one :class:`SpnnError` naming the file."""
    from systemrdl import RDLCompileError, RDLCompiler
    from systemrdl.messages import MessagePrinter

    class _Quiet(MessagePrinter):
        def __init__(self):
            super().__init__()
            self.lines = []

        def emit_message(self, lines):
            self.lines.extend(lines)

    printer = _Quiet()
    rdl = RDLCompiler(message_printer=printer)
    try:
        rdl.compile_file(str(path), incl_search_paths=[*map(str, include_dirs), str(HDL_LIB)],
                         defines=dict(defines or {}))
        root = rdl.elaborate(top_def_name=top, parameters=dict(parameters or {}))
    except RDLCompileError:
        detail = next((line for line in printer.lines if "error" in line), "")
        raise SpnnError(f"register description {Path(path).name}: {detail.strip()}") from None
    registers = []
    for reg in root.top.registers(unroll=True):
        if reg.get_property("regwidth") != 32 or reg.absolute_address % 4:
            raise SpnnError(f"register {reg.inst_name}: only 32-bit registers at 32-bit "
                            f"aligned offsets are supported")
        name = reg.inst_name if reg.current_idx is None else \
            reg.inst_name + "".join(f"_{i}" for i in reg.current_idx)
        fields = tuple(Field(f.inst_name, f.lsb, f.width, _kind(f),
                             int(f.get_property("reset") or 0),
                             f.get_property("desc") or "") for f in reg.fields())
        registers.append(Register(name, reg.absolute_address, fields,
                                  reg.get_property("desc") or ""))
    registers.sort(key=lambda r: r.offset)
    return RegMap(top, tuple(registers), root.top.size, root)


def _export(exporter, root, suffix: str, **kwargs) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{root.top.inst_name}{suffix}"     # names the header guard
        exporter.export(root.top, str(path), **kwargs)
        return path.read_text()


def c_header(regmap: RegMap) -> str:
    """The C header (PeakRDL-cheader): bit masks, positions, widths, resets and a packed
    struct of the map."""
    from peakrdl_cheader.exporter import CHeaderExporter
    return _export(CHeaderExporter(), regmap._root, ".h")


def ipxact(regmap: RegMap, vendor: str = "spnn", library: str = "spnn",
           version: str = "1.0") -> str:
    """The IP-XACT 1685-2014 component with the map's memoryMap (PeakRDL-ipxact)."""
    from peakrdl_ipxact import IPXACTExporter
    return _export(IPXACTExporter(vendor=vendor, library=library, version=version),
                   regmap._root, ".xml")


def markdown(regmap: RegMap) -> str:
    """The register reference in Markdown (PeakRDL-markdown)."""
    from peakrdl_markdown import MarkdownExporter
    return _export(MarkdownExporter(), regmap._root, ".md")


def requant_regs(regmap: RegMap, rq, positions: int, channels: int, depth: int) -> list:
    """``[[offset, value], ...]``: the ``RQ_*`` registers of a :class:`gen.core.fixed.Requant`
    job whose transfers share a channel ``positions`` at a time over ``channels``; a job
    beyond the stage (more channels than its ``depth`` biases, more than the registers
    hold, or a bias list of another length) is a ValueError."""
    if not 1 <= channels <= min(depth, 0xFFFF) or not 1 <= positions <= 0xFFFFFFFF:
        raise ValueError(f"the requantisation stage holds 1..{min(depth, 0xFFFF)} channels "
                         f"(rq_depth {depth}) and 1..2**32-1 positions, not {channels} "
                         f"channels of {positions}")
    if rq.bias is not None and len(rq.bias) != channels:
        raise ValueError(f"{len(rq.bias)} biases for {channels} channels")
    return [[regmap.offset("RQ_SCALE"), rq.scale_word()],
            [regmap.offset("RQ_POSITIONS"), int(positions)],
            [regmap.offset("RQ_CHANNELS"), int(channels)]]
