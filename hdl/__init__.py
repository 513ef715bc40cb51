# SPDX-License-Identifier: Apache-2.0
"""Amaranth gateware of the spnn blocks (one block per module)."""
