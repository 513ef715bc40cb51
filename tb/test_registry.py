# SPDX-License-Identifier: Apache-2.0
"""The block contract: every registered block is found by its one name in every tree, and
the tools (CLI, verilog, waveform regressions) list exactly the registered blocks."""

import importlib
from pathlib import Path

import pytest

from gen.core.block import Block, Gateware
from gen.registry import BLOCKS, get_block, wave_cases

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", sorted(BLOCKS))
def test_one_name_in_every_tree(name):
    block = BLOCKS[name]
    assert isinstance(block, Block) and block.name == name
    hdl = importlib.import_module(f"hdl.{name}")
    assert isinstance(hdl.GATEWARE, Gateware) and block.gateware is hdl.GATEWARE
    assert hdl.GATEWARE.name == name
    for part in ("block", "twin", "cli"):
        assert (ROOT / "gen" / name / f"{part}.py").is_file(), part
    assert importlib.import_module(f"gen.{name}.block").BLOCK is block
    assert block.cli is importlib.import_module(f"gen.{name}.cli")
    assert list((ROOT / "tb" / name).glob("test_*.py")), f"tb/{name}/ has no tests"
    assert (ROOT / "docs" / f"{name}.md").is_file()
    # the models and the twin live in the block's own package
    for fn in (block.golden, block.cycle_model, block.twin):
        assert fn.__module__.startswith(f"gen.{name}."), (fn, fn.__module__)
    assert block.twin.__module__ == f"gen.{name}.twin"


@pytest.mark.parametrize("name", sorted(BLOCKS))
def test_defaults_build(name):
    block = BLOCKS[name]
    configs = block.defaults()
    assert configs and all(isinstance(cfg, block.config_cls) for cfg in configs)
    for cfg in configs:
        component = block.build(cfg)
        component._MustUse__silence = True
        assert block.module_name(cfg) == cfg.module_name
        info = component.port_info()
        assert set(info) == {path[0] for path, *_ in component.signature.flatten(component)}
        assert component.latency >= 0 and component.ii >= 1


def test_cli_is_built_from_the_registry():
    from gen import cli
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    runs = next(a for a in sub.choices["run"]._actions if a.dest == "block")
    # every block, and `spnn run model` (a compiled network through the blocks)
    assert sorted(runs.choices) == sorted([*BLOCKS, "model"])
    from gen.model import run_cli
    assert cli.RUN_COMMANDS["model"] is run_cli
    for name, block in BLOCKS.items():
        assert cli.RUN_COMMANDS[name] is block.cli
        for command in block.commands:
            assert command in cli.EXTRA_COMMANDS


def test_info_lists_every_block(capsys):
    from gen.cli import main
    assert main(["info"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert listed == sorted(BLOCKS)


def test_unknown_block_is_refused():
    from gen.core.config import SpnnError
    with pytest.raises(SpnnError, match="block must be one of conv, fc, lstm, pwl, spmv"):
        get_block("fdcsr")


def test_every_wave_case_has_a_golden_trace_and_back():
    from tb import waves
    cases = wave_cases()
    assert len(cases) == sum(len(b.waves) for b in BLOCKS.values())   # names unique
    for name, (block, case) in cases.items():
        assert name.startswith(block.name + "_"), name
        assert waves.golden_path(name).is_file(), name
    on_disk = {p.stem for p in waves.GOLDEN.glob("*.trace")}
    assert on_disk == set(cases)
