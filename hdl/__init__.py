# SPDX-License-Identifier: Apache-2.0
"""Amaranth gateware of the spnn blocks: one package per block (``hdl/<block>/``, whose
``GATEWARE`` builds the top-level component) and shared pieces in ``hdl/lib/``."""
