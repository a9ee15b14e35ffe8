"""Layer 1: MX formats (MXFP8 E4M3/E5M2 elements, E8M0 block scales) and low-precision GEMM ops.

- `quantize_mx` / `dequantize_mx` (blocks along the last dim), `quantize_mx_dim` /
  `dequantize_mx_dim` (blocks along any dim): `formats.py`, with the edge-case choices.
- `contract`, `round_operand`, `MXRecipe`, precisions "fp32" | "bf16" | "mxfp8": `gemm.py`.
- `linear` and `grouped_linear`, autograd ops whose forward and backward GEMMs each round their
  operands along the dimension they contract: `ops.py`.

- `triton_quantize.quantize_mx_triton`: the same quantization as one Triton kernel (blocks along
  any dim, one pass), which `quantize_mx` / `quantize_mx_dim` use for CUDA tensors.

The GEMMs run emulated (quantize → dequantize → float32 matmul) on every device today; an FP8
GEMM kernel slots in behind `gemm.contract` / the two ops without changing their signatures.
"""

from overture.mx.formats import (
    ELEMENT_FORMATS,
    ElementFormat,
    Scaling,
    dequantize_mx,
    dequantize_mx_dim,
    quantize_mx,
    quantize_mx_dim,
)
from overture.mx.gemm import DEFAULT_RECIPE, PRECISIONS, MXRecipe, Precision, contract, round_operand
from overture.mx.ops import grouped_linear, linear

__all__ = [
    "DEFAULT_RECIPE",
    "ELEMENT_FORMATS",
    "PRECISIONS",
    "ElementFormat",
    "MXRecipe",
    "Precision",
    "Scaling",
    "contract",
    "dequantize_mx",
    "dequantize_mx_dim",
    "grouped_linear",
    "linear",
    "quantize_mx",
    "quantize_mx_dim",
    "round_operand",
]
