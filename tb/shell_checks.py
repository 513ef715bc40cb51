# SPDX-License-Identifier: Apache-2.0
"""Checks shared by the accelerator shells' tests (tb/<block>/test_shell.py)."""

__all__ = ["assert_cleared_by_reset"]


def assert_cleared_by_reset(cut: dict) -> None:
    """A job cut by ``aresetn`` (:mod:`gen.core.cocotb_axi`, ``reset_after``) began (some
    input beats went in) and left the registers at their reset values: STATUS idle, no
    interrupt pending, every performance counter 0."""
    assert cut["reset"]
    assert cut["beats_in"] > 0, "the reset came before the job's first input beat"
    assert (cut["status"], cut["irq"], cut["irq_status"]) == (0, 0, 0)
    assert cut["counters"] == {"cycles": 0, "busy": 0, "stall_in": 0, "stall_out": 0}
