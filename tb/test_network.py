# SPDX-License-Identifier: Apache-2.0
"""A small network through the accelerator shells back to back, under both simulators:
three conv layers of different shapes (3x3 pad 1, 1x1 with an input-channel split, 3x3
stride 2) on a batch of two images, then an FC layer on the flattened features.  Between
layers the host requantises the exact sums to the next layer's 8-bit input (ReLU, shift
with round half up, saturation: :func:`gen.core.fixed.requantise`; in hardware with the
model flow, #25).  Every layer's RTL output equals the golden model's, bit for bit, and the
chain's end equals the golden chain's."""

import numpy as np
import pytest

from gen.conv import ConvConfig, ConvLayer, plan, ref_conv
from gen.conv.twin import rtl_conv_axi
from gen.core.fixed import QFormat, requantise
from gen.fc import FcConfig, prune_random, ref_fc
from gen.fc.twin import rtl_fc_axi

CONV = ConvConfig(rows=4, cols=2, max_groups=2, feat_depth=256, weight_depth=128,
                  out_depth=128, max_slots=64, max_dim=16, bus_words=3)
CODE = QFormat(8, 0)
# oc, k, stride, pad, icq, shift of the requantisation after the layer
LAYERS = [(4, 3, 1, 1, None, 7), (3, 1, 1, 0, 2, 6), (4, 3, 2, 0, None, 7)]


def _requant(sums, shift):
    """ReLU, then drop ``shift`` bits (round half up) and saturate to 8-bit codes."""
    return requantise(np.maximum(sums, 0), shift, CODE)


def _conv(x, w, stride, pad, icq, sim, name):
    b, ic, h, wd = x.shape
    oc, _, k, _ = w.shape
    sched = plan(ConvLayer(oc, ic, h, wd, k, k, stride, pad, batch=b), CONV, "remainder",
                 icq=icq)
    (y,), _, (record,) = rtl_conv_axi([(x, w, sched)], CONV, sim, valid_prob=0.8,
                                      ready_prob=0.7, seed=3, name=name)
    assert record["status"] == 0b10
    return y


@pytest.mark.rtl
def test_small_network_through_the_shells(sim):
    rng = np.random.default_rng(77)
    x = rng.integers(-128, 128, (2, 2, 5, 5))
    ws, ic = [], 2
    for oc, k, *_ in LAYERS:
        ws.append(rng.integers(-128, 128, (oc, ic, k, k)))
        ic = oc
    act, gold = x, x
    for i, ((_, _, stride, pad, icq, shift), w) in enumerate(zip(LAYERS, ws)):
        sums = _conv(act, w, stride, pad, icq, sim, f"net-conv{i}")
        want = np.stack([ref_conv(xb, w, stride, pad) for xb in gold])
        np.testing.assert_array_equal(sums, want)
        act = gold = _requant(want, shift)
        assert 0 < np.count_nonzero(act) < act.size         # the shifts keep it non-trivial
    features = act.reshape(act.shape[0], -1).T               # (C*H*W) x batch
    fc = FcConfig(batch=2, nz_per_clock=2, row_width=8, segs_per_beat=2, max_cols=16,
                  max_rows=16, addr_width=8, w_fmt=CODE, x_fmt=CODE, bus_words=4)
    assert features.shape == (16, 2)
    w_fc = prune_random((10, 16), 0.4, rng, 8)
    y, record = rtl_fc_axi(w_fc, features, fc, sim, valid_prob=0.8, ready_prob=0.7, seed=4,
                           name="net-fc")
    np.testing.assert_array_equal(y, ref_fc(w_fc, features, fc))
    assert record[0]["status"] == 0b10
