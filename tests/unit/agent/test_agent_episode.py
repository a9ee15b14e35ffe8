"""The episode loop: token-level records, how episodes end, and resuming an aborted one."""

from __future__ import annotations

import asyncio
import re

import pytest
from agent_helpers import call_text, make_repo, tokenizer

from overture.agent import Episode, ScriptedPolicy, Trajectory, scripted_logprob
from overture.config import AgentConfig, ConfigError, SandboxConfig
from overture.sandbox import SandboxPool
from overture.text import render_tool_responses

FIX = call_text(
    (
        "search_replace",
        {"file_path": "calc/core.py", "old_string": "(len(values) + 1)", "new_string": "len(values)"},
    ),
    prose="The divisor is off by one.",
)
EXPLORE = call_text(
    ("grep", {"pattern": "def mean", "output_mode": "files_with_matches"}),
    ("read_file", {"path": "calc/core.py", "offset": 9, "limit": 3}),
    prose="Let me look.",
)
TEST = call_text(("run_terminal_cmd", {"command": "python -m pytest -q tests 2>&1 | tail -1"}))
FINISH = call_text(("finish", {"summary": "fixed mean"}))


def run_episode(repo, policy, after=None, **agent) -> tuple[Trajectory, str]:
    """Run an episode to its end in a fresh sandbox; its trajectory and the workspace diff."""

    async def main():
        async with SandboxPool(SandboxConfig()) as pool, pool.sandbox(repo) as box:
            config = AgentConfig(**{"search_backend": "bm25", **agent})
            episode = Episode(policy, box, tokenizer(), "Fix mean().", config=config, task_id="t1")
            trajectory = await (after(episode) if after else episode.run())
            return trajectory, box.diff()

    return asyncio.run(main())


@pytest.fixture
def repo(tmp_path):
    return make_repo(tmp_path)


def test_policy_tokens_logprobs_and_versions_line_up_token_by_token(repo):
    policy = ScriptedPolicy(tokenizer(), [EXPLORE, FIX, TEST, FINISH], version=7)
    trajectory, diff = run_episode(repo, policy)
    assert (trajectory.status, trajectory.status_reason) == ("finished", "finish")
    assert "+    return sum(values) / len(values)" in diff
    ids, mask = trajectory.token_ids, trajectory.loss_mask
    # Exactly the tokens the policy produced carry mask 1, with its logprobs and version, in order.
    produced = [t for g in policy.generations for t in g.token_ids]
    assert [t for t, m in zip(ids, mask, strict=True) if m] == produced
    assert [p for p, m in zip(trajectory.behavior_logprobs, mask, strict=True) if m] == [
        p for g in policy.generations for p in g.logprobs
    ]
    assert {v for v, m in zip(trajectory.versions, mask, strict=True) if m} == {7}
    assert all(
        v == -1 and p == 0.0
        for v, p, m in zip(trajectory.versions, trajectory.behavior_logprobs, mask, strict=True)
        if not m
    )
    # Each turn's body is the policy's generation, and each tool turn is the responses, rendered.
    tok = tokenizer()
    for turn, generation in zip(trajectory.turns, policy.generations, strict=True):
        assert ids[turn["body_start"] : turn["body_end"]] == generation.token_ids
        assert trajectory.behavior_logprobs[turn["body_start"]] == scripted_logprob(0)
    text = tok.decode(ids)
    for turn in trajectory.turns[:-1]:
        assert render_tool_responses([c["response"] for c in turn["calls"]]) in text
    assert "1 passed" in trajectory.turns[2]["calls"][0]["response"]


def test_behaviour_metrics_of_an_episode(repo):
    policy = ScriptedPolicy(tokenizer(), [EXPLORE, FIX, call_text(("list_dir", {}), ("nope", {})), FINISH])
    trajectory, _ = run_episode(repo, policy)
    metrics = trajectory.metrics
    assert metrics["turns"] == 4 and metrics["tool_calls"] == 6
    assert metrics["tool_calls_per_turn"] == 1.5 and metrics["parallel_turn_share"] == 0.5
    assert metrics["reads_before_first_edit"] == 2 and metrics["edited"]
    assert metrics["invalid_calls"] == 1 and metrics["invalid_call_rate"] == pytest.approx(1 / 6)
    assert metrics["tokens"] == len(trajectory.token_ids)
    assert metrics["policy_tokens"] == sum(trajectory.loss_mask)
    assert metrics["tool_time_s"] > 0


def test_edits_that_do_not_apply_are_counted_apart(repo):
    missing = call_text(
        ("search_replace", {"file_path": "calc/core.py", "old_string": "not in the file", "new_string": "x"}),
    )
    trajectory, _ = run_episode(repo, ScriptedPolicy(tokenizer(), [missing, FIX, FINISH]))
    metrics = trajectory.metrics
    assert metrics["edit_calls"] == 2 and metrics["edits_applied"] == 1 and metrics["edited"]
    assert metrics["edits_refused"] == 0


def test_edits_refused_because_the_file_would_not_compile_are_counted(repo):
    unclosed = ("search_replace", {"file_path": "calc/core.py", "old_string": "(len(values) + 1)",
                                   "new_string": "(len(values)"})  # fmt: skip
    missing = ("search_replace", {"file_path": "calc/core.py", "old_string": "absent", "new_string": "x"})
    turns = [call_text(unclosed), call_text(unclosed, missing), FIX, FINISH]
    trajectory, _ = run_episode(repo, ScriptedPolicy(tokenizer(), turns))
    metrics = trajectory.metrics
    assert metrics["edit_calls"] == 4 and metrics["edits_applied"] == 1
    assert metrics["edits_refused"] == 2  # the two unclosed brackets; the missing old_string is another error
    with_refusal_off, _ = run_episode(repo, ScriptedPolicy(tokenizer(), turns), refuse_syntax_errors=False)
    assert with_refusal_off.metrics["edits_refused"] == 0


def test_the_agent_is_given_the_tools_its_config_names_and_no_others(repo):
    tools = ["edit_lines", "read_file", "finish", "grep"]  # announced in the tool set's own order
    trajectory, diff = run_episode(repo, ScriptedPolicy(tokenizer(), [EXPLORE, FIX, FINISH]), tools=tools)
    text = tokenizer().decode(trajectory.token_ids)
    announced = re.findall(r'\{"type": "function", "function": \{"name": "(\w+)"', text)
    assert announced == ["read_file", "edit_lines", "grep", "finish"]
    assert [call["error"] for call in trajectory.turns[0]["calls"]] == ["", ""]
    refused = trajectory.turns[1]["calls"][0]  # search_replace is a tool, but not this agent's
    assert refused["error"] == "malformed" and "search_replace" in refused["response"]
    assert diff == "" and trajectory.status_reason == "finish"
    with pytest.raises(ConfigError, match=r"agent\.tools: no tool named 'nope'"):
        run_episode(repo, ScriptedPolicy(tokenizer(), [FINISH]), tools=["read_file", "nope"])


def test_a_turn_without_calls_finishes(repo):
    trajectory, _ = run_episode(repo, ScriptedPolicy(tokenizer(), [EXPLORE, "All done."]))
    assert (trajectory.status, trajectory.status_reason) == ("finished", "no_tool_call")


def test_max_turns_truncates(repo):
    policy = ScriptedPolicy(tokenizer(), [EXPLORE] * 5)
    trajectory, _ = run_episode(repo, policy, max_turns=3)
    assert (trajectory.status, trajectory.status_reason) == ("truncated", "max_turns")
    assert len(trajectory.turns) == 3


def test_context_limit_truncates_without_exceeding_it_in_generation(repo):
    policy = ScriptedPolicy(tokenizer(), [EXPLORE] * 50)
    trajectory, _ = run_episode(repo, policy, context_tokens=2500)
    assert (trajectory.status, trajectory.status_reason) == ("truncated", "context")
    # Generation never ran past the limit (only the last tool responses may).
    last = trajectory.turns[-1]
    assert len(trajectory.turns) >= 2 and last["body_end"] <= 2500


def test_long_tool_responses_are_cut_with_a_note(repo):
    policy = ScriptedPolicy(tokenizer(), [call_text(("read_file", {"path": "notes.txt"})), FINISH])
    trajectory, _ = run_episode(repo, policy, tool_response_tokens=100)
    call = trajectory.turns[0]["calls"][0]
    assert call["truncated"] and "tokens cut from the middle of this response" in call["response"]
    assert call["response"].startswith("   1|line 1") and call["response"].endswith("offset=251]")
    assert len(tokenizer().encode(call["response"])) <= 110
    assert trajectory.metrics["truncated_responses"] == 1


def test_a_turn_cut_by_max_new_tokens(repo):
    trajectory, _ = run_episode(repo, ScriptedPolicy(tokenizer(), [EXPLORE]), max_new_tokens=5)
    assert (trajectory.status, trajectory.status_reason) == ("truncated", "max_new_tokens")
    assert trajectory.turns[0]["finish_reason"] == "length"


def test_wall_clock_truncates_a_slow_command_and_a_slow_policy(repo):
    policy = ScriptedPolicy(tokenizer(), [call_text(("run_terminal_cmd", {"command": "sleep 30"})), FINISH])
    trajectory, _ = run_episode(repo, policy, wall_clock_s=1.0)
    assert (trajectory.status, trajectory.status_reason) == ("truncated", "wall_clock")
    assert trajectory.turns[0]["calls"][0]["response"].startswith("timed out after 1s")
    stalled = ScriptedPolicy(tokenizer(), [FINISH], stall_after={0: 3})
    trajectory, _ = run_episode(repo, stalled, wall_clock_s=0.5)
    assert (trajectory.status, trajectory.status_reason) == ("truncated", "wall_clock")
    assert sum(trajectory.loss_mask) == 3  # the tokens generated before the deadline are kept


def test_a_failing_policy_fails_the_episode_only(repo):
    class Broken:
        def generate(self, prompt_ids, max_new_tokens):
            raise RuntimeError("engine gone")

    trajectory, _ = run_episode(repo, Broken())
    assert (trajectory.status, trajectory.status_reason) == ("failed", "RuntimeError: engine gone")


def test_an_aborted_episode_resumes_where_it_stopped(repo):
    script = [EXPLORE, FIX, TEST, FINISH]
    old = ScriptedPolicy(tokenizer(), script, version=1, stall_after={1: 6})

    async def main():
        async with SandboxPool(SandboxConfig()) as pool, pool.sandbox(repo) as box:
            config = AgentConfig(search_backend="bm25")
            episode = Episode(old, box, tokenizer(), "Fix mean().", config=config, task_id="t2", group_id="g")
            running = asyncio.ensure_future(episode.run())
            while len(episode.turns) < 2 or not episode.generating:
                await asyncio.sleep(0.01)  # wait until turn 1's generation is in flight
            episode.abort()
            partial = await running
            record = Trajectory.from_dict(partial.to_dict())  # as stored and loaded back
            new = ScriptedPolicy(tokenizer(), script, version=2)
            resumed = await Episode.resume(record, new, box, tokenizer(), config=config).run()
            return partial, resumed, box.diff()

    partial, resumed, diff = asyncio.run(main())
    assert (partial.status, partial.status_reason) == ("aborted", "aborted")
    assert partial.turns[-1]["finish_reason"] == "abort"
    assert sum(partial.loss_mask[partial.turns[1]["body_start"] :]) == 6  # the 6 tokens written so far
    assert (resumed.status, resumed.status_reason) == ("finished", "finish")
    assert resumed.token_ids[: len(partial.token_ids)] == partial.token_ids  # continued, not restarted
    assert (resumed.task_id, resumed.group_id) == ("t2", "g")
    # The interrupted turn holds tokens of both versions; it reads as the uninterrupted one would.
    turn = resumed.turns[1]
    assert resumed.versions[turn["body_start"] : turn["body_end"]] == [1] * 6 + [2] * (
        turn["body_end"] - turn["body_start"] - 6
    )
    assert tokenizer().decode(resumed.token_ids[turn["body_start"] : turn["body_end"]]) == FIX + "<|im_end|>"
    assert "+    return sum(values) / len(values)" in diff
    uninterrupted, _ = run_episode(repo, ScriptedPolicy(tokenizer(), script, version=1))
    # Up to the end of the interrupted turn, token for token (later tool output holds timings).
    end = turn["body_end"]
    assert resumed.token_ids[:end] == uninterrupted.token_ids[:end]
    assert [t["text"] for t in resumed.turns] == [t["text"] for t in uninterrupted.turns]


def test_resume_refuses_what_it_cannot_continue(repo):
    trajectory, _ = run_episode(repo, ScriptedPolicy(tokenizer(), [FINISH]))
    with pytest.raises(ValueError, match="only aborted episodes resume"):
        Episode.resume(trajectory, ScriptedPolicy(tokenizer(), []), None, tokenizer())  # type: ignore[arg-type]
    trajectory.status = "aborted"
    trajectory.prompt = "another task"
    with pytest.raises(ValueError, match="does not replay to the same tokens"):
        Episode.resume(trajectory, ScriptedPolicy(tokenizer(), []), None, tokenizer())  # type: ignore[arg-type]


class WeightsSwappedMidTurn:
    """Wraps a policy so each generation's second half carries the next version, as the engine does
    when new weights arrive while a turn is being generated."""

    def __init__(self, inner: ScriptedPolicy) -> None:
        self.inner = inner

    def generate(self, prompt_ids, max_new_tokens):
        request = self.inner.generate(prompt_ids, max_new_tokens)

        class Swapped:
            def abort(self) -> None:
                request.abort()

            def __await__(self):
                return self.result().__await__()

            async def result(self):
                generation = await request
                half = len(generation.versions) // 2
                generation.versions = generation.versions[:half] + [v + 1 for v in generation.versions[half:]]
                return generation

        return Swapped()


def test_versions_change_inside_a_turn_when_weights_change_mid_generation(repo):
    trajectory, _ = run_episode(
        repo, WeightsSwappedMidTurn(ScriptedPolicy(tokenizer(), [EXPLORE, FINISH], version=3))
    )
    assert trajectory.status == "finished"
    for turn in trajectory.turns:
        body = trajectory.versions[turn["body_start"] : turn["body_end"]]
        half = len(body) // 2
        assert body == [3] * half + [4] * (len(body) - half)
