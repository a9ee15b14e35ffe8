"""Per-token log-probabilities and entropies of the policy, from its logits.

The policy at temperature 1: log_softmax of the logits in (at least) float32, so that a
bfloat16 model's logprobs are comparable with the engine's. Targets are already shifted:
the logits at position t are scored against the token at t + 1 (see `batching.py`).
"""

from __future__ import annotations

import torch


def _at_least_float32(logits: torch.Tensor) -> torch.Tensor:
    # float64 stays float64 so that finite-difference checks run at full precision.
    return logits.to(torch.promote_types(logits.dtype, torch.float32))


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """log π(target | prefix) for every position: logits ...×V, targets ... → ... (float32+)."""
    if logits.shape[:-1] != targets.shape:
        raise ValueError(f"logits {tuple(logits.shape)} do not match targets {tuple(targets.shape)}")
    logprobs = torch.log_softmax(_at_least_float32(logits), dim=-1)
    return logprobs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)


@torch.no_grad()
def token_entropy(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of the next-token distribution at every position (logged, never trained on)."""
    logprobs = torch.log_softmax(_at_least_float32(logits), dim=-1)
    return -(logprobs.exp() * logprobs).sum(-1)
