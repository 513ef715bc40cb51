# SPDX-License-Identifier: Apache-2.0
"""spnn generators: one package per block (``gen/<block>/``: config, golden and cycle models,
RTL twin, CLI command, block contract), shared pieces in ``gen/core/``, the block registry
(:mod:`gen.registry`), the CLI (:mod:`gen.cli`) and synthesis (:mod:`gen.synth`)."""
