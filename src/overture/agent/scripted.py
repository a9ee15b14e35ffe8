"""`ScriptedPolicy`: a policy that writes given assistant turns, token by token, for tests and demos.

It plays the role of a model where no trained one is at hand (`overture agent --script FILE`,
the agent tests). Turn k of the script is the text it writes for the k-th assistant turn of the
conversation; it finds where it is from the prompt alone (assistant turns so far, tokens of the
open turn already written), so a partial turn aborted under one instance is continued by
another, e.g. one with a newer `version`. Each token's logprob is a fixed function of its
position in the turn, so that tests can check the loop stores exactly what the policy said.
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator, Sequence
from typing import Any

from overture.agent.policy import Generation
from overture.text import Tokenizer
from overture.text.chat import assistant_header_pieces
from overture.text.conversation import encode_written


def scripted_logprob(position: int) -> float:
    """The logprob ScriptedPolicy reports for the token at `position` of a turn's body."""
    return -0.01 * (position % 97 + 1)


class ScriptedRequest:
    """One scripted generation: yields its tokens, or stalls until aborted when told to."""

    def __init__(self, policy: ScriptedPolicy, tokens: list[int], done: int, stall: bool) -> None:
        self._policy = policy
        self._tokens = tokens
        self._done = done  # tokens of the turn already in the prompt
        self._stall = stall
        self._aborted = asyncio.Event()

    def abort(self) -> None:
        self._aborted.set()

    def _generation(self, tokens: list[int], reason: str) -> Generation:
        positions = range(self._done, self._done + len(tokens))
        return Generation(
            token_ids=tokens,
            logprobs=[scripted_logprob(p) for p in positions],
            versions=[self._policy.version] * len(tokens),
            finish_reason=reason,  # type: ignore[arg-type]
        )

    async def _run(self) -> Generation:
        if self._stall:
            await self._aborted.wait()
            return self._generation(self._tokens, "abort")
        reason = "length" if self._tokens[-1:] != [self._policy.tokenizer.im_end_id] else "stop"
        generation = self._generation(self._tokens, reason)
        self._policy.generations.append(generation)
        return generation

    def __await__(self) -> Generator[Any, None, Generation]:
        return self._run().__await__()


class ScriptedPolicy:
    """Writes `script[k]` (plus `<|im_end|>`) as the k-th assistant turn.

    `stall_after={k: n}`: in turn k, write n tokens and then wait until aborted (a generation
    in flight when an episode is aborted).
    Past the end of the script it writes an empty turn (which ends the episode).
    """

    def __init__(
        self,
        tokenizer: Tokenizer,
        script: Sequence[str],
        version: int = 0,
        stall_after: dict[int, int] | None = None,
    ) -> None:
        self.tokenizer = tokenizer
        self.script = list(script)
        self.version = version
        self.stall_after = dict(stall_after or {})
        self.generations: list[Generation] = []
        # The ids after `<|im_start|>` that open an assistant turn, as Conversation encodes them.
        self._header = tokenizer.encode("".join(p.text for p in assistant_header_pieces() if not p.marker))

    def turn_tokens(self, turn: int) -> list[int]:
        """The turn's tokens as a model writes them: marker strings (`<tool_call>`) as their ids."""
        text = self.script[turn] if turn < len(self.script) else ""
        return [*encode_written(self.tokenizer, text), self.tokenizer.im_end_id]

    def _position(self, prompt_ids: list[int]) -> tuple[int, int]:
        """(index of the open assistant turn, tokens of it already written) from the prompt."""
        starts = [i for i, t in enumerate(prompt_ids) if t == self.tokenizer.im_start_id]
        turn = -1
        body_start = len(prompt_ids)
        for start in starts:
            after = prompt_ids[start + 1 : start + 1 + len(self._header)]
            if after == self._header:
                turn += 1
                body_start = start + 1 + len(self._header)
        return turn, len(prompt_ids) - body_start

    def generate(self, prompt_ids: list[int], max_new_tokens: int) -> ScriptedRequest:
        turn, done = self._position(prompt_ids)
        remaining = self.turn_tokens(turn)[done:]
        stall_at = self.stall_after.get(turn)
        if stall_at is not None and done < stall_at:
            return ScriptedRequest(self, remaining[: stall_at - done], done, stall=True)
        return ScriptedRequest(self, remaining[:max_new_tokens], done, stall=False)
