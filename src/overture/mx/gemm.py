"""The one GEMM primitive the quantized ops are built from, and how each precision rounds its operands.

`contract(a, b, ...)` computes a (M×K) @ b (K×N) with each operand rounded *along K*, the
dimension the GEMM sums over: a along its last dim, b along its first. Every GEMM of a linear
layer's forward and backward is this primitive with different operands (see `ops.py`), so the
orientation rule lives in one place, and a device kernel (an MX tensor-core GEMM on sm_100, or a
fused quantize + FP8 GEMM elsewhere) replaces this one function without touching the autograd ops.

Here the GEMM is emulated: each operand is quantized and dequantized back to float32, then
multiplied in float32. A real MX GEMM multiplies the same element values by the same power-of-two
scales and accumulates in float32, so the emulation computes what it computes up to the order of
the float32 additions.

Precisions:
- "fp32": operands as they are (float32 GEMM).
- "bf16": operands rounded to bfloat16 (round to nearest even), float32 accumulation.
- "mxfp8": operands in MX blocks of `MXRecipe.block_size` along K. When K is not a multiple of the
  block size, the operand is padded with zeros along K first: zeros change neither a block's
  amax nor the products, so this equals a partial last block.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

import torch
import torch.nn.functional as F

from overture.mx.formats import Scaling, dequantize_mx_dim, element_format, quantize_mx_dim

Precision = Literal["fp32", "bf16", "mxfp8"]
PRECISIONS: tuple[str, ...] = get_args(Precision)


@dataclass(frozen=True)
class MXRecipe:
    """How "mxfp8" quantizes: block size, element types (activations and weights; gradients), scale rule.

    Defaults: E4M3 everywhere (block scales leave gradients enough range; torchao's MX training
    recipe does the same) and RCEIL, the rule MX hardware applies, which never saturates a block.
    """

    block_size: int = 32
    elem_dtype: torch.dtype = torch.float8_e4m3fn
    grad_elem_dtype: torch.dtype = torch.float8_e4m3fn
    scaling: Scaling = "rceil"

    def __post_init__(self) -> None:
        element_format(self.elem_dtype)
        element_format(self.grad_elem_dtype)
        if self.block_size <= 0:
            raise ValueError(f"MXRecipe.block_size must be positive, got {self.block_size}")


DEFAULT_RECIPE = MXRecipe()


def check_precision(precision: str) -> None:
    if precision not in PRECISIONS:
        raise ValueError(f"precision {precision!r} is not one of {', '.join(PRECISIONS)}")


def mx_round_trip(
    x: torch.Tensor, dim: int, block_size: int, elem_dtype: torch.dtype, scaling: Scaling
) -> torch.Tensor:
    """`x` quantized in MX blocks along `dim` and dequantized to float32 (zero-padded to whole blocks)."""
    dim = dim % x.ndim
    size = x.shape[dim]
    padding = -size % block_size
    if padding:
        # F.pad lists (left, right) pairs from the last dim backwards.
        x = F.pad(x, [0, 0] * (x.ndim - 1 - dim) + [0, padding])
    qdata, scale = quantize_mx_dim(x, dim, block_size, elem_dtype, scaling)
    return dequantize_mx_dim(qdata, scale, dim, block_size).narrow(dim, 0, size)


def round_operand(
    x: torch.Tensor, dim: int, precision: Precision, recipe: MXRecipe = DEFAULT_RECIPE, gradient: bool = False
) -> torch.Tensor:
    """`x` as a GEMM contracting over `dim` sees it under `precision`, in float32.

    `gradient` picks the recipe's gradient element type (for dY operands).
    """
    if precision == "fp32":
        return x.float()
    if precision == "bf16":
        return x.to(torch.bfloat16).float()
    check_precision(precision)
    elem = recipe.grad_elem_dtype if gradient else recipe.elem_dtype
    return mx_round_trip(x, dim, recipe.block_size, elem, recipe.scaling)


def contract(
    a: torch.Tensor,
    b: torch.Tensor,
    precision: Precision,
    recipe: MXRecipe = DEFAULT_RECIPE,
    a_is_gradient: bool = False,
) -> torch.Tensor:
    """a (M×K) @ b (K×N) in float32, each operand rounded along K (a's dim 1, b's dim 0)."""
    return round_operand(a, 1, precision, recipe, a_is_gradient) @ round_operand(b, 0, precision, recipe)
