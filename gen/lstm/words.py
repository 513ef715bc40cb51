# SPDX-License-Identifier: Apache-2.0
"""The LSTM engine's input streams: a compiled layer as ``w`` words and a sequence as
``x`` words.

Streams (see :class:`hdl.lstm.LstmEngine`)
------------------------------------------
``w`` words ``{value, idx, pe, kind}``: ROW (rowmap of unit k: pe, idx = local),
BIAS (pe, idx = gate << lbits | local, value = bias code), per column ENTRY words then
one COL word (columns: ``X`` inputs then the ``R * P`` h slots), END.  With ``w_lanes``
``L > 1`` the stream is beats of ``L`` words (:func:`weight_beats`, lane 0 in the LSBs):
lane ``l`` carries the words of the PEs ``p mod L = l`` (lane 0 also every ROW word,
first), each lane closes each column with its own COL word, lanes are padded with NOP
words to equal length and the last beat is all END.
``x`` words ``{value, kind}``: per sequence ``H`` words H0 (``h_0``, ``x_fmt``, original
order), ``H`` words C0 (``c_0``, ``c_fmt``), then ``T * X`` words X.  ``o``: ``h_t``
codes (``x_fmt``), ``H`` per step in original order.
"""

import numpy as np

from gen.core.lanes import beat_words, lane_beats

from gen.lstm.compile import LstmPlan
from gen.lstm.config import (KIND_BIAS, KIND_COL, KIND_END, KIND_ENTRY, KIND_NOP, KIND_ROW,
                             XK_C0, XK_H0, XK_X, LstmConfig)

__all__ = ["weight_words", "weight_beats", "seq_words", "pack_word", "roofline_beats"]


def _u(v, width):
    return int(v) & ((1 << width) - 1)


def pack_word(kind, pe, idx, value, cfg: LstmConfig) -> int:
    vw = cfg.wv_width
    return (_u(value, vw) | (int(idx) << vw) | (int(pe) << (vw + cfg.idx_bits))
            | (int(kind) << (vw + cfg.idx_bits + cfg.pe_bits)))


def _lanes(plan: LstmPlan) -> list:
    """Per lane its words: ROW x H (lane 0), BIAS x 4 per unit of its PEs, per column its
    PEs' ENTRY words and one COL."""
    cfg = plan.cfg
    lb, L = cfg.lbits, cfg.w_lanes
    lanes = [[] for _ in range(L)]
    lanes[0] += [pack_word(KIND_ROW, pe, loc, 0, cfg)
                 for pe, loc in zip(plan.unit_pe, plan.unit_local)]
    for k in range(plan.hidden):
        pe, loc = plan.unit_pe[k], plan.unit_local[k]
        for g in range(4):
            lanes[pe % L].append(pack_word(KIND_BIAS, pe, (g << lb) | loc,
                                           plan.bias[pe, g, loc], cfg))
    pos = [0] * cfg.pes
    for j in range(plan.cols):
        for p in range(cfg.pes):
            for _ in range(plan.counts[p, j]):
                wv, row = plan.entries[p][pos[p]]
                lanes[p % L].append(pack_word(KIND_ENTRY, p, row, wv, cfg))
                pos[p] += 1
        for lane in lanes:
            lane.append(pack_word(KIND_COL, 0, 0, 0, cfg))
    return lanes


def weight_words(plan: LstmPlan) -> list:
    """The weight stream as words: ROW x H, BIAS x 4H, per column (ENTRY* COL), END; with
    ``w_lanes`` > 1 the words of :func:`weight_beats`, lane by lane within each beat."""
    cfg = plan.cfg
    return beat_words(weight_beats(plan), cfg.w_lanes, cfg.word_width)


def weight_beats(plan: LstmPlan) -> list:
    """The weight stream as beats of ``w_lanes`` words (lane 0 in the LSBs): the lanes of
    :func:`_lanes` padded with NOP words to equal length, then one beat of END words
    (``w_lanes`` = 1: the words themselves)."""
    cfg = plan.cfg
    return lane_beats(_lanes(plan), cfg.word_width, pack_word(KIND_NOP, 0, 0, 0, cfg),
                      pack_word(KIND_END, 0, 0, 0, cfg))


def seq_words(plan: LstmPlan, xs, h0=None, c0=None) -> list:
    """The ``x`` stream of one sequence: H0 x H, C0 x H, then the inputs step by step."""
    cfg = plan.cfg
    vw = cfg.xv_width
    hid = plan.hidden
    h0 = np.zeros(hid, np.int64) if h0 is None else np.asarray(h0, np.int64).ravel()
    c0 = np.zeros(hid, np.int64) if c0 is None else np.asarray(c0, np.int64).ravel()
    xs = np.asarray(xs, np.int64).reshape(-1, plan.inputs)
    words = [_u(v, vw) | (XK_H0 << vw) for v in h0]
    words += [_u(v, vw) | (XK_C0 << vw) for v in c0]
    words += [_u(v, vw) | (XK_X << vw) for v in xs.ravel()]
    return words


def roofline_beats(plan: LstmPlan, steps: int) -> dict:
    """The beats each shell port must carry at least for the weights and one sequence of
    ``steps`` steps: the one-lane weight stream (ROW, BIAS, ENTRY, one COL per column, END)
    packed perfectly into ``w_lanes`` words per beat (``bus_words`` for one lane), the
    sequence words (``2 H + steps X``) and the ``steps H`` results at ``bus_words``."""
    cfg = plan.cfg
    words = 5 * plan.hidden + plan.nnz + plan.cols + 1
    per = cfg.w_lanes if cfg.w_lanes > 1 else cfg.bus_words
    n = cfg.bus_words
    return {"s_axis_w": -(-words // per),
            "s_axis_x": -(-(2 * plan.hidden + steps * plan.inputs) // n),
            "m_axis_h": -(-steps * plan.hidden // n)}
