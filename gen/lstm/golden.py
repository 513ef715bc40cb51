# SPDX-License-Identifier: Apache-2.0
"""The LSTM layer's float reference and bit-exact golden model.

What the block computes
-----------------------
One PyTorch-style LSTM layer over a whole sequence (gate order i, f, g, o as in
``torch.nn.LSTM``).  With integer codes (formats in :class:`LstmConfig`) per step::

    acc_r  = sum_j W[r, j] * v_j  +  (b_r << (acc_frac - b_frac))      exact, no overflow
             v = [x_t, h_{t-1}],  W = [W_ih W_hh] (4H x (X + H)),  acc_frac = w_frac + x_frac
    pre_r  = requantise(acc_r, acc_frac, pre_fmt)                       round half up, saturate
    i, f, o = ref_pwl(pre, sigmoid table)       g = ref_pwl(pre, tanh table)    (act_fmt)
    c_t    = requantise(f * c_{t-1} << s1  +  i * g << s2,  F,  c_fmt)
             F = max(a + c_frac, 2a),  s1 = F - a - c_frac,  s2 = F - 2a,  a = act_frac
    h_t    = requantise(o * ref_pwl(c_t, tanh table over c_fmt), 2a, x_fmt)

``b = b_ih + b_hh`` (summed in float, then quantised to ``b_fmt``).  The accumulator
(``acc_width`` bits, derived) is wide enough that the sum is exact in any order, so
the hardware may add the products in whatever order its PEs finish them.
"""

import numpy as np

from gen.core.fixed import QFormat, check_codes, requantise
from gen.lstm.config import LstmConfig
from gen.lstm.weights import LstmFloat, LstmQuant
from gen.pwl import ref_pwl

__all__ = ["float_lstm", "ref_lstm"]


def _sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def float_lstm(model: LstmFloat, xs, h0=None, c0=None):
    """Float64 numpy LSTM (the equations of ``torch.nn.LSTM``): returns ``(h seq T x H, c_T)``."""
    xs = np.asarray(xs, dtype=np.float64)
    hid = model.hidden
    h = np.zeros(hid) if h0 is None else np.asarray(h0, dtype=np.float64)
    c = np.zeros(hid) if c0 is None else np.asarray(c0, dtype=np.float64)
    out = np.zeros((len(xs), hid))
    for t, x in enumerate(xs):
        z = model.w_ih @ x + model.w_hh @ h + model.b
        i, f, g, o = (z[k * hid:(k + 1) * hid] for k in range(4))
        c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
        h = _sigmoid(o) * np.tanh(c)
        out[t] = h
    return out, c


def _requantise_big(values, frac_bits: int, fmt: QFormat):
    """:func:`gen.core.fixed.requantise` (round half up, saturate) on Python integers: for sums
    wider than int64, held in object arrays; returns int64 codes of ``fmt``."""
    shift = frac_bits - fmt.frac_bits
    out = []
    for v in np.asarray(values, dtype=object).ravel():
        v = (int(v) + (1 << (shift - 1))) >> shift if shift > 0 else int(v) << -shift
        out.append(min(max(v, fmt.min_code), fmt.max_code))
    return np.array(out, dtype=np.int64)


def _cell_sum_width(cfg: LstmConfig) -> int:
    """Bits of the cell-update sum ``f*c << s1 + i*g << s2`` (the gateware's ``c_sum``)."""
    a = cfg.act_fmt.frac_bits
    s1, s2 = cfg.prod_frac - a - cfg.c_fmt.frac_bits, cfg.prod_frac - 2 * a
    aw, cw = cfg.act_fmt.width, cfg.c_fmt.width
    return max(cw + aw + s1, 2 * aw + s2) + 1


def ref_lstm(q: LstmQuant, xs, cfg: LstmConfig, h0=None, c0=None):
    """Golden model: input codes ``xs`` (T x X, ``x_fmt``), optional ``h0`` (``x_fmt``) and
    ``c0`` (``c_fmt``) codes -> ``(h codes T x H in x_fmt, c_T codes in c_fmt)``.

    The sums are exact: the accumulator and the cell update use Python integers when
    their width (``acc_width``, the gateware's cell sum) exceeds what int64 holds, as with
    wide formats such as a 32-bit bias with ``bias_shift`` 46."""
    hid, nx = q.hidden, q.inputs
    xs = check_codes(xs, cfg.x_fmt, "xs").reshape(-1, nx)
    h = np.zeros(hid, np.int64) if h0 is None else check_codes(h0, cfg.x_fmt, "h0").ravel()
    c = np.zeros(hid, np.int64) if c0 is None else check_codes(c0, cfg.c_fmt, "c0").ravel()
    tabs = cfg.tables()
    a = cfg.act_fmt.frac_bits
    F = cfg.prod_frac
    s1, s2 = F - a - cfg.c_fmt.frac_bits, F - 2 * a
    # (62 bits leave room for the rounding constant added in requantise)
    big_acc, big_cell = cfg.acc_width > 62, _cell_sum_width(cfg) > 62
    w = np.hstack([q.w_ih, q.w_hh]).astype(np.int64)
    bias = q.b.astype(np.int64)
    if big_acc:
        w, bias = w.astype(object), bias.astype(object)
    bias = bias << cfg.bias_shift
    out = np.zeros((len(xs), hid), np.int64)
    for t, x in enumerate(xs):
        v = np.concatenate([x, h])
        if big_acc:
            pre = _requantise_big(w @ v.astype(object) + bias, cfg.acc_frac, cfg.pre_fmt)
        else:
            pre = requantise(w @ v + bias, cfg.acc_frac, cfg.pre_fmt)
        gi, gf, gg, go = (pre[k * hid:(k + 1) * hid] for k in range(4))
        i, f, o = (ref_pwl(v, tabs["sigmoid"]) for v in (gi, gf, go))
        g = ref_pwl(gg, tabs["tanh"])
        if big_cell:
            big = [v.astype(object) for v in (f, c, i, g)]
            c = _requantise_big((big[0] * big[1] << s1) + (big[2] * big[3] << s2), F,
                                cfg.c_fmt)
        else:
            c = requantise((f * c << s1) + (i * g << s2), F, cfg.c_fmt)
        h = requantise(o * ref_pwl(c, tabs["tanh_c"]), 2 * a, cfg.x_fmt)
        out[t] = h
    return out, c
