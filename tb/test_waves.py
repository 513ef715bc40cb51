# SPDX-License-Identifier: Apache-2.0
"""Waveform regressions: golden cycle-level traces, and proof that a lost cycle is caught."""

from amaranth.hdl import Module
from amaranth.lib import wiring
import pytest

import numpy as np

from gen.core.block import Gateware
from gen.core.fixed import to_unsigned
from gen.core.sim import run_job
from gen.core.stimulus import Pattern, make_job
from gen.core.traces import TraceMismatch, compare, gtkw_text, trace_lines
from tb import waves


@pytest.mark.parametrize("case", waves.case_names())
def test_golden_trace(sim, case):
    """The RTL's handshakes and outputs match tb/golden/<case>.trace cycle for cycle."""
    from gen.core.sim import build_root
    from gen.core.traces import write_diff
    try:
        compare(waves.golden_path(case).read_text().splitlines(), waves.fresh_trace(case, sim))
    except TraceMismatch as mismatch:
        write_diff(build_root() / "waves" / f"{case}-{sim}.diff", mismatch)
        raise


def _shift(lines, signal, after, by=1):
    out, seen = [], 0
    for line in lines:
        if line.startswith("#"):
            out.append(line)
            continue
        cycle, name, value = line.split(" ", 2)
        if name == signal:
            seen += 1
            if seen > after:
                cycle = str(int(cycle) + by)
        out.append(f"{cycle} {name} {value}")
    return out


def test_compare_names_first_difference():
    golden = waves.golden_path("pwl_sigmoid_backpressure").read_text().splitlines()
    assert compare(golden, list(golden)) is None
    delayed = _shift(golden, "o", after=5)
    sixth = [line for line in golden if line.split(" ")[1:2] == ["o"]][5]
    with pytest.raises(TraceMismatch) as info:
        compare(golden, delayed)
    assert info.value.signal == "o" and info.value.cycle == int(sixth.split()[0])
    assert f"first difference at cycle {info.value.cycle}, signal o" in str(info.value)
    assert any(line.startswith("-" + sixth) for line in info.value.diff)


class _DelayedPwl(wiring.Component):
    """The PWL unit with one extra output register: same results, one cycle later."""

    def __init__(self, cfg):
        from hdl.pwl.unit import PwlUnit
        from gen.pwl import fit_table
        self.unit = PwlUnit(fit_table(cfg))
        super().__init__(dict(self.unit.signature.members))

    def elaborate(self, platform):
        m = Module()
        m.submodules.unit = unit = self.unit
        wiring.connect(m, wiring.flipped(self.i), unit.i)
        m.d.comb += unit.o.ready.eq(~self.o.valid | self.o.ready)
        with m.If(~self.o.valid | self.o.ready):
            m.d.sync += [self.o.valid.eq(unit.o.valid), self.o.payload.eq(unit.o.payload)]
        return m


def test_rtl_with_one_extra_cycle_is_caught(sim):
    """Same results one cycle later: the trace comparison fails at the first output."""
    from gen.pwl import PwlConfig
    from hdl.pwl import GATEWARE
    cfg, ports = PwlConfig(func="sigmoid"), ["i", "o"]
    x = np.random.default_rng(11).integers(-32768, 32768, 48)
    job = make_job([("i", to_unsigned(x, 16), 0.7)], [("o", len(x), Pattern.always())],
                   seed=11, max_cycles=20 * len(x) + 100)
    delayed = Gateware("pwl_delayed", _DelayedPwl, lambda c: "pwl_delayed")
    reference = trace_lines(run_job(GATEWARE, cfg, job, sim=sim, name="waves-reference"), ports)
    fresh = trace_lines(run_job(delayed, cfg, job, sim=sim, name="waves-injected-delay"), ports)
    first_o = next(int(line.split()[0]) for line in reference if line.split(" ")[1:2] == ["o"])
    with pytest.raises(TraceMismatch) as info:
        compare(reference, fresh)
    assert info.value.signal == "o" and info.value.cycle == first_o
    # Data and input handshakes are untouched: only the outputs moved, by exactly one cycle.
    assert [line for line in fresh if " o " not in line] == \
        [line for line in reference if " o " not in line]
    assert sorted(_shift(reference, "o", after=0)) == sorted(fresh)


def test_gtkw_groups_streams():
    from gen.registry import get_block
    from gen.core.emit import manifest
    block = get_block("pwl")
    cfg = block.defaults()[0]
    unit = block.build(cfg)
    text = gtkw_text("pwl_sigmoid", manifest(block, cfg, unit), unit.wave_signals())
    assert "-stream i" in text and "pwl_sigmoid.o__payload[15:0]" in text
    assert "pwl_sigmoid.advance" in text


def test_waves_dump_matches_gtkw(sim, monkeypatch):
    """WAVES=1 writes <module>.fst (or .vcd) and a .gtkw whose every signal is in the dump."""
    pywellen = pytest.importorskip("pywellen")
    from gen.pwl import PwlConfig
    from gen.pwl.twin import rtl_pwl
    monkeypatch.setenv("WAVES", "1")
    _, result = rtl_pwl(np.arange(-50, 50), PwlConfig(func="tanh"), sim, name="waves-dump")
    from pathlib import Path
    run = Path(result["test_dir"])
    dumps = [p for p in (run / "pwl_tanh.fst", run / "pwl_tanh.vcd") if p.exists()]
    assert dumps, list(run.iterdir())
    names = {v.full_name for v in pywellen.Waveform(str(dumps[0])).all_vars()}
    gtkw = (run / "pwl_tanh.gtkw").read_text().splitlines()
    wanted = [line.split("[")[0] for line in gtkw if line.startswith("pwl_tanh.")]
    assert len(wanted) > 8
    assert [w for w in wanted if w not in names] == []
