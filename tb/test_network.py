# SPDX-License-Identifier: Apache-2.0
"""A small network through the accelerator shells back to back, under both simulators:
three conv layers of different shapes (3x3 pad 1, 1x1, 3x3 stride 2) on a batch of two
images, each planned into strips on small buffers, then an FC layer on the flattened
features.  Every
shell has its requantisation stage built (``rq_width`` 8): the hardware adds each layer's
biases, drops bits with round half up, saturates to the next layer's 8-bit input and applies
the ReLU (:mod:`hdl.lib.requant`), so each layer's output codes feed the next layer as they
come out of the shell; the host only reshapes.  Every layer's output equals the golden
chain's (exact sums, then :func:`gen.core.fixed.requant_sums`), bit for bit."""

import numpy as np
import pytest

from gen.conv import ConvLayer, ref_conv
from gen.conv.banked import BankedConfig, plan_layer, run_plan
from gen.conv.twin import requant_conv, rtl_banked_axi
from gen.core.fixed import QFormat, Requant
from gen.fc import FcConfig, prune_random, ref_fc
from gen.fc.twin import requant_fc, rtl_fc_axi

CONV = BankedConfig(rows=4, cols=2, bus_words=3, copies=2, feat_depth=16, weight_depth=16,
                    out_depth=8, rq_width=8, rq_depth=8)
CODE = QFormat(8, 0)
# oc, k, stride, pad, shift of the requantisation after the layer
LAYERS = [(4, 3, 1, 1, 7), (3, 1, 1, 0, 6), (4, 3, 2, 0, 7)]


def _conv(x, w, stride, pad, rq, sim, name):
    """The layer planned on the small buffers (strips, chunks), every job one AXI job with
    its channels' biases loaded; returns the output codes and the strips x chunks run."""
    b, ic, h, wd = x.shape
    oc, _, k, _ = w.shape
    plan = plan_layer(ConvLayer(oc, ic, h, wd, k, k, stride, pad, batch=b), CONV)
    records = []

    def run(items):
        outs, _, recs = rtl_banked_axi([item + (rq,) for item in items], CONV, sim, valid=0.8,
                                       ready=0.7, seed=3, name=name)
        records.extend(recs)
        return outs
    y = run_plan(x, w, plan, run)
    assert len(records) == len(plan.jobs) and all(r["status"] == 0b10 for r in records)
    return y, sum(job.S * job.Q for job in plan.jobs)


@pytest.mark.rtl
def test_small_network_through_the_shells(sim):
    rng = np.random.default_rng(77)
    x = rng.integers(-128, 128, (2, 2, 5, 5))
    ws, ic = [], 2
    for oc, k, *_ in LAYERS:
        ws.append(rng.integers(-128, 128, (oc, ic, k, k)))
        ic = oc
    act, steps = x, 0
    for i, ((oc, _, stride, pad, shift), w) in enumerate(zip(LAYERS, ws)):
        rq = Requant(shift=shift, relu=True, bias=rng.integers(-2000, 2000, oc))
        sums = np.stack([ref_conv(xb, w, stride, pad) for xb in act])
        want = requant_conv(sums, rq, rq.bias, 8)
        got, n = _conv(act, w, stride, pad, rq, sim, f"net-conv{i}")
        steps += n
        np.testing.assert_array_equal(got, want)
        assert 0 < np.count_nonzero(got) < got.size          # non-trivial codes
        act = got                              # the shell's codes are the next input
    assert steps > 3 * len(LAYERS)             # the small buffers cut layers into strips
    features = act.reshape(act.shape[0], -1).T               # (C*H*W) x batch
    fc = FcConfig(batch=2, nz_per_clock=2, row_width=8, segs_per_beat=2, max_cols=16,
                  max_rows=16, addr_width=8, w_fmt=CODE, x_fmt=CODE, bus_words=4,
                  rq_width=12, rq_depth=16)
    assert features.shape == (16, 2)
    w_fc = prune_random((10, 16), 0.4, rng, 8)
    rq = Requant(mult=3, shift=2, bias=rng.integers(-500, 500, 10))
    y, record = rtl_fc_axi(w_fc, features, fc, sim, valid_prob=0.8, ready_prob=0.7, seed=4,
                           name="net-fc", rq=rq)
    np.testing.assert_array_equal(y, requant_fc(ref_fc(w_fc, features, fc), rq, rq.bias, 12))
    assert record[0]["status"] == 0b10
