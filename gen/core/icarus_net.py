# SPDX-License-Identifier: Apache-2.0
"""The design's Verilog rewritten for Icarus: same behaviour, cheaper to simulate.

Icarus runs every ``always`` block as a thread, and every read of a signal in a thread
(``%load/vec4``) goes through a ``dynamic_cast`` that costs more than the operation itself;
continuous assignments are *functors*, cheap and evaluated only when an input changes.
Amaranth's Verilog (Yosys' ``write_verilog``) has a thread per flip-flop
(``always @(posedge clk) q <= d;``: on the 32-PE SpMV engine 3,388 threads woken and 3,388
loads every clock) and a thread per combinational process (``always @*`` with the
``$verilog_initial_trigger`` read).  Profiled under Icarus 11 (``perf``): thread scheduling
and loads were ~75 % of the native run.  :func:`icarus_netlist` rewrites, per module:

* **combinational processes into continuous assignments** (:func:`_fold`): a process made
  of whole-signal assignments, ``if``/``else`` and ``case``/``casez`` becomes one ``assign``
  per signal, a ``?:`` chain (each assigned value through a wire of the signal's width, so
  widths and signedness convert as the blocking assignment did).  Anything else (a part
  assignment, a signal read after it is assigned, a latch) keeps its process;
* **identical continuous assignments** (:func:`_share`): Amaranth repeats an expression once
  per use (the PWL unit computes ``acc + 0x8000`` six times); the second and later copies
  become aliases of the first;
* **every flip-flop of a clock into one process** (:func:`_clocked`): one thread per module
  and clock instead of one per flip-flop (the memories' port processes join it unchanged);
  with ``pack`` the flip-flops are also packed into registers of up to 64 bits (a
  concatenation of their next values, one load and one non-blocking assignment a group,
  the flip-flops become part-selects of it).

Besides, a ``case`` that only selects constants for one signal becomes a ROM read (one
array functor instead of a chain of comparisons and multiplexers), and a concatenation that
only extends a value is written as the extension (:func:`_extend`).  Packing pays where
most flip-flops hold their value in a clock (the SpMV PEs: one load per 64 bits instead of
one per flip-flop) and costs where they all change (the PWL pipeline: every change ripples
through Icarus' bit-by-bit concatenation), so it is applied to designs of at least
:data:`PACK_MIN_FLOPS` flip-flops.  Measured steps, what was tried and dropped (Yosys before
Icarus, ``always_comb``, dirty flags): docs/sim.md, "Native Icarus netlist".

Non-blocking assignments keep their semantics whether one process or many make them, and a
process's reads see the values before the clock edge either way; the ``native_agree`` tests
compare every native Icarus run (this netlist) with the cocotb run on Amaranth's Verilog,
transfer for transfer and cycle for cycle.  The output is a function of the input text only
(no paths, no time), and is used by the native Icarus build only (:mod:`gen.core.native`).
"""

import re

__all__ = ["icarus_netlist", "PACK_MIN_FLOPS", "PACK_BITS", "ROM_MAX_BITS"]

# Designs with at least this many flip-flops (single-statement clocked processes) get
# their flip-flops packed (module docstring); the limit of a packed register's width:
# Icarus keeps vectors of up to 64 bits inline (no allocation per copy).
PACK_MIN_FLOPS = 1000
PACK_BITS = 64
# A case that only selects constants on a subject of up to this many bits becomes a ROM.
ROM_MAX_BITS = 8

_ID = r"(?:\\\S+ |[A-Za-z_][A-Za-z0-9_$]*)"
_ID_RE = re.compile(_ID)
_WIDTH_DECL = re.compile(r"^  (?:reg|wire|input|output) (?:\[(\d+):(\d+)\] )?(" + _ID
                         + r")(?: = .*)?;$")
_REG_INIT = re.compile(r"^  reg (?:\[(\d+):0\] )?(" + _ID + r") = (\d+)'([hdb])([0-9a-fA-F_]+);$")
_REG_BARE = re.compile(r"^  reg (?:\[(\d+):0\] )?(" + _ID + r");$")
_CLOCKED = re.compile(r"^  always @\(posedge (" + _ID + r")\)( begin)?$")
_FLOP = re.compile(r"^    (" + _ID + r") <= (.*);$")
_TRIGGER = re.compile(r"^if \(\\\$auto\$verilog_backend\.cc:\d+:dump_module\$\d+ \) begin end$")
_ASSIGN = re.compile(r"^(" + _ID + r") = (.*);$")
_CONST = re.compile(r"^(\d+)'[hdb][0-9a-fA-F_]+$")
_SLICE = re.compile(r"^(" + _ID + r")\[(\d+)(?::(\d+))?\]$")
_LABEL = re.compile(r"^(\d+)'([hb])([0-9a-fA-F_?]+)$")


class _Bail(Exception):
    """The process is outside the folded subset: it stays a process."""


def _widths(lines):
    out = {}
    for line in lines:
        m = _WIDTH_DECL.match(line)
        if m:
            hi, lo = m.group(1), m.group(2)
            out[m.group(3)] = int(hi) - int(lo) + 1 if hi is not None else 1
    return out


def _width_of(expr, widths):
    """The width of a leaf (a signal, a part-select of one, a sized constant) or None (an
    escaped name keeps its closing space)."""
    expr = expr.lstrip()
    if not expr.startswith("\\"):
        expr = expr.rstrip()
    if expr in widths:
        return widths[expr]
    m = _CONST.match(expr)
    if m:
        return int(m.group(1))
    m = _SLICE.match(expr)
    if m and m.group(1) in widths:
        return 1 if m.group(3) is None else int(m.group(2)) - int(m.group(3)) + 1
    return None


class _Folder:
    """Symbolic execution of one combinational process (Yosys' ``write_verilog`` layout:
    a statement a line, 2 spaces an indentation level)."""

    def __init__(self, body, widths, fresh):
        self.lines = [(len(line) - len(line.lstrip(" ")), line.strip()) for line in body
                      if line.strip()]
        self.widths = widths
        self.fresh = fresh          # callable: a new wire name for a converted value
        self.extra = []             # declarations of the conversion wires
        self.assigned = set()
        self.read = set()

    def leaf(self, target, expr):
        """``expr`` as ``target``'s blocking assignment converts it: itself when it is a
        leaf of the target's width, else a wire of that width assigned from it."""
        self.read.update(m.group(0) for m in _ID_RE.finditer(expr))
        width = self.widths[target]
        if _width_of(expr, self.widths) == width:
            return expr
        name = self.fresh()
        self.extra.append(f"  wire {f'[{width - 1}:0] ' if width > 1 else ''}{name} = {expr};")
        self.widths[name] = width
        return name

    def cond(self, text):
        self.read.update(m.group(0) for m in _ID_RE.finditer(text))
        return text

    def block(self, i, indent, state):
        """Statements at ``indent`` from line ``i``; returns the next line index."""
        while i < len(self.lines):
            ind, text = self.lines[i]
            if ind < indent:
                return i
            if ind > indent:
                raise _Bail("indentation")
            i = self.statement(i, indent, state)
        return i

    def statement(self, i, indent, state):
        ind, text = self.lines[i]
        if _TRIGGER.match(text) or (text.startswith("(*") and text.endswith("*)")):
            return i + 1
        if text == "/* empty */;":
            return i + 1
        m = _ASSIGN.match(text)
        if m:
            target = m.group(1)
            if target not in self.widths:
                raise _Bail("target width")
            self.assigned.add(target)
            state[target] = self.leaf(target, m.group(2))
            return i + 1
        if text.startswith("if (") and text.endswith(") begin"):
            return self.if_chain(i, indent, state)
        m = re.match(r"^(casez|case) \((.*)\)$", text)
        if m:
            return self.case(i, indent, state, m.group(1), self.cond(m.group(2)))
        raise _Bail(f"statement {text!r}")

    def branch(self, i, indent, state):
        inner = dict(state)
        i = self.block(i, indent + 2, inner)
        return i, inner

    def if_chain(self, i, indent, state):
        arms = []                   # (condition or None, state)
        text = self.lines[i][1]
        cond = self.cond(text[len("if ("):-len(") begin")])
        i, inner = self.branch(i + 1, indent, state)
        arms.append((cond, inner))
        while i < len(self.lines):
            ind, text = self.lines[i]
            if ind != indent:
                raise _Bail("if layout")
            if text == "end":
                i += 1
                break
            if text.startswith("end else if (") and text.endswith(") begin"):
                cond = self.cond(text[len("end else if ("):-len(") begin")])
                i, inner = self.branch(i + 1, indent, state)
                arms.append((cond, inner))
                continue
            if text == "end else begin":
                i, inner = self.branch(i + 1, indent, state)
                arms.append((None, inner))
                continue
            raise _Bail(f"if layout {text!r}")
        self.merge(state, arms)
        return i

    def case(self, i, indent, state, kind, subject):
        arms, values, items = [], set(), []
        i += 1
        while True:
            if i >= len(self.lines):
                raise _Bail("case end")
            ind, text = self.lines[i]
            if ind == indent and text == "endcase":
                i += 1
                break
            if ind != indent + 2 or not text.endswith(":"):
                raise _Bail(f"case layout {text!r}")
            labels = [x.strip() for x in text[:-1].split(",")]
            inner = dict(state)
            j = i + 1
            if j < len(self.lines) and self.lines[j][0] > indent + 2:
                j = self.statement(j, self.lines[j][0], inner)
                if j < len(self.lines) and self.lines[j][0] > indent + 2:
                    raise _Bail("case item of several statements")
            if labels == ["default"]:
                arms.append((None, inner))
                items.append((None, inner))
            else:
                arms.append((" || ".join(self.match(kind, subject, x) for x in labels),
                             inner))
                values.update(self.value(x) for x in labels)
                items.append(([self.value(x) for x in labels], inner))
            i = j
        # a case that lists every value of its subject (Yosys' full_case tables) has no
        # default: its last item is the else
        width = _width_of(subject, self.widths)
        if (arms and arms[-1][0] is not None and width is not None and width <= 16
                and None not in values and len(values) == 1 << width
                and all(0 <= v < 1 << width for v in values)):
            arms[-1] = (None, arms[-1][1])
        if not self.table(state, subject, width, values, items):
            self.merge(state, arms)
        return i

    def table(self, state, subject, width, values, items):
        """A case that only selects constants for one signal (a lookup table: Amaranth's
        ``Array`` of constants, the PWL unit's segment bounds) becomes a ROM read: one array
        functor instead of a chain of comparisons and multiplexers.  False when it is not
        one."""
        if width is None or width > ROM_MAX_BITS or None in values:
            return False
        names = set()
        for _, inner in items:
            names.update(k for k in inner if inner[k] != state.get(k, _UNSET))
        if len(names) != 1:
            return False
        name = names.pop()
        fallback = state.get(name, _UNSET)
        for labels, inner in items:
            if labels is None:
                fallback = inner.get(name, _UNSET)
        rows = []
        for v in range(1 << width):
            value = next((inner.get(name, _UNSET) for labels, inner in items
                          if labels is not None and v in labels), fallback)
            if value == _UNSET or not _CONST.match(value):
                return False
            rows.append(value)
        rom = self.fresh().replace("fold", "rom")
        out = self.fresh()
        wbits = self.widths[name]
        vec = f"[{wbits - 1}:0] " if wbits > 1 else ""
        self.extra.append(f"  reg {vec}{rom}[0:{(1 << width) - 1}];")
        self.extra.append("  initial begin")
        self.extra.extend(f"    {rom}[{v}] = {row};" for v, row in enumerate(rows))
        self.extra.append("  end")
        self.extra.append(f"  wire {vec}{out} = {rom}[{subject}];")
        self.widths[out] = wbits
        state[name] = out
        return True

    @staticmethod
    def value(label):
        """A label's value, None when it has wildcards."""
        m = _LABEL.match(label)
        digits = m.group(3).replace("_", "") if m else "?"
        return None if "?" in digits else int(digits, 16 if m.group(2) == "h" else 2)

    @staticmethod
    def match(kind, subject, label):
        m = _LABEL.match(label)
        if not m:
            raise _Bail(f"case label {label!r}")
        width, base, digits = int(m.group(1)), m.group(2), m.group(3).replace("_", "")
        if "?" not in digits:
            return f"({subject}) == {label}"
        if kind != "casez":
            raise _Bail("wildcard in case")
        bits = "".join(f"{int(d, 16):04b}" if d != "?" else "????" for d in digits) \
            if base == "h" else digits
        bits = bits[-width:].rjust(width, "0")
        mask = "".join("0" if b == "?" else "1" for b in bits)
        value = "".join("0" if b == "?" else b for b in bits)
        return f"(({subject}) & {width}'b{mask}) == {width}'b{value}"

    def merge(self, state, arms):
        """``state`` after a chain of guarded arms (the first true one runs; a None guard
        is the final else); a signal some path leaves unassigned is :data:`_UNSET`."""
        names = set()
        for _, inner in arms:
            names.update(k for k in inner if inner[k] != state.get(k, _UNSET))
        for name in sorted(names):
            if arms[-1][0] is None:
                value, rest = arms[-1][1].get(name, _UNSET), arms[:-1]
            else:
                value, rest = state.get(name, _UNSET), arms
            for cond, inner in reversed(rest):
                mine = inner.get(name, _UNSET)
                if mine == value:
                    continue
                if _UNSET in (mine, value):
                    value = _UNSET
                    continue
                if "?" in mine:
                    mine = f"({mine})"
                value = f"({cond}) ? {mine} : {value}"
            state[name] = value


_UNSET = "\0unset"


_PROC_TARGET = re.compile(r"^\s+(" + _ID + r")(?: ?\[[^\]]*\])? <?= ")


def _targets(lines):
    """How many procedural assignments (``=`` or ``<=``, whole or part) each signal has."""
    counts = {}
    for line in lines:
        m = _PROC_TARGET.match(line)
        if m and not line.startswith("  assign "):
            counts[m.group(1)] = counts.get(m.group(1), 0) + 1
    return counts


def _fold(lines, widths, counter):
    """Comb processes of one module into continuous assignments (module docstring)."""
    out, i = [], 0
    everywhere = _targets(lines)
    decl_at = {}
    for k, line in enumerate(lines):
        m = _WIDTH_DECL.match(line)
        if m and line.startswith("  reg ") and " = " not in line:
            decl_at[m.group(3)] = k
    to_wire = set()
    while i < len(lines):
        line = lines[i]
        if line != "  always @* begin":
            out.append(line)
            i += 1
            continue
        j = i + 1
        while lines[j] != "  end":
            j += 1
        body = lines[i + 1:j]

        def fresh():
            counter[0] += 1
            return f"\\spnn$fold${counter[0]} "
        folder = _Folder(body, dict(widths), fresh)
        state = {}
        try:
            folder.block(0, 4, state)
            if folder.assigned & folder.read:
                raise _Bail("reads an assigned signal")
            if any(state.get(n, _UNSET) == _UNSET for n in folder.assigned):
                raise _Bail("latch")
            if any(n not in decl_at for n in folder.assigned):
                raise _Bail("not a plain reg")
            mine = _targets(body)
            if any(everywhere.get(n) != mine.get(n) for n in folder.assigned):
                raise _Bail("assigned elsewhere too")
        except _Bail:
            out.extend(lines[i:j + 1])
            i = j + 1
            continue
        out.extend(folder.extra)
        for name in sorted(folder.assigned):
            out.append(f"  assign {name} = {state[name]};")
            to_wire.add(name)
        widths.update(folder.widths)
        i = j + 1
    # the folded signals become wires (their declarations are above, so indices hold)
    for name in to_wire:
        k = decl_at[name]
        out[k] = out[k].replace("  reg ", "  wire ", 1)
    return out


_TOKEN = re.compile(r"\d+'[hdbsHDB][0-9a-fA-F_xzXZ?]+|" + _ID)


def _share(lines, widths):
    """The second and later of identical continuous assignments (same value, same target
    width) become aliases of the first, and every continuous assignment reads a signal's
    first alias (so ``{ b[33], b }`` with ``b`` an alias of ``a`` is found equal to
    ``{ a[33], a }``), to a fixed point."""
    pat = re.compile(r"^  assign (" + _ID + r") = (.*);$")
    alias = {}

    def rename(text):
        return _TOKEN.sub(lambda t: alias.get(t.group(0), t.group(0)), text)

    for _ in range(8):
        first, out, changed = {}, [], False
        for line in lines:
            m = pat.match(line)
            if m and m.group(1) in widths:
                target, value = m.group(1), rename(m.group(2))
                key = (value, widths[target])
                if _ID_RE.fullmatch(value) and widths.get(value) == widths[target]:
                    if alias.get(target) != alias.get(value, value) and value != target:
                        alias[target] = alias.get(value, value)
                        changed = True
                elif key in first and first[key] != target:
                    value = first[key]
                    if alias.get(target) != alias.get(value, value):
                        alias[target] = alias.get(value, value)
                        changed = True
                else:
                    first[key] = target
                line = f"  assign {target} = {value};"
            out.append(line)
        lines = out
        if not changed:
            break
    return lines


_ITEM = r"(?:" + _ID + r"(?:\[\d+(?::\d+)?\])?|\d+'[hdb][0-9a-fA-F_]+)"
_CONCAT = re.compile(r"^  assign (" + _ID + r") = \{ (" + _ITEM + r"(?:, " + _ITEM + r")*) \};$")
_ZERO = re.compile(r"^\d+'[hdb]0+$")


def _extend(lines, widths):
    """A continuous assignment of a concatenation that only sign- or zero-extends a value
    (Amaranth's ``{ a[15], a[15], a }``, ``{ 4'h0, b }``) becomes an assignment of the value
    (``$signed`` for a sign extension): Icarus builds a concatenation of a tree of 4-input
    functors that copy their inputs bit by bit (~15 % of the PWL unit's run), an extension
    is one functor."""
    out = []
    for line in lines:
        m = _CONCAT.match(line)
        if m and m.group(1) in widths:
            items = [x.strip() for x in m.group(2).split(", ")]
            last, head = items[-1], items[:-1]
            total = sum(_width_of(x, widths) or 0 for x in items)
            widths_known = all(_width_of(x, widths) for x in items)
            if head and widths_known and total == widths[m.group(1)]:
                if all(_ZERO.match(x) for x in head):
                    line = f"  assign {m.group(1)} = {last};"
                elif len(set(head)) == 1 and _msb(last, widths) == head[0]:
                    line = f"  assign {m.group(1)} = $signed({last});"
        out.append(line)
    return out


def _msb(leaf, widths):
    """The most significant bit of a signal or part-select as a bit-select (text)."""
    m = _SLICE.match(leaf)
    if m:
        return f"{m.group(1)}[{m.group(2)}]"
    if leaf in widths and widths[leaf] > 1:
        return f"{leaf}[{widths[leaf] - 1}]"
    return None


def _blocks(lines):
    """(lines outside clocked processes, [(clock, body lines)] in order)."""
    keep, blocks, i = [], [], 0
    while i < len(lines):
        m = _CLOCKED.match(lines[i])
        if not m:
            keep.append(lines[i])
            i += 1
            continue
        body = []
        i += 1
        if m.group(2):
            while lines[i] != "  end":
                body.append(lines[i])
                i += 1
            i += 1
        else:
            while True:
                body.append(lines[i])
                i += 1
                if not lines[i].startswith("    "):
                    break
        blocks.append((m.group(1), body))
    return keep, blocks


def _flops(lines):
    keep, blocks = _blocks(lines)
    return sum(1 for _, body in blocks if len(body) == 1 and _FLOP.match(body[0]))


def _clocked(lines, pack, counter):
    """One process per clock; with ``pack``, flip-flops packed (module docstring)."""
    inits = {}
    for k, line in enumerate(lines):
        m = _REG_INIT.match(line)
        if m:
            width = int(m.group(1)) + 1 if m.group(1) else 1
            if int(m.group(3)) == width:
                inits[m.group(2)] = (k, width, f"{m.group(3)}'{m.group(4)}{m.group(5)}")
            continue
        m = _REG_BARE.match(line)
        if m:           # a memory's read data register: undefined until its first clock
            width = int(m.group(1)) + 1 if m.group(1) else 1
            inits[m.group(2)] = (k, width, f"{width}'bx")
    keep, blocks = _blocks(lines)
    if not blocks:
        return lines
    # a blocking assignment in a clocked process would make the order of the processes
    # matter: such a module keeps its processes as they are
    if any(re.match(r"^\s+" + _ID + r"(?: ?\[[^\]]*\])? = ", line)
           for _, body in blocks for line in body):
        return lines
    targets = _targets(lines)
    order, rest, flops = [], {}, {}
    for clock, body in blocks:
        if clock not in order:
            order.append(clock)
        m = _FLOP.match(body[0]) if len(body) == 1 else None
        if pack and m and m.group(1) in inits and targets[m.group(1)] == 1:
            flops.setdefault(clock, []).append((m.group(1), m.group(2)))
        else:
            rest.setdefault(clock, []).extend(body)
    end = keep.pop()
    tail, replaced = [], {}
    for clock in order:
        groups, cur, width = [], [], 0
        for name, expr in flops.get(clock, []):
            w = inits[name][1]
            if cur and width + w > PACK_BITS:
                groups.append(cur)
                cur, width = [], 0
            cur.append((name, expr))
            width += w
        if cur:
            groups.append(cur)
        stmts = []
        for group in groups:
            counter[0] += 1
            q, d = f"\\spnn$q${counter[0]} ", f"\\spnn$d${counter[0]} "
            total = sum(inits[n][1] for n, _ in group)
            vec = f"[{total - 1}:0] " if total > 1 else ""
            init = ", ".join(inits[n][2] for n, _ in reversed(group))
            tail.append(f"  reg {vec}{q} = {{ {init} }};")
            parts, lo = [], 0
            for name, expr in group:
                w = inits[name][1]
                counter[0] += 1
                part = f"\\spnn$n${counter[0]} "
                tail.append(f"  wire {f'[{w - 1}:0] ' if w > 1 else ''}{part} = {expr};")
                parts.append(part)
                replaced[name] = (q, lo + w - 1, lo, total)
                lo += w
            tail.append(f"  wire {vec}{d} = {{ {', '.join(reversed(parts))} }};")
            stmts.append(f"    {q} <= {d};")
        tail.append(f"  always @(posedge {clock}) begin")
        tail.extend(rest.get(clock, []))
        tail.extend(stmts)
        tail.append("  end")
    for name, (q, hi, lo, total) in replaced.items():
        k, w, _ = inits[name]
        keep_line = lines[k]
        idx = keep.index(keep_line)
        keep[idx] = f"  wire {f'[{w - 1}:0] ' if w > 1 else ''}{name};"
        sel = "" if total == 1 else (f"[{lo}]" if hi == lo else f"[{hi}:{lo}]")
        tail.append(f"  assign {name} = {q}{sel};")
    return keep + tail + [end]


def _modules(text):
    """Split ``text`` into (prefix lines, [module lines], suffix lines)."""
    lines = text.split("\n")
    pieces, cur, loose = [], None, []
    for line in lines:
        if line.startswith("module "):
            cur = [line]
            continue
        if cur is not None:
            cur.append(line)
            if line.startswith("endmodule"):
                pieces.append(("module", cur))
                cur = None
            continue
        pieces.append(("text", [line]))
    return pieces


def icarus_netlist(verilog: str, pack: bool | None = None) -> str:
    """``verilog`` (Amaranth's output) rewritten for Icarus (module docstring); ``pack``
    None: when the design has :data:`PACK_MIN_FLOPS` flip-flops or more."""
    pieces = _modules(verilog)
    if pack is None:
        pack = sum(_flops(lines) for kind, lines in pieces if kind == "module") >= PACK_MIN_FLOPS
    out, counter = [], [0]
    for kind, lines in pieces:
        if kind == "text":
            out.extend(lines)
            continue
        widths = _widths(lines)
        lines = _fold(lines, widths, counter)
        lines = _extend(lines, widths)
        lines = _share(lines, widths)
        lines = _clocked(lines, pack, counter)
        out.extend(lines)
    return "\n".join(out)
