# SPDX-License-Identifier: Apache-2.0
"""Whole networks: an ONNX model as a layer graph (:mod:`gen.model.graph`), its float
reference (:mod:`gen.model.reference`) and its plan onto the blocks
(:mod:`gen.model.compile`, ``spnn compile``)."""

from gen.model.compile import SPMV_DENSITY, choose_format, compile_model, plan_table
from gen.model.graph import SUPPORTED, Graph, Layer, load_onnx
from gen.model.reference import conv2d, pool2d, run_float

__all__ = ["Graph", "Layer", "load_onnx", "SUPPORTED", "run_float", "conv2d", "pool2d",
           "compile_model", "choose_format", "plan_table", "SPMV_DENSITY"]
