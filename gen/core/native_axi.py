# SPDX-License-Identifier: Apache-2.0
"""The native simulation path of an accelerator shell: AXI4-Lite and AXI4-Stream driven by
a generated Verilog testbench, no Python per clock.

:func:`run_native_axi` takes the job spec of the cocotbext-axi bench
(:mod:`gen.core.cocotb_axi`, whose docstring gives the job and result formats) and returns
the same per-job records: the received packets, the counters and registers read back,
``status`` and ``irq``, and what the testbench saw on the ports (``start_ack``, ``first_in``,
``end``, beats and stall clocks).  The testbench performs the cocotb bench's sequence of
each job: write the registers, write ``CTRL.start``, stream one packet on each source named
in ``packets`` (``tkeep`` marks a partial last beat, ``tlast`` the last), take one packet
on each sink in ``receive``, poll ``STATUS.done``, read the counters and ``read``
registers, note ``irq``, acknowledge the interrupt; or, with ``reset_after``, hold
``aresetn`` low for 4 clocks that many clocks after the start and read the registers back.

Its bus timing is that of cocotbext-axi's models, so the records are the same clock for
clock (the ``native_agree`` shell tests compare every record under both simulators): the
timing discipline of :mod:`gen.core.native` (inputs change at the falling edge, handshakes
are sampled just before the rising edge); an AXI4-Lite access offers its address (and
data) in the clock after it was issued and the next access is issued in the clock its
response was taken; a source offers its job's beats from the second clock after the start
write's response, in the clocks its pattern allows (pattern bit ``c`` = clock ``c`` after
``aresetn`` rises) and holds a beat until it is taken; a sink is ready in clock ``c`` when
its pattern's bit ``c - 1`` is set; while ``aresetn`` is low the sources drop their beat
and the sinks are not ready.

Files of a run: ``job.txt`` (``total_clocks max_cycles`` then ``beats always`` per source
and ``always`` per sink), ``s<k>_<c>.hex`` (source ``k``'s beats ``{tlast, tkeep, tdata}``
in :data:`gen.core.native.SOURCE_CHUNK`-beat chunks), ``s<k>.pat`` / ``k<k>.pat`` (as in
:mod:`gen.core.native`), ``script.txt`` (one operation a line, ``op a b``, hex operands:
:data:`OPS`), and ``events.txt`` written by the testbench (``K<k> <clock> <beat hex>`` a
sink beat, ``J`` a job begins, ``F`` its packets are in, ``Q <hex>`` a register read,
``T <hex>`` the polled status, ``I <irq>``, ``O <beats out>`` a reset begins, ``Z`` the
bus models were cleared, ``M <first/last clocks and counts>``, ``D <clocks> <timeout>``).
"""

from pathlib import Path
import subprocess
import time

from gen.core.emit import verilog_ports
from gen.core.native import (NATIVE_TOP, SOURCE_CHUNK, _pattern_lines, build_testbench,
                             finish_run, run_dir_for)
from gen.core.simbase import SimError, children_cpu
from gen.core.stimulus import Pattern

__all__ = ["run_native_axi", "axi_testbench", "OPS"]

CTRL, STATUS, IRQ_STATUS = 0x08, 0x0C, 0x14
COUNTERS = ("cycles", "busy", "stall_in", "stall_out")
COUNTER_AT = {"cycles": 0x20, "busy": 0x28, "stall_in": 0x30, "stall_out": 0x38}

# The testbench's operations (script.txt): code, then what it does.
OPS = {
    "write": 1,      # a b: write b to register a
    "start": 2,      # a b: the start write (clears the port monitor; sources open at its response)
    "read": 3,       # a: read register a, log Q
    "poll": 4,       # read STATUS until done, log T
    "receive": 5,    # wait for the job's packets, log F
    "wait": 6,       # a: wait a clocks
    "irq": 7,        # log I irq
    "reset": 8,      # log O, aresetn low 4 clocks, drop what the bus models hold, log Z
    "monitor": 9,    # log M
    "beats": 10,     # a b: source a sends b beats at the next start
    "expect": 11,    # a: the job takes one more packet from sink a
    "job": 12,       # log J, restart the job's clock budget
    "end": 13,
}


def _sig(kind, k, width):
    return f"{kind} {'[%d:0] ' % (width - 1) if width > 1 else ''}{k}"


def _decls(sources, sinks):
    out = []
    for k, (_, dw, kw, _) in enumerate(sources):
        bw = 1 + kw + dw
        out.append(f"  {_sig('reg', f's{k}_tdata', dw)}; reg s{k}_tlast, s{k}_tvalid; "
                   f"wire s{k}_tready;\n"
                   + (f"  {_sig('reg', f's{k}_tkeep', kw)};\n" if kw else "")
                   + f"  reg [{bw - 1}:0] s{k}_mem [0:{SOURCE_CHUNK - 1}];\n"
                   f"  integer s{k}_n, s{k}_idx, s{k}_end, s{k}_pend, s{k}_chunk, s{k}_pfd, "
                   f"s{k}_always;\n  reg s{k}_hold; reg [31:0] s{k}_pw;\n")
    for k, (_, dw, kw, _) in enumerate(sinks):
        out.append(f"  {_sig('wire', f'k{k}_tdata', dw)}; wire k{k}_tlast, k{k}_tvalid; "
                   f"reg k{k}_tready;\n"
                   + (f"  {_sig('wire', f'k{k}_tkeep', kw)};\n" if kw else "")
                   + f"  integer k{k}_frames, k{k}_target, k{k}_pfd, k{k}_always; "
                   f"reg [31:0] k{k}_pw;\n")
    return "".join(out)


def _instance(module, sources, sinks, addr_width):
    conns = [".aclk(aclk)", ".aresetn(aresetn)", ".irq(irq)"]
    for sig in ("awaddr", "awprot", "awvalid", "awready", "wdata", "wstrb", "wvalid", "wready",
                "bresp", "bvalid", "bready", "araddr", "arprot", "arvalid", "arready", "rdata",
                "rresp", "rvalid", "rready"):
        conns.append(f".s_axi_{sig}({sig})")
    for tag, ports in (("s", sources), ("k", sinks)):
        for k, (port, _, kw, _) in enumerate(ports):
            for sig in ("tdata", "tlast", "tvalid", "tready") + (("tkeep",) if kw else ()):
                conns.append(f".{port}_{sig}({tag}{k}_{sig})")
    return f"  {module} dut (\n    " + ",\n    ".join(conns) + "\n  );\n"


def _fetch(k, dw, kw):
    """Statement: source ``k``'s beat ``s<k>_idx`` into its bus registers (chunk loaded on
    demand)."""
    keep = f"s{k}_tkeep = s{k}_mem[s{k}_idx % {SOURCE_CHUNK}][{kw + dw - 1}:{dw}]; " if kw else ""
    return (f"begin if (s{k}_idx / {SOURCE_CHUNK} != s{k}_chunk) begin "
            f"s{k}_chunk = s{k}_idx / {SOURCE_CHUNK}; "
            f"$sformat(fname, \"s{k}_%0d.hex\", s{k}_chunk); $readmemh(fname, s{k}_mem); end "
            f"s{k}_tdata = s{k}_mem[s{k}_idx % {SOURCE_CHUNK}][{dw - 1}:0]; {keep}"
            f"s{k}_tlast = s{k}_mem[s{k}_idx % {SOURCE_CHUNK}][{kw + dw}]; end")


def _ports_code(sources, sinks):
    """(open files, start sources at a start, clear at a reset, drive, sample, beats
    operation, expect operation, all packets in)."""
    opens, start, clear, drive, sample, beats, expect, got = [], [], [], [], [], [], [], []
    for k, (_, dw, kw, _) in enumerate(sources):
        opens.append(f"    rc = $fscanf(fcfg, \"%d %d\\n\", s{k}_n, s{k}_always);\n"
                     f"    if (!s{k}_always) s{k}_pfd = $fopen(\"s{k}.pat\", \"r\");\n"
                     f"    s{k}_idx = 0; s{k}_end = 0; s{k}_pend = 0; s{k}_chunk = -1; "
                     f"s{k}_hold = 0; s{k}_pw = 0;\n")
        start.append(f"          s{k}_end = s{k}_end + s{k}_pend; s{k}_pend = 0;\n")
        clear.append(f"          s{k}_idx = s{k}_end; s{k}_hold = 0; s{k}_tvalid = 0;\n")
        drive.append(f"      if (!s{k}_always && clock % 32 == 0) "
                     f"rc = $fscanf(s{k}_pfd, \"%h\\n\", s{k}_pw);\n"
                     f"      if (!s{k}_hold) begin\n"
                     f"        if (aresetn && s{k}_idx < s{k}_end && "
                     f"(s{k}_always || s{k}_pw[clock % 32])) begin\n"
                     f"          {_fetch(k, dw, kw)}\n"
                     f"          s{k}_tvalid = 1; s{k}_hold = 1;\n"
                     f"        end else s{k}_tvalid = 0;\n      end\n")
        sample.append(f"      if (s{k}_tvalid && s{k}_tready) begin beats_in = beats_in + 1; "
                      f"if (first_in < 0) first_in = clock; end\n"
                      f"      if (s{k}_tready && !s{k}_tvalid) begin stall_in = stall_in + 1; "
                      f"starving = 1; end\n"
                      f"      if (s{k}_hold && s{k}_tready) begin s{k}_idx = s{k}_idx + 1; "
                      f"s{k}_hold = 0; end\n")
        beats.append(f"            if (opa == {k}) s{k}_pend = opb;\n")
    for k, (_, dw, kw, _) in enumerate(sinks):
        opens.append(f"    rc = $fscanf(fcfg, \"%d\\n\", k{k}_always);\n"
                     f"    if (!k{k}_always) k{k}_pfd = $fopen(\"k{k}.pat\", \"r\");\n"
                     f"    k{k}_frames = 0; k{k}_target = 0; k{k}_tready = 0; k{k}_pw = 0;\n")
        clear.append(f"          k{k}_frames = 0; k{k}_target = 0;\n")
        drive.append(f"      if (!k{k}_always && clock % 32 == 0) "
                     f"rc = $fscanf(k{k}_pfd, \"%h\\n\", k{k}_pw);\n"
                     f"      k{k}_tready = aresetn && (k{k}_always || k{k}_pw[clock % 32]);\n")
        beat = "{" + ", ".join([f"k{k}_tlast"] + ([f"k{k}_tkeep"] if kw else [])
                               + [f"k{k}_tdata"]) + "}"
        sample.append(f"      if (k{k}_tvalid && k{k}_tready) begin\n"
                      f"        $fwrite(fev, \"K{k} %0d %h\\n\", clock, {beat});\n"
                      f"        beats_out = beats_out + 1;\n"
                      f"        if (k{k}_tlast) begin last_end = clock; "
                      f"k{k}_frames = k{k}_frames + 1; end\n      end\n"
                      f"      if (k{k}_tvalid && !k{k}_tready) begin stall_out = stall_out + 1; "
                      f"blocked = 1; end\n")
        expect.append(f"            if (opa == {k}) k{k}_target = k{k}_target + 1;\n")
        got.append(f"k{k}_frames >= k{k}_target")
    return ["".join(x) for x in (opens, start, clear, drive, sample, beats, expect)] + [
        " && ".join(got) or "1"]


def _sequencer(start, clear, beats, expect, got):
    """The drive-phase half of the sequencer: finish the operation in progress (from the
    handshakes sampled in the previous clock), then start the next ones."""
    o = OPS
    return f"""\
      // an access offers its address (and data) in the clock after it was issued
      if (issue) begin
        issue = 0;
        if (st == 1) begin awvalid = 1; wvalid = 1; bready = 1; end
        else begin arvalid = 1; rready = 1; end
      end
      // the operation in progress
      if (st == 1) begin
        if (aw_hs) awvalid = 0;
        if (w_hs) wvalid = 0;
        if (b_hs) begin
          bready = 0; st = 0;
          if (is_start) open_at = clock + 1;

        end
      end else if (st == 2 || st == 3) begin
        if (ar_hs) arvalid = 0;
        if (r_hs) begin
          rready = 0;
          if (st == 2) begin $fwrite(fev, "Q %h\\n", rvalue); st = 0; end
          else if (rvalue & 32'd2) begin $fwrite(fev, "T %h\\n", rvalue); st = 0; end
          else begin araddr = {STATUS}; issue = 1; end
        end
      end else if (st == 4) begin
        if ({got}) begin $fwrite(fev, "F\\n"); st = 0; end
      end else if (st == 5) begin
        if (nwait <= 1) st = 0; else nwait = nwait - 1;
      end else if (st == 6) begin
        rst_left = rst_left - 1;
        if (rst_left == 0) begin
{clear}\
          $fwrite(fev, "Z\\n");
          aresetn = 1; st = 0;
        end
      end
      aw_hs = 0; w_hs = 0; b_hs = 0; ar_hs = 0; r_hs = 0;
      if (clock == open_at) begin
{start}\
      end
      // the next operations (those that take no clock run at once)
      while (st == 0 && !stop) begin
        rc = $fscanf(fscr, "%d %h %h\\n", op, opa, opb);
        if (rc != 3) op = {o["end"]};
        case (op)
          {o["write"]}, {o["start"]}: begin
            is_start = op == {o["start"]};
            if (is_start) begin
              start_ack = -1; first_in = -1; last_end = -1; beats_in = 0; beats_out = 0;
              stall_in = 0; stall_out = 0; stall_in_any = 0; stall_out_any = 0;
            end
            awaddr = opa; wdata = opb; st = 1; issue = 1;
          end
          {o["read"]}: begin araddr = opa; st = 2; issue = 1; end
          {o["poll"]}: begin araddr = {STATUS}; st = 3; issue = 1; end
          {o["receive"]}: if ({got}) $fwrite(fev, "F\\n"); else st = 4;
          {o["wait"]}: begin nwait = opa; if (nwait > 0) st = 5; end
          {o["irq"]}: $fwrite(fev, "I %0d\\n", irq);
          {o["reset"]}: begin
            $fwrite(fev, "O %0d\\n", beats_out);
            aresetn = 0; rst_left = 4; st = 6;
            awvalid = 0; wvalid = 0; bready = 0; arvalid = 0; rready = 0;
            // as cocotbext-axi's models do when reset rises: sources drop their beat
{clear}\
          end
          {o["monitor"]}: $fwrite(fev, "M %0d %0d %0d %0d %0d %0d %0d %0d %0d\\n", start_ack,
                          first_in, last_end, beats_in, beats_out, stall_in, stall_out,
                          stall_in_any, stall_out_any);
          {o["beats"]}: begin
{beats}\
          end
          {o["expect"]}: begin
{expect}\
          end
          {o["job"]}: begin $fwrite(fev, "J\\n"); job_clocks = 0; end
          default: stop = 1;
        endcase
      end
"""


def axi_testbench(module: str, sources, sinks, addr_width: int) -> str:
    """The native testbench of the shell ``module``; ``sources`` / ``sinks``:
    ``[(port, tdata width, tkeep width or 0, word bytes)]``."""
    opens, start, clear, drive, sample, beats, expect, got = _ports_code(sources, sinks)
    aw = f"[{addr_width - 1}:0] "
    return f"""// Generated by spnn (gen/core/native_axi.py): native AXI testbench of {module}.
// Sources {", ".join(f"s{k}={p[0]}" for k, p in enumerate(sources))}; sinks \
{", ".join(f"k{k}={p[0]}" for k, p in enumerate(sinks))}.
`timescale 1ns/1ps
module {NATIVE_TOP};
  reg aclk, aresetn;
  integer clock, rc, fcfg, fscr, fev, total, max_cycles, job_clocks, timeout, stop;
  integer op, st, nwait, rst_left, start_ack, first_in, last_end, beats_in, beats_out;
  integer stall_in, stall_out, stall_in_any, stall_out_any, starving, blocked;
  reg [31:0] opa, opb, rvalue;
  integer open_at;
  reg issue, is_start, aw_hs, w_hs, b_hs, ar_hs, r_hs;
  reg [8*32-1:0] fname;
  reg {aw}awaddr, araddr;
  reg [31:0] wdata;
  reg awvalid, wvalid, bready, arvalid, rready;
  wire awready, wready, bvalid, arready, rvalid, irq;
  wire [1:0] bresp, rresp;
  wire [31:0] rdata;
  wire [2:0] awprot = 3'd0, arprot = 3'd0;
  wire [3:0] wstrb = 4'hf;
{_decls(sources, sinks)}\
{_instance(module, sources, sinks, addr_width)}
  always #5 aclk = ~aclk;

  initial begin
    aclk = 0; aresetn = 0;
    awaddr = 0; araddr = 0; wdata = 0; awvalid = 0; wvalid = 0; bready = 0; arvalid = 0;
    rready = 0;
{"".join(f"    s{k}_tvalid = 0; s{k}_tdata = 0; s{k}_tlast = 0;" + (f" s{k}_tkeep = 0;" if kw else "") + chr(10) for k, (_, _, kw, _) in enumerate(sources))}\
    fcfg = $fopen("job.txt", "r");
    rc = $fscanf(fcfg, "%d %d\\n", total, max_cycles);
{opens}\
    $fclose(fcfg);
    fscr = $fopen("script.txt", "r");
    fev = $fopen("events.txt", "w");
    open_at = -1; issue = 0;
    clock = 0; job_clocks = 0; timeout = 0; stop = 0; st = 0; is_start = 0;
    start_ack = -1; first_in = -1; last_end = -1; beats_in = 0; beats_out = 0;
    stall_in = 0; stall_out = 0; stall_in_any = 0; stall_out_any = 0;
    aw_hs = 0; w_hs = 0; b_hs = 0; ar_hs = 0; r_hs = 0; rvalue = 0;
    repeat (4) @(posedge aclk);
    @(negedge aclk);
    aresetn = 1;
    while (!stop) begin
{_sequencer(start, clear, beats, expect, got)}\
{drive}\
      #4;
      if (awvalid && awready) aw_hs = 1;
      if (wvalid && wready) w_hs = 1;
      if (bvalid && bready) b_hs = 1;
      if (arvalid && arready) ar_hs = 1;
      if (rvalid && rready) begin r_hs = 1; rvalue = rdata; end
      if (start_ack < 0 && bvalid) start_ack = clock;
      starving = 0; blocked = 0;
{sample}\
      stall_in_any = stall_in_any + starving;
      stall_out_any = stall_out_any + blocked;
      clock = clock + 1;
      job_clocks = job_clocks + 1;
      if (!stop && (job_clocks > max_cycles || clock >= total)) begin timeout = 1; stop = 1; end
      if (!stop) @(negedge aclk);
    end
    $fwrite(fev, "D %0d %0d\\n", clock, timeout);
    $fclose(fev);
    $finish;
  end
endmodule
"""


def _bus_ports(verilog, module, spec):
    widths = {n: w for n, _, w in verilog_ports(verilog, module)}
    out = []
    for kind in ("sources", "sinks"):
        ports = []
        for e in spec[kind]:
            port = e["port"]
            if f"{port}_tdata" not in widths:
                raise SimError(f"{module} has no AXI4-Stream port {port!r}")
            ports.append((port, widths[f"{port}_tdata"], widths.get(f"{port}_tkeep", 0),
                          int(e["word_bytes"])))
        out.append(ports)
    return out[0], out[1], widths["s_axi_awaddr"]


def _beats(words, dw, kw, wb):
    """One packet's beats ``{tlast, tkeep, tdata}`` (cocotbext-axi's framing: the words'
    bytes little-endian, ``tkeep`` lanes a beat, the last beat partial)."""
    lanes = kw or -(-dw // 8)
    data = b"".join(int(w).to_bytes(wb, "little") for w in words)
    beats = []
    for at in range(0, len(data), lanes):
        chunk = data[at:at + lanes]
        value = int.from_bytes(chunk, "little")
        if kw:
            value |= ((1 << len(chunk)) - 1) << dw
        last = at + lanes >= len(data)
        beats.append(value | (int(last) << (dw + kw)))
    return beats


def _script(spec, sources, sinks, reads_of):
    ops, beats = [], {k: [] for k in range(len(sources))}
    index = {p[0]: k for k, p in enumerate(sources)}
    sink_index = {p[0]: k for k, p in enumerate(sinks)}

    def op(name, a=0, b=0):
        ops.append(f"{OPS[name]} {int(a) & 0xFFFFFFFF:x} {int(b) & 0xFFFFFFFF:x}")

    def read_counters():
        for name in COUNTERS:
            op("read", COUNTER_AT[name])
            op("read", COUNTER_AT[name] + 4)

    for job in spec["jobs"]:
        op("job")
        for offset, value in job.get("regs", []):
            op("write", offset, value)
        for port, words in job.get("packets", {}).items():
            if port not in index:
                continue
            k = index[port]
            packet = _beats(words, *sources[k][1:]) if len(words) else []
            beats[k] += packet
            op("beats", k, len(packet))
        reset = job.get("reset_after") is not None
        if not reset:
            for port in job.get("receive", [p[0] for p in sinks]):
                op("expect", sink_index[port])
        op("start", CTRL, 1)
        if reset:
            op("wait", int(job["reset_after"]))
            op("reset")
            op("wait", 2)
            read_counters()
            op("read", STATUS)
            op("irq")
            op("read", IRQ_STATUS)
        else:
            op("receive")
            op("poll")
            read_counters()
            for offset in reads_of(job):
                op("read", offset)
            op("irq")
            op("write", IRQ_STATUS, 1)
            op("wait", 1)
            op("irq")
            op("read", IRQ_STATUS)
        op("monitor")
    op("end")
    return "\n".join(ops) + "\n", beats


def _write_run(run_dir: Path, spec, sources, sinks):
    max_cycles = int(spec["max_cycles"])
    script, beats = _script(spec, sources, sinks, lambda job: job.get("read", []))
    total = max_cycles * len(spec["jobs"]) + 64
    lines = [f"{total} {max_cycles}"]
    for tag, ports, entries in (("s", sources, spec["sources"]), ("k", sinks, spec["sinks"])):
        for k, (entry, port) in enumerate(zip(entries, ports)):
            pattern = Pattern.from_json(entry["pattern"])
            always = pattern.kind == "always"
            lines.append(f"{len(beats[k])} {int(always)}" if tag == "s" else f"{int(always)}")
            if not always:
                # a sink's ready follows its pattern one clock late, as cocotbext-axi's
                # sink does (it sets tready from the pause drawn at the previous edge)
                (run_dir / f"{tag}{k}.pat").write_text(
                    _pattern_lines(pattern, total, 1 if tag == "k" else 0))
            if tag == "s":
                rows = [f"{b:x}\n" for b in beats[k]]
                rows += ["0\n"] * (-len(rows) % SOURCE_CHUNK)
                for c in range(len(rows) // SOURCE_CHUNK):
                    (run_dir / f"s{k}_{c}.hex").write_text(
                        "".join(rows[c * SOURCE_CHUNK:(c + 1) * SOURCE_CHUNK]))
    (run_dir / "job.txt").write_text("\n".join(lines) + "\n")
    (run_dir / "script.txt").write_text(script)


def _unpack(value, dw, kw, wb):
    """``(bytes of the kept lanes, tlast)`` of a sink beat."""
    lanes = kw or -(-dw // 8)
    keep = (value >> dw) & ((1 << kw) - 1) if kw else (1 << lanes) - 1
    data = (value & ((1 << dw) - 1)).to_bytes(lanes, "little")
    return bytes(b for i, b in enumerate(data) if keep >> i & 1), value >> (dw + kw) & 1


def _records(spec, sources, sinks, text):
    """The cocotb bench's per-job records from the event file."""
    frames = [[] for _ in sinks]
    partial = [bytearray() for _ in sinks]
    jobs, log = [], None
    done = (0, 0)
    for line in text.splitlines():
        tag, *rest = line.split()
        if tag[0] == "K" and len(tag) > 1:
            k = int(tag[1:])
            data, last = _unpack(int(rest[1], 16), *sinks[k][1:3], sinks[k][3])
            partial[k] += data
            if last:
                frames[k].append(bytes(partial[k]))
                partial[k] = bytearray()
        elif tag == "J":
            log = {"Q": [], "I": [], "T": [], "O": [], "M": [], "F": []}
            jobs.append(log)
        elif tag == "Z":
            frames = [[] for _ in sinks]
            partial = [bytearray() for _ in sinks]
        elif tag == "F":
            log["F"].append([frames[k].pop(0) if frames[k] else b"" for k in range(len(sinks))])
        elif tag == "D":
            done = (int(rest[0]), int(rest[1]))
        elif log is not None:
            log[tag].append(rest)
    return jobs, done


def _job_record(job, log, sinks):
    q = [int(v[0], 16) for v in log["Q"]]
    counters = {name: q[2 * i] | q[2 * i + 1] << 32 for i, name in enumerate(COUNTERS)}
    q = q[2 * len(COUNTERS):]
    irqs = [int(v[0]) for v in log["I"]]
    m = [int(v) for v in log["M"][0]]
    if job.get("reset_after") is not None:
        return {"reset": True, "packets": {}, "counters": counters, "status": q[0],
                "irq": irqs[0], "irq_status": q[1],
                "beats_out_before_reset": int(log["O"][0][0]), "beats_in": m[3]}
    receive = job.get("receive", [p[0] for p in sinks])
    got = log["F"][0]
    packets = {}
    for k, (port, _, _, wb) in enumerate(sinks):
        if port in receive:
            data = got[k]
            packets[port] = [int.from_bytes(data[i:i + wb], "little")
                             for i in range(0, len(data), wb)]
    n = len(job.get("read", []))
    return {"packets": packets, "counters": counters, "reads": q[:n],
            "status": int(log["T"][0][0], 16), "irq": irqs[0], "irq_after_ack": irqs[1],
            "irq_status_after_ack": q[n],
            "start_ack": m[0], "first_in": None if m[1] < 0 else m[1],
            "end": None if m[2] < 0 else m[2], "beats_in": m[3], "beats_out": m[4],
            "stall_in": m[5], "stall_out": m[6], "stall_in_any": m[7], "stall_out_any": m[8]}


def run_native_axi(module: str, verilog: str, spec: dict, sim: str, root: Path,
                   name: str = "run-axi") -> dict:
    """Run the job ``spec`` of :func:`gen.core.sim.run_axi_jobs` on the shell natively;
    returns ``{"jobs": [...], "clocks", "engine", "build_seconds", "sim_seconds",
    "test_dir"}`` (the records as :mod:`gen.core.cocotb_axi` writes them).  Raises
    :class:`SimError` when a job does not end within ``max_cycles`` clocks."""
    sources, sinks, addr_width = _bus_ports(verilog, module, spec)
    tb = axi_testbench(module, sources, sinks, addr_width)
    cmd, build_seconds = build_testbench(module, verilog, tb, sim, root)
    run_dir, folder = run_dir_for(cmd, sim, name)
    _write_run(run_dir, spec, sources, sinks)
    t0, c0 = time.perf_counter(), children_cpu()
    proc = subprocess.run(cmd, cwd=run_dir, capture_output=True, text=True)
    sim_seconds, sim_cpu = time.perf_counter() - t0, children_cpu() - c0
    run_dir, events = finish_run(proc, run_dir, folder / "runs" / name, sim, module)
    logs, (clocks, timeout) = _records(spec, sources, sinks, events)
    if timeout:
        raise SimError(f"{module} under {sim} (native): job {len(logs) - 1} did not end "
                       f"within {spec['max_cycles']} clocks (see {run_dir})")
    jobs = [_job_record(job, log, sinks) for job, log in zip(spec["jobs"], logs)]
    return {"jobs": jobs, "clocks": clocks + 4, "engine": "native",
            "build_seconds": build_seconds, "sim_seconds": sim_seconds,
            "sim_cpu_seconds": sim_cpu, "test_dir": str(run_dir)}
