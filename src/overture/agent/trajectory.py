"""The Trajectory record (DESIGN.md): one episode, token by token, with how it ended.

Per-token lists are aligned with `token_ids`, as `overture.text.Conversation` keeps them:
`loss_mask` 1 where the policy produced the token, `behavior_logprobs` the logprob the policy
sampled it with (0.0 elsewhere), `versions` the policy version that produced it (-1 elsewhere;
a resumed partial episode holds several versions). `turns` holds one plain dict per assistant
turn (see `records.TurnRecord`), so a trajectory serialises to JSON as it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from overture.text import Conversation

Status = Literal["finished", "truncated", "aborted", "failed"]
STATUSES = ("finished", "truncated", "aborted", "failed")


@dataclass
class Trajectory:
    """One episode: DESIGN.md's record, plus what the agent loop needs to resume it.

    `status_reason` says why it ended (e.g. `finish`, `max_turns`, `context`, `wall_clock`,
    `aborted`, or the error of a failed episode); `system` and `prompt` are the texts the
    conversation began with, so that an aborted episode can be rebuilt and resumed.
    """

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
    turns: list[dict[str, Any]] = field(default_factory=list)
    status_reason: str = ""
    system: str = ""
    prompt: str = ""

    def __post_init__(self) -> None:
        check_aligned(self.token_ids, self.loss_mask, self.behavior_logprobs, self.versions, self.task_id)
        if self.status not in STATUSES:
            raise ValueError(
                f"trajectory {self.task_id!r}: unknown status {self.status!r}, expected {STATUSES}"
            )

    @classmethod
    def from_conversation(cls, conversation: Conversation, reward: float = 0.0, **fields: Any) -> Trajectory:
        """The per-token lists of a token-level conversation, with the other fields given."""
        return cls(
            token_ids=list(conversation.token_ids),
            loss_mask=list(conversation.loss_mask),
            behavior_logprobs=list(conversation.logprobs),
            versions=list(conversation.versions),
            reward=reward,
            **fields,
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Trajectory:
        return cls(**data)


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
