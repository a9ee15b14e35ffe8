"""The RL orchestrator in its three modes, with a tiny random MoE served by a real engine, a real
trainer, real sandboxes and synthesized tasks: staleness bounds, weight versions, whole groups,
partial rollouts that are aborted and resumed, sandbox deaths, and configuration errors."""

from __future__ import annotations

import asyncio
import dataclasses
import json

import pytest
from orchestrator_helpers import SandboxKillingPolicy, run_config, run_orchestrator

from overture.agent import Trajectory
from overture.orchestration.orchestrator import Orchestrator, StepReport, check_config
from overture.orchestration.rollout_groups import TaskQueue, admissible, policy_versions, staleness


def assert_whole_groups(reports: list[StepReport], group_size: int, batch_groups: int) -> None:
    """Each batch: B blocks of G trajectories, one group and one task per block, none unfinished."""
    seen: set[str] = set()
    for report in reports:
        assert len(report.trajectories) == group_size * batch_groups
        for start in range(0, len(report.trajectories), group_size):
            block = report.trajectories[start : start + group_size]
            assert len({t.group_id for t in block}) == 1 and len({t.task_id for t in block}) == 1
            assert block[0].group_id not in seen  # a group is trained on once
            seen.add(block[0].group_id)
        assert all(t.status in ("finished", "truncated", "failed") for t in report.trajectories)


def test_sync_mode_trains_on_fresh_rollouts_only(tiny_policy, numbers_tasks):
    config = run_config(staleness=0, overprovision=1.0)
    config.tasks = config.tasks.model_copy(update={"turn_cost": 0.01})  # a reward of two terms
    # The orchestrator deals the tasks it is given, whatever their split (RL's practice tasks are held out).
    tasks = [dataclasses.replace(task, split="heldout") for task in numbers_tasks]
    reports, engine_version = run_orchestrator(tiny_policy, tasks, config, steps=2)
    assert {t.task_id for r in reports for t in r.trajectories} <= {task.instance_id for task in tasks}
    assert [r.step for r in reports] == [1, 2] and [r.version for r in reports] == [1, 2]
    assert engine_version == 2
    for report in reports:
        assert report.staleness == {0: len(report.trajectories)}
        assert report.off_policy_token_share == 0.0
        # Every policy token was made by the weights trained at this step: nothing generated meanwhile.
        assert {v for t in report.trajectories for v in policy_versions(t)} == {report.version - 1}
        assert report.episodes_aborted == report.episodes_resumed == report.groups_dropped_stale == 0
        assert report.tokens_generated == sum(len(policy_versions(t)) for t in report.trajectories) > 0
        assert report.to_dict()["staleness"] == {"0": 4} and "trajectories" not in report.to_dict()
        # The batch's reward, term by term, and what its episodes did.
        means, episodes = report.episode_means, report.trajectories
        terms = means["reward_score"] + means["reward_turn_cost"] + means["reward_invalid_call_cost"]
        assert terms == pytest.approx(report.reward_mean)
        for episode in episodes:  # the turn cost is a share of the score: a failure pays none
            info = episode.reward_info
            assert info["turn_cost"] == pytest.approx(-0.01 * info["score"] * episode.metrics["turns"])
        assert means["turns"] == pytest.approx(sum(t.metrics["turns"] for t in episodes) / len(episodes))
        assert set(means) == {"reward_score", "reward_turn_cost", "reward_invalid_call_cost",
                              "parallel_turn_share", "tool_calls_per_turn", "turns",
                              "reads_before_first_edit", "policy_tokens"}  # fmt: skip
    assert_whole_groups(reports, 2, 2)


def test_async_mode_generates_during_training_within_the_staleness_bound(tiny_policy, numbers_tasks):
    config = run_config(staleness=1, overprovision=1.0)
    reports, engine_version = run_orchestrator(tiny_policy, numbers_tasks, config, steps=3)
    assert engine_version == 3
    lags = [lag for report in reports for lag in report.staleness]
    assert max(lags) == 1  # never beyond eta, and reached: rollouts ran under the old weights
    for report in reports:
        trained_under = report.version - 1
        for trajectory in report.trajectories:
            assert min(policy_versions(trajectory)) >= trained_under - 1
    assert any(r.off_policy_token_share > 0 for r in reports[1:])
    assert_whole_groups(reports, 2, 2)


def test_partial_rollouts_are_aborted_resumed_and_keep_each_tokens_version(tiny_policy, numbers_tasks):
    config = run_config(staleness=1, overprovision=2.0)
    # Two sequences at a time: episodes end in waves, so some are mid-turn when B groups are done.
    config.engine.max_batch_size = 2
    config.agent.max_new_tokens = 24
    reports, engine_version = run_orchestrator(tiny_policy, numbers_tasks, config, steps=3)
    assert engine_version == 3
    assert sum(r.episodes_aborted for r in reports) > 0 and sum(r.episodes_resumed for r in reports) > 0
    spanning = [
        (report, t) for report in reports for t in report.trajectories if len(set(policy_versions(t))) > 1
    ]
    assert spanning and sum(r.multi_version_trajectories for r in reports) == len(spanning)
    for report, trajectory in spanning:
        versions = policy_versions(trajectory)
        # Tokens made before the abort keep the old version, those after it the next one.
        assert versions == sorted(versions) and versions[-1] - versions[0] == 1
        assert report.version - 1 - versions[0] <= 1
    for report in reports:
        assert max(report.staleness) <= 1
    assert_whole_groups(reports, 2, 2)


def test_an_episode_whose_sandbox_dies_is_retried_once_in_a_fresh_sandbox(tiny_policy, numbers_tasks):
    config = run_config(batch_groups=1)
    killers: list[SandboxKillingPolicy] = []

    def wrap(policy):
        killers.append(SandboxKillingPolicy(policy, kills=1))
        return killers[0]

    (report,), _ = run_orchestrator(tiny_policy, numbers_tasks, config, steps=1, wrap_policy=wrap)
    killed = len(killers[0].killed)
    assert killed >= 1
    assert report.episodes_retried == killed and report.episodes_failed == 0
    assert all(t.status != "failed" for t in report.trajectories)


def test_an_episode_whose_sandbox_dies_twice_is_kept_as_failed_with_reward_zero(tiny_policy, numbers_tasks):
    config = run_config(batch_groups=1)
    (report,), _ = run_orchestrator(
        tiny_policy,
        numbers_tasks,
        config,
        steps=1,
        wrap_policy=lambda policy: SandboxKillingPolicy(policy, kills=99),
    )
    assert report.episodes_retried == report.episodes_failed == 2
    for trajectory in report.trajectories:
        assert trajectory.status == "failed" and "sandbox died (twice)" in trajectory.status_reason
        assert trajectory.reward == 0.0 and trajectory.reward_info["reason"] == "episode failed"
    assert_whole_groups([report], 2, 1)


@pytest.mark.parametrize(
    "signal_off",
    [{"drop_zero_signal_groups": True}, {"kl_coef": 0.0}],
    ids=["groups-dropped", "advantages-all-zero"],
)
def test_a_batch_without_signal_makes_no_optimizer_step_and_the_run_goes_on(
    tiny_policy, numbers_tasks, signal_off
):
    # A random model resolves nothing: every group's rewards are equal, so every group is dropped,
    # or kept with advantages of 0 and no KL term: no gradient but the router's, and no step.
    config = run_config(batch_groups=1, **signal_off)
    reports, engine_version = run_orchestrator(tiny_policy, numbers_tasks, config, steps=2)
    assert engine_version == 0 and [r.version for r in reports] == [0, 0]
    assert all(r.train_metrics["skipped"] == 1.0 for r in reports)
    assert all(r.staleness == {0: 2} for r in reports)  # sync: the next groups waited for the batch


def test_bad_configurations_name_the_key(numbers_tasks):
    train = [task for task in numbers_tasks if task.split == "train"]
    config = run_config(batch_groups=len(train), overprovision=2.0, staleness=1)
    with pytest.raises(ValueError, match=r"tasks to deal.*rl\.batch_groups"):
        check_config(config.rl, train)
    with pytest.raises(ValueError, match=r"rl\.staleness"):
        check_config(run_config(overprovision=2.0, staleness=0).rl, train)
    config = run_config()
    config.rl = config.rl.model_copy(update={"group_size": 1})  # past the schema's own check
    with pytest.raises(ValueError, match=r"rl\.group_size"):
        check_config(config.rl, train)
    with pytest.raises(ValueError, match=r"rl\.minibatches"):
        check_config(run_config(minibatches=5).rl, train)
    check_config(run_config().rl, train)


def trajectory_with_versions(versions: list[int]) -> Trajectory:
    """Two prompt tokens, then one policy token per version."""
    n = len(versions)
    return Trajectory(list(range(2 + n)), [0, 0] + [1] * n, [0.0, 0.0] + [-1.0] * n, [-1, -1, *versions])


def test_admission_rule_bounds_the_oldest_policy_token_of_every_trajectory():
    resumed = trajectory_with_versions([3, 3, 4, 4])  # a partial rollout, aborted under 3, resumed under 4
    fresh = trajectory_with_versions([5, 5])
    assert staleness(resumed, 5) == 2 and staleness(fresh, 5) == 0
    assert admissible([fresh, resumed], 5, 2) and not admissible([fresh, resumed], 5, 1)
    assert admissible([fresh, fresh], 5, 0) and not admissible([fresh, trajectory_with_versions([4])], 5, 0)
    assert policy_versions(resumed) == [3, 3, 4, 4]


def test_task_queue_cycles_a_seeded_shuffle_and_serves_requeued_tasks_first(numbers_tasks):
    def order(seed: int) -> list[str]:
        queue = TaskQueue(numbers_tasks, seed)
        return [queue.next().instance_id for _ in range(2 * len(numbers_tasks))]

    assert order(7) == order(7)  # the seed decides the order
    ids = sorted(t.instance_id for t in numbers_tasks)
    assert (
        sorted(order(7)[: len(numbers_tasks)]) == ids == sorted(order(7)[len(numbers_tasks) :])
    )  # each once per pass
    queue = TaskQueue(numbers_tasks, seed=7)
    taken = [queue.next() for _ in range(3)]
    queue.requeue(taken[1])
    assert queue.next() is taken[1]


def test_task_queue_state_round_trips_through_json_and_deals_what_the_queue_would_have(numbers_tasks):
    queue = TaskQueue(numbers_tasks, seed=7)
    dealt = [queue.next() for _ in range(len(numbers_tasks) + 3)]  # into its second pass
    lost = dealt[-2:]  # e.g. the tasks of groups still in flight at a checkpoint
    state = json.loads(json.dumps(queue.state(lost)))
    restored = TaskQueue(numbers_tasks, seed=7)
    restored.restore(state)
    for task in reversed(lost):  # saved first: as if re-queued
        queue.requeue(task)
    assert [restored.next() for _ in range(60)] == [queue.next() for _ in range(60)]
    other_tasks = [t for t in numbers_tasks if t.instance_id != dealt[-1].instance_id]
    with pytest.raises(ValueError, match="task set it was saved with"):
        TaskQueue(other_tasks, seed=7).restore(state)


def instance_ids(tasks) -> list[str]:
    return sorted(task.instance_id for task in tasks)


def test_an_orchestrator_restored_from_a_reports_task_queue_deals_the_lost_tasks_then_the_rest(numbers_tasks):
    # B = 1, O = 2: after the first batch, groups are still in flight; a run resumed from that
    # report's queue state starts their tasks first, then the tasks the first run would have dealt.
    config = run_config(batch_groups=1, overprovision=2.0, staleness=2)
    works = [1, 60, 1, 1, 1, 1, 1, 1]

    def run(steps: int, task_queue=None) -> tuple[ScriptedRollouts, list[StepReport]]:
        rollouts = ScriptedRollouts(list(works), CountingEngine())
        orchestrator = Orchestrator(
            config.rl, config.seed, numbers_tasks, rollouts.engine, CountingTrainer(), rollouts, task_queue
        )
        return rollouts, asyncio.run(orchestrator.run(steps))

    uninterrupted, _ = run(3)
    first, (report,) = run(1)
    trained = {t.group_id for t in report.trajectories}
    lost = [g.task for g in first.groups if g.group_id not in trained]
    assert lost and report.task_queue and "task_queue" not in report.to_dict()
    resumed, _ = run(1, json.loads(json.dumps(report.task_queue)))
    started = [g.task for g in resumed.groups]
    assert instance_ids(started[: len(lost)]) == instance_ids(lost)  # complete ones, then those in flight
    rest = started[len(lost) :]
    assert rest and rest == [g.task for g in uninterrupted.groups][len(first.groups) :][: len(rest)]


class ScriptedGroup:
    """A group of two that needs `work` turns of the event loop while not paused, its episodes
    earning `rewards`; counts its pauses."""

    def __init__(
        self, task, group_id: str, work: int, versions: list[int], rewards: tuple[float, float] = (0.0, 0.0)
    ) -> None:
        self.task, self.group_id, self.work, self.rewards = task, group_id, work, rewards
        self.versions = versions  # the engine version each turn runs under, appended as it goes
        self.pauses = 0
        self._gate = asyncio.Event()
        self._gate.set()

    def pause(self) -> None:
        self.pauses += 1
        self._gate.clear()

    def release(self) -> None:
        self._gate.set()

    async def run(self) -> list[Trajectory]:
        made = []
        for _ in range(self.work):
            await self._gate.wait()
            made.append(self.versions[-1])
            await asyncio.sleep(0)
        group = [trajectory_with_versions(made) for _ in range(2)]
        for trajectory, reward in zip(group, self.rewards, strict=True):
            trajectory.reward, trajectory.group_id = reward, self.group_id
            trajectory.metrics["resolved"] = reward == 1.0
        return group


class ScriptedRollouts:
    """Groups started in order, the n-th with the n-th of `works` (and of `rewards`, if given)."""

    def __init__(self, works: list[int], engine, rewards: list[tuple[float, float]] | None = None) -> None:
        self.works, self.engine, self.groups = list(works), engine, []
        self.rewards = list(rewards) if rewards is not None else [(0.0, 0.0)] * len(works)

    def start(self, task, group_id: str) -> ScriptedGroup:
        group = ScriptedGroup(task, group_id, self.works.pop(0), self.engine.served, self.rewards.pop(0))
        self.groups.append(group)
        return group

    async def take_stats(self) -> dict[str, float]:
        return {"aborted": 0, "resumed": 0, "retried": 0, "failed": 0, "tokens": 0, "idle_s": 0.0}


class CountingEngine:
    def __init__(self) -> None:
        self.served = [0]

    @property
    def version(self) -> int:
        return self.served[-1]

    async def update_weights(self, weights, version: int) -> None:
        self.served.append(version)


class CountingTrainer:
    version = 0

    def __init__(self) -> None:
        self.batches: list[list[Trajectory]] = []

    async def train(self, trajectories) -> dict[str, float]:
        self.batches.append(list(trajectories))
        for _ in range(5):
            await asyncio.sleep(0)
        self.version += 1
        return {}

    async def export_weights(self) -> dict:
        return {}


def test_a_group_resumed_at_a_weight_update_is_not_cut_again_at_the_next_batch(numbers_tasks):
    # B = 1, O = 2: a quick group and a straggler start; the quick one makes batch 1, so the
    # straggler is paused for the update and resumed after it. A group started then makes batch
    # 2 at once; the straggler, already under the newest weights, runs on instead of being cut.
    config = run_config(batch_groups=1, overprovision=2.0, staleness=2)
    engine, trainer = CountingEngine(), CountingTrainer()
    rollouts = ScriptedRollouts([1, 60, 1, 1, 1], engine)
    orchestrator = Orchestrator(config.rl, config.seed, numbers_tasks, engine, trainer, rollouts)
    reports = asyncio.run(orchestrator.run(2))
    assert [r.version for r in reports] == [1, 2]
    quick, straggler = rollouts.groups[:2]
    assert quick.pauses == 0 and straggler.pauses == 1


def rewards_trained(trainer: CountingTrainer) -> list[list[float]]:
    return [[t.reward for t in batch] for batch in trainer.batches]


def test_dynamic_sampling_leaves_zero_signal_groups_out_and_starts_others_in_their_place(numbers_tasks):
    # Sync, B = 1: one group at a time. All-failed and all-solved groups stay out of the batch;
    # each gives its place to the next group, and the report counts them, the all-solved ones
    # among them, and their rewards.
    config = run_config(staleness=0, overprovision=1.0, batch_groups=1, dynamic_sampling=True)
    engine, trainer = CountingEngine(), CountingTrainer()
    rewards = [(0.0, 0.0), (1.0, 1.0), (0.0, 1.0), (0.0, 0.0), (1.0, 0.0), (0.0, 0.0)]
    rollouts = ScriptedRollouts([1] * 6, engine, rewards)  # the sixth starts after the last step
    reports = asyncio.run(
        Orchestrator(config.rl, config.seed, numbers_tasks, engine, trainer, rollouts).run(2)
    )
    assert rewards_trained(trainer) == [[0.0, 1.0], [1.0, 0.0]]
    assert [r.groups_left_out for r in reports] == [2, 1]
    assert [r.groups_left_out_resolved for r in reports] == [1, 0]
    assert [r.reward_mean for r in reports] == [0.5, 0.5]
    assert [r.sampled_reward_mean for r in reports] == [3 / 6, 1 / 4]
    assert [r.version for r in reports] == [1, 2]


def test_dynamic_sampling_takes_zero_signal_groups_past_its_limit_and_is_off_by_default(numbers_tasks):
    rewards = [(0.0, 0.0), (0.0, 0.0), (0.0, 1.0), (0.0, 0.0)]
    for rl, trained, left_out in (
        ({"dynamic_sampling": True, "max_left_out_groups": 1}, [[0.0, 0.0]], [1]),
        ({}, [[0.0, 0.0]], [0]),
    ):
        config = run_config(staleness=0, overprovision=1.0, batch_groups=1, **rl)
        engine, trainer = CountingEngine(), CountingTrainer()
        rollouts = ScriptedRollouts([1] * 4, engine, rewards)
        reports = asyncio.run(
            Orchestrator(config.rl, config.seed, numbers_tasks, engine, trainer, rollouts).run(1)
        )
        assert rewards_trained(trainer) == trained
        assert [r.groups_left_out for r in reports] == left_out
        assert reports[0].sampled_reward_mean == 0.0


def test_aborted_groups_leave_their_places_to_new_groups_while_the_trainer_runs(numbers_tasks):
    # B = 2 of 4 groups in flight (O = 2), η = 4. Groups 0 and 1 complete at once (group 4 takes
    # 0's place meanwhile): the batch. Groups 2-4 are aborted and generate nothing while the
    # trainer runs, so four new groups run meanwhile, not one: the in-flight cap counts the
    # groups that generate.
    config = run_config(batch_groups=2, overprovision=2.0, staleness=4)
    rollouts = ScriptedRollouts([1, 1] + [50] * 10, CountingEngine())
    pauses_at_training: list[list[int]] = []

    class ObservingTrainer(CountingTrainer):
        async def train(self, trajectories) -> dict[str, float]:
            pauses_at_training.append([group.pauses for group in rollouts.groups])
            return await super().train(trajectories)

    orchestrator = Orchestrator(
        config.rl, config.seed, numbers_tasks, rollouts.engine, ObservingTrainer(), rollouts
    )
    (report,) = asyncio.run(orchestrator.run(1))
    assert pauses_at_training == [[0, 0, 1, 1, 1, 0, 0, 0, 0]]
    assert report.version == 1 and rollouts.engine.served == [0, 1]
