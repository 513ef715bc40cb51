# SPDX-License-Identifier: Apache-2.0
"""The two-entry skid buffer (hdl/lib/skid.py) on its own, under both simulators.

The conv array's weight stream and the FC engine's decoder output run through it, so
their tests cover it in context; here its contract is checked directly: every word
leaves in order and unchanged, a word taken at clock t is offered at t + 1, no clock is
lost while the output is never back-pressured, at most two words are held, and a reset
empties it.
"""

import numpy as np
import pytest

from gen.core.block import Gateware
from gen.core.sim import run_job
from gen.core.stimulus import make_job
from hdl.lib.skid import SkidBuffer

WIDTH = 12
SKID = Gateware("skid", SkidBuffer, lambda width: f"skid_{width}")


def _words(n, seed):
    """Signed WIDTH-bit words, both extremes included, as unsigned codes."""
    x = np.random.default_rng(seed).integers(-2 ** (WIDTH - 1), 2 ** (WIDTH - 1), n)
    x[:2] = [-2 ** (WIDTH - 1), 2 ** (WIDTH - 1) - 1]
    return [int(v) & (2 ** WIDTH - 1) for v in x]


def _job(data, valid_prob, ready_prob, seed, reset_at=None):
    return make_job([("i", data, valid_prob)], [("o", len(data), ready_prob)], seed=seed,
                    reset_at=reset_at, max_cycles=40 * len(data) + 100)


def _held(result):
    """Words inside the buffer after each clock (taken minus given up to that clock)."""
    cycles = result["cycles_run"]
    taken = np.bincount(result["sources"]["i"]["cycles"], minlength=cycles).cumsum()
    given = np.bincount(result["sinks"]["o"]["cycles"], minlength=cycles).cumsum()
    return taken - given


@pytest.mark.parametrize("valid_prob, ready_prob", [(1.0, 1.0), (0.5, 1.0), (1.0, 0.4),
                                                    (0.6, 0.5)])
def test_skid_keeps_order_and_holds_at_most_two(sim, valid_prob, ready_prob):
    data = _words(120, 7)
    result = run_job(SKID, WIDTH, _job(data, valid_prob, ready_prob, seed=11), sim=sim,
                     name=f"skid-v{valid_prob}-r{ready_prob}")
    assert result["sinks"]["o"]["data"] == data
    held = _held(result)
    assert held.min() >= 0 and held.max() <= 2
    if ready_prob == 1.0:
        # never back-pressured: each word is offered (and taken) the clock after it entered
        i_cycles, o_cycles = result["sources"]["i"]["cycles"], result["sinks"]["o"]["cycles"]
        assert o_cycles == [c + 1 for c in i_cycles]
        if valid_prob == 1.0:
            assert i_cycles == list(range(len(data)))     # one transfer per clock
    else:
        assert held.max() == 2                            # the spare entry was used


def test_skid_reset_mid_stream_empties_it(sim):
    """A reset while both entries are full (the output stalls) drops them: after it the
    output carries exactly the restarted stream, nothing left over from before."""
    data = _words(60, 9)
    result = run_job(SKID, WIDTH, _job(data, 1.0, 0.3, seed=5, reset_at=25), sim=sim,
                     name="skid-reset")
    before = result["before_reset"]["o"]["data"]
    assert 0 < len(before) < len(data) and before == data[:len(before)]
    # both entries were full when the reset came (the log spans the reset; the cycle
    # counter stands still during it, so the clocks before it are those < reset_at)
    taken = sum(1 for cycle, _ in result["log"]["i"] if cycle < 25)
    assert taken - len(before) == 2
    assert result["sinks"]["o"]["data"] == data
