# SPDX-License-Identifier: Apache-2.0
"""spnn generators: fixed-point core, golden models, table fitting, compilers, CLI."""
