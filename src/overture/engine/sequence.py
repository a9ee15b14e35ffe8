"""One request's state inside the engine: its tokens, what it sampled, its KV blocks, its stop rules."""

from __future__ import annotations

import random
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field

from overture.engine.params import Completion, FinishReason, SamplingParams

# Decoding a few tokens more than a stop string's length covers tokens that decode to partial
# characters (byte-level BPE), so a stop string is seen in the step its last token arrives.
_STOP_WINDOW_SLACK = 4


@dataclass(eq=False)
class Sequence:
    """A request while it waits or runs; `generated` may start non-empty when it is a resumption."""

    request_id: int
    prompt: list[int]
    params: SamplingParams
    rng: random.Random
    future: Future
    generated: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    budget_end: int = 0  # len(generated) at which the request has used its budget
    blocks: list[int] = field(default_factory=list)
    cached: int = 0  # leading tokens whose keys and values are in the cache
    cache_epoch: int = -1  # the scheduler's cache epoch when its keys and values were computed
    digests: list[bytes] = field(default_factory=list)  # of its leading full blocks (kv_cache.block_digests)

    def __post_init__(self) -> None:
        if not self.budget_end:
            self.budget_end = len(self.generated) + self.params.max_new_tokens

    def tokens(self) -> list[int]:
        return self.prompt + self.generated

    def __len__(self) -> int:
        return len(self.prompt) + len(self.generated)

    def append(self, token: int, logprob: float, version: int) -> None:
        self.generated.append(token)
        self.logprobs.append(logprob)
        self.versions.append(version)

    def uniform(self) -> float:
        return self.rng.random()

    def finish_reason(
        self, max_model_len: int, decode: Callable[[list[int]], str] | None
    ) -> FinishReason | None:
        """Why the request is done after its latest token, or None if it goes on."""
        if self.generated and self.generated[-1] in self.params.stop_token_ids:
            return "stop"
        if self.params.stop_strings and decode is not None and self._hit_stop_string(decode):
            return "stop"
        if len(self.generated) >= self.budget_end or len(self) >= max_model_len:
            return "length"
        return None

    def _hit_stop_string(self, decode: Callable[[list[int]], str]) -> bool:
        window = max(len(s) for s in self.params.stop_strings) + _STOP_WINDOW_SLACK
        text = decode(self.generated[-window:])
        return any(s in text for s in self.params.stop_strings)

    def completion(self, reason: FinishReason) -> Completion:
        return Completion(
            request_id=self.request_id,
            prompt_ids=list(self.prompt),
            token_ids=list(self.generated),
            logprobs=list(self.logprobs),
            versions=list(self.versions),
            finish_reason=reason,
            params=self.params.with_budget(self.budget_end),
        )
