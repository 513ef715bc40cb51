# SPDX-License-Identifier: Apache-2.0
"""Benchmarks and tool flows; run each as ``python -m scripts.<name>`` from the repository."""
