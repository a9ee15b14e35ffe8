"""Per-token log-probabilities and entropies of the policy, from its logits.

log_softmax(logits / temperature) in (at least) float32, so that a bfloat16 model's logprobs
are comparable with the engine's. Temperature 1 (the default) is the model's own distribution,
what SFT trains; RL scores its samples under the tempered distribution the engine sampled them
from and reported logprobs of (`overture.engine.params.SamplingParams`), so that importance
ratios compare like with like, as verl's actor does by dividing the logits by the rollout
temperature. Targets are already shifted: the logits at position t are scored against the token
at t + 1 (see `batching.py`).
"""

from __future__ import annotations

import torch


def _tempered_log_softmax(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature!r}")
    # float64 stays float64 so that finite-difference checks run at full precision.
    logits = logits.to(torch.promote_types(logits.dtype, torch.float32))
    return torch.log_softmax(logits if temperature == 1 else logits / temperature, dim=-1)


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """log π(target | prefix) for every position: logits ...×V, targets ... → ... (float32+)."""
    if logits.shape[:-1] != targets.shape:
        raise ValueError(f"logits {tuple(logits.shape)} do not match targets {tuple(targets.shape)}")
    logprobs = _tempered_log_softmax(logits, temperature)
    return logprobs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)


@torch.no_grad()
def token_entropy(logits: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Entropy of the next-token distribution at every position (logged, never trained on)."""
    logprobs = _tempered_log_softmax(logits, temperature)
    return -(logprobs.exp() * logprobs).sum(-1)
