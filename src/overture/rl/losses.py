"""The RL objective: decoupled PPO over behavior, proximal and current policies.

Per trained token t with advantage A (formulas from `reference/async-rl.md`, AReaL's decoupled
PPO and Yao et al.'s importance-sampling fixes):

    r_t   = π_θ(t) / π_prox(t)                                   (the PPO ratio)
    s_t   = -min(r_t · A, clip(r_t, 1 - clip_low, 1 + clip_high) · A)   (clip-higher surrogate)
    w_t   = π_prox(t) / π_behav(t)      per token, or per sequence: Π over the sequence's tokens
    TIS:  w'_t = min(w_t, C)           MIS: w'_t = w_t if 1/C <= w_t <= C else 0 (token dropped)
    kl_t  = exp(q) - q - 1,  q = log π_ref(t) - log π_θ(t)       (k3 estimator)
    loss  = Σ_t g_t · (w'_t · s_t + kl_coef · kl_t)

`g_t` is the aggregation weight of the token (`aggregation_weights`): 1/N for the token mean,
1/(S·n_i) for the sequence mean of token means, 1/(S·C) for Dr. GRPO's constant normaliser.
Because g is fixed for the whole optimizer step, summing the loss over micro-batches gives
exactly the loss of the whole batch. The behavior weight is a constant (no gradient flows
through π_prox or π_behav).

Every function takes 1-D tensors over the trained tokens of a micro-batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from overture.config import RLConfig

# exp() of a sequence's summed log-weight overflows long before it matters: any weight past
# this is beyond every sensible bound C, so clamping the exponent changes no result.
MAX_LOG_WEIGHT = 30.0


@dataclass
class PolicyLossInputs:
    """Per trained token: current logprobs (with grad) and the constants the loss needs."""

    logprobs: torch.Tensor
    behavior_logprobs: torch.Tensor
    advantages: torch.Tensor
    weights: torch.Tensor  # aggregation weight g_t
    sequence_ids: torch.Tensor  # which sequence each token belongs to (for sequence-level IS)
    proximal_logprobs: torch.Tensor | None = None  # None: the current policy, detached
    reference_logprobs: torch.Tensor | None = None  # needed when kl_coef > 0

    def __post_init__(self) -> None:
        shape = self.logprobs.shape
        named = {
            "behavior_logprobs": self.behavior_logprobs,
            "advantages": self.advantages,
            "weights": self.weights,
            "sequence_ids": self.sequence_ids,
            "proximal_logprobs": self.proximal_logprobs,
            "reference_logprobs": self.reference_logprobs,
        }
        for name, value in named.items():
            if value is not None and value.shape != shape:
                raise ValueError(f"{name} has shape {tuple(value.shape)}, logprobs {tuple(shape)}")


def aggregation_weights(token_counts: Sequence[int], method: str, constant: int) -> list[float]:
    """The per-token weight g of each sequence's tokens, given each sequence's trained-token count.

    Sequences without trained tokens (e.g. masked-out truncations) do not count in S.
    """
    counted = [n for n in token_counts if n > 0]
    if not counted:
        return [0.0] * len(token_counts)
    if method == "token_mean":
        return [1.0 / sum(counted)] * len(token_counts)
    if method == "seq_mean_token_mean":
        return [1.0 / (len(counted) * n) if n else 0.0 for n in token_counts]
    if method == "constant":
        return [1.0 / (len(counted) * constant)] * len(token_counts)
    raise ValueError(f"unknown loss aggregation {method!r}")


def behavior_weights(
    proximal: torch.Tensor, behavior: torch.Tensor, sequence_ids: torch.Tensor, rl: RLConfig
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(raw weight w, corrected weight w', kept mask) per token; no gradient."""
    log_weight = (proximal - behavior).detach()
    if rl.is_level == "sequence":
        per_sequence = torch.zeros(int(sequence_ids.max()) + 1 if sequence_ids.numel() else 0).to(log_weight)
        per_sequence.index_add_(0, sequence_ids, log_weight)
        log_weight = per_sequence[sequence_ids]
    raw = log_weight.clamp(max=MAX_LOG_WEIGHT).exp()
    bound = rl.is_bound
    if rl.is_correction == "tis":
        return raw, raw.clamp(max=bound), torch.ones_like(raw, dtype=torch.bool)
    if rl.is_correction == "mis":
        kept = (raw >= 1.0 / bound) & (raw <= bound)
        return raw, torch.where(kept, raw, torch.zeros_like(raw)), kept
    return raw, torch.ones_like(raw), torch.ones_like(raw, dtype=torch.bool)


def clipped_surrogate(
    logprobs: torch.Tensor, proximal: torch.Tensor, advantages: torch.Tensor, rl: RLConfig
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(per-token surrogate loss s, ratio r, clipped-below mask, clipped-above mask)."""
    ratio = torch.exp(logprobs - proximal.detach())
    clipped_ratio = ratio.clamp(1.0 - rl.clip_low, 1.0 + rl.clip_high)
    surrogate = -torch.minimum(ratio * advantages, clipped_ratio * advantages)
    # The clipped branch is the active one (and has no gradient) exactly here:
    above = (advantages > 0) & (ratio > 1.0 + rl.clip_high)
    below = (advantages < 0) & (ratio < 1.0 - rl.clip_low)
    return surrogate, ratio.detach(), below, above


def k3_kl(logprobs: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """Schulman's k3 estimate of KL(π_θ ‖ π_ref) per token: exp(q) - q - 1, q = ref - current."""
    q = reference.detach() - logprobs
    return torch.exp(q) - q - 1.0


def policy_loss(inputs: PolicyLossInputs, rl: RLConfig) -> tuple[torch.Tensor, dict[str, float]]:
    """The weighted loss of one micro-batch and its statistics as sums (see `merge_stats`)."""
    proximal = inputs.proximal_logprobs if inputs.proximal_logprobs is not None else inputs.logprobs
    surrogate, ratio, below, above = clipped_surrogate(inputs.logprobs, proximal, inputs.advantages, rl)
    raw_weight, weight, kept = behavior_weights(proximal, inputs.behavior_logprobs, inputs.sequence_ids, rl)
    pg_loss = (inputs.weights * weight * surrogate).sum()
    loss = pg_loss
    stats = {
        "tokens": float(inputs.logprobs.numel()),
        "pg_loss": pg_loss.item(),
        "ratio_sum": ratio.sum().item(),
        "ratio_max": ratio.max().item() if ratio.numel() else 1.0,
        "clipped_low": below.sum().item(),
        "clipped_high": above.sum().item(),
        "is_weight_sum": raw_weight.sum().item(),
        "is_weight_max": raw_weight.max().item() if raw_weight.numel() else 1.0,
        "is_weight_min": raw_weight.min().item() if raw_weight.numel() else 1.0,
        "is_truncated": (raw_weight > rl.is_bound).sum().item() if rl.is_correction == "tis" else 0.0,
        "is_masked": (~kept).sum().item(),
    }
    if rl.kl_coef > 0:
        if inputs.reference_logprobs is None:
            raise ValueError("rl.kl_coef > 0 needs reference logprobs")
        kl = k3_kl(inputs.logprobs, inputs.reference_logprobs)
        kl_loss = (inputs.weights * kl).sum()
        loss = loss + rl.kl_coef * kl_loss
        stats["kl_loss"] = kl_loss.item()
        stats["kl_sum"] = kl.detach().sum().item()
    return loss, stats


def merge_stats(total: dict[str, float], part: dict[str, float]) -> dict[str, float]:
    """Combine the statistics of two micro-batches: maxima by max, minima by min, the rest summed."""
    for key, value in part.items():
        if key not in total:
            total[key] = value
        elif key.endswith("_max"):
            total[key] = max(total[key], value)
        elif key.endswith("_min"):
            total[key] = min(total[key], value)
        else:
            total[key] += value
    return total


def summarize_stats(total: dict[str, float]) -> dict[str, float]:
    """Sums over a step → the logged metrics (fractions and means over trained tokens)."""
    tokens = max(total.get("tokens", 0.0), 1.0)
    summary = {
        "pg_loss": total.get("pg_loss", 0.0),
        "ratio_mean": total.get("ratio_sum", tokens) / tokens,
        "ratio_max": total.get("ratio_max", 1.0),
        "clip_frac_low": total.get("clipped_low", 0.0) / tokens,
        "clip_frac_high": total.get("clipped_high", 0.0) / tokens,
        "is_weight_mean": total.get("is_weight_sum", tokens) / tokens,
        "is_weight_max": total.get("is_weight_max", 1.0),
        "is_weight_min": total.get("is_weight_min", 1.0),
        "is_truncated_frac": total.get("is_truncated", 0.0) / tokens,
        "is_masked_frac": total.get("is_masked", 0.0) / tokens,
        "trained_tokens": total.get("tokens", 0.0),
    }
    if "kl_sum" in total:
        summary["kl"] = total["kl_sum"] / tokens
        summary["kl_loss"] = total["kl_loss"]
    return summary
