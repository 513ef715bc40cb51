# SPDX-License-Identifier: Apache-2.0
"""Gateware shared by the blocks: skid buffer, fixed-point arithmetic helpers."""
