# SPDX-License-Identifier: Apache-2.0
"""The spnn command line: help, deterministic emission, one-line errors with exit code 2."""

import json
import re
import subprocess
import sys

import numpy as np
import pytest

from gen.cli import main
from gen.core.config import SpnnError
from gen.core.runutil import float_arg, format_arg, int_arg


def run_cli(args, cwd=None):
    proc = subprocess.run([sys.executable, "-m", "gen.cli", *args], capture_output=True,
                          text=True, cwd=cwd)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize("args", [[], ["verilog"], ["run"], ["info"], ["run", "pwl"]])
def test_help_has_examples(args, capsys):
    with pytest.raises(SystemExit) as info:
        main([*args, "--help"])
    assert info.value.code == 0
    assert "Example" in capsys.readouterr().out


@pytest.mark.slow
def test_verilog_all_is_deterministic(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    assert main(["verilog", "--all", "-o", str(a)]) == 0
    assert main(["verilog", "--all", "-o", str(b)]) == 0
    names = sorted(p.name for p in a.iterdir())
    assert "pwl_sigmoid.v" in names and "pwl_tanh.json" in names
    assert names == sorted(p.name for p in b.iterdir())
    for name in names:
        text = (a / name).read_bytes()
        assert text == (b / name).read_bytes()
        assert str(tmp_path).encode() not in text and b"/home/" not in text
        assert b"(* src" not in text   # no source-location attributes


def test_manifest_contents(tmp_path):
    main(["verilog", "pwl", "--set", "func=tanh", "--set", "segments=16", "-o", str(tmp_path)])
    man = json.loads((tmp_path / "pwl_tanh.json").read_text())
    assert man["module"] == "pwl_tanh" and man["latency"] == 10
    assert man["parameters"]["segments"] == 16
    ports = {p["name"]: p for p in man["ports"]}
    assert ports["i__payload"]["format"] == "Q4.12" and ports["i__payload"]["width"] == 16
    assert ports["o__payload"]["direction"] == "output"
    assert ports["o__ready"]["direction"] == "input"
    verilog = (tmp_path / "pwl_tanh.v").read_text()
    for name in ports:
        assert name in verilog


@pytest.mark.parametrize("args, message", [
    (["verilog", "pwl", "--set", "segments=12"],
     "spnn: error: --set segments must be a power of two between 2 and 256, not 12"),
    (["verilog", "pwl", "--set", "colour=red"],
     "spnn: error: --set unknown parameter 'colour'; allowed: boundaries, bus_words, func, "
     "guard_bits, in_fmt, out_fmt, segments, slope_width, x_max"),
    (["verilog", "nosuch"], "spnn: error: block must be one of"),
    (["verilog", "pwl", "--set", "in_fmt=Q4"],
     "spnn: error: --set in_fmt must be a fixed-point format like Q4.12 or int16"),
    (["verilog", "pwl", "--set", "segments=many"],
     "spnn: error: --set segments must be an integer, not 'many'"),
])
def test_verilog_errors(tmp_path, args, message):
    out = tmp_path / "out"
    code, stdout, stderr = run_cli([*args, "-o", str(out)])
    assert code == 2
    assert stderr.startswith(message) and stderr.count("\n") == 1
    assert not out.exists()


@pytest.fixture
def inputs(tmp_path):
    files = {
        "x": np.linspace(-8, 7.99, 301),
        "wide": np.linspace(-9, 9, 301),
        "codes": np.arange(-500, 500, dtype=np.int32),
        "nan": np.array([0.0, np.nan]),
        "inf": np.array([np.inf]),
        "big": np.array([40000], dtype=np.int64),
        "text": np.array(["a", "b"]),
        "empty": np.zeros(0),
    }
    paths = {}
    for name, arr in files.items():
        paths[name] = tmp_path / f"{name}.npy"
        np.save(paths[name], arr)
    paths["pickle"] = tmp_path / "pickle.npy"
    np.save(paths["pickle"], np.array([{"a": 1}], dtype=object), allow_pickle=True)
    return paths


@pytest.mark.parametrize("extra, message", [
    (["--func", "relu", "--input", "{x}"], "--func must be one of sigmoid, tanh, not 'relu'"),
    (["--func", "tanh", "--segments", "12", "--input", "{x}"],
     "--segments must be a power of two between 2 and 256, not 12"),
    (["--func", "tanh", "--input", "{nan}"], "--input: values must be finite, found NaN"),
    (["--func", "tanh", "--input", "{inf}"], "--input: values must be finite, found Inf"),
    (["--func", "tanh", "--input", "{pickle}"], "holds pickled objects"),
    (["--func", "tanh", "--input", "{text}"], "--input: dtype must be integer or float"),
    (["--func", "tanh", "--input", "{empty}"], "--input must not be empty, not shape (0,)"),
    (["--func", "tanh", "--input", "{wide}"],
     "--input: value -9 lies outside the range of --in-fmt Q4.12, [-8, 7.99976]"),
    (["--func", "tanh", "--input", "{x}", "--raw"], "--input with --raw must hold integer codes"),
    (["--func", "tanh", "--input", "{big}", "--raw"], "--input: value 40000 lies outside [-32768, 32767] (codes of --in-fmt Q4.12)"),
    (["--func", "tanh", "--input", "missing.npy"], "--input: no such file"),
    (["--func", "tanh", "--input", "{x}", "--sim", "modelsim"], "invalid choice: 'modelsim'"),
])
def test_run_pwl_errors(tmp_path, inputs, extra, message):
    args = [a.format(**{k: str(v) for k, v in inputs.items()}) for a in extra]
    out = tmp_path / "y.npy"
    code, stdout, stderr = run_cli(["run", "pwl", *args, "--out", str(out)])
    assert code == 2, stderr
    assert message in stderr and stderr.count("\n") == 1
    assert not out.exists()


def test_run_pwl_end_to_end(sim, tmp_path, inputs):
    """Float in -> float out, and raw codes, with a report holding the common fields."""
    out, report = tmp_path / "y.npy", tmp_path / "r.json"
    code, stdout, stderr = run_cli(["run", "pwl", "--func", "sigmoid", "--input",
                                    str(inputs["x"]), "--out", str(out), "--report",
                                    str(report), "--sim", sim], cwd=tmp_path)
    assert code == 0, stderr
    y = np.load(out)
    assert y.dtype == np.float64 and y.shape == (301,)
    from scipy.special import expit
    assert np.max(np.abs(y - expit(np.linspace(-8, 7.99, 301)))) < 2 ** -11
    rep = json.loads(report.read_text())
    for field in ("block", "config", "formats", "sim", "cycles", "ideal_cycles", "efficiency",
                  "utilisation", "samples", "max_abs_error"):
        assert field in rep
    assert rep["samples"] == 301 and rep["sim"] == sim
    assert rep["cycles"] == rep["ideal_cycles"] == 301 + 11
    assert rep["formats"]["input"]["name"] == "Q4.12"
    assert rep["max_abs_error"] < 2 ** -11
    # the native engine by default; its cost in the report
    assert rep["engine"] == "native" and rep["simulated_clocks"] >= rep["cycles"]
    assert rep["build_seconds"] >= 0 and rep["sim_seconds"] > 0
    assert rep["clocks_per_second"] == pytest.approx(rep["simulated_clocks"]
                                                     / rep["sim_seconds"], rel=0.01)
    # the cocotb engine: the same output, the same cycles
    out2, report2 = tmp_path / "y2.npy", tmp_path / "r2.json"
    code, _, stderr = run_cli(["run", "pwl", "--func", "sigmoid", "--input", str(inputs["x"]),
                               "--out", str(out2), "--report", str(report2), "--sim", sim,
                               "--engine", "cocotb"], cwd=tmp_path)
    assert code == 0, stderr
    rep2 = json.loads(report2.read_text())
    assert rep2["engine"] == "cocotb" and rep2["cycles"] == rep["cycles"]
    np.testing.assert_array_equal(np.load(out2), y)

    raw = tmp_path / "raw.npy"
    code, _, stderr = run_cli(["run", "pwl", "--func", "tanh", "--raw", "--input",
                               str(inputs["codes"]), "--out", str(raw), "--sim", sim],
                              cwd=tmp_path)
    assert code == 0, stderr
    from gen.pwl import PwlConfig, fit_table, ref_pwl
    expected = ref_pwl(np.arange(-500, 500), fit_table(PwlConfig(func="tanh")))
    np.testing.assert_array_equal(np.load(raw), expected)


ZERO_INIT = """  reg [9:0] rowmap [3:0];
  initial begin
    rowmap[0] = 10'h000;
    rowmap[1] = 10'h000;
    rowmap[2] = 10'h000;
    rowmap[3] = 10'h000;
  end
  reg [7:0] \\pe.table  [3:0];
  initial begin
    \\pe.table [0] = 8'h00;
    \\pe.table [1] = 8'h00;
    \\pe.table [2] = 8'h00;
    \\pe.table [3] = 8'h00;
  end
"""


def test_compact_zero_init():
    from gen.core.emit import compact_zero_init
    out = compact_zero_init(ZERO_INIT)
    assert out == ZERO_INIT.replace(
        "  initial begin\n" + "".join(f"    rowmap[{i}] = 10'h000;\n" for i in range(4)),
        "  initial begin : spnn_zero_init_0\n    integer i;\n"
        "    for (i = 0; i < 4; i = i + 1)\n      rowmap[i] = 10'd0;\n").replace(
        "  initial begin\n" + "".join(f"    \\pe.table [{i}] = 8'h00;\n" for i in range(4)),
        "  initial begin : spnn_zero_init_1\n    integer i;\n"
        "    for (i = 0; i < 4; i = i + 1)\n      \\pe.table [i] = 8'd0;\n")
    # anything but words 0..N-1 of one memory, all zero, is left as written
    for old, new in (("rowmap[2] = 10'h000", "rowmap[2] = 10'h001"),
                     ("rowmap[2] = 10'h000", "rowmap[5] = 10'h000"),
                     ("rowmap[2] = 10'h000", "other[2] = 10'h000")):
        text = ZERO_INIT.replace(old, new)
        assert compact_zero_init(text).count("spnn_zero_init") == 1
        assert "    rowmap[0] = 10'h000;\n" in compact_zero_init(text)


def test_emitted_memories_have_compact_init():
    """The default FC engine's run-time-loaded memories start at zero through loops."""
    from gen.registry import BLOCKS
    from gen.core.emit import to_verilog
    block = BLOCKS["fc"]
    cfg = block.defaults()[0]
    text = to_verilog(block.build(cfg), block.module_name(cfg))
    assert "spnn_zero_init_0" in text
    assert not re.search(r"^    \S+\[\d+\] = \d+'[hdb]0+;$", text, re.M)


@pytest.mark.parametrize("call, message", [
    (lambda: int_arg("2.5", "--pes"), "--pes must be an integer, not '2.5'"),
    (lambda: int_arg(None, "--lanes"), "--lanes must be an integer, not None"),
    (lambda: int_arg("0", "--stride", 1), "--stride must be at least 1, not 0"),
    (lambda: float_arg("half", "--density"), "--density must be a number, not 'half'"),
    (lambda: format_arg("Q4", "--w-fmt"), "--w-fmt"),
])
def test_argument_parsers_reject(call, message):
    with pytest.raises(SpnnError) as err:
        call()
    assert message in str(err.value)


def test_argument_parsers_accept():
    assert int_arg("7", "--pes", 1) == 7
    assert float_arg("0.25", "--density") == 0.25
    assert format_arg("Q4.12", "--x-fmt").frac_bits == 12


def test_config_field_checks():
    from gen.core.config import check_format, check_int
    from gen.core.fixed import QFormat
    from gen.spmv import SpmvConfig
    with pytest.raises(TypeError, match="pes must be an integer, not True"):
        SpmvConfig(pes=True)
    with pytest.raises(ValueError, match="pes must be between 1 and 256, not 0"):
        SpmvConfig(pes=0)
    with pytest.raises(ValueError, match=r"out_fmt must be 2 to 64 bits wide, not 1 \(Q1.0\)"):
        SpmvConfig(out_fmt=QFormat(1, 0))
    cfg = SpmvConfig()
    assert check_int(cfg, "pes", 1, 256) == cfg.pes
    assert check_format(cfg, "w_fmt", 2, 32) == cfg.w_fmt
