# SPDX-License-Identifier: Apache-2.0
"""The LSTM engine's input streams: a compiled layer as ``w`` words and a sequence as
``x`` words.

Streams (see :class:`hdl.lstm.LstmEngine`)
------------------------------------------
``w`` words ``{value, idx, pe, kind}``: ROW (rowmap of unit k: pe, idx = local),
BIAS (pe, idx = gate << lbits | local, value = bias code), per column ENTRY words then
one COL word (columns: ``X`` inputs then the ``R * P`` h slots), END.
``x`` words ``{value, kind}``: per sequence ``H`` words H0 (``h_0``, ``x_fmt``, original
order), ``H`` words C0 (``c_0``, ``c_fmt``), then ``T * X`` words X.  ``o``: ``h_t``
codes (``x_fmt``), ``H`` per step in original order.
"""

import numpy as np

from gen.lstm.compile import LstmPlan
from gen.lstm.config import (KIND_BIAS, KIND_COL, KIND_END, KIND_ENTRY, KIND_ROW, XK_C0, XK_H0,
                             XK_X, LstmConfig)

__all__ = ["weight_words", "seq_words", "pack_word"]


def _u(v, width):
    return int(v) & ((1 << width) - 1)


def pack_word(kind, pe, idx, value, cfg: LstmConfig) -> int:
    vw = cfg.wv_width
    return (_u(value, vw) | (int(idx) << vw) | (int(pe) << (vw + cfg.idx_bits))
            | (int(kind) << (vw + cfg.idx_bits + cfg.pe_bits)))


def weight_words(plan: LstmPlan) -> list:
    """The weight stream: ROW x H, BIAS x 4H, per column (ENTRY* COL), END."""
    cfg = plan.cfg
    lb = cfg.lbits
    words = [pack_word(KIND_ROW, pe, loc, 0, cfg)
             for pe, loc in zip(plan.unit_pe, plan.unit_local)]
    for k in range(plan.hidden):
        pe, loc = plan.unit_pe[k], plan.unit_local[k]
        for g in range(4):
            words.append(pack_word(KIND_BIAS, pe, (g << lb) | loc, plan.bias[pe, g, loc], cfg))
    pos = [0] * cfg.pes
    for j in range(plan.cols):
        for p in range(cfg.pes):
            for _ in range(plan.counts[p, j]):
                wv, row = plan.entries[p][pos[p]]
                words.append(pack_word(KIND_ENTRY, p, row, wv, cfg))
                pos[p] += 1
        words.append(pack_word(KIND_COL, 0, 0, 0, cfg))
    words.append(pack_word(KIND_END, 0, 0, 0, cfg))
    return words


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
