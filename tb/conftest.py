# SPDX-License-Identifier: Apache-2.0
"""pytest wiring shared by every block's tests.

* ``sim`` fixture: every test that takes it runs once per simulator
  (``icarus``, ``verilator``); a missing simulator skips its half with one clear
  line in the summary instead of failing.  ``SIM=icarus`` (or ``verilator``)
  restricts the run to one simulator.
* ``cycle_log`` fixture: assert and record RTL cycles against the cycle model.
* RTL builds go to ``<repo>/build/sim/`` (``SPNN_BUILD_DIR``), one folder per
  (block, config, simulator), shared between tests and safe under ``pytest -n 2``.
* Test tiers (markers, ``pyproject.toml``): ``rtl`` (runs an HDL simulator; every test
  taking the ``sim`` fixture gets it automatically), ``synth`` (runs Yosys / nextpnr),
  ``slow`` (over ~20 s on 2 cores).  ``make test-fast`` runs ``-m "not rtl and not synth and
  not slow"`` with ``SPNN_FAST=1``, under which a test that starts a simulation or a
  synthesis tool without its marker fails, naming the marker it lacks.
"""

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("SPNN_BUILD_DIR", str(REPO / "build"))

from gen.core.sim import SIMS, missing_reason, sim_available  # noqa: E402

_SKIPPED = set()


def _selected_sims():
    only = os.environ.get("SIM", "").strip()
    return [only] if only in SIMS else list(SIMS)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "sim" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.rtl)


@pytest.fixture(autouse=True)
def _fast_tier_guard(request, monkeypatch):
    """Under ``SPNN_FAST=1``: starting a simulator or a synthesis tool fails the test."""
    if os.environ.get("SPNN_FAST") != "1":
        return
    import gen.core.sim
    import gen.synth

    def refuse(marker):
        def stop(*args, **kwargs):
            pytest.fail(f"{request.node.nodeid} runs an HDL tool: mark it "
                        f"@pytest.mark.{marker}", pytrace=False)
        return stop

    import gen.core.native
    monkeypatch.setattr(gen.core.sim, "_runner", refuse("rtl"))
    monkeypatch.setattr(gen.core.native, "run_native", refuse("rtl"))
    monkeypatch.setattr(gen.synth, "_run", refuse("synth"))


# The tests build native simulators without C++ optimisation (they run short jobs; a cold
# -O0 build is several times faster); `spnn run` keeps its -O1.
os.environ.setdefault("SPNN_NATIVE_OPT", "-O0")

_AGREE_KEYS = ("error", "cycles_run", "sources", "sinks", "before_reset", "resets", "log")


@pytest.fixture(autouse=True)
def _native_agreement(request):
    """Tests marked ``native_agree``: every stream job the test ran (through the cocotb
    bench) runs again on the native engine (:mod:`gen.core.native`) under the same
    simulator, and every transfer - data, cycle, port, before and after a reset - must be
    identical; every shell job (:func:`gen.core.sim.run_axi_jobs`) likewise through
    :mod:`gen.core.native_axi`, every record (packets, counters, registers, clocks of the
    start, first and last beats, stall counts) identical."""
    if request.node.get_closest_marker("native_agree") is None:
        yield
        return
    from gen.core.sim import recording, run_axi_spec, run_job
    with recording() as runs:
        yield
    assert runs, "a native_agree test ran no stream job"
    for i, (gateware, cfg, job, sim, result) in enumerate(runs):
        if result.get("engine") != "cocotb":
            continue
        if result.get("axi"):           # a shell's AXI jobs: every record the same
            native = run_axi_spec(gateware, cfg, job, sim, name=f"agree-{request.node.name}-{i}",
                                  engine="native")
            for k, (a, b) in enumerate(zip(native, result["jobs"])):
                assert a == b, f"AXI job {k} of run {i}: native and cocotb records differ"
            assert len(native) == len(result["jobs"])
            continue
        native = run_job(gateware, cfg, job, sim, name=f"agree-{request.node.name}-{i}",
                         engine="native")
        for key in _AGREE_KEYS:
            assert native[key] == result[key], (
                f"job {i}: native and cocotb differ in {key!r} under {sim}")


def pytest_generate_tests(metafunc):
    if "sim" in metafunc.fixturenames:
        metafunc.parametrize("sim", _selected_sims(), indirect=True)


@pytest.fixture
def sim(request):
    name = request.param
    if not sim_available(name):
        _SKIPPED.add(name)
        pytest.skip(missing_reason(name))
    return name


@pytest.fixture
def cycle_log(request):
    """``cycle_log(measured, model)``: assert RTL cycles == cycle model and record both
    (``build/cycles/*.jsonl``, summarised by ``scripts/ci_summary.py``)."""
    import json
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    path = Path(os.environ["SPNN_BUILD_DIR"]) / "cycles" / f"{worker}.jsonl"

    def record(measured, model):
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as handle:
            handle.write(json.dumps({"test": request.node.nodeid, "measured": int(measured),
                                     "model": int(model)}) + "\n")
        assert measured == model, f"RTL took {measured} cycles, the cycle model says {model}"
    return record


def pytest_terminal_summary(terminalreporter):
    for name in SIMS:
        if not sim_available(name) and name in _selected_sims():
            terminalreporter.write_line(f"NOTE: {missing_reason(name)}", yellow=True)
