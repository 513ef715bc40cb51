# SPDX-License-Identifier: Apache-2.0
"""The AXI4-Lite register file generated from SystemRDL (hdl/lib/axil.py, gen/core/regmap.py):
cocotbext-axi's manager against it under both simulators, and the generated C header,
IP-XACT map and Markdown against the same description."""

import json
import re

import pytest

from gen.core.block import Gateware
from gen.core.config import SpnnError
from gen.core.regmap import CONTROL_RDL, c_header, compile_rdl, ipxact, markdown
from gen.core.sim import run_cocotb
from hdl.lib.axil import AxiLiteRegisters

PARAMS = {}
REGS = Gateware("axil_regs", lambda params: AxiLiteRegisters(compile_rdl(parameters=dict(params))),
                lambda params: "axil_control")


def _spec(regmap, seed):
    return {"size": regmap.size, "seed": seed,
            "registers": [{"name": r.name, "offset": r.offset,
                           "fields": [{"name": f.name, "lsb": f.lsb, "width": f.width,
                                       "kind": f.kind, "reset": f.reset} for f in r.fields]}
                          for r in regmap.registers]}


def test_control_map():
    regmap = compile_rdl(parameters=PARAMS)
    assert [(r.name, r.offset) for r in regmap.registers][:6] == [
        ("ID", 0), ("VERSION", 4), ("CTRL", 8), ("STATUS", 12), ("IRQ_ENABLE", 16),
        ("IRQ_STATUS", 20)]
    assert regmap.register("ID").fields[0].reset == 0x53500000
    assert [f.reset for f in regmap.register("VERSION").fields] == [0, 1, 0]
    kinds = {f.kind for r in regmap.registers for f in r.fields}
    assert kinds == {"const", "status", "control", "pulse", "w1c"}
    assert regmap.size == 0x40 and regmap.addr_width == 6


def test_unsupported_field_is_refused(tmp_path):
    path = tmp_path / "bad.rdl"
    path.write_text("addrmap bad { reg { field { sw = w; hw = r; } x[0:0] = 0; } R @ 0; };")
    with pytest.raises(SpnnError, match=r"bad\.R\.x: sw = w, hw = r is not one of"):
        compile_rdl(path, top="bad")
    path.write_text("addrmap bad { reg { field { sw = r; } x[0:0] = 0 } R @ 0; };")
    with pytest.raises(SpnnError, match=r"register description bad\.rdl: .*error"):
        compile_rdl(path, top="bad")


def test_generated_files_agree_with_the_map():
    regmap = compile_rdl(parameters=PARAMS)
    header, xml, md = c_header(regmap), ipxact(regmap), markdown(regmap)
    for reg in regmap.registers:
        assert f"<ipxact:name>{reg.name}</ipxact:name>" in xml
        assert re.search(rf"<ipxact:name>{reg.name}</ipxact:name>\s*(<ipxact:displayName>.*"
                         rf"</ipxact:displayName>\s*)?(<ipxact:description>.*"
                         rf"</ipxact:description>\s*)?<ipxact:addressOffset>'h{reg.offset:x}"
                         rf"</ipxact:addressOffset>", xml), reg.name
        for f in reg.fields:     # a register type used twice is defined once, by type name
            for suffix, value in (("bp", f.lsb), ("bw", f.width)):
                assert re.search(rf"#define SPNN_CONTROL__\w+__{f.name.upper()}_{suffix} "
                                 rf"{value}\n", header), (reg.name, f.name)
        assert reg.name in md and f"0x{reg.offset:02x}" in md.lower()
    # the C struct lays the registers out at the map's offsets
    offset, layout = 0, {}
    for line in header[header.index("typedef struct"):].splitlines()[1:]:
        if line.startswith("}"):
            break
        word = re.fullmatch(r"\s*uint32_t (\w+);", line)
        gap = re.fullmatch(r"\s*uint8_t RESERVED_\w+\[(0x[0-9a-f]+)\];", line)
        assert word or gap, line
        if word:
            layout[word.group(1)] = offset
        offset += 4 if word else int(gap.group(1), 16)
    assert layout == {r.name: r.offset for r in regmap.registers}
    assert "#ifndef SPNN_CONTROL_H" in header
    # deterministic: the same text twice, no dates or paths
    assert c_header(compile_rdl(parameters=PARAMS)) == header
    assert ipxact(compile_rdl(parameters=PARAMS)) == xml
    assert str(CONTROL_RDL.parent) not in header + xml + md


@pytest.mark.parametrize("seed", [1])
def test_axil_registers(sim, tmp_path, seed):
    regmap = compile_rdl(parameters=PARAMS)
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(_spec(regmap, seed)))
    run_cocotb(REGS, tuple(PARAMS.items()), "tb.lib.cocotb_axil", sim=sim,
               name=f"axil-{seed}", env={"SPNN_AXIL": spec})


def test_register_reference_is_current():
    """docs/control-registers.md is PeakRDL-markdown's output for hdl/lib/control.rdl."""
    from scripts.write_regs_doc import DOC, text
    assert DOC.read_text() == text(), "stale: run python -m scripts.write_regs_doc"
