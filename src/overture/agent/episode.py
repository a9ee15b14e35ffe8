"""The episode loop: a policy and the tools take turns over one token-level conversation.

`Episode.run()` alternates generation and tool execution, token in and token out: the policy's
tokens go into the `Conversation` with loss mask 1, their behaviour logprobs and the policy
version of each token; the tool responses of a turn are tokenized once and appended with mask
0. History is never re-rendered. The episode ends, and `run()` returns its `Trajectory`, when

- a turn calls `finish` (or writes no tool call at all): `finished`;
- a limit is hit: `truncated` with reason `max_turns`, `context` (conversation length),
  `max_new_tokens` (a turn cut off without a call) or `wall_clock`;
- `abort()` is called: `aborted`, keeping the tokens of a generation cut mid-turn;
- the policy raises or the sandbox dies: `failed` with the error as reason.

An aborted episode resumes with `Episode.resume(trajectory, ...)` (same sandbox, so that the
workspace is as the episode left it): the conversation is rebuilt from the record, checked to
be token-identical, and generation continues inside the open turn, e.g. under newer weights.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from overture.agent.executor import CallRecord, ToolSet
from overture.agent.metrics import behaviour_metrics
from overture.agent.policy import Generation, Policy
from overture.agent.prompts import SYSTEM_PROMPT
from overture.agent.records import TurnRecord
from overture.agent.tools import ToolContext
from overture.agent.trajectory import Trajectory
from overture.config import AgentConfig
from overture.sandbox import Sandbox
from overture.text import Conversation, Tokenizer

Observer = Callable[[str, dict[str, Any]], None]


class Episode:
    """One episode of `policy` acting through `tools` in `sandbox` on the task `prompt`."""

    def __init__(
        self,
        policy: Policy,
        sandbox: Sandbox,
        tokenizer: Tokenizer,
        prompt: str,
        config: AgentConfig | None = None,
        tools: ToolSet | None = None,
        system: str = SYSTEM_PROMPT,
        task_id: str = "",
        group_id: str = "",
        observer: Observer | None = None,
    ) -> None:
        self.policy, self.sandbox, self.tokenizer = policy, sandbox, tokenizer
        self.prompt, self.system = prompt, system
        self.config = config or AgentConfig()
        self.tools = tools or ToolSet.for_agent(self.config)
        self.task_id, self.group_id = task_id, group_id
        self.observer = observer
        self.conversation = Conversation(tokenizer)
        self.turns: list[TurnRecord] = []
        self.reward_info: dict[str, Any] = {}
        self._elapsed_before = 0.0  # wall time of earlier parts of a resumed episode
        self._abort_requested = False
        self._request: Any = None
        self._started = False

    # ----------------------------------------------------------------- control

    @property
    def generating(self) -> bool:
        """Whether a generation is in flight (what `abort()` would cut short)."""
        return self._request is not None

    def abort(self) -> None:
        """End the episode as soon as possible; a generation in flight keeps its tokens so far."""
        self._abort_requested = True
        if self._request is not None:
            self._request.abort()

    @classmethod
    def resume(
        cls,
        trajectory: Trajectory,
        policy: Policy,
        sandbox: Sandbox,
        tokenizer: Tokenizer,
        config: AgentConfig | None = None,
        tools: ToolSet | None = None,
        observer: Observer | None = None,
    ) -> Episode:
        """An episode that continues an aborted one where it stopped (see the module docstring)."""
        if trajectory.status != "aborted":
            raise ValueError(
                f"trajectory {trajectory.task_id!r} is {trajectory.status}; only aborted episodes resume"
            )
        episode = cls(
            policy, sandbox, tokenizer, trajectory.prompt, config, tools, trajectory.system,
            trajectory.task_id, trajectory.group_id, observer,
        )  # fmt: skip
        episode.turns = [TurnRecord.from_dict(turn) for turn in trajectory.turns]
        episode.reward_info = dict(trajectory.reward_info)
        episode._elapsed_before = float(trajectory.metrics.get("elapsed_s", 0.0))
        episode._replay(trajectory)
        episode._started = True
        return episode

    def _replay(self, trajectory: Trajectory) -> None:
        """Rebuild the conversation from the record, exactly as the loop built it."""
        conversation = self.conversation
        conversation.add_system(self.system, self.tools.schemas())
        conversation.add_user(self.prompt)
        for position, turn in enumerate(self.turns):
            conversation.begin_assistant()
            self._append(
                trajectory.token_ids[turn.body_start : turn.body_end],
                trajectory.behavior_logprobs[turn.body_start : turn.body_end],
                trajectory.versions[turn.body_start : turn.body_end],
            )
            if position == len(self.turns) - 1 and turn.finish_reason == "abort":
                break  # the open turn: generation continues inside it
            conversation.end_assistant()
            if turn.responses_appended:
                conversation.add_tool_responses([call["response"] for call in turn.calls])
        if conversation.token_ids != trajectory.token_ids:
            raise ValueError(
                f"trajectory {trajectory.task_id!r} does not replay to the same tokens: "
                "resume it with the tokenizer and tool set it was recorded with"
            )

    # ----------------------------------------------------------------- the loop

    async def run(self) -> Trajectory:
        started = time.monotonic()
        deadline = started + self.config.wall_clock_s - self._elapsed_before
        context = ToolContext(self.sandbox, self.config, deadline=deadline)
        if not self._started:
            self.conversation.add_system(self.system, self.tools.schemas())
            self.conversation.add_user(self.prompt)
            self._started = True
        try:
            status, reason = await self._loop(context, deadline)
        except Exception as exc:  # a policy or sandbox failure ends this episode only
            status, reason = "failed", f"{exc.__class__.__name__}: {exc}"
        elapsed = self._elapsed_before + time.monotonic() - started
        return self._trajectory(status, reason, elapsed)

    async def _loop(self, context: ToolContext, deadline: float) -> tuple[str, str]:
        config, conversation = self.config, self.conversation
        while True:
            limit = self._limit_reached(deadline)
            if limit:
                return limit
            if not conversation.in_assistant_turn:
                conversation.begin_assistant()
                self.turns.append(TurnRecord(len(self.turns), len(conversation), len(conversation)))
            turn = self.turns[-1]
            generation = await self._generate(turn, deadline)
            if generation.finish_reason == "abort":
                if self._abort_requested:
                    return "aborted", "aborted"
                conversation.end_assistant()
                return "truncated", "wall_clock"
            conversation.end_assistant()
            turn.text = conversation.assistant_text()
            parsed = self.tools.parse(turn.text)
            self._emit("assistant", {"turn": turn.index, "text": turn.text})
            if parsed.block_count == 0:
                if generation.finish_reason == "length":
                    full = len(conversation) >= config.context_tokens
                    return "truncated", "context" if full else "max_new_tokens"
                return "finished", "no_tool_call"
            records = await self._execute(parsed, context, turn)
            if any(record.ok and record.name == "finish" for record in records):
                return "finished", "finish"
            if not self.sandbox.alive:
                return "failed", "sandbox died"
            conversation.add_tool_responses([record.response for record in records])
            turn.responses_appended = True

    def _limit_reached(self, deadline: float) -> tuple[str, str] | None:
        """How the episode ends if a limit (or an abort) is reached now; closes an open turn then."""
        if self._abort_requested:
            return "aborted", "aborted"
        open_turn = self.conversation.in_assistant_turn
        if len(self.turns) >= self.config.max_turns and not open_turn:
            return "truncated", "max_turns"
        # A new turn needs room for its header and one policy token.
        needed = 0 if open_turn else len(self.conversation.assistant_header_ids)
        if len(self.conversation) + needed >= self.config.context_tokens:
            if open_turn:
                self.conversation.end_assistant()
            return "truncated", "context"
        if time.monotonic() >= deadline:
            if open_turn:
                self.conversation.end_assistant()
            return "truncated", "wall_clock"
        return None

    async def _generate(self, turn: TurnRecord, deadline: float) -> Generation:
        """Generate (the rest of) the open turn within the token budgets and the wall clock."""
        prompt = list(self.conversation.token_ids)
        written = len(prompt) - turn.body_start
        budget = min(self.config.max_new_tokens - written, self.config.context_tokens - len(prompt))
        began = time.monotonic()
        if budget < 1:
            generation = Generation([], [], [], "length")
        else:
            generation = await self._await_request(self.policy.generate(prompt, budget), deadline)
        self._append(generation.token_ids, generation.logprobs, generation.versions)
        turn.body_end = len(self.conversation)
        turn.finish_reason = generation.finish_reason
        turn.generation_s += time.monotonic() - began
        return generation

    async def _await_request(self, request: Any, deadline: float) -> Generation:
        """Await a generation; past the deadline (or on `abort()`) abort it and keep its tokens."""
        self._request = request
        if self._abort_requested:
            request.abort()

        async def wait() -> Generation:
            return await request

        task = asyncio.ensure_future(wait())
        try:
            done, _ = await asyncio.wait({task}, timeout=max(0.0, deadline - time.monotonic()))
            if not done:
                request.abort()
            return await task
        finally:
            self._request = None
            if not task.done():  # the episode itself was cancelled: stop generating for it
                request.abort()
                task.cancel()

    def _append(self, ids: list[int], logprobs: list[float], versions: list[int]) -> None:
        """Policy tokens into the open turn, one run per policy version (a resumed turn has several)."""
        start = 0
        while start < len(ids):
            end = start
            while end < len(ids) and versions[end] == versions[start]:
                end += 1
            self.conversation.add_policy_tokens(ids[start:end], logprobs[start:end], versions[start])
            start = end

    async def _execute(self, parsed: Any, context: ToolContext, turn: TurnRecord) -> list[CallRecord]:
        began = time.monotonic()
        records = await self.tools.execute(parsed, context, self.tokenizer, self.config.tool_response_tokens)
        turn.tool_wall_s = time.monotonic() - began
        turn.calls = [record.to_dict() for record in records]
        self._emit("tools", {"turn": turn.index, "calls": turn.calls})
        return records

    def _emit(self, kind: str, data: dict[str, Any]) -> None:
        if self.observer is not None:
            self.observer(kind, data)

    def _trajectory(self, status: str, reason: str, elapsed: float) -> Trajectory:
        turns = [turn.to_dict() for turn in self.turns]
        metrics = behaviour_metrics(turns, len(self.conversation), self.conversation.policy_token_count)
        metrics["elapsed_s"] = round(elapsed, 6)
        return Trajectory.from_conversation(
            self.conversation,
            status=status,
            status_reason=reason,
            task_id=self.task_id,
            group_id=self.group_id,
            reward_info=self.reward_info,
            metrics=metrics,
            turns=turns,
            system=self.system,
            prompt=self.prompt,
        )
