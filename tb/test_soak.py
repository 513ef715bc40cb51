# SPDX-License-Identifier: Apache-2.0
"""A short soak of every block (scripts/soak.py; `make soak` runs the long one): random jobs
with random back-pressure and resets through the native engine, every result equal to the
golden model."""

import pytest

from scripts.soak import BLOCKS, soak

SHORT = {"pwl": 70_000, "spmv": 20, "fc": 6, "lstm": 20, "conv": 60}


@pytest.mark.parametrize("block", sorted(BLOCKS))
def test_short_soak(sim, block):
    tally = soak(block, SHORT[block], sim, seed=1)
    assert tally["mismatches"] == 0
    assert tally["vectors"] >= SHORT[block] and tally["jobs"] >= 2
    if tally["jobs"] >= 3:
        assert tally["resets"] >= 1


def test_every_block_has_a_soak():
    from gen.registry import BLOCKS as REGISTRY
    assert set(BLOCKS) == set(REGISTRY)
