"""Autograd ops for low-precision GEMMs: a linear layer and a grouped (per-expert) linear.

Both take high-precision inputs and weights (the float32 masters, or bfloat16), round each GEMM's
operands along the dimension that GEMM contracts (`gemm.contract`), and accumulate in float32.
For Y = X Wᵀ (X: M×K tokens, W: N×K):

| GEMM                 | operands                          | rounded along          |
|----------------------|-----------------------------------|------------------------|
| forward Y = X Wᵀ     | X (M×K), Wᵀ (K×N)                 | K                      |
| input grad dX = dY W | dY (M×N), W (N×K)                 | N                      |
| weight grad dW = dYᵀX| dYᵀ (N×M), X (M×K)                | M, the token dimension |

The backward re-rounds the saved high-precision X and W in the orientation each gradient GEMM
needs: a tensor quantized along one dim is not a tensor quantized along another. For the grouped
op the tokens of expert e form their own group: the weight-gradient operands are quantized per
group, each zero-padded to a whole number of blocks, so no block mixes two experts' tokens.

Under precision "fp32" `linear` is plain `F.linear`, bit for bit what the model computes without
this package, and `grouped_linear` is per-expert float32 matmuls (the model keeps its own
`torch._grouped_mm` path for fp32 and calls this op only for bf16 and mxfp8). A device
implementation replaces `gemm.contract` (and may fuse the per-group loop into one grouped
kernel) behind these same functions.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from overture.mx.gemm import DEFAULT_RECIPE, MXRecipe, Precision, check_precision, contract, round_operand


class _LowPrecisionLinear(torch.autograd.Function):
    """Y = X Wᵀ for X: M×K, W: N×K; the bias is added outside, in high precision."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, precision: Precision, recipe: MXRecipe):
        ctx.save_for_backward(x, weight)
        ctx.precision, ctx.recipe = precision, recipe
        return contract(x, weight.t(), precision, recipe).to(x.dtype)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        x, weight = ctx.saved_tensors
        grad_x = grad_weight = None
        if ctx.needs_input_grad[0]:
            grad_x = contract(grad, weight, ctx.precision, ctx.recipe, a_is_gradient=True).to(x.dtype)
        if ctx.needs_input_grad[1]:
            grad_weight = contract(grad.t(), x, ctx.precision, ctx.recipe, a_is_gradient=True)
            grad_weight = grad_weight.to(weight.dtype)
        return grad_x, grad_weight, None, None


def linear(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    precision: Precision = "fp32",
    recipe: MXRecipe = DEFAULT_RECIPE,
) -> torch.Tensor:
    """`F.linear(x, weight, bias)` with its three GEMMs (forward and both gradients) in `precision`.

    x: ...×K, weight: N×K, bias: N; leading dims of x are flattened into the token dimension M.
    """
    check_precision(precision)
    if precision == "fp32":
        return F.linear(x, weight, bias)
    out = _LowPrecisionLinear.apply(x.reshape(-1, x.shape[-1]), weight, precision, recipe)
    out = out.reshape(*x.shape[:-1], weight.shape[0])
    return out if bias is None else out + bias


class _LowPrecisionGroupedLinear(torch.autograd.Function):
    """Rows of x sorted by group (`counts[e]` rows for group e) times weight[e]ᵀ (weight: E×N×K).

    Operands whose blocks run along K or N (a row of x or dY, a row or column of one expert's
    weight) never span two groups, so they are rounded once for all groups; the weight gradient's
    operands are blocked along the tokens and are rounded group by group (`contract` pads each).
    """

    @staticmethod
    def forward(
        ctx,
        x: torch.Tensor,
        weight: torch.Tensor,
        counts: tuple[int, ...],
        precision: Precision,
        recipe: MXRecipe,
    ):
        ctx.save_for_backward(x, weight)
        ctx.counts, ctx.precision, ctx.recipe = counts, precision, recipe
        rows = round_operand(x, 1, precision, recipe).split(counts)  # along K
        weights = round_operand(weight, 2, precision, recipe).unbind(0)  # along K
        return torch.cat([r @ w.t() for r, w in zip(rows, weights, strict=True)]).to(x.dtype)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        x, weight = ctx.saved_tensors
        counts, precision, recipe = ctx.counts, ctx.precision, ctx.recipe
        grad_x = grad_weight = None
        if ctx.needs_input_grad[0]:
            grads = round_operand(grad, 1, precision, recipe, gradient=True).split(counts)  # along N
            weights = round_operand(weight, 1, precision, recipe).unbind(0)  # along N
            grad_x = torch.cat([g @ w for g, w in zip(grads, weights, strict=True)]).to(x.dtype)
        if ctx.needs_input_grad[1]:
            # One contraction per group over its own tokens: blocks never cross experts.
            pieces = [
                contract(g.t(), rows, precision, recipe, a_is_gradient=True)
                for g, rows in zip(grad.split(counts), x.split(counts), strict=True)
            ]
            grad_weight = torch.stack(pieces).to(weight.dtype)
        return grad_x, grad_weight, None, None, None


def grouped_linear(
    x: torch.Tensor,
    weight: torch.Tensor,
    counts: Sequence[int] | torch.Tensor,
    precision: Precision = "fp32",
    recipe: MXRecipe = DEFAULT_RECIPE,
) -> torch.Tensor:
    """Per-group linear: the first counts[0] rows of x (M×K) times weight[0]ᵀ, the next counts[1]
    rows times weight[1]ᵀ, ... (weight: E×N×K, the orientation of nn.Linear); returns M×N."""
    check_precision(precision)
    counts = tuple(int(c) for c in (counts.tolist() if isinstance(counts, torch.Tensor) else counts))
    if len(counts) != weight.shape[0] or sum(counts) != x.shape[0]:
        raise ValueError(
            f"grouped_linear: counts {list(counts)} do not split {x.shape[0]} rows over "
            f"{weight.shape[0]} groups"
        )
    return _LowPrecisionGroupedLinear.apply(x, weight, counts, precision, recipe)
