"""The rollout engine behind the agent's `Policy` protocol.

The agent layer never imports the engine: it talks to a `Policy`. `EnginePolicy` is the thin
adapter between the two, used by `overture agent` (one episode) and by the RL orchestrator
(many episodes sharing one engine whose weights change under them). Each request's tokens,
behaviour logprobs and per-token policy versions come back as a `Generation`.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from overture.agent import Generation


class EngineRequest:
    """An engine request seen as a `PolicyRequest`."""

    def __init__(self, handle: Any) -> None:
        self._handle = handle

    def abort(self) -> None:
        self._handle.abort()

    async def _result(self) -> Generation:
        completion = await self._handle
        return Generation(
            token_ids=list(completion.token_ids),
            logprobs=list(completion.logprobs),
            versions=list(completion.versions),
            finish_reason=completion.finish_reason,
        )

    def __await__(self) -> Generator[Any, None, Generation]:
        return self._result().__await__()


class EnginePolicy:
    """`overture.engine.Engine` behind the agent's `Policy` protocol; `sampling` fields (seed,
    temperature, stop tokens, ...) apply to every request."""

    def __init__(self, engine: Any, **sampling: Any) -> None:
        self.engine = engine
        self.sampling = sampling

    def close(self) -> None:
        self.engine.close()

    def generate(self, prompt_ids: list[int], max_new_tokens: int) -> EngineRequest:
        budget = self.engine.fitting_budget(len(prompt_ids), max_new_tokens)
        return EngineRequest(self.engine.submit(prompt_ids, max_new_tokens=budget, **self.sampling))
