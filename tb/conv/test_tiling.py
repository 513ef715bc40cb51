# SPDX-License-Identifier: Apache-2.0
"""Host-side tiling (gen/conv/tiling.py): layers larger than the array's buffers as a
sequence of jobs; assembled outputs exact against the whole layer's golden model, the plan's
cycles the exact model's, and one tiled layer through the accelerator shell under both
simulators."""

import numpy as np
import pytest

from gen.conv import (ConvConfig, ConvLayer, layer_cycles, layers_timeline, plan, ref_conv,
                      shell_cycles)
from gen.conv.tiling import plan_tiles, run_runs, run_tiles, tile_input
from gen.conv.twin import rtl_conv_axi
from gen.core.config import SpnnError

# the shell tests' small array (4 x 2, 256 feature words, 128 output words, 64 slots,
# max_dim 16): their Verilator build is reused
CFG = ConvConfig(rows=4, cols=2, max_groups=2, feat_depth=256, weight_depth=128,
                 out_depth=128, max_slots=64, max_dim=16, bus_words=3)


def _golden(xt, wt, sched):
    sub = sched.layer
    return np.stack([ref_conv(xb, wt, sub.stride, sub.pad) for xb in xt])


@pytest.mark.parametrize("oc, ic, h, w, k, s, p, b", [
    (6, 3, 20, 20, 3, 1, 1, 1),       # max_dim exceeded: spatial tiles with halos
    (9, 2, 11, 13, 3, 2, 1, 2),       # stride 2, odd sizes, two images
    (5, 4, 9, 9, 5, 1, 2, 1),         # 5x5 kernel, pad 2
    (3, 2, 18, 6, 1, 1, 0, 3),        # 1x1, tall maps, three images
    (4, 1, 8, 8, 3, 1, 1, 1),         # fits: one tile, the array pads
])
def test_tiles_assemble_the_layer(oc, ic, h, w, k, s, p, b):
    rng = np.random.default_rng(oc * 100 + h)
    layer = ConvLayer(oc, ic, h, w, k, k, s, p, batch=b)
    x = rng.integers(-128, 128, (b, ic, h, w))
    wt = rng.integers(-128, 128, (oc, ic, k, k))
    tp = plan_tiles(layer, CFG)
    np.testing.assert_array_equal(run_tiles(x, wt, tp, _golden),
                                  np.stack([ref_conv(xb, wt, s, p) for xb in x]))
    covered = sum((t.b[1] - t.b[0]) * (t.o[1] - t.o[0]) * (t.y[1] - t.y[0])
                  * (t.x[1] - t.x[0]) for t in tp.tiles)
    assert covered == b * oc * layer.ho * layer.wo          # every output exactly once
    np.testing.assert_array_equal(
        run_runs(x, wt, tp, lambda xs, ws, sched, tiles: [_golden(*a, sched)
                                                          for a in zip(xs, ws)]),
        np.stack([ref_conv(xb, wt, s, p) for xb in x]))
    # runs: equal tiles of one channel group, next to each other, each one job
    assert [t for run in tp.runs for t in run] == list(tp.tiles)
    assert all(len({(t.sched.layer, t.o) for t in run}) == 1 for run in tp.runs)
    assert len({(run[0].sched.layer, run[0].o) for run in tp.runs}) == tp.jobs
    assert tp.cycles == sum(layers_timeline([run[0].sched] * len(run))[-1]["last_out"]
                            for run in tp.runs)
    # a run overlaps its tiles' output streams with the next tile's loads and compute
    assert tp.cycles <= sum(layer_cycles(t.sched)["last_out"] for t in tp.tiles)
    assert tp.words["outputs"] == b * oc * layer.ho * layer.wo
    assert 0 < tp.utilisation() < 1


def test_a_layer_that_fits_is_one_job_with_the_arrays_padding():
    layer = ConvLayer(4, 3, 6, 6, 3, 3, 1, 1)
    tp = plan_tiles(layer, CFG)
    # cut only when faster by the exact model (here: no)
    assert len(tp.tiles) == 1 and tp.tiles[0].sched.layer == layer
    assert tp.cycles == layer_cycles(plan(layer, CFG, "remainder"))["last_out"]
    x = np.ones((1, 3, 6, 6), dtype=np.int64)
    assert tile_input(x, layer, tp.tiles[0]).shape == (1, 3, 6, 6)


@pytest.mark.parametrize("layer", [ConvLayer(4, 1, 8, 8, 3, 3, 1, 1),
                                   ConvLayer(8, 1, 8, 8, 1, 1, 1, 0)])
def test_a_layer_that_fits_is_cut_when_runs_are_faster(layer):
    """Layers whose output stream is long against their loads and compute: cut into one
    run of spatial tiles, whose output streams overlap the next tiles' loads, they take
    fewer clocks by the exact model than as one tile, and the planner cuts them."""
    tp = plan_tiles(layer, CFG)
    single = layer_cycles(plan(layer, CFG, "remainder"))["last_out"]
    assert len(tp.tiles) > 1 and tp.jobs == 1 and tp.cycles < single




def test_cut_tiles_read_their_halo_from_the_padded_input():
    layer = ConvLayer(2, 1, 20, 20, 3, 3, 1, 1)
    tp = plan_tiles(layer, CFG)
    t = next(t for t in tp.tiles if t.y[0] > 0 and t.x[0] > 0)
    x = np.arange(400).reshape(1, 1, 20, 20)
    window = tile_input(x, layer, t)
    sub = t.sched.layer
    assert sub.pad == 0 and window.shape == (1, 1, sub.h, sub.w)
    # window row 0 is padded row y0 (input row y0 - 1)
    assert window[0, 0, 0, 0] == x[0, 0, t.y[0] - 1, t.x[0] - 1]


def test_a_layer_that_cannot_fit_is_one_clear_error():
    with pytest.raises(SpnnError, match="does not fit the array even one output position"):
        plan_tiles(ConvLayer(1, 1, 20, 20, 17, 17, 1, 0), CFG)


def test_tiled_layer_through_the_shell(sim):
    """A 6 x 3 x 20 x 20 layer (max_dim 16) as back-to-back shell jobs, one per run of
    equal tiles (``LAYERS``), idle inputs and back-pressure: the assembled output is
    exact."""
    rng = np.random.default_rng(5)
    layer = ConvLayer(6, 3, 20, 20, 3, 3, 1, 1)
    x = rng.integers(-128, 128, (1, 3, 20, 20))
    wt = rng.integers(-128, 128, (6, 3, 3, 3))
    tp = plan_tiles(layer, CFG)
    assert len(tp.tiles) > 1 and any(len(run) > 1 for run in tp.runs)
    jobs = [([tile_input(x, layer, t) for t in run], [wt[t.o[0]:t.o[1]] for t in run],
             run[0].sched) for run in tp.runs]
    outs, _, records = rtl_conv_axi(jobs, CFG, sim, valid_prob=0.8, ready_prob=0.7, seed=1,
                                    name="tiled")
    got = iter(outs)
    y = run_runs(x, wt, tp, lambda xs, ws, sched, tiles: next(got))
    np.testing.assert_array_equal(y, ref_conv(x[0], wt, 1, 1)[None])
    assert all(r["status"] == 0b10 for r in records)
    assert tp.shell_cycles == sum(shell_cycles(run[0].sched, len(run)) for run in tp.runs)
