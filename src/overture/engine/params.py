"""What a request asks for and what it gets back: sampling parameters, completions, errors.

A completion carries, per generated token, the log-probability of the distribution the token was
sampled from and the policy version of the weights that produced it (see `SamplingParams`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Literal

FinishReason = Literal["stop", "length", "abort"]


class RequestError(ValueError):
    """A request the engine cannot serve (bad prompt or sampling parameters); others are unaffected."""


class EngineError(RuntimeError):
    """The engine failed while serving a request, or was closed before the request finished."""


class WeightUpdateError(ValueError):
    """A weight update whose tensors do not match the served model; the old weights stay in place."""


@dataclass(frozen=True)
class SamplingParams:
    """How to sample one completion.

    Logprobs: each token's logprob is taken from the distribution it was sampled from, that is
    log softmax(logits / temperature) restricted to the top-k / top-p set and renormalised. With
    top_k = 0 and top_p = 1 this is the plain tempered distribution; at temperature 1 it equals the
    training forward's log_softmax. Greedy decoding (temperature 0) reports the logprob of the
    chosen token under the untempered (temperature 1) distribution, since a point mass would
    always report 0.

    `max_repeats` > 0 turns on the repeat guard (`overture.engine.repeat_guard`): no token is
    sampled that would end the completion in more than `max_repeats` back-to-back copies of a span
    of at most `repeat_span` tokens, and the logprob reported is that of the distribution so
    restricted.

    `seed` makes sampling reproducible and independent of what else is in the batch; `None`
    draws one. Generation stops after `max_new_tokens`, at any of `stop_token_ids` (kept as the
    last token), or once the decoded completion contains one of `stop_strings` (the token that
    completed it is the last token; no token is cut).
    """

    max_new_tokens: int = 256
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    max_repeats: int = 0
    repeat_span: int = 8
    seed: int | None = None
    stop_token_ids: tuple[int, ...] = ()
    stop_strings: tuple[str, ...] = ()

    def validate(self, vocab_size: int) -> None:
        """Raise `RequestError` naming the first bad field."""
        if not isinstance(self.max_new_tokens, int) or self.max_new_tokens < 1:
            raise RequestError(f"max_new_tokens must be a positive integer, got {self.max_new_tokens!r}")
        if not _finite(self.temperature) or self.temperature < 0:
            raise RequestError(f"temperature must be a finite number >= 0, got {self.temperature!r}")
        if not _finite(self.top_p) or not 0 < self.top_p <= 1:
            raise RequestError(f"top_p must be in (0, 1], got {self.top_p!r}")
        if not isinstance(self.top_k, int) or self.top_k < 0:
            raise RequestError(f"top_k must be an integer >= 0 (0 = off), got {self.top_k!r}")
        if not isinstance(self.max_repeats, int) or self.max_repeats < 0:
            raise RequestError(f"max_repeats must be an integer >= 0 (0 = off), got {self.max_repeats!r}")
        if not isinstance(self.repeat_span, int) or self.repeat_span < 1:
            raise RequestError(f"repeat_span must be a positive integer, got {self.repeat_span!r}")
        if self.seed is not None and not isinstance(self.seed, int):
            raise RequestError(f"seed must be an integer or None, got {self.seed!r}")
        bad = [t for t in self.stop_token_ids if not isinstance(t, int) or not 0 <= t < vocab_size]
        if bad:
            raise RequestError(f"stop_token_ids {bad} outside the vocabulary 0..{vocab_size - 1}")
        if any(not isinstance(s, str) or not s for s in self.stop_strings):
            raise RequestError(f"stop_strings must be non-empty strings, got {list(self.stop_strings)!r}")

    def with_budget(self, max_new_tokens: int) -> SamplingParams:
        return replace(self, max_new_tokens=max_new_tokens)


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


@dataclass
class Completion:
    """One request's result; partial when `finish_reason` is "abort".

    `token_ids`, `logprobs` and `versions` are aligned, one entry per generated token. A resumed
    request's completion holds the tokens of every part, so `versions` may hold several values.
    """

    request_id: int
    prompt_ids: list[int]
    token_ids: list[int]
    logprobs: list[float]
    versions: list[int]
    finish_reason: FinishReason
    params: SamplingParams = field(default_factory=SamplingParams)

    @property
    def remaining_budget(self) -> int:
        """New tokens this request may still generate under its original `max_new_tokens`."""
        return max(0, self.params.max_new_tokens - len(self.token_ids))
