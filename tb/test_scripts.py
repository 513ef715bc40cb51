# SPDX-License-Identifier: Apache-2.0
"""Every script under ``scripts/`` with a command line refuses an unknown option: argparse's
one-line error naming it, exit 2, before any work."""

import importlib
import sys

import pytest

SCRIPTS = ["bench_banked", "bench_conv", "bench_explore", "bench_fc", "bench_lstm",
           "bench_model", "bench_pwl", "bench_shells", "bench_sim", "bench_soak", "bench_spmv",
           "bench_sweep", "bench_synth", "soak"]


@pytest.mark.parametrize("name", SCRIPTS)
def test_unknown_option_exits_2(name, monkeypatch, capsys):
    mod = importlib.import_module(f"scripts.{name}")
    block = ["pwl"] if name == "soak" else []          # soak's one positional argument
    monkeypatch.setattr(sys, "argv", [f"{name}.py", *block, "--no-such-option"])
    with pytest.raises(SystemExit) as e:
        mod.main()
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "--no-such-option" in err[-1]
