# SPDX-License-Identifier: Apache-2.0
"""The netlist the native engine compiles under Icarus (gen/core/icarus_net.py): what it
rewrites, what it leaves, and that it runs the same transfers as Amaranth's Verilog.

Every block's ``native_agree`` tests compare it (native, Icarus) with Amaranth's text
(cocotb) job by job; here its own cases: the folded process shapes, the packed and merged
flip-flops on a small design, a reset mid-job, and the environment switches."""

import re
import shutil

import numpy as np
import pytest

from gen.core import icarus_net
from gen.core.block import Gateware
from gen.core.config import SpnnError
from gen.core.icarus_net import icarus_netlist
from gen.core.native import icarus_netlist_kind
from gen.core.sim import run_job, verilog_for
from gen.core.stimulus import make_job
from hdl.lib.skid import SkidBuffer

TRIGGER = "    if (\\$auto$verilog_backend.cc:2355:dump_module$1 ) begin end\n"


def _module(body, decls=""):
    return ("module m(clk, rst, a, b, s, y, z);\n  input clk;\n  input rst;\n  input [3:0] a;\n"
            "  input [3:0] b;\n  input [1:0] s;\n  output [3:0] y;\n  output [3:0] z;\n"
            f"  reg [3:0] y;\n  reg [3:0] z;\n{decls}" + body + "endmodule\n")


def test_a_process_of_ifs_and_cases_becomes_assignments():
    text = _module(
        "  always @* begin\n" + TRIGGER +
        "    y = a;\n"
        "    if (rst) begin\n      y = 4'h0;\n    end else if (s[0]) begin\n      y = b;\n"
        "    end\n"
        "    z = 4'h2;\n"
        "    (* full_case = 32'd1 *)\n"
        "    casez (s)\n      2'h0:\n          z = a;\n      2'h1, 2'h2:\n          z = b;\n"
        "      2'h3:\n          /* empty */;\n    endcase\n"
        "    if (rst) begin\n      z = 4'h1;\n    end\n"
        "  end\n")
    out = icarus_netlist(text, pack=False)
    assert "always @*" not in out and "dump_module" not in out
    assert "  wire [3:0] y;" in out and "  wire [3:0] z;" in out
    assert "  assign y = (rst) ? 4'h0 : (s[0]) ? b : a;" in out
    assert ("  assign z = (rst) ? 4'h1 : ((s) == 2'h0) ? a : ((s) == 2'h1 || (s) == 2'h2) ? b "
            ": 4'h2;") in out


def test_a_full_case_without_default_is_complete():
    text = _module(
        "  always @* begin\n" + TRIGGER +
        "    (* full_case = 32'd1 *)\n"
        "    casez (s)\n      2'h0:\n          y = a;\n      2'h1:\n          y = b;\n"
        "      2'h2:\n          y = 4'h3;\n      2'h3:\n          y = 4'h4;\n    endcase\n"
        "  end\n")
    out = icarus_netlist(text, pack=False)
    assert "always @*" not in out
    assert ("  assign y = ((s) == 2'h0) ? a : ((s) == 2'h1) ? b : ((s) == 2'h2) ? 4'h3 "
            ": 4'h4;") in out


def test_a_table_of_constants_becomes_a_rom():
    text = _module(
        "  always @* begin\n" + TRIGGER +
        "    y = 4'h0;\n"
        "    casez (s)\n      2'h0:\n          y = 4'h7;\n      2'h2:\n          y = 4'h9;\n"
        "    endcase\n"
        "  end\n")
    out = icarus_netlist(text, pack=False)
    assert "always @*" not in out
    rom = re.search(r"  reg \[3:0\] (\\spnn\$rom\$\d+ )\[0:3\];", out)
    assert rom, out
    name = rom.group(1)
    for v, value in enumerate(("4'h7", "4'h0", "4'h9", "4'h0")):
        assert f"    {name}[{v}] = {value};" in out
    wire = re.search(r"  wire \[3:0\] (\\spnn\$fold\$\d+ ) = " + re.escape(name) + r"\[s\];",
                     out)
    assert wire and f"  assign y = {wire.group(1)};" in out


@pytest.mark.parametrize("body", [
    # a part assignment
    "    y = a;\n    if (rst) begin\n      y [1:0] = 2'h0;\n    end\n",
    # a latch: y unassigned when s[0] is 0
    "    if (s[0]) begin\n      y = a;\n    end\n",
    # reads what it assigned
    "    y = a;\n    z = y;\n",
    # a statement outside the subset
    "    y = a;\n    for (i = 0; i < 2; i = i + 1) y = b;\n",
], ids=["part", "latch", "read-after-write", "loop"])
def test_processes_outside_the_subset_stay(body):
    text = _module("  always @* begin\n" + TRIGGER + body + "  end\n")
    out = icarus_netlist(text, pack=False)
    assert out.count("always @*") == 1 and "  reg [3:0] y;" in out


def test_widths_convert_as_the_assignment_did():
    """A value that is not a signal or a constant of the target's width goes through a
    wire of that width (so ``?:`` sees operands of one width and signedness)."""
    text = _module("  always @* begin\n" + TRIGGER +
                   "    y = $signed(a[1:0]);\n    if (rst) begin\n      y = 4'h0;\n    end\n"
                   "  end\n")
    out = icarus_netlist(text, pack=False)
    fold = re.search(r"  wire \[3:0\] (\\spnn\$fold\$\d+ ) = \$signed\(a\[1:0\]\);", out)
    assert fold and f"  assign y = (rst) ? 4'h0 : {fold.group(1)};" in out


def test_extensions_and_repeated_expressions():
    text = _module("  wire [5:0] e;\n  wire [5:0] f;\n  wire [4:0] p;\n  wire [4:0] q;\n"
                   "  assign e = { a[3], a[3], a };\n  assign f = { 2'h0, b };\n"
                   "  assign p = a + b;\n  assign q = a + b;\n")
    out = icarus_netlist(text, pack=False)
    assert "  assign e = $signed(a);" in out and "  assign f = b;" in out
    assert "  assign p = a + b;" in out and "  assign q = p;" in out


def test_flip_flops_merge_and_pack():
    text = _module("  reg [3:0] r = 4'h5;\n  reg [2:0] t = 3'h1;\n"
                   "  always @(posedge clk)\n    r <= a;\n"
                   "  always @(posedge clk)\n    t <= b[2:0];\n")
    merged = icarus_netlist(text, pack=False)
    assert merged.count("always @(posedge clk)") == 1
    assert "    r <= a;\n    t <= b[2:0];" in merged
    packed = icarus_netlist(text, pack=True)
    assert packed.count("always @(posedge clk)") == 1
    q = re.search(r"  reg \[6:0\] (\\spnn\$q\$\d+ ) = \{ 3'h1, 4'h5 \};", packed)
    assert q, packed
    assert f"  assign r = {q.group(1)}[3:0];" in packed
    assert f"  assign t = {q.group(1)}[6:4];" in packed
    assert "  wire [3:0] r;" in packed and "  wire [2:0] t;" in packed


def test_the_output_is_a_function_of_the_text():
    module, text = verilog_for(SKID, 12)
    assert icarus_netlist(text) == icarus_netlist(text)
    assert "/" + "tmp" not in icarus_netlist(text)


WIDTH = 12
SKID = Gateware("skid", SkidBuffer, lambda width: f"skid_{width}")


@pytest.mark.rtl
@pytest.mark.parametrize("pack", [False, True], ids=["merged", "packed"])
def test_icarus_netlist_runs_the_same_transfers(pack, monkeypatch):
    """The skid buffer natively under Icarus on Amaranth's text and on the rewritten netlist
    (merged, and packed, forced on this small design), against cocotb: idle inputs,
    back-pressure and a reset mid-job."""
    if shutil.which("iverilog") is None:
        pytest.skip("Icarus Verilog not installed")
    monkeypatch.setattr(icarus_net, "PACK_MIN_FLOPS", 0 if pack else 10 ** 9)
    rng = np.random.default_rng(7)
    data = [int(v) for v in rng.integers(0, 1 << WIDTH, 400)]
    job = make_job([("i", data, 0.7)], [("o", len(data), 0.6)], seed=5, reset_at=57,
                   max_cycles=5000)
    ref = run_job(SKID, WIDTH, job, "icarus", name=f"icarus-net-ref-{pack}", engine="cocotb")
    results = {}
    for kind in ("amaranth", "icarus"):
        monkeypatch.setenv("SPNN_ICARUS_NETLIST", kind)
        results[kind] = run_job(SKID, WIDTH, job, "icarus", name=f"icarus-net-{kind}-{pack}",
                                engine="native")
    for key in ("error", "cycles_run", "sources", "sinks", "before_reset", "resets", "log"):
        assert results["icarus"][key] == results["amaranth"][key] == ref[key], key
    assert ref["resets"] == [57]


def test_netlist_switch(monkeypatch):
    monkeypatch.delenv("SPNN_ICARUS_NETLIST", raising=False)
    assert icarus_netlist_kind() == "icarus"
    monkeypatch.setenv("SPNN_ICARUS_NETLIST", "amaranth")
    assert icarus_netlist_kind() == "amaranth"
    monkeypatch.setenv("SPNN_ICARUS_NETLIST", "yosys")
    with pytest.raises(SpnnError, match="SPNN_ICARUS_NETLIST"):
        icarus_netlist_kind()
