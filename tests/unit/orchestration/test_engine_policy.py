"""The rollout engine behind the agent's Policy protocol (the CLI's adapter), with a tiny random model."""

from __future__ import annotations

import asyncio

from agent_helpers import make_repo, tokenizer
from conftest import tiny_model_config

from overture.agent import Episode, Policy
from overture.config import AgentConfig, SandboxConfig
from overture.engine import Engine
from overture.model import Transformer
from overture.orchestration.engine_policy import EnginePolicy
from overture.sandbox import SandboxPool


def tiny_engine() -> Engine:
    model = Transformer(tiny_model_config(vocab_size=tokenizer().vocab_size))
    return Engine(model, tokenizer(), max_new_tokens=16, temperature=1.0)


def test_engine_policy_feeds_the_loop_its_tokens_logprobs_and_versions(tmp_path):
    repo = make_repo(tmp_path)
    policy = EnginePolicy(tiny_engine(), seed=0)
    assert isinstance(policy, Policy)

    async def main():
        async with SandboxPool(SandboxConfig()) as pool, pool.sandbox(repo) as box:
            config = AgentConfig(max_turns=1, max_new_tokens=12, search_backend="bm25")
            return await Episode(policy, box, tokenizer(), "Fix mean().", config=config).run()

    try:
        trajectory = asyncio.run(main())
    finally:
        policy.close()
    turn = trajectory.turns[0]
    body = slice(turn["body_start"], turn["body_end"])
    assert 1 <= sum(trajectory.loss_mask) == turn["body_end"] - turn["body_start"] <= 12
    assert all(trajectory.loss_mask[body]) and set(trajectory.versions[body]) == {0}
    assert all(p < 0 for p in trajectory.behavior_logprobs[body])  # sampled logprobs, not placeholders
    assert trajectory.status in ("finished", "truncated")


def test_aborting_an_engine_request_returns_its_partial_tokens():
    engine = tiny_engine()
    policy = EnginePolicy(engine, seed=1, stop_token_ids=[])  # no end-of-turn: it would run to the budget

    async def main():
        request = policy.generate(list(range(1, 20)), 100_000)
        await asyncio.sleep(0.2)
        request.abort()
        return await request

    try:
        generation = asyncio.run(main())
    finally:
        policy.close()
    assert generation.finish_reason == "abort"
    assert len(generation.token_ids) == len(generation.logprobs) == len(generation.versions)
    assert len(generation.token_ids) < engine.max_model_len - 19
