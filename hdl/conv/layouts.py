# SPDX-License-Identifier: Apache-2.0
"""Layouts shared by the conv array's issue-side components (:mod:`hdl.conv.issue`,
:mod:`hdl.conv.copy`, :mod:`hdl.conv.columns`)."""

from amaranth.lib import data

from gen.conv import ConvConfig, descriptor_fields

__all__ = ["PASS_FIELDS", "pass_regs_layout", "ISSUE_CONSTS"]

# per-pass descriptor fields the array keeps in registers while the pass runs
PASS_FIELDS = ("r", "n", "count", "tiles", "noc", "ns", "wvn", "wvns", "a", "as", "aswp",
               "bn", "bns", "ai", "aiis")


def pass_regs_layout(cfg: ConvConfig) -> data.StructLayout:
    """The pass registers: the fields :data:`PASS_FIELDS` of the running pass, each as wide
    as the descriptor's field of pass 0 (``p0_<field>``)."""
    fw = dict(descriptor_fields(cfg))
    return data.StructLayout({f: fw[f"p0_{f}"] for f in PASS_FIELDS})


# Chunk and pass constants the issue control registers for the copies' counters: kq1
# (kq == 1), iccz (one input channel), iccm0 (two), iccm1 (icc - 3), tiles1 / tiles_is2 /
# tiles3 (tiles == 1, == 2, tiles - 3), count1 / count_is2 / count3 (blocks likewise), and
# the start values of the next copy to start: sgs (feature offset, g * stride), sgoc (output
# offset, g * oc), wpass / cbpass (weight / output block offsets of the pass).
ISSUE_CONSTS = data.StructLayout({
    "kq1": 1, "iccz": 1, "iccm0": 1, "iccm1": 16,
    "tiles1": 1, "tiles_is2": 1, "tiles3": 24, "count1": 1, "count_is2": 1, "count3": 16,
    "sgs": 16, "sgoc": 24, "wpass": 24, "cbpass": 16,
})
