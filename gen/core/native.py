# SPDX-License-Identifier: Apache-2.0
"""The native simulation path: a generated Verilog testbench, no Python per clock.

:func:`run_native` runs the same stream *job* as the cocotb bench
(:mod:`gen.core.cocotb_bench`, :func:`gen.core.stimulus.make_job`) and returns the same
result dict, transfer for transfer and cycle for cycle (``tb/core/test_native.py`` runs
jobs with idle inputs, back-pressure and a reset mid-job through both and compares).  The
difference is where the per-clock work happens: here a testbench generated from the
module's ports (:func:`testbench`) reads each source's words and every port's handshake
pattern from files and writes every transfer with its cycle number to event files, all
inside the simulator.

The testbench is plain Verilog-2005 (file I/O system tasks only) in a ``.sv`` file: Icarus
compiles it with ``-g2012``, Verilator with ``--binary --timing`` (its clock is
``always #5``).  Its timing discipline is the cocotb bench's: inputs change at the falling
edge and handshakes are sampled one time unit before the next rising edge (everything
settled, nothing racing the edge), so a transfer is recorded in the clock whose rising edge
completes it.  Under Icarus the design is compiled from the netlist of
:mod:`gen.core.icarus_net` (the same behaviour, 2-4x cheaper to simulate;
``$SPNN_ICARUS_NETLIST=amaranth`` compiles Amaranth's text instead).

Its per-clock work is kept small, as under Icarus every variable it reads costs (a
``dynamic_cast`` per ``%load``): clock and word indices are split with bit-selects, not
``%`` and ``/`` (signed division was ~5 % of a PWL run), and transfers are buffered in
arrays and written ``EVENT_CHUNK`` at a time with ``$writememh`` (a ``$fwrite`` per
transfer was ~1 us, ~25 % of the testbench's time on the PWL unit).

Files of one run (in its folder, the simulator's working directory):

* ``job.txt``: ``max_cycles reset_at reset_cycles drain_cycles`` (``reset_at`` -1: none),
  then per source (testbench order) ``words always``, per sink ``count always``;
* ``s<k>_<c>.hex``: chunk ``c`` of source ``k``'s words (words ``SOURCE_CHUNK c`` ..
  ``SOURCE_CHUNK (c + 1) - 1``, one hex number a line, the last chunk padded with zeros),
  loaded with ``$readmemh`` when the source reaches it (a ``$fscanf`` per word was ~45 % of
  an Icarus run on the PWL unit);
* ``s<k>.pat`` / ``k<k>.pat``: the port's pattern for clocks 0 .. max_cycles - 1, 32 clocks
  a line as a hex word (clock ``32 i + b`` is bit ``b`` of line ``i``); absent when the
  port transfers on every clock;
* ``s<k>_<c>.ev`` / ``k<k>_<c>.ev`` (written by the testbench): chunk ``c`` of the port's
  transfers (``EVENT_CHUNK`` a file), one hex number a line: a source transfer's cycle, a
  sink transfer's ``{payload, cycle}`` (the cycle in the low 32 bits);
* ``events.txt`` (written by the testbench): ``R <cycle>`` a reset begins (the transfers of
  cycle ``reset_at`` and later come after it), ``D <cycles_run> <timeout>`` the end.

Builds (the design's Verilog + the testbench) are cached under ``<build>/native/`` by a
hash of both texts and the build flags (and, under Icarus, the netlist rewrite's source).
"""

import hashlib
import os
import re
from pathlib import Path
import shutil
import subprocess
import tempfile
import time

import numpy as np

from gen.core.config import SpnnError
from gen.core.emit import verilog_ports
from gen.core import icarus_net
from gen.core.icarus_net import icarus_netlist
from gen.core.simbase import SimError, _locked, _say, children_cpu
from gen.core.stimulus import normalise_job, sink_pattern, source_pattern

__all__ = ["stream_ports", "testbench", "run_native", "native_build", "build_testbench",
           "run_dir_for", "finish_run", "icarus_netlist_kind", "NATIVE_TOP", "VERILATOR_ARGS",
           "SOURCE_CHUNK", "EVENT_CHUNK"]

NATIVE_TOP = "spnn_native_tb"

# Source words per ``$readmemh`` chunk file (the testbench holds one chunk per source); a
# power of two (the testbench splits a word's index with bit operations).
SOURCE_CHUNK = 4096
_CHUNK_BITS = SOURCE_CHUNK.bit_length() - 1
assert SOURCE_CHUNK == 1 << _CHUNK_BITS

# Transfers per event chunk file (``$writememh``): a port's transfers are buffered in the
# testbench and written a chunk at a time.
EVENT_CHUNK = 4096

# Verilator flags of the native build.  The C++ is compiled at -O1: on the 32-PE SpMV
# engine -O1 builds in about half the time of -O2/-O3 and simulates within a few percent
# of them; no signal is public (nothing reads the design from outside), unlike the cocotb
# build.  $SPNN_NATIVE_OPT overrides the C++ level.
VERILATOR_ARGS = ["--binary", "--timing", "-CFLAGS", "-fcoroutines", "--x-assign", "fast",
                  "-Wno-WIDTHEXPAND", "-Wno-WIDTHTRUNC", "-Wno-CASEINCOMPLETE",
                  "-Wno-STMTDLY", "-Wno-INITIALDLY", "-Wno-lint", "-Wno-fatal"]


# The design's Verilog of a native Icarus build: ``icarus`` (default), Amaranth's text
# rewritten by :func:`gen.core.icarus_net.icarus_netlist` (the same behaviour, 2-4x less
# simulation time: docs/sim.md), or ``amaranth``, the text as converted.  Verilator (which
# compiles the design to C++ itself) always gets Amaranth's text.
_NETLISTS = ("icarus", "amaranth")
_NETLIST_VERSION = hashlib.sha256(
    (Path(__file__).parent / "icarus_net.py").read_bytes()).hexdigest()[:16]


def icarus_netlist_kind() -> str:
    """``$SPNN_ICARUS_NETLIST`` (``icarus`` or ``amaranth``; default ``icarus``)."""
    kind = os.environ.get("SPNN_ICARUS_NETLIST", "") or "icarus"
    if kind not in _NETLISTS:
        raise SpnnError(f"SPNN_ICARUS_NETLIST must be one of {', '.join(_NETLISTS)}, "
                        f"not {kind!r}")
    return kind


def _verilator_args():
    """:data:`VERILATOR_ARGS`, with ``--threads N`` when ``$SPNN_NATIVE_THREADS`` is N > 1
    (measured by scripts/bench_sim.py; one thread is the default)."""
    threads = int(os.environ.get("SPNN_NATIVE_THREADS", "1") or 1)
    return VERILATOR_ARGS + (["--threads", str(threads)] if threads > 1 else [])


def stream_ports(verilog: str, module: str):
    """``(sources, sinks, others)`` of ``module``: each stream ``(name, payload width)``
    (0 without a payload) by its ``__valid`` direction, then the other inputs (tied to 0)
    besides ``clk`` and ``rst``."""
    ports = {name: (direction, width) for name, direction, width in verilog_ports(verilog, module)}
    sources, sinks = [], []
    for name, (direction, _) in ports.items():
        if name.endswith("__valid"):
            base = name[:-len("__valid")]
            width = ports.get(base + "__payload", (None, 0))[1]
            (sources if direction == "input" else sinks).append((base, width))
    streams = {b for b, _ in sources + sinks}
    others = [(n, w) for n, (d, w) in ports.items()
              if d == "input" and n not in ("clk", "rst")
              and n.rsplit("__", 1)[0] not in streams]
    return sources, sinks, others


def _vec(width):
    return f"[{width - 1}:0] " if width > 1 else ""


def _source_decl(k, w):
    return (f"  reg s{k}_valid;\n  wire s{k}_ready;\n"
            + (f"  reg {_vec(w)}s{k}_payload;\n  reg {_vec(w)}s{k}_next;\n"
               f"  reg {_vec(w)}s{k}_mem [0:{SOURCE_CHUNK - 1}];\n" if w else "")
            + f"  integer s{k}_n, s{k}_idx, s{k}_chunk, s{k}_pfd, s{k}_always;\n"
              f"  reg s{k}_hold = 1'b0;\n  reg [31:0] s{k}_pw = 32'd0;\n"
              f"  reg [31:0] s{k}_ev [0:{EVENT_CHUNK - 1}];\n  integer s{k}_en, s{k}_ef;\n")


def _sink_decl(k, w):
    return (f"  reg k{k}_ready;\n  wire k{k}_valid;\n"
            + (f"  wire {_vec(w)}k{k}_payload;\n" if w else "")
            + f"  integer k{k}_n, k{k}_cnt, k{k}_pfd, k{k}_always;\n"
              f"  reg [31:0] k{k}_pw = 32'd0;\n"
              f"  reg [{w + 31}:0] k{k}_ev [0:{EVENT_CHUNK - 1}];\n  integer k{k}_en, k{k}_ef;\n")


def _record(tag, k, value):
    """Statements that append ``value`` to port ``tag k``'s event buffer, written out with
    ``$writememh`` as ``<tag><k>_<c>.ev`` when full (module docstring)."""
    return (f"{tag}{k}_ev[{tag}{k}_en] = {value}; {tag}{k}_en = {tag}{k}_en + 1;\n"
            f"        if ({tag}{k}_en == {EVENT_CHUNK}) begin "
            f"$sformat(fname, \"{tag}{k}_%0d.ev\", {tag}{k}_ef); $writememh(fname, {tag}{k}_ev); "
            f"{tag}{k}_ef = {tag}{k}_ef + 1; {tag}{k}_en = 0; end\n")


def _event_init(sources, sinks):
    return "".join(f"    {tag}{k}_en = 0; {tag}{k}_ef = 0;\n"
                   for tag, ports in (("s", sources), ("k", sinks)) for k in range(len(ports)))


def _flush(sources, sinks):
    """The end of the run: every port's last, partial event chunk."""
    out = []
    for tag, ports in (("s", sources), ("k", sinks)):
        for k in range(len(ports)):
            out.append(f"    if ({tag}{k}_en > 0) begin $sformat(fname, \"{tag}{k}_%0d.ev\", "
                       f"{tag}{k}_ef); $writememh(fname, {tag}{k}_ev, 0, {tag}{k}_en - 1); end\n")
    return "".join(out)


def _tasks(sources, sinks):
    """The per-port statements of the main loop: (restart sources, restart sinks, load
    patterns, drive, sample, all done)."""
    rs, rk, load, drive, sample, done = [], [], [], [], [], []
    for k, (_, w) in enumerate(sources):
        read = (f"begin if ((s{k}_idx >> {_CHUNK_BITS}) != s{k}_chunk) begin "
                f"s{k}_chunk = s{k}_idx >> {_CHUNK_BITS}; "
                f"$sformat(fname, \"s{k}_%0d.hex\", s{k}_chunk); "
                f"$readmemh(fname, s{k}_mem); end "
                f"s{k}_next = s{k}_mem[s{k}_idx[{_CHUNK_BITS - 1}:0]]; end" if w else "")
        rs.append(f"      s{k}_idx = 0; s{k}_hold = 1'b0; s{k}_valid = 1'b0;\n"
                  + (f"      if (s{k}_n > 0) {read}\n" if w else ""))
        load.append(f"      if (!s{k}_always && new_word) "
                    f"rc = $fscanf(s{k}_pfd, \"%h\\n\", s{k}_pw);\n")
        take = f"s{k}_payload = s{k}_next; " if w else ""
        drive.append(f"      if (!s{k}_hold) begin\n"
                     f"        if (s{k}_idx < s{k}_n && (s{k}_always || s{k}_pw[pbit]))"
                     f" begin\n          {take}s{k}_valid = 1'b1; s{k}_hold = 1'b1;\n"
                     f"        end else s{k}_valid = 1'b0;\n      end\n")
        sample.append(f"      if (s{k}_hold && s{k}_ready) begin\n"
                      f"        {_record('s', k, 'cycle')}"
                      f"        s{k}_idx = s{k}_idx + 1; s{k}_hold = 1'b0;\n"
                      + (f"        if (s{k}_idx < s{k}_n) {read}\n" if w else "")
                      + "      end\n")
        done.append(f"s{k}_idx >= s{k}_n")
    for k, (_, w) in enumerate(sinks):
        rk.append(f"      k{k}_cnt = 0;\n")
        load.append(f"      if (!k{k}_always && new_word) "
                    f"rc = $fscanf(k{k}_pfd, \"%h\\n\", k{k}_pw);\n")
        drive.append(f"      k{k}_ready = k{k}_always || k{k}_pw[pbit];\n")
        value = f"{{k{k}_payload, cycle}}" if w else "cycle"
        sample.append(f"      if (k{k}_ready && k{k}_valid) begin\n"
                      f"        {_record('k', k, value)}"
                      f"        k{k}_cnt = k{k}_cnt + 1;\n      end\n")
        done.append(f"k{k}_cnt >= k{k}_n")
    return ["".join(x) for x in (rs, rk, load, drive, sample)] + [" && ".join(done) or "1"]


def _opens(sources, sinks):
    lines = []
    for tag, ports in (("s", sources), ("k", sinks)):
        for k, (_, w) in enumerate(ports):
            lines.append(f"    rc = $fscanf(fcfg, \"%d %d\\n\", {tag}{k}_n, {tag}{k}_always);\n")
            if tag == "s" and w:
                lines.append(f"    s{k}_chunk = -1;\n")
            lines.append(f"    if (!{tag}{k}_always) {tag}{k}_pfd = $fopen(\"{tag}{k}.pat\", "
                         f"\"r\");\n")
    return "".join(lines)


def _zeros(sources, sinks):
    lines = [f"    s{k}_valid = 1'b0;" + (f" s{k}_payload = {w}'d0; s{k}_next = {w}'d0;" if w else "")
             for k, (_, w) in enumerate(sources)]
    lines += [f"    k{k}_ready = 1'b0;" for k in range(len(sinks))]
    return "".join(line + "\n" for line in lines)


def _progress_fmt(sources, sinks):
    return " %0d" * (len(sources) + len(sinks))


def _progress_args(sources, sinks):
    return "".join(f", s{k}_idx" for k in range(len(sources))) + "".join(
        f", k{k}_cnt" for k in range(len(sinks)))


def _instance(module, sources, sinks, others):
    conns = [".clk(clk)", ".rst(rst)"]
    for k, (name, w) in enumerate(sources):
        conns += [f".{name}__valid(s{k}_valid)", f".{name}__ready(s{k}_ready)"]
        if w:
            conns.append(f".{name}__payload(s{k}_payload)")
    for k, (name, w) in enumerate(sinks):
        conns += [f".{name}__valid(k{k}_valid)", f".{name}__ready(k{k}_ready)"]
        if w:
            conns.append(f".{name}__payload(k{k}_payload)")
    conns += [f".{name}({w}'d0)" for name, w in others]
    return f"  {module} dut (\n    " + ",\n    ".join(conns) + "\n  );\n"


def testbench(module: str, sources, sinks, others=()) -> str:
    """The native testbench of ``module`` (ports from :func:`stream_ports`)."""
    rs, rk, load, drive, sample, done = _tasks(sources, sinks)
    names = ", ".join(f"s{k}={n}" for k, (n, _) in enumerate(sources))
    names += "; " + ", ".join(f"k{k}={n}" for k, (n, _) in enumerate(sinks))
    return f"""// Generated by spnn (gen/core/native.py): native testbench of {module}.
// Sources {names}.
`timescale 1ns/1ps
module {NATIVE_TOP};
  reg clk, rst;
  integer cycle, rc, fcfg, fev, max_cycles, reset_at, reset_cycles, drain;
  integer finished, fin_at, stop, timeout, r, progress;
  reg [4:0] pbit;
  reg new_word;
  reg [8*32-1:0] fname;
{"".join(_source_decl(k, w) for k, (_, w) in enumerate(sources))}\
{"".join(_sink_decl(k, w) for k, (_, w) in enumerate(sinks))}\
{_instance(module, sources, sinks, others)}
  always #5 clk = ~clk;

  initial begin
    // every input is assigned at time 0 (not by a declaration's initialiser), so the
    // design's combinational processes see an event, as they do when cocotb drives them
    clk = 1'b0; rst = 1'b1;
{_zeros(sources, sinks)}\
    progress = $test$plusargs("progress");
    fcfg = $fopen("job.txt", "r");
    rc = $fscanf(fcfg, "%d %d %d %d\\n", max_cycles, reset_at, reset_cycles, drain);
{_opens(sources, sinks)}\
    $fclose(fcfg);
    fev = $fopen("events.txt", "w");
    cycle = 0; finished = 0; fin_at = 0; stop = 0; timeout = 0;
{_event_init(sources, sinks)}\
{rs}{rk}\
    for (r = 0; r < reset_cycles; r = r + 1) @(posedge clk);
    @(negedge clk);
    rst = 1'b0;
    while (!stop) begin
      if (reset_at >= 0 && cycle == reset_at) begin
        $fwrite(fev, "R %0d\\n", cycle);
        rst = 1'b1;
{rs}\
        for (r = 0; r < reset_cycles; r = r + 1) @(posedge clk);
        @(negedge clk);
        rst = 1'b0;
{rs}{rk}\
      end
      pbit = cycle[4:0]; new_word = pbit == 5'd0;
{load}{drive}\
      #4;
{sample}\
      cycle = cycle + 1;
      if (progress) if (cycle[13:0] == 14'd0) begin
        $display("P %0d{_progress_fmt(sources, sinks)}", cycle{_progress_args(sources, sinks)});
        $fflush;
      end
      if (!finished && {done}) begin finished = 1; fin_at = cycle; end
      if (finished && cycle >= fin_at + drain) stop = 1;
      else if (cycle >= max_cycles) begin timeout = 1; stop = 1; end
      if (!stop) @(negedge clk);
    end
{_flush(sources, sinks)}\
    $fwrite(fev, "D %0d %0d\\n", cycle, timeout);
    $fclose(fev);
    $finish;
  end
endmodule
"""


def native_build(module: str, verilog: str, sim: str, root: Path):
    """Build (once) the native simulator of ``module`` for ``sim`` under ``root``; returns
    ``(command to run, testbench ports, build seconds: 0.0 when cached)``."""
    sources, sinks, others = stream_ports(verilog, module)
    cmd, seconds = build_testbench(module, verilog, testbench(module, sources, sinks, others),
                                   sim, root)
    return cmd, (sources, sinks), seconds


def build_testbench(module: str, verilog: str, tb: str, sim: str, root: Path):
    """Build (once) ``tb`` (a module :data:`NATIVE_TOP` instantiating ``module``) with the
    design for ``sim``, cached under ``root/native/<module>-<hash>/<sim>/``; returns
    ``(command to run, build seconds: 0.0 when cached)``."""
    flags = " ".join(_verilator_args()) + os.environ.get("SPNN_NATIVE_OPT", "-O1")
    netlist = icarus_netlist_kind() if sim == "icarus" else "amaranth"
    if netlist == "icarus":     # the rewrite's source and its knobs (tests force packing)
        flags += (f" netlist={_NETLIST_VERSION},{icarus_net.PACK_MIN_FLOPS},"
                  f"{icarus_net.PACK_BITS}")
    digest = hashlib.sha256("\0".join((verilog, tb, sim, flags)).encode()).hexdigest()[:16]
    folder = root / "native" / f"{module}-{digest}" / sim
    exe = folder / ("native.vvp" if sim == "icarus" else f"obj/V{NATIVE_TOP}")
    seconds = 0.0
    with _locked(folder.parent / f".{sim}.lock"):
        if not (folder / ".built").exists():
            _say(f"building the native {sim} simulator of {module}")
            t0 = time.perf_counter()
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{module}.v").write_text(
                icarus_netlist(verilog) if netlist == "icarus" else verilog)
            (folder / f"{NATIVE_TOP}.sv").write_text(tb)
            _compile(sim, module, folder)
            (folder / ".built").write_text("ok\n")
            seconds = time.perf_counter() - t0
    if sim == "icarus":
        cmd = [shutil.which("vvp") or "vvp", "-n", str(exe)]
    else:
        cmd = [str(exe)]
    return cmd, seconds


def _compile(sim, module, folder):
    files = [f"{NATIVE_TOP}.sv", f"{module}.v"]
    if sim == "icarus":
        cmd = ["iverilog", "-g2012", "-o", "native.vvp", "-s", NATIVE_TOP] + files
        env = None
    else:
        opt = os.environ.get("SPNN_NATIVE_OPT", "-O1")
        cmd = (["verilator"] + _verilator_args() + ["--top-module", NATIVE_TOP, "-Mdir", "obj",
                                                 "-j", str(os.cpu_count() or 2)] + files)
        env = dict(os.environ)
        flags = " ".join(f for f in env.get("MAKEFLAGS", "").split()
                         if not f.startswith(("OPT_FAST=", "OPT_SLOW=", "OPT_GLOBAL=")))
        env["MAKEFLAGS"] = f"{flags} OPT_FAST={opt} OPT_SLOW={opt} OPT_GLOBAL={opt}".strip()
    proc = subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True)
    (folder / "build.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise SimError(f"native {sim} build of {module} failed: {' / '.join(tail)} "
                       f"(see {folder / 'build.log'})")


def _write_chunks(folder: Path, k: int, data, width: int) -> None:
    """Source ``k``'s words as ``$readmemh`` chunk files (module docstring)."""
    mask = (1 << width) - 1
    lines = [f"{int(v) & mask:x}\n" for v in data]
    lines += ["0\n"] * (-len(lines) % SOURCE_CHUNK)
    for c in range(len(lines) // SOURCE_CHUNK):
        (folder / f"s{k}_{c}.hex").write_text(
            "".join(lines[c * SOURCE_CHUNK:(c + 1) * SOURCE_CHUNK]))


def _write_job(job, sources, sinks, folder: Path) -> None:
    """The job's files (module docstring) for the testbench's port order."""
    by_port = {s["port"]: s for s in job["sources"]}
    by_sink = {s["port"]: s for s in job["sinks"]}
    unknown = (set(by_port) - {n for n, _ in sources}) | (set(by_sink) - {n for n, _ in sinks})
    if unknown:
        raise SpnnError(f"the job names ports the module does not have: {sorted(unknown)}")
    n = int(job.get("max_cycles", 100_000))
    reset_at = job.get("reset_at")
    lines = [f"{n} {-1 if reset_at is None else int(reset_at)} "
             f"{int(job.get('reset_cycles', 2))} {int(job.get('drain_cycles', 8))}"]
    for tag, ports, specs in (("s", sources, by_port), ("k", sinks, by_sink)):
        for k, (name, width) in enumerate(ports):
            spec = specs.get(name)
            pattern = (source_pattern if tag == "s" else sink_pattern)(spec or {})
            always = spec is None and tag == "s" or pattern.kind == "always"
            count = len(spec["data"]) if tag == "s" and spec else (spec or {}).get("count", 0)
            if tag == "k" and spec is None:
                always = False          # a sink the job does not name: ready stays low
                pattern = None
            lines.append(f"{int(count)} {int(always)}")
            if tag == "s" and width and count:
                _write_chunks(folder, k, spec["data"], width)
            if not always:
                text = _pattern_lines(pattern, n) if pattern is not None else "0\n" * -(-n // 32)
                (folder / f"{tag}{k}.pat").write_text(text)
    (folder / "job.txt").write_text("\n".join(lines) + "\n")


_COMMENT = re.compile(r"//[^\n]*")


def _port_events(run_dir: Path, tag: str, k: int) -> list:
    """Port ``tag k``'s event values in order, from its ``$writememh`` chunk files (Icarus
    heads each with an address comment)."""
    values, c = [], 0
    while (path := run_dir / f"{tag}{k}_{c}.ev").exists():
        values += [int(v, 16) for v in _COMMENT.sub("", path.read_text()).split()]
        c += 1
    return values


def _parse(job, sources, sinks, text: str, run_dir: Path) -> dict:
    """The cocotb bench's result dict from the event files: per source its transfers'
    cycles, per sink ``{payload, cycle}`` per transfer (``<tag><k>_<c>.ev``), and in
    ``events.txt`` ``R <cycle>`` at a reset (the transfers start again; a transfer of
    cycle ``c`` came after every reset at a cycle <= ``c``), ``D <cycles run> <timeout>``
    at the end."""
    data = {s["port"]: s["data"] for s in job["sources"]}
    counts = {s["port"]: s["count"] for s in job["sinks"]}
    src = [{"cycles": [], "log": []} for _ in sources]
    snk = [{"data": [], "cycles": [], "log": []} for _ in sinks]
    before, cycles_run, timeout = None, 0, 0
    done = re.search(r"^D (\d+) (\d+)$", text, re.M)
    if done:
        cycles_run, timeout = int(done.group(1)), int(done.group(2))
    resets = [int(v) for v in re.findall(r"^R (\d+)$", text, re.M)]
    mask = (1 << 32) - 1
    src_events = [np.array(_port_events(run_dir, "s", i), dtype=np.int64)
                  for i in range(len(sources))]
    snk_events = []
    for i in range(len(sinks)):
        values = _port_events(run_dir, "k", i)
        snk_events.append((np.array([v & mask for v in values], dtype=np.int64),
                           np.array([v >> 32 for v in values], dtype=object)))
    src_seg = [np.searchsorted(resets, c, side="right") for c in src_events]
    snk_seg = [np.searchsorted(resets, c, side="right") for c, _ in snk_events]
    for k in range(len(resets) + 1):
        if k:
            before = {name: {"data": s["data"], "cycles": s["cycles"]}
                      for (name, _), s in zip(sinks, snk) if name in counts}
        for i, s in enumerate(src):
            c = src_events[i][src_seg[i] == k].tolist()
            words = data.get(sources[i][0], [])
            s["cycles"] = c
            s["log"] += [[cy, w] for cy, w in zip(c, words)]
        for i, s in enumerate(snk):
            pick = snk_seg[i] == k
            c, v = snk_events[i][0][pick].tolist(), snk_events[i][1][pick].tolist()
            s["cycles"], s["data"] = c, v
            s["log"] += [[cy, w] for cy, w in zip(c, v)]
    error = f"timeout after {job.get('max_cycles', 100_000)} cycles" if timeout else None
    extra = {name: len(s["data"]) - counts[name] for (name, _), s in zip(sinks, snk)
             if name in counts and len(s["data"]) > counts[name]}
    if error is None and extra:
        error = f"unexpected extra output transfers: {extra}"
    named = [(n, s) for (n, _), s in zip(sources, src) if n in data]
    named_k = [(n, s) for (n, _), s in zip(sinks, snk) if n in counts]
    return {
        "error": error, "cycles_run": cycles_run,
        "sources": {n: {"cycles": s["cycles"]} for n, s in named},
        "sinks": {n: {"data": s["data"], "cycles": s["cycles"]} for n, s in named_k},
        "before_reset": before, "resets": resets,
        "log": {n: s["log"] for n, s in named + named_k},
        "trace": {},
    }


def _run_with_progress(cmd, run_dir, job, sources, sinks, module):
    """Run the simulator showing a progress bar (tqdm, on stderr): the source words
    transferred, with each port's count beside it, updated every 16384 clocks."""
    from tqdm import tqdm
    words = {s["port"]: len(s["data"]) for s in job["sources"]}
    counts = {s["port"]: s["count"] for s in job["sinks"]}
    names = [n for n, _ in sources] + [n for n, _ in sinks]
    totals = [words.get(n, 0) for n, _ in sources] + [counts.get(n, 0) for n, _ in sinks]
    out = []
    with subprocess.Popen(cmd, cwd=run_dir, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as proc, \
            tqdm(total=sum(words.values()), unit="word", desc=f"simulate {module}",
                 leave=False) as bar:
        for line in proc.stdout:
            if not line.startswith("P "):
                out.append(line)
                continue
            cycle, *done = (int(v) for v in line.split()[1:])
            bar.update(sum(done[:len(sources)]) - bar.n)
            bar.set_postfix_str(f"clock {cycle:,}; " + ", ".join(
                f"{n} {d:,}/{t:,}" for n, d, t in zip(names, done, totals) if t))
        err = proc.stderr.read()
    return subprocess.CompletedProcess(cmd, proc.returncode, "".join(out), err)


def _settle(work: Path, final: Path) -> Path:
    """Move a finished run folder to ``final`` (replacing the previous run of that name);
    if another process is doing the same at this moment, keep ``work`` where it is."""
    try:
        if final.exists():
            shutil.rmtree(final)
        os.replace(work, final)
        return final
    except OSError:
        return work


def run_dir_for(cmd, sim: str, name: str):
    """``(private run folder, build folder)`` of a run of the simulator ``cmd``: a new
    folder (parallel runs of one build share nothing), which :func:`_settle` renames to
    ``runs/<name>`` when the run ends so the last run of each name stays to inspect."""
    folder = Path(cmd[-1]).parent if sim == "icarus" else Path(cmd[0]).parent.parent
    (folder / "runs").mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{name}-", dir=folder / "runs")), folder


def finish_run(proc, run_dir: Path, final: Path, sim: str, module: str):
    """After the simulator process ``proc``: its log into ``run_dir/sim.log``, the folder
    settled at ``final`` (:func:`_settle`); ``(run folder, event file text)``, or a
    :class:`SimError` when the process failed or wrote no events."""
    (run_dir / "sim.log").write_text(proc.stdout + proc.stderr)
    run_dir = _settle(run_dir, final)
    events = run_dir / "events.txt"
    if proc.returncode != 0 or not events.exists():
        raise SimError(f"native {sim} run of {module} failed (exit {proc.returncode}); "
                       f"see {run_dir / 'sim.log'}")
    return run_dir, events.read_text()


def _pattern_lines(pattern, n: int, delay: int = 0) -> str:
    """The pattern file of ``pattern`` for clocks 0 .. n - 1 (module docstring), ``delay``
    clocks late (the first ``delay`` clocks 0)."""
    bits = pattern.expand(n)
    if delay:
        bits = np.concatenate([np.zeros(delay, bool), bits])[:n]
    bits = np.concatenate([bits, np.zeros(-len(bits) % 32, dtype=bool)])
    words = np.packbits(bits.reshape(-1, 32)[:, ::-1], axis=1).view(">u4").ravel()
    return "".join(f"{int(w):08x}\n" for w in words)


def run_native(module: str, verilog: str, job: dict, sim: str, root: Path,
               name: str = "run", progress: bool = False) -> dict:
    """Run one stream job natively (same contract and result as
    :func:`gen.core.sim.run_job`'s cocotb path); the result also has ``engine``,
    ``build_seconds``, ``sim_seconds`` (the simulator process, file I/O included) and
    ``sim_cpu_seconds`` (its user + system CPU time).
    ``progress``: show a progress bar on stderr while it runs."""
    if job.get("watch"):
        raise SpnnError("the native engine does not trace signals (watch); use the cocotb "
                        "engine")
    job = normalise_job(job)
    cmd, (sources, sinks), build_seconds = native_build(module, verilog, sim, root)
    run_dir, folder = run_dir_for(cmd, sim, name)
    try:
        _write_job(job, sources, sinks, run_dir)
    except BaseException:
        shutil.rmtree(run_dir)
        raise
    t0, c0 = time.perf_counter(), children_cpu()
    if progress:
        proc = _run_with_progress(cmd + ["+progress"], run_dir, job, sources, sinks, module)
    else:
        proc = subprocess.run(cmd, cwd=run_dir, capture_output=True, text=True)
    sim_seconds, sim_cpu = time.perf_counter() - t0, children_cpu() - c0
    run_dir, events = finish_run(proc, run_dir, folder / "runs" / name, sim, module)
    result = _parse(job, sources, sinks, events, run_dir)
    result.update(engine="native", build_seconds=build_seconds, sim_seconds=sim_seconds,
                  sim_cpu_seconds=sim_cpu,
                  test_dir=str(run_dir))
    return result
