# SPDX-License-Identifier: Apache-2.0
"""gen.core.stimulus: per-port handshake patterns that depend on the clock number alone."""

import numpy as np
import pytest

from gen.core.stimulus import (ModelSource, Pattern, job_patterns, make_job, normalise_job,
                               port_seed)


def test_patterns_are_functions_of_the_clock():
    p = Pattern.bernoulli(0.3, 7)
    forward = [p.at(c) for c in range(10000)]
    q = Pattern.bernoulli(0.3, 7)
    backward = [q.at(c) for c in reversed(range(10000))][::-1]
    assert forward == backward                       # any visiting order, same bits
    assert abs(np.mean(forward) - 0.3) < 0.02
    assert Pattern.bernoulli(1.0, 7) == Pattern.always() and Pattern.always().at(10 ** 9)
    bits = Pattern.bits([1, 0, 0])
    assert [bits.at(c) for c in range(6)] == [True, False, False] * 2 and bits.rate == 1 / 3
    with pytest.raises(ValueError):
        Pattern.bits([0, 0])
    with pytest.raises(ValueError):
        Pattern("bernoulli", 0.0, 1)


def test_ports_draw_alone():
    """Reordering a job's sources (or adding one) changes no other port's pattern: the
    defect of a shared generator, where it did."""
    a = make_job([("w", [1, 2], 0.5), ("x", [3], 0.5)], [("o", 1, 0.7)], seed=3)
    b = make_job([("x", [3], 0.5), ("extra", [9], 0.2), ("w", [1, 2], 0.5)],
                 [("o", 1, 0.7)], seed=3)
    pa, pb = job_patterns(a), job_patterns(b)
    for port in ("w", "x", "o"):
        assert [pa[port].at(c) for c in range(500)] == [pb[port].at(c) for c in range(500)]
    assert port_seed(3, "w") != port_seed(3, "x") != port_seed(4, "x")
    assert [pa["w"].at(c) for c in range(64)] != [pa["x"].at(c) for c in range(64)]


def test_legacy_probabilities_become_port_patterns():
    legacy = {"sources": [{"port": "i", "data": [1], "valid_prob": 0.4}],
              "sinks": [{"port": "o", "count": 1, "ready_prob": 1.0}], "seed": 5}
    norm = normalise_job(legacy)
    assert norm["sources"][0]["valid"] == {"kind": "bernoulli", "prob": 0.4,
                                           "seed": port_seed(5, "i")}
    assert norm["sinks"][0]["ready"] == {"kind": "always"}
    assert "valid_prob" not in norm["sources"][0]
    assert normalise_job(norm) == norm
    with pytest.raises(ValueError, match="gives both 'ready' and 'ready_prob'"):
        normalise_job(dict(norm, sinks=[dict(norm["sinks"][0], ready_prob=0.5)]))
    explicit = make_job([("i", [1], Pattern.bits([0, 1]))], [("o", 1, None)])
    assert explicit["sources"][0]["valid"] == {"kind": "bits", "seq": [0, 1]}


def test_model_source_follows_the_testbench_rule():
    """valid is raised by the pattern and then held until a ready clock."""
    src = ModelSource(3, Pattern.bits([1, 0]))
    taken = []
    for cycle in range(12):
        src.drive(cycle)
        if src.take(cycle % 3 == 2, cycle):
            taken.append(cycle)
    # raised at 0, held until ready at 2; raised at 4 (2 was taken, 3 not allowed), ...
    assert taken == [2, 5, 8] and src.idx == 3
