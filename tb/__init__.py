# SPDX-License-Identifier: Apache-2.0
"""cocotb testbenches, their stream helpers and pytest runners."""
