"""The RL run on a real local Ray cluster: the engine actor across the death of its process,
aborts across processes, and the orchestrator driving trainer, engine and two rollout-worker
actors in async+partial mode while the engine actor is killed."""

from __future__ import annotations

import asyncio

import pytest
import torch
from orchestrator_helpers import run_config

from overture.config import EngineConfig, RuntimeConfig
from overture.distributed.ray.cluster import ray_cluster
from overture.distributed.ray.engine import RemoteEnginePolicy, start_engine_actor
from overture.engine import Engine
from overture.model import load_pretrained
from overture.orchestration.orchestrator import Orchestrator, StepReport
from overture.orchestration.ray_actors import ray_rl_runtime
from overture.orchestration.rollout_groups import group_policy, policy_versions
from overture.text import Tokenizer

CPU = RuntimeConfig(device="cpu")
ENGINE = EngineConfig(max_batch_size=4)


@pytest.fixture(scope="module")
def ray():
    with ray_cluster(RuntimeConfig(ray=True)) as module:
        yield module


def trained_weights(tiny_policy) -> dict[str, torch.Tensor]:
    """Weights other than the checkpoint's, as a trainer would export them."""
    return {name: tensor * 1.5 for name, tensor in load_pretrained(tiny_policy).state_dict().items()}


async def wait_until_running(engine) -> None:
    while (await engine.actor.stats.remote())["running"] == 0:
        await asyncio.sleep(0.01)


def test_a_groups_policy_sends_its_group_along_and_counts_resends_where_the_rollouts_read_them():
    policy = RemoteEnginePolicy(actor=None, temperature=0.3)
    grouped = group_policy(policy, "g-7")
    assert grouped.group == "g-7" and grouped.sampling == {"temperature": 0.3} and policy.group is None
    grouped.count_resent()
    assert policy.requests_resent == 1


def test_a_killed_engine_actor_comes_back_with_the_newest_weights_and_cut_requests_are_sent_again(
    ray, tiny_policy
):
    weights = trained_weights(tiny_policy)
    prompt = [5, 6, 7, 8]

    async def main():
        engine = start_engine_actor(tiny_policy, ENGINE, CPU, version=0)
        try:
            await engine.update_weights(weights, 3)
            before = await engine.actor.describe.remote()
            policy = engine.policy(temperature=0.0)
            request = asyncio.ensure_future(policy.generate(prompt, 300))
            await wait_until_running(engine)
            ray.kill(engine.actor, no_restart=False)
            generation = await request
            after = await engine.actor.describe.remote()
            again = await policy.generate(prompt, 300)
            return engine.version, before, after, generation, again, policy.requests_resent
        finally:
            await engine.close()

    version, before, after, generation, again, resent = asyncio.run(main())
    assert version == 3 and before["version"] == after["version"] == 3
    assert after["incarnation"] != before["incarnation"]  # a new process
    assert resent == 1  # the one request the death cut, sent again once the engine was back
    assert generation.finish_reason == "length" and len(generation.token_ids) == 300
    assert set(generation.versions) == {3}
    # The restarted engine serves the updated weights, not the checkpoint it was built from.
    local = Engine.from_pretrained(tiny_policy, config=ENGINE)
    try:
        local.update_weights(weights, 3)
        [expected] = local.generate([prompt], max_new_tokens=300, temperature=0.0)
    finally:
        local.close()
    assert generation.token_ids == again.token_ids == expected.token_ids


def test_aborts_reach_the_engine_actor_before_or_during_their_request(ray, tiny_policy):
    async def main():
        engine = start_engine_actor(tiny_policy, ENGINE, CPU, version=2)
        try:
            policy = engine.policy()
            early = policy.generate([5, 6, 7], 50)
            early.abort()  # before the request is even sent
            cut = policy.generate([5, 6, 7], 5000)
            running = asyncio.ensure_future(cut)
            await wait_until_running(engine)
            cut.abort()
            results = await early, await running
            # Nothing is left behind (stats are read without a lock: give the step thread a moment).
            for _ in range(200):
                stats = await engine.actor.stats.remote()
                if stats["running"] == stats["waiting"] == 0:
                    break
                await asyncio.sleep(0.01)
            return (*results, stats)
        finally:
            await engine.close()

    early, cut, stats = asyncio.run(main())
    assert early.finish_reason == "abort" and early.token_ids == []
    assert cut.finish_reason == "abort" and 0 < len(cut.token_ids) < 5000 and set(cut.versions) == {2}
    assert stats["running"] == stats["waiting"] == 0


def test_the_orchestrator_runs_async_partial_on_actors_through_an_engine_death(
    ray, tiny_policy, numbers_tasks
):
    config = run_config(staleness=1, overprovision=2.0)
    # Two sequences at a time: episodes end in waves, so some are mid-turn when B groups are done.
    config.engine.max_batch_size = 2
    config.agent.max_new_tokens = 24
    # A third turn, so that an episode paused during its last tool calls still generates after
    # its resume (pauses reach a worker a moment late; in process they land at once).
    config.agent.max_turns = 3
    config.runtime.device = "cpu"
    config.runtime.rollout_workers = 2  # groups spread over two workers, each with its own sandboxes
    tokenizer = Tokenizer.from_dir(tiny_policy)

    async def main() -> tuple[list[StepReport], dict]:
        async with ray_rl_runtime(config, tiny_policy, tokenizer) as actors:

            def on_step(report: StepReport) -> None:
                # Episodes are generating again: the engine dies under them. Not after step 1: the
                # groups paused then would be held up by the restart until they were too stale to
                # train, and with them the rollouts that span two versions.
                if report.step == 2:
                    ray.kill(actors.engine.actor, no_restart=False)

            orchestrator = Orchestrator(
                config.rl, config.seed, numbers_tasks, actors.engine, actors.trainer, actors.rollouts
            )
            # Four steps: a batch boundary after the restart too, where paused groups resume
            # promptly (one run of three steps trained no rollout that spanned two versions).
            reports = await asyncio.wait_for(orchestrator.run(4, on_step), 240)
            return reports, await actors.engine.actor.describe.remote()

    reports, engine = asyncio.run(main())
    assert [r.version for r in reports] == [1, 2, 3, 4] and engine["version"] == 4
    for report in reports:
        assert len(report.trajectories) == 4  # two whole groups of two
        assert max(report.staleness) <= 1
        assert all(max(policy_versions(t), default=0) <= report.version - 1 for t in report.trajectories)
        assert all(t.status in ("finished", "truncated") for t in report.trajectories)
    # Partial rollouts across processes: paused on the worker, resumed under the next version.
    assert sum(r.episodes_aborted for r in reports) > 0 and sum(r.episodes_resumed for r in reports) > 0
    spanning = [t for r in reports for t in r.trajectories if len(set(policy_versions(t))) > 1]
    assert spanning and all(policy_versions(t) == sorted(policy_versions(t)) for t in spanning)
