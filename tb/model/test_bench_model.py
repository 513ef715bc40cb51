# SPDX-License-Identifier: Apache-2.0
"""``scripts/bench_model.py --docs``: each part (digits CNN, digits LSTM, VGG16 / ResNet-18
plans) has its own doc section, and a partial run replaces only the sections it ran.  The
parts' computations are stubbed out: no training, no simulator."""

from pathlib import Path

import pytest

from scripts import bench_model
from scripts.docs import markers

ROOT = Path(__file__).resolve().parents[2]
PARTS = {"cnn": ("cnn_result", "markdown"), "lstm": ("lstm_result", "lstm_markdown"),
         "networks": ("network_rows", "networks_markdown")}


def _doc(parts_text):
    lines = ["# doc", ""]
    for part, text in parts_text.items():
        begin, end = markers(bench_model.SECTIONS[part][0], bench_model.SCRIPT)
        lines += [begin, text, end, "", f"after {part}", ""]
    return "\n".join(lines)


@pytest.fixture
def stubbed(tmp_path, monkeypatch):
    """A folder with README.md and docs/model.md holding "old <part>" in every section, and
    the bench's parts replaced by stubs that produce "new <part>"."""
    monkeypatch.chdir(tmp_path)
    old = _doc({part: f"old {part}" for part in PARTS})
    (tmp_path / "docs").mkdir()
    for path in bench_model.DOC_FILES:
        (tmp_path / path).write_text(old)
    ran = []
    for part, (compute, render) in PARTS.items():
        def result(*args, part=part, **kwargs):
            ran.append(part)
            return ([] if part == "networks" else
                    {"rtl_equals_golden": True, "accuracy_golden": 0.5, "accuracy_float": 0.5})
        monkeypatch.setattr(bench_model, compute, result)
        monkeypatch.setattr(bench_model, render, lambda res, part=part: f"new {part}\n")
    return tmp_path, ran


@pytest.mark.parametrize("skip", [("networks",), ("cnn", "lstm"), ("lstm",), ()])
def test_partial_run_keeps_skipped_sections(stubbed, skip):
    folder, ran = stubbed
    argv = ["--docs", "--out", "bench"] + [f"--no-{part}" for part in skip]
    assert bench_model.main(argv) == 0
    done = [part for part in PARTS if part not in skip]
    assert ran == done
    want = _doc({part: f"new {part}" if part in done else f"old {part}" for part in PARTS})
    for path in bench_model.DOC_FILES:
        assert (folder / path).read_text() == want, path
    stems = {bench_model.SECTIONS[part][1] for part in done}
    assert {p.stem for p in (folder / "bench").iterdir()} == stems


def test_failed_check_fails_the_run(stubbed, monkeypatch):
    monkeypatch.setattr(bench_model, "lstm_result", lambda *a, **k: {
        "rtl_equals_golden": True, "accuracy_golden": 0.5, "accuracy_float": 0.52})
    assert bench_model.main(["--no-cnn", "--no-networks", "--out", "bench"]) == 1


def test_docs_carry_every_section_once():
    for path in bench_model.DOC_FILES:
        text = (ROOT / path).read_text()
        for what, _ in bench_model.SECTIONS.values():
            begin, end = markers(what, bench_model.SCRIPT)
            assert text.count(begin) == 1 and text.count(end) == 1, (path, what)
            assert text.index(begin) < text.index(end)


@pytest.mark.parametrize("how, want", [([], bench_model.CONV_FMAX_MHZ), (["--fmax", "120"], 120.0),
                                       (["--fmax-from", "reports"], 140.0)])
def test_networks_clock(stubbed, monkeypatch, how, want):
    """The networks' clock: the default measured figure, ``--fmax``, or the median of the
    conv reports that ``--fmax-from`` names (gen.model.fmax_from_reports)."""
    folder, _ = stubbed
    (folder / "reports").mkdir()
    for seed, mhz in ((1, 130.0), (2, 140.0), (3, 150.0)):
        (folder / "reports" / f"s{seed}.json").write_text(
            f'{{"block": "conv", "fmax_mhz": {mhz}, "seed": {seed}}}')
    got = []
    monkeypatch.setattr(bench_model, "network_rows", lambda fmax: got.append(fmax) or [])
    assert bench_model.main(["--no-cnn", "--no-lstm", "--out", "bench"] + how) == 0
    assert got == [want]
