# SPDX-License-Identifier: Apache-2.0
"""Shared by every block: fixed point, config parsing and errors, command-line rules,
outputs, stimulus patterns, the simulation runner and cocotb bench, Verilog emission,
waveform traces and the block contract."""
