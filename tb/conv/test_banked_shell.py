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
