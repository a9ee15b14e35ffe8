"""Cross-entropy of an LM head's logits, computed a chunk of positions at a time.

`linear_cross_entropy(hidden, weight, targets)` is `F.cross_entropy(hidden @ weight.T, targets,
reduction="sum")` without the N×V logits. Next-token training on every position (the main job's
language-model warm-up: 8 windows of 1,024 tokens, vocabulary 4,096) otherwise writes, reads and
differentiates a 134 MB logits tensor and its log-softmax in each step; chunked, that step runs
1.2× as fast on a CPU (`benchmarks/model_forward.py`). Each chunk of rows makes its logits, takes
their log-sum-exp and, when gradients are wanted, turns the logits in place into the loss's
gradient with respect to them (softmax minus one-hot), and from that the gradients of `hidden`
and `weight`, before the next chunk reuses the memory. The forward pass thus does the
backward's work; `backward` only scales the stored gradients by the incoming one, which is exact
because the loss is a plain sum (the approach of Liger Kernel's fused linear cross-entropy,
arXiv 2410.10989).
"""

from __future__ import annotations

import torch

# Rows per chunk: 256 rows of a 4,096-token vocabulary are 4 MB of float32 logits, which stay in
# cache between the matmul, the softmax and the two gradient matmuls (256-1,024 measured alike).
CHUNK_ROWS = 256


class _LinearCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden, weight, targets, chunk_rows):
        want_hidden, want_weight = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        grad_hidden = torch.empty_like(hidden) if want_hidden else None
        # float32 at least (float64 stays float64, for finite-difference checks)
        dtype = torch.promote_types(torch.promote_types(hidden.dtype, weight.dtype), torch.float32)
        grad_weight = torch.zeros_like(weight, dtype=dtype) if want_weight else None
        total = torch.zeros((), dtype=dtype, device=hidden.device)
        weight_up = weight.to(dtype)
        for start in range(0, hidden.shape[0], chunk_rows):
            rows = hidden[start : start + chunk_rows].to(dtype)
            chunk_targets = targets[start : start + chunk_rows]
            logits = rows @ weight_up.t()
            log_normalizer = torch.logsumexp(logits, dim=-1)
            target_logits = logits.gather(1, chunk_targets[:, None]).squeeze(1)
            total += (log_normalizer - target_logits).sum()
            if grad_hidden is None and grad_weight is None:
                continue
            # d loss / d logits = softmax - one-hot, written over the logits.
            grad_logits = logits.sub_(log_normalizer[:, None]).exp_()
            grad_logits[torch.arange(grad_logits.shape[0], device=grad_logits.device), chunk_targets] -= 1.0
            if grad_hidden is not None:
                grad_hidden[start : start + chunk_rows] = grad_logits @ weight_up
            if grad_weight is not None:
                grad_weight.addmm_(grad_logits.t(), rows)
        ctx.save_for_backward(grad_hidden, grad_weight)
        ctx.weight_dtype = weight.dtype
        return total

    @staticmethod
    def backward(ctx, grad_total):
        grad_hidden, grad_weight = ctx.saved_tensors
        return (
            grad_hidden * grad_total.to(grad_hidden.dtype) if grad_hidden is not None else None,
            (grad_weight * grad_total).to(ctx.weight_dtype) if grad_weight is not None else None,
            None,
            None,
        )


def linear_cross_entropy(
    hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, chunk_rows: int = CHUNK_ROWS
) -> torch.Tensor:
    """Σ over the N rows of −log softmax(hidden @ weight.T)[target], in float32 or wider: hidden N×H,
    weight V×H (an LM head's), targets N token ids. Differentiable in `hidden` and `weight`, to
    first order (the gradients are computed by the forward pass)."""
    if hidden.dim() != 2 or weight.dim() != 2 or hidden.shape[1] != weight.shape[1]:
        raise ValueError(f"hidden {tuple(hidden.shape)} and weight {tuple(weight.shape)} are not N×H and V×H")
    if targets.shape != hidden.shape[:1]:
        raise ValueError(f"targets {tuple(targets.shape)} do not match hidden {tuple(hidden.shape)}")
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows must be >= 1, got {chunk_rows}")
    if targets.numel():
        low, high = (int(bound) for bound in torch.aminmax(targets))
        if not 0 <= low <= high < weight.shape[0]:
            raise ValueError(f"targets must be token ids in [0, {weight.shape[0]}), got {low}..{high}")
    return _LinearCrossEntropy.apply(hidden, weight, targets, chunk_rows)
