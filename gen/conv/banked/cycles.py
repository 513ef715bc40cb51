# SPDX-License-Identifier: Apache-2.0
"""Exact cycle model of the banked MAC array (filled in below)."""

__all__ = []
