"""What the trainer trains on: the samples made from trajectories.

The `Trajectory` record itself belongs to the agent layer (`overture.agent.trajectory`), which
produces it; it is re-exported here because the trainer consumes it.

`samples_from_trajectories` turns a batch of whole groups into `TrainingSample`s: advantages
per group (`advantages.py`), zero-signal groups counted and optionally dropped, trajectories
cut by a limit (`truncated`) masked out of the loss when `rl.mask_truncated` is set.
`has_policy_signal` says whether such a batch gives the policy anything to learn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from overture.agent.trajectory import STATUSES, Status, Trajectory, check_aligned
from overture.config import RLConfig
from overture.rl.advantages import compute_advantages, zero_signal_groups

__all__ = [
    "STATUSES",
    "BatchReport",
    "Status",
    "TrainingSample",
    "Trajectory",
    "check_aligned",
    "has_policy_signal",
    "samples_from_trajectories",
]


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


@dataclass
class BatchReport:
    """What `samples_from_trajectories` did to a batch, for the step's metrics."""

    groups: int = 0
    zero_signal_groups: int = 0
    dropped_groups: int = 0
    masked_truncated: int = 0
    reward_mean: float = 0.0


def check_groups_are_whole(trajectories: Sequence[Trajectory], group_size: int) -> None:
    """Each block of `group_size` consecutive trajectories must be one group (advantages are
    computed per block): a block mixing group ids, e.g. after reordering, is an error naming it."""
    for start in range(0, len(trajectories), group_size):
        ids = {t.group_id for t in trajectories[start : start + group_size] if t.group_id}
        if len(ids) > 1:
            raise ValueError(
                f"trajectories {start}..{start + group_size - 1} mix groups {sorted(map(str, ids))}: "
                f"each run of rl.group_size ({group_size}) trajectories must be one whole group"
            )


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
    check_groups_are_whole(trajectories, rl.group_size)
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


def has_policy_signal(samples: Sequence[TrainingSample], rl: RLConfig) -> bool:
    """Whether an RL loss on `samples` has a gradient of its own: some trained token carries a
    nonzero advantage, or the KL term (`rl.kl_coef`) pulls trained tokens toward the reference.
    A batch whose groups all earned equal rewards, or whose signal was all masked, has none."""
    trained = [s for s in samples if s.trained_tokens]
    if rl.kl_coef > 0:
        return bool(trained)
    return any(s.advantage != 0 for s in trained)
