# SPDX-License-Identifier: Apache-2.0
"""The ``rtl`` and ``synth`` stages of ``spnn sweep`` on tiny configurations."""

import csv

import pytest

from gen.cli import main
from gen.core.sim import sim_available
from tb.sweep.conftest import SMALL, write_spec


def _summary(out):
    with open(out / "summary.csv") as handle:
        return list(csv.DictReader(handle))


@pytest.mark.rtl
@pytest.mark.skipif(not sim_available("verilator"), reason="Verilator not found")
def test_rtl_stage_is_bit_and_cycle_exact(tmp_path):
    spec = write_spec(tmp_path, {
        "block": "spmv", "base": {"rows_per_pe": 16, "max_cols": 32, "mem_depth": 64},
        "grid": {"pes": [2, 4], "fifo_depth": [2]}, "workloads": [SMALL],
        "stages": {"model": {}, "rtl": {"points": 1}}})
    out = tmp_path / "out"
    assert main(["sweep", str(spec), "-o", str(out), "--serial", "-q"]) == 0
    rows = _summary(out)
    assert [r["rtl"] for r in rows] == ["1/1", ""] and all(r["status"] == "ok" for r in rows)
    with open(out / "results.csv") as handle:
        rtl = [r for r in csv.DictReader(handle) if r["stage"] == "rtl"]
    assert len(rtl) == 1 and rtl[0]["bit_exact"] == rtl[0]["cycle_exact"] == "true"
    assert rtl[0]["rtl_cycles"] == rtl[0]["model_cycles"] == rows[0]["cycles"]


@pytest.mark.rtl
@pytest.mark.skipif(not sim_available("verilator"), reason="Verilator not found")
def test_lstm_model_and_rtl_stages(tmp_path):
    """A generated pruned LSTM layer: the model stage's end-to-end cycles (weight load
    included) equal the RTL's, bit-exact; two allocators give two rows."""
    spec = write_spec(tmp_path, {
        "block": "lstm", "base": {"max_inputs": 4, "max_hidden": 8, "mem_depth": 256},
        "grid": {"pes": [2], "alloc": ["balanced", "zigzag"]},
        "workloads": [{"name": "tiny", "generate": {"inputs": 3, "hidden": 6,
                                                     "density": 0.5, "steps": 3}}],
        "stages": {"model": {}, "rtl": {"points": 1}}})
    out = tmp_path / "out"
    assert main(["sweep", str(spec), "-o", str(out), "--serial", "-q"]) == 0
    rows = _summary(out)
    assert [r["alloc"] for r in rows] == ["balanced", "zigzag"]
    assert all(r["status"] == "ok" and int(r["cycles"]) > int(r["weight_beats"])
               for r in rows)
    with open(out / "results.csv") as handle:
        rtl = [r for r in csv.DictReader(handle) if r["stage"] == "rtl"]
    assert len(rtl) == 1 and rtl[0]["bit_exact"] == rtl[0]["cycle_exact"] == "true"
    assert rtl[0]["rtl_cycles"] == rtl[0]["model_cycles"] == rows[0]["cycles"]


@pytest.mark.synth
@pytest.mark.slow
def test_synth_stage_resources_and_fmax(tmp_path):
    spec = write_spec(tmp_path, {"block": "pwl", "grid": {"segments": [4]},
                                 "stages": {"synth": {"targets": ["xc7", "ecp5"]}}})
    out = tmp_path / "out"
    assert main(["sweep", str(spec), "-o", str(out), "--workers", "1", "-q"]) == 0
    (row,) = _summary(out)
    assert row["status"] == "ok" and int(row["xc7.lut"]) > 0 and int(row["xc7.dsp"]) >= 1
    assert float(row["ecp5.fmax_mhz"]) > 50 and row["ecp5.seeds"] == "1"
    assert "xc7.lut/xc7.dsp" in row["pareto"]
