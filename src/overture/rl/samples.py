"""What the trainer trains on: trajectories (DESIGN.md's record) and the samples made from them.

A `Trajectory` is one episode as the agent loop records it; its per-token lists are aligned
with `token_ids` (as `overture.text.Conversation` keeps them): `loss_mask` 1 where the policy
produced the token, `behavior_logprobs` the engine's logprob of each policy token (0.0
elsewhere), `versions` the policy version that produced it (-1 elsewhere).

`samples_from_trajectories` turns a batch of whole groups into `TrainingSample`s: advantages
per group (`advantages.py`), zero-signal groups counted and optionally dropped, trajectories
cut by a limit (`truncated`) masked out of the loss when `rl.mask_truncated` is set.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from overture.config import RLConfig
from overture.rl.advantages import compute_advantages, zero_signal_groups
from overture.text import Conversation

Status = Literal["finished", "truncated", "aborted", "failed"]
STATUSES = ("finished", "truncated", "aborted", "failed")


@dataclass
class Trajectory:
    """One episode (the fields of DESIGN.md's Trajectory record that training reads, and more)."""

    token_ids: list[int]
    loss_mask: list[int]
    behavior_logprobs: list[float]
    versions: list[int]
    reward: float = 0.0
    status: Status = "finished"
    task_id: str = ""
    group_id: str = ""
    reward_info: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_aligned(self.token_ids, self.loss_mask, self.behavior_logprobs, self.versions, self.task_id)
        if self.status not in STATUSES:
            raise ValueError(
                f"trajectory {self.task_id!r}: unknown status {self.status!r}, expected {STATUSES}"
            )

    @classmethod
    def from_conversation(cls, conversation: Conversation, reward: float, **fields: Any) -> Trajectory:
        """The per-token lists of a token-level conversation, as the agent loop will record them."""
        return cls(
            token_ids=list(conversation.token_ids),
            loss_mask=list(conversation.loss_mask),
            behavior_logprobs=list(conversation.logprobs),
            versions=list(conversation.versions),
            reward=reward,
            **fields,
        )


@dataclass
class TrainingSample:
    """One sequence ready for the trainer: tokens, loss mask, behavior logprobs, one advantage.

    `behavior_logprobs` and `versions` may be None for supervised data (no behavior policy).
    """

    token_ids: list[int]
    loss_mask: list[int]
    behavior_logprobs: list[float] | None = None
    versions: list[int] | None = None
    advantage: float = 0.0
    name: str = ""

    def __post_init__(self) -> None:
        check_aligned(self.token_ids, self.loss_mask, self.behavior_logprobs, self.versions, self.name)

    @property
    def trained_tokens(self) -> int:
        """Tokens the loss sees: policy tokens after the first (token 0 has no prefix to predict it)."""
        return sum(self.loss_mask[1:])


def check_aligned(
    token_ids: Sequence[int],
    loss_mask: Sequence[int],
    logprobs: Sequence[float] | None,
    versions: Sequence[int] | None,
    name: str = "",
) -> None:
    """Raise a ValueError naming the list whose length differs from token_ids (or a bad mask)."""
    label = f"sequence {name!r}" if name else "sequence"
    if len(token_ids) < 2:
        raise ValueError(f"{label}: needs at least 2 tokens to train on, got {len(token_ids)}")
    lengths = {"loss_mask": loss_mask, "behavior_logprobs": logprobs, "versions": versions}
    for key, values in lengths.items():
        if values is not None and len(values) != len(token_ids):
            raise ValueError(f"{label}: {key} has {len(values)} entries but token_ids has {len(token_ids)}")
    if any(m not in (0, 1) for m in loss_mask):
        raise ValueError(f"{label}: loss_mask must hold only 0 and 1")


@dataclass
class BatchReport:
    """What `samples_from_trajectories` did to a batch, for the step's metrics."""

    groups: int = 0
    zero_signal_groups: int = 0
    dropped_groups: int = 0
    masked_truncated: int = 0
    reward_mean: float = 0.0


def samples_from_trajectories(
    trajectories: Sequence[Trajectory], rl: RLConfig
) -> tuple[list[TrainingSample], BatchReport]:
    """Advantages per group of `rl.group_size` consecutive trajectories, then training samples.

    Aborted trajectories are unfinished partial rollouts: they must be resumed, not trained
    on, so one in a batch is an error.
    """
    for trajectory in trajectories:
        if trajectory.status == "aborted":
            raise ValueError(
                f"trajectory {trajectory.task_id!r} (group {trajectory.group_id!r}) is aborted: "
                "resume it before training on it"
            )
    rewards = [t.reward for t in trajectories]
    advantages = compute_advantages(rewards, rl.group_size, rl.advantage).tolist()
    no_signal = zero_signal_groups(rewards, rl.group_size).tolist()
    report = BatchReport(
        groups=len(no_signal), zero_signal_groups=sum(no_signal), reward_mean=sum(rewards) / len(rewards)
    )
    samples = []
    for index, (trajectory, advantage) in enumerate(zip(trajectories, advantages, strict=True)):
        if rl.drop_zero_signal_groups and no_signal[index // rl.group_size]:
            continue
        mask = trajectory.loss_mask
        if rl.mask_truncated and trajectory.status == "truncated":
            mask = [0] * len(mask)
            report.masked_truncated += 1
        samples.append(
            TrainingSample(
                token_ids=trajectory.token_ids,
                loss_mask=mask,
                behavior_logprobs=trajectory.behavior_logprobs,
                versions=trajectory.versions,
                advantage=advantage,
                name=trajectory.task_id,
            )
        )
    report.dropped_groups = report.zero_signal_groups if rl.drop_zero_signal_groups else 0
    return samples, report
