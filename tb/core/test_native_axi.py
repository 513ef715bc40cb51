# SPDX-License-Identifier: Apache-2.0
"""The native engine of the accelerator shells (gen/core/native_axi.py).

Every shell's job and reset tests (marker ``native_agree``) rerun their AXI jobs natively
and require every record to equal cocotbext-axi's; here the engine's own contract: beat
framing (``tkeep`` on a partial last beat, ports without ``tkeep``), packets longer than a
source chunk, a packet left over for a later job, the timeout, and ``spnn run`` on a
shell reporting the native engine."""

import json

import numpy as np
import pytest

from gen.core.fixed import to_signed
from gen.core.native import SOURCE_CHUNK
from gen.core.native_axi import _beats, _unpack
from gen.core.sim import SimError, run_axi_jobs, using_engine
from gen.core.stimulus import Pattern
from gen.pwl import PwlConfig, fit_table, ref_pwl
from gen.pwl.twin import axi_job, axi_ports, rtl_pwl_axi
from hdl.pwl import SHELL


@pytest.mark.parametrize("dw, kw, wb, n", [(64, 8, 2, 7), (64, 8, 2, 8), (24, 3, 3, 5),
                                           (16, 0, 2, 3), (48, 6, 3, 1)])
def test_beats_round_trip(dw, kw, wb, n):
    """A packet's beats carry its words little-endian, ``tkeep`` marks the bytes of a
    partial last beat, ``tlast`` only the last beat; unpacking gives the words back."""
    rng = np.random.default_rng(n)
    words = [int(v) for v in rng.integers(0, 1 << (8 * wb), n)]
    beats = _beats(words, dw, kw, wb)
    lanes = kw or dw // 8
    assert len(beats) == -(-n * wb // lanes)
    data = bytearray()
    for i, beat in enumerate(beats):
        part, last = _unpack(beat, dw, kw, wb)
        assert last == (i == len(beats) - 1)
        assert len(part) == (lanes if not last else n * wb - lanes * (len(beats) - 1))
        data += part
    assert [int.from_bytes(data[i:i + wb], "little") for i in range(0, len(data), wb)] == words


def test_packet_longer_than_a_chunk(sim):
    """A packet of more beats than one source chunk file holds, at full rate and then with
    back-pressure, equals the golden model's results."""
    cfg = PwlConfig(bus_words=1)
    x = np.random.default_rng(5).integers(-32768, 32768, SOURCE_CHUNK + 700)
    want = ref_pwl(x, fit_table(cfg))
    with using_engine("native"):
        y, record = rtl_pwl_axi(x, cfg, sim, name="native-axi-long")
        np.testing.assert_array_equal(y, want)
        assert record["beats_in"] == record["beats_out"] == len(x)
        y, record = rtl_pwl_axi(x[:900], cfg, sim, valid_prob=0.7, ready_prob=0.4, seed=2,
                                name="native-axi-long-bp")
        np.testing.assert_array_equal(y, want[:900])
        assert record["stall_out_any"] > 0 and record["stall_in_any"] > 0


@pytest.mark.native_agree
def test_a_packet_not_taken_waits_for_the_next_job(sim):
    """A job that does not take its output packet (``receive`` empty) leaves it in the sink;
    the next job takes that packet first, as cocotbext-axi's sink queue does - and the
    native records equal the cocotb ones (marker)."""
    cfg = PwlConfig(bus_words=2)
    table = fit_table(cfg)
    a, b = np.arange(5) * 1000, np.arange(3) * -700
    jobs = [dict(axi_job(a, cfg), receive=[]), axi_job(b, cfg), dict(axi_job(b, cfg))]
    first, second, third = run_axi_jobs(SHELL, cfg, jobs, *axi_ports(cfg, 0.8, 0.7, seed=1),
                                        sim=sim, name="native-axi-queue", max_cycles=3000)
    assert first["packets"] == {}
    np.testing.assert_array_equal(to_signed(second["packets"]["m_axis_y"], cfg.out_fmt.width), ref_pwl(a, table))
    np.testing.assert_array_equal(to_signed(third["packets"]["m_axis_y"], cfg.out_fmt.width), ref_pwl(b, table))


def test_timeout_is_an_error(sim):
    """A sink that is never ready: the job does not end, the native engine says so."""
    cfg = PwlConfig(bus_words=2)
    sources, sinks = axi_ports(cfg)
    never = Pattern.bits([1] + [0] * 4000)         # ready in clock 0 only, before the job
    sinks = [(port, wb, never) for port, wb, _ in sinks]
    with pytest.raises(SimError, match="did not end within 300 clocks"):
        run_axi_jobs(SHELL, cfg, [axi_job(np.arange(9), cfg)], sources, sinks, sim=sim,
                     name="native-axi-timeout", max_cycles=300, engine="native")


@pytest.mark.rtl
def test_spnn_run_on_a_shell_is_native(tmp_path):
    """``spnn run pwl --bus-words 2`` runs the shell on the native engine (the report says
    so); ``--engine cocotb`` gives the same results, cycles and counters."""
    from gen.cli import main
    x = np.random.default_rng(4).integers(-32768, 32768, 61).astype(np.int16)
    np.save(tmp_path / "x.npy", x)
    reports = {}
    for engine in ("native", "cocotb"):
        argv = ["run", "pwl", "--func", "sigmoid", "--bus-words", "2", "--input",
                str(tmp_path / "x.npy"), "--out", str(tmp_path / f"y-{engine}.npy"), "--report",
                str(tmp_path / f"r-{engine}.json"), "--engine", engine]
        assert main(argv) == 0
        reports[engine] = json.loads((tmp_path / f"r-{engine}.json").read_text())
    assert reports["native"]["engine"] == "native" and reports["cocotb"]["engine"] == "cocotb"
    np.testing.assert_array_equal(np.load(tmp_path / "y-native.npy"),
                                  np.load(tmp_path / "y-cocotb.npy"))
    for key in ("cycles", "counters", "roofline_cycles"):
        assert reports["native"][key] == reports["cocotb"][key], key
