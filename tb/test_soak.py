# SPDX-License-Identifier: Apache-2.0
"""A short soak of every block (scripts/soak.py; `make soak` runs the long one): random jobs
with random back-pressure and resets through the native engine, every result equal to the
golden model."""

import pytest

from scripts.soak import BLOCKS, soak

# enough vectors for three jobs (the third has a reset) per block
SHORT = {"pwl": 90_000, "spmv": 140, "fc": 150, "lstm": 80, "conv": 400}


@pytest.mark.parametrize("block", sorted(BLOCKS))
def test_short_soak(sim, block):
    tally = soak(block, SHORT[block], sim, seed=1)
    assert tally["mismatches"] == 0
    assert tally["vectors"] >= SHORT[block] and tally["jobs"] >= 3
    assert tally["resets"] >= 1


def test_every_block_has_a_soak():
    from gen.registry import BLOCKS as REGISTRY
    assert set(BLOCKS) == set(REGISTRY)


@pytest.mark.rtl
def test_soak_reports_a_wrong_result(monkeypatch):
    """A golden model that disagrees by one code is counted (the soak can fail)."""
    import gen.pwl
    real = gen.pwl.ref_pwl
    monkeypatch.setattr(gen.pwl, "ref_pwl", lambda x, table: real(x, table) + (x == 5))
    seen = []
    tally = soak("pwl", 65536, "verilator", seed=3, log=seen.append)   # every code
    assert tally["mismatches"] == 1 and "differ from the golden model" in seen[0]
