"""The per-turn record an episode keeps in `Trajectory.turns` (as plain dicts, JSON-ready)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class TurnRecord:
    """One assistant turn: where its policy tokens lie, what it called, and what it cost.

    `body_start:body_end` index the trajectory's `token_ids` (the policy's tokens of the turn);
    `calls` are `CallRecord.to_dict()`s in block order; `responses_appended` says whether the
    tool responses went into the conversation (not after `finish`, nor when the episode ended
    on this turn).
    """

    index: int
    body_start: int
    body_end: int
    finish_reason: str = ""
    text: str = ""
    calls: list[dict[str, Any]] = field(default_factory=list)
    responses_appended: bool = False
    generation_s: float = 0.0
    tool_wall_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TurnRecord:
        return cls(**data)
