# SPDX-License-Identifier: Apache-2.0
"""The banked array's accelerator shell (hdl/conv/banked/shell.py) under both simulators,
driven by cocotbext-axi: jobs back to back with idle inputs and back-pressure (strips whose
last beat is partial), the statistics against the cycle model, the counters against what
the bench saw, the interrupt, Vivado port names, ``aresetn`` in the middle of a job."""

import numpy as np
import pytest

from gen.conv import ConvLayer, ref_conv
from gen.conv.banked import BankedConfig, make_job, run_cycles
from gen.conv.twin import rtl_banked_axi
from gen.core.emit import to_verilog
from hdl.conv import BankedShell
from tb.shell_checks import assert_cleared_by_reset

CFG = BankedConfig(rows=8, cols=4, bus_words=4, feat_depth=64, weight_depth=64, out_depth=64)
CFG3 = BankedConfig(rows=8, cols=4, bus_words=3, copies=4, feat_depth=64, weight_depth=64,
                    out_depth=64)


def golden(x, w, layer):
    return np.stack([ref_conv(x[b], w, layer.stride, layer.pad) for b in range(layer.batch)])


def _items(rng, cfg):
    shapes = [(ConvLayer(5, 3, 6, 7, 3, 3, 1, 1), dict(rs=3, segw=7, icq=2, R=5, n=1)),
              (ConvLayer(2, 2, 7, 5, 2, 2, 2, 0, 2), dict(rs=1, segw=2, icq=1)),
              (ConvLayer(4, 3, 5, 5, 1, 1, 1, 0), dict(rs=5, segw=5, resident=False))]
    items = []
    for layer, kw in shapes:
        x = rng.integers(-128, 128, (layer.batch, layer.ic, layer.h, layer.w))
        w = rng.integers(-128, 128, (layer.oc, layer.ic, layer.kh, layer.kw))
        items.append((x, w, make_job(layer, cfg, **kw)))
    return items


@pytest.mark.parametrize("cfg, valid, ready", [(CFG, 1.0, 1.0), (CFG, 0.7, 0.6),
                                               (CFG3, 0.5, 0.8)])
@pytest.mark.native_agree
def test_shell_jobs(sim, cfg, valid, ready):
    """Three jobs back to back: sums == golden, statistics == the cycle model's, counters ==
    what the bench saw on the ports, the interrupt raised and acknowledged."""
    rng = np.random.default_rng(int(valid * 10 + ready))
    items = _items(rng, cfg)
    outs, stats, records = rtl_banked_axi(items, cfg, sim, valid=valid, ready=ready, seed=3,
                                          name=f"shell-{cfg.bus_words}-{int(10 * valid)}")
    model = run_cycles([job for _x, _w, job in items], cfg)
    for (x, w, job), y, st, job_model, rec in zip(items, outs, stats, model["stats"], records):
        np.testing.assert_array_equal(y, golden(x, w, job.layer))
        assert st == job_model
        assert rec["status"] == 0b10
        assert (rec["irq"], rec["irq_after_ack"], rec["irq_status_after_ack"]) == (1, 0, 0)
        assert rec["beats_out"] == job.G * job.S * job.obeats
        assert rec["counters"]["cycles"] == rec["end"] - rec["start_ack"]
        assert rec["counters"]["stall_in"] == rec["stall_in_any"]
        assert rec["counters"]["stall_out"] == rec["stall_out_any"]
    if valid < 1 and ready < 1:
        assert sum(r["stall_in_any"] for r in records) and sum(r["stall_out_any"] for r in records)


def test_shell_reset_mid_job(sim):
    """``aresetn`` low in the middle of the first job: the registers read their reset values
    and the next jobs are exact."""
    rng = np.random.default_rng(5)
    items = _items(rng, CFG)
    outs, stats, records = rtl_banked_axi(items, CFG, sim, ready=0.7, reset_after=40,
                                          name="shell-reset")
    assert_cleared_by_reset(records[0])
    model = run_cycles([job for _x, _w, job in items], CFG)
    for (x, w, job), y, st, job_model in list(zip(items, outs, stats, model["stats"]))[1:]:
        np.testing.assert_array_equal(y, golden(x, w, job.layer))
        assert st == job_model


def test_shell_ports_are_vivado_names():
    text = to_verilog(BankedShell(CFG), CFG.shell_name)
    head = text[text.index(f"module {CFG.shell_name}("):].split(");", 1)[0]
    for port in ("aclk", "aresetn", "s_axis_w_tdata", "s_axis_x_tkeep", "m_axis_o_tlast",
                 "m_axis_o_tkeep", "s_axi_awaddr", "irq"):
        assert port in head, port


@pytest.mark.rtl
def test_cli_run_banked(tmp_path):
    """``spnn run conv --banked``: a layer the planner cuts into jobs (a remainder channel
    part), the exact sums, the report's end-to-end cycles beside the roofline."""
    import json
    from gen.cli import main
    from gen.core.sim import sim_available
    sim = "icarus" if sim_available("icarus") else "verilator"
    rng = np.random.default_rng(8)
    w, x = rng.integers(-128, 128, (10, 3, 3, 3)), rng.integers(-128, 128, (3, 9, 7))
    np.save(tmp_path / "w.npy", w)
    np.save(tmp_path / "x.npy", x)
    assert main(["run", "conv", "--weights", str(tmp_path / "w.npy"), "--input",
                 str(tmp_path / "x.npy"), "--array", "8x4", "--banked", "--bus-words", "4",
                 "--sim", sim, "--out", str(tmp_path / "y.npy"),
                 "--report", str(tmp_path / "r.json")]) == 0
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), ref_conv(x, w, 1, 1))
    r = json.loads((tmp_path / "r.json").read_text())
    assert r["array_kind"] == "banked" and r["interface"] == "axi" and r["jobs"] >= 2
    assert r["compute_bound_cycles"] == -(-10 * 27 * 63 // 32)
    assert r["end_to_end_cycles"] == r["cycles"] >= r["roofline_cycles"]
    assert r["utilisation"] == 10 * 27 * 63 / (32 * r["cycles"]) < r["compute_utilisation"]


@pytest.mark.parametrize("extra, message", [
    (["--mapping", "seed"], "--mapping does not apply to --banked"),
    (["--copies", "3"], "--copies must be 1, 2 or 4, not 3"),
    (["--bus-words", "33"], "--bus-words"),
    (["--stride", "8"], "--stride"),
])
def test_cli_banked_errors(tmp_path, capsys, extra, message):
    from gen.cli import main
    np.save(tmp_path / "w.npy", np.ones((2, 1, 3, 3), dtype=np.int64))
    np.save(tmp_path / "x.npy", np.ones((1, 5, 5), dtype=np.int64))
    out = tmp_path / "y.npy"
    assert main(["run", "conv", "--weights", str(tmp_path / "w.npy"), "--input",
                 str(tmp_path / "x.npy"), "--banked", "--out", str(out)] + extra) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]
    assert not out.exists()


def test_cli_copies_needs_banked(tmp_path, capsys):
    from gen.cli import main
    np.save(tmp_path / "w.npy", np.ones((2, 1, 3, 3), dtype=np.int64))
    np.save(tmp_path / "x.npy", np.ones((1, 5, 5), dtype=np.int64))
    assert main(["run", "conv", "--weights", str(tmp_path / "w.npy"), "--input",
                 str(tmp_path / "x.npy"), "--copies", "4"]) == 2
    assert "--copies needs --banked" in capsys.readouterr().err
