"""The `Policy` protocol: what the episode loop needs from whatever generates the assistant's tokens.

The loop hands a policy the conversation so far as token ids and gets back a `PolicyRequest`:
awaiting it gives a `Generation` (token ids, their behaviour logprobs and the policy version
of each token, and why generation stopped); `abort()` makes it finish early with what it has
so far (`finish_reason == "abort"`). The rollout engine fits through a thin adapter (in the
CLI layer); tests use `ScriptedPolicy`. The loop never sees the engine itself.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

FinishReason = Literal["stop", "length", "abort"]


@dataclass
class Generation:
    """What one generation produced: aligned lists, one entry per token."""

    token_ids: list[int]
    logprobs: list[float]
    versions: list[int]
    finish_reason: FinishReason
    info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not len(self.token_ids) == len(self.logprobs) == len(self.versions):
            raise ValueError(
                f"generation lists differ in length: {len(self.token_ids)} token ids, "
                f"{len(self.logprobs)} logprobs, {len(self.versions)} versions"
            )


@runtime_checkable
class PolicyRequest(Protocol):
    """One generation in flight."""

    def abort(self) -> None:
        """Stop as soon as possible; awaiting the request then gives the partial generation."""

    def __await__(self) -> Generator[Any, None, Generation]: ...


@runtime_checkable
class Policy(Protocol):
    """Generates an assistant turn's tokens from the conversation's token ids."""

    def generate(self, prompt_ids: list[int], max_new_tokens: int) -> PolicyRequest:
        """Start generating after `prompt_ids` (which end inside an open assistant turn), stopping
        at the end-of-turn token or after `max_new_tokens` tokens."""
        ...
