"""Group-relative advantage estimators: GRPO, Dr. GRPO and RLOO, and zero-signal groups.

Rewards come in consecutive groups of `group_size` rollouts of the same prompt
(`rewards[g * group_size : (g + 1) * group_size]` is group g). Formulas from
`reference/async-rl.md` ("Advantage estimators"):

- GRPO:     A_i = (r_i - mean(r)) / (std(r) + eps), std the population std of the group
- Dr. GRPO: A_i = r_i - mean(r)
- RLOO:     A_i = r_i - mean of the other G - 1 rewards  (= G / (G - 1) · (r_i - mean(r)))

A group whose rewards are all equal carries no signal (every advantage is 0 under all three);
DAPO's dynamic sampling drops such groups, which `zero_signal_groups` finds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch

AdvantageMethod = Literal["grpo", "drgrpo", "rloo"]
GRPO_EPS = 1e-6


def grouped_rewards(rewards: Sequence[float] | torch.Tensor, group_size: int) -> torch.Tensor:
    """Rewards as a float64 G×group_size tensor; a count that does not split into groups is an error."""
    values = torch.as_tensor(rewards, dtype=torch.float64).flatten()
    if group_size < 2:
        raise ValueError(f"group_size must be at least 2 for group-relative advantages, got {group_size}")
    if values.numel() == 0 or values.numel() % group_size:
        raise ValueError(
            f"{values.numel()} rewards do not split into whole groups of group_size={group_size}"
        )
    if not torch.isfinite(values).all():
        raise ValueError(f"rewards must be finite, got {values.tolist()}")
    return values.view(-1, group_size)


def compute_advantages(
    rewards: Sequence[float] | torch.Tensor, group_size: int, method: AdvantageMethod = "grpo"
) -> torch.Tensor:
    """One advantage per reward (float32, same order), relative to its group of `group_size`."""
    groups = grouped_rewards(rewards, group_size)
    centred = groups - groups.mean(dim=1, keepdim=True)
    if method == "grpo":
        advantages = centred / (groups.std(dim=1, unbiased=False, keepdim=True) + GRPO_EPS)
    elif method == "drgrpo":
        advantages = centred
    elif method == "rloo":
        advantages = centred * group_size / (group_size - 1)
    else:
        raise ValueError(f"unknown advantage method {method!r}; expected 'grpo', 'drgrpo' or 'rloo'")
    return advantages.flatten().to(torch.float32)


def zero_signal_groups(rewards: Sequence[float] | torch.Tensor, group_size: int) -> torch.Tensor:
    """Boolean per group: True where every reward of the group is equal (no learning signal)."""
    groups = grouped_rewards(rewards, group_size)
    return (groups == groups[:, :1]).all(dim=1)
