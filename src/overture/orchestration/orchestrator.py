"""The RL orchestrator: rollout groups in flight, batches to the trainer, weights to the engine.

One code path, three modes by configuration (DESIGN.md decisions 2-3):

- `sync` (`rl.staleness` η = 0, `rl.overprovision` O = 1): B groups run under version v, the
  trainer takes them, the engine gets version v + 1, the next B groups start. Nothing generates
  while the trainer runs.
- `async` (η ≥ 1): generation goes on under the old weights while the trainer runs; episodes in
  flight at a weight update continue under the new weights, every token keeping its version.
- `async+partial` (O > 1, needs η ≥ 1): up to ceil(O × B) groups in flight; when B are
  complete every episode still in flight is aborted (its tokens, logprobs and versions kept,
  its sandbox held) and the trainer runs, while new groups run under the old weights in the
  places the batch and the aborted groups freed (an aborted group generates nothing, so it
  does not count against the in-flight cap until it resumes; it still holds its staleness
  capacity and its sandboxes); after the weight update the aborted episodes resume before any
  newer group starts, with what is left of their budgets. Groups stay whole. A group resumed
  at the last weight update is not aborted again at the next batch: it already generates
  under the newest weights, and cutting it would only redo its prefill (the next batch is
  often complete at once, from the groups that ran during training, so without this a resumed
  group would be cut before it moved on).

Admission follows AReaL. A new group starts only while fewer than ceil(O × B) groups are
generating (in flight and not aborted) and the groups started (less those dropped) stay below
(η + v + 1) × B, v being the trainer's version. A complete group joins a batch only if every
policy token's version is ≥ v − η; otherwise it is dropped, counted, and its task re-queued.

Dynamic sampling (DAPO, `rl.dynamic_sampling`): a group whose rewards are all equal gives every
advantage 0, so it is left out of the batch as it completes (counted, its task not re-queued)
and a new group takes its place and its staleness capacity. Up to `rl.max_left_out_groups` a
batch; past that such groups join the batch, so a policy that solves every task or none still
reaches its steps (which then train on the KL term alone, or are skipped).

Engine, trainer and rollout groups are reached through small async interfaces (`EngineHandle`,
`TrainerHandle`, `Rollouts`), in process by default (`LocalEngine`, `LocalTrainer`: heavy compute
runs off the event loop; `LocalRollouts`), and as Ray actors when `runtime.ray` is set
(`overture.orchestration.ray_actors`): the same orchestrator drives both (DESIGN.md decision 7).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from overture.agent import Policy, ToolSet, Trajectory
from overture.agent.metrics import RL_BEHAVIOUR
from overture.config import RLConfig, RunConfig
from overture.orchestration.engine_policy import EnginePolicy
from overture.orchestration.rollout_groups import (
    GroupRun,
    LocalRollouts,
    RolloutEnv,
    Rollouts,
    TaskQueue,
    admissible,
    policy_versions,
    staleness,
)
from overture.rl.advantages import zero_signal_groups
from overture.rl.samples import samples_from_trajectories
from overture.sandbox import SandboxPool
from overture.tasks.spec import Task
from overture.text import Tokenizer

Weights = Mapping[str, Any]


class EngineHandle(Protocol):
    """What the orchestrator needs of the rollout engine."""

    @property
    def version(self) -> int: ...

    def policy(self, **sampling: Any) -> Policy:
        """The engine behind the agent's `Policy` protocol; `sampling` (e.g. temperature) overrides
        the handle's own for that policy's requests."""
        ...

    async def update_weights(self, weights: Weights, version: int) -> None:
        """Serve `weights` (what the trainer's `export_weights` gave) as `version` from now on."""
        ...


class TrainerHandle(Protocol):
    """What the orchestrator needs of the trainer."""

    @property
    def version(self) -> int: ...

    async def train(self, trajectories: list[Trajectory]) -> dict[str, float]:
        """One optimizer update on a batch of whole groups; its metrics."""
        ...

    async def export_weights(self) -> Weights:
        """The current weights, in whatever form the engine handle's `update_weights` takes."""
        ...


class LocalEngine:
    """An in-process `overture.engine.Engine` as an `EngineHandle`; `sampling` applies to every request."""

    def __init__(self, engine: Any, **sampling: Any) -> None:
        self.engine = engine
        self.sampling = sampling

    @property
    def version(self) -> int:
        return self.engine.version

    def policy(self, **sampling: Any) -> Policy:
        return EnginePolicy(self.engine, **{**self.sampling, **sampling})

    async def update_weights(self, weights: Weights, version: int) -> None:
        # Blocks until the engine's step thread has swapped them in: off the event loop.
        await asyncio.to_thread(self.engine.update_weights, weights, version)


class LocalTrainer:
    """An in-process `overture.rl.trainer.Trainer` as a `TrainerHandle` (steps run in a thread)."""

    def __init__(self, trainer: Any) -> None:
        self.trainer = trainer

    @property
    def version(self) -> int:
        return self.trainer.policy_version

    async def train(self, trajectories: list[Trajectory]) -> dict[str, float]:
        return await asyncio.to_thread(self._train, trajectories)

    def _train(self, trajectories: list[Trajectory]) -> dict[str, float]:
        return train_on_trajectories(self.trainer, trajectories)

    async def export_weights(self) -> Weights:
        return await asyncio.to_thread(self.trainer.export_weights)


def train_on_trajectories(trainer: Any, trajectories: list[Trajectory]) -> dict[str, float]:
    """One RL update of an `overture.rl.trainer.Trainer` on a batch of whole groups; its metrics."""
    samples, report = samples_from_trajectories(trajectories, trainer.rl_settings())
    if not samples:  # every group dropped (rl.drop_zero_signal_groups): nothing to step on
        return {"skipped": 1.0, "zero_signal_groups": report.zero_signal_groups}
    metrics = trainer.rl_step(samples)  # {"skipped": 1, ...} too when no sample carries signal
    metrics.update(zero_signal_groups=report.zero_signal_groups, masked_truncated=report.masked_truncated)
    return metrics


def local_rollouts(
    config: RunConfig,
    engine: EngineHandle,
    pool: SandboxPool,
    tokenizer: Tokenizer,
    policy: Policy | None = None,
    tools: ToolSet | None = None,
) -> LocalRollouts:
    """Groups of `rl.group_size` episodes (`agent`'s limits, graded by `tasks`' rules) in this
    process on `pool`; `policy`: what the episodes call, by default `engine.policy()` (pass a
    wrapper around it to observe or disturb episodes)."""
    policy = policy or engine.policy()
    env = RolloutEnv(policy, pool, tokenizer, config.agent, config.tasks, config.rl.group_size, tools)
    return LocalRollouts(env)


@dataclass
class StepReport:
    """One batch of the orchestrator (one optimizer update, unless the batch had no policy signal:
    every group dropped for it, or all advantages 0 (`overture.rl.samples.has_policy_signal`);
    then `version` stays and `train_metrics["skipped"]` is 1), JSON-ready through `to_dict()`.

    Counts (`groups_dropped_stale`, `episodes_*`, `requests_resent`, `tokens_generated`,
    `generation_idle_s`, `wall_s`, `groups_left_out`) cover the time since the previous report;
    `requests_resent` counts generation requests sent again because the engine's process (the
    engine actor's, or a vLLM server's) died under them; `groups_left_out` counts zero-signal
    groups dynamic sampling kept out of batches, `groups_left_out_resolved` those of them whose
    every episode resolved its task (the rest failed every time): which kind of task the
    sampling spent itself on.
    `reward_mean` is over the batch; `sampled_reward_mean` over the batch and the groups left out,
    which is the policy's reward on what it sampled. `episode_means` are the batch's means of each
    reward term (`REWARD_TERMS`: the score and the costs subtracted from it) and of the behaviour
    RL should move (`overture.agent.metrics.RL_BEHAVIOUR`). `task_queue` is the train-task queue's
    state after the step (`TaskQueue.state`), for checkpoints; `to_dict` leaves it out.
    `staleness` maps trainer version minus a trajectory's oldest token version to the number of
    admitted trajectories with that lag.
    """

    step: int
    version: int
    reward_mean: float
    resolved_share: float
    staleness: dict[int, int]
    off_policy_token_share: float
    groups_dropped_stale: int
    episodes_aborted: int
    episodes_resumed: int
    episodes_retried: int
    episodes_failed: int
    multi_version_trajectories: int
    generation_idle_s: float
    training_s: float
    tokens_generated: int
    wall_s: float
    requests_resent: int = 0
    groups_left_out: int = 0
    groups_left_out_resolved: int = 0
    sampled_reward_mean: float = 0.0
    episode_means: dict[str, float] = field(default_factory=dict)
    train_metrics: dict[str, float] = field(default_factory=dict)
    trajectories: list[Trajectory] = field(default_factory=list, repr=False)
    task_queue: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def tokens_per_s(self) -> float:
        """Tokens generated per second of the step's wall time."""
        return self.tokens_generated / self.wall_s if self.wall_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        """Every field but the trajectories (write those with `Trajectory.to_dict`) and the task
        queue's state."""
        data = {k: v for k, v in self.__dict__.items() if k not in ("trajectories", "task_queue")}
        data["staleness"] = {str(lag): count for lag, count in sorted(self.staleness.items())}
        return data


# The terms of an episode's reward (`overture.tasks.grading.reward`): the task's score, and the
# costs subtracted from it (negative).
REWARD_TERMS = ("score", "turn_cost", "invalid_call_cost")


def episode_means(trajectories: Sequence[Trajectory]) -> dict[str, float]:
    """The mean of each reward term and episode measure over `trajectories` (`reward_*`, then the
    measures by name); an episode that was not graded counts 0 for every term."""
    count = max(1, len(trajectories))
    means = {
        f"reward_{term}": sum(float(t.reward_info.get(term, 0.0)) for t in trajectories) / count
        for term in REWARD_TERMS
    }
    for name in RL_BEHAVIOUR:
        means[name] = sum(float(t.metrics.get(name, 0.0)) for t in trajectories) / count
    return means


def check_config(rl: RLConfig, tasks: Sequence[Task]) -> None:
    """A clear error naming the key when the `[rl]` settings cannot run the orchestrator on `tasks`."""
    if rl.group_size < 2:
        raise ValueError(
            f"rl.group_size = {rl.group_size}: a group needs at least 2 episodes (advantages compare them)"
        )
    if rl.overprovision > 1 and rl.staleness < 1:
        raise ValueError(
            f"rl.overprovision = {rl.overprovision:g} needs rl.staleness >= 1: a resumed partial rollout "
            "holds tokens one version old, which rl.staleness = 0 would always drop"
        )
    in_flight = groups_in_flight(rl)
    if len(tasks) < in_flight:
        raise ValueError(
            f"{len(tasks)} tasks to deal, but rl.batch_groups x rl.overprovision = {in_flight} groups "
            "run at once, each on its own task: give more tasks or lower rl.batch_groups"
        )
    if rl.minibatches > rl.batch_groups * rl.group_size:
        raise ValueError(
            f"rl.minibatches = {rl.minibatches} exceeds the {rl.batch_groups * rl.group_size} trajectories "
            "of a batch (rl.batch_groups x rl.group_size)"
        )


def groups_in_flight(rl: RLConfig) -> int:
    return math.ceil(rl.overprovision * rl.batch_groups)


class Orchestrator:
    """Runs rollout groups on the engine's policy and trains on them (see the module docstring)."""

    def __init__(
        self,
        rl: RLConfig,
        seed: int,
        tasks: Sequence[Task],
        engine: EngineHandle,
        trainer: TrainerHandle,
        rollouts: Rollouts,
        task_queue: dict[str, Any] | None = None,
    ) -> None:
        """`rl`: the batch, staleness and partial-rollout settings; `seed`: the order tasks are
        dealt in; `tasks`: the tasks to deal, whatever their split; `rollouts`: where groups run
        (`local_rollouts(...)` in this process); `task_queue`: a step report's `task_queue`, to
        deal tasks on from where that run stood (a resume)."""
        check_config(rl, tasks)
        if engine.version != trainer.version:
            raise ValueError(
                f"the engine serves version {engine.version} but the trainer is at {trainer.version}: "
                "start both from the same weights"
            )
        self.rl, self.engine, self.trainer = rl, engine, trainer
        self.batch_groups, self.staleness_bound = rl.batch_groups, rl.staleness
        self.max_in_flight = groups_in_flight(rl)
        self.partial = rl.overprovision > 1
        self.dynamic_sampling = rl.dynamic_sampling
        self.max_left_out = rl.max_left_out_groups
        self.queue = TaskQueue(tasks, seed)
        if task_queue:
            self.queue.restore(task_queue)
        self.rollouts = rollouts
        self.version = trainer.version
        self._in_flight: dict[asyncio.Task, GroupRun] = {}
        self._just_resumed: set[asyncio.Task] = set()  # paused at the last batch, released since
        self._paused: set[asyncio.Task] = set()  # paused while the trainer runs
        self._complete: list[tuple[GroupRun, list[Trajectory]]] = []
        self._started = 0  # groups started and not dropped (AReaL's accepted + running)
        self._dropped = 0
        self._left_out_of_batch = 0  # zero-signal groups left out while this batch gathers
        self._left_out_rewards: list[float] = []  # their rewards, since the last report
        self._left_out_resolved = 0  # of those groups, the ones that resolved every episode
        self._group_ids = 0
        self._changed = asyncio.Event()
        self._error: BaseException | None = None
        self._stopping = False

    # ------------------------------------------------------------------ the loop

    async def run(self, steps: int, on_step: Callable[[StepReport], None] | None = None) -> list[StepReport]:
        """Train for `steps` batches; one `StepReport` each (also handed to `on_step` as it comes).
        Groups still in flight at the end are cancelled: an orchestrator runs once."""
        reports: list[StepReport] = []
        last = time.monotonic()
        await self.rollouts.take_stats()
        try:
            self._fill()
            while len(reports) < steps:
                batch = await self._next_batch()
                report = await self._train(batch, len(reports) + 1, last)
                last = time.monotonic()
                reports.append(report)
                if on_step is not None:
                    on_step(report)
        finally:
            await self._stop()
        return reports

    async def _next_batch(self) -> list[tuple[GroupRun, list[Trajectory]]]:
        """Wait until B admissible groups are complete; take them (oldest first)."""
        while True:
            if self._error is not None:
                raise self._error
            self._drop_stale()
            if len(self._complete) >= self.batch_groups:
                batch = self._complete[: self.batch_groups]
                del self._complete[: self.batch_groups]
                self._left_out_of_batch = 0
                return batch
            self._changed.clear()
            await self._changed.wait()

    async def _train(
        self, batch: list[tuple[GroupRun, list[Trajectory]]], step: int, since: float
    ) -> StepReport:
        """Pause (partial mode), train, push the weights, resume; the step's report."""
        # Groups resumed at the last weight update already generate under the newest weights:
        # cutting them again now would only redo their prefill, so they run on.
        paused = [r for r in self._in_flight if r not in self._just_resumed] if self.partial else []
        for runner in paused:
            self._in_flight[runner].pause()
        self._paused = set(paused)
        # The places the batch and the paused groups free go to new groups, which run under the
        # old weights while the trainer works (within the staleness capacity: none with η = 0,
        # which is sync).
        self._fill()
        trajectories = [t for _, group in batch for t in group]
        trained_under = self.version
        began = time.monotonic()
        metrics = await self.trainer.train(trajectories)
        training_s = time.monotonic() - began
        version = self.trainer.version
        if version == trained_under:
            # No optimizer step (the batch had no policy signal): no new weights, and
            # these groups made no version, so they give their staleness capacity back.
            self._started -= len(batch)
        else:
            await self.engine.update_weights(await self.trainer.export_weights(), version)
            if self.engine.version != version:
                raise RuntimeError(
                    f"the engine serves version {self.engine.version} after an update to version {version}"
                )
        self.version = version
        for runner in paused:
            if runner in self._in_flight:
                self._in_flight[runner].release()  # resumed first: before any new group starts
        self._paused = set()
        self._just_resumed = set(paused)
        self._fill()
        counts = await self.rollouts.take_stats()
        return self._report(step, trajectories, trained_under, metrics, training_s, since, counts)

    # ------------------------------------------------------------------ admission

    def _fill(self) -> None:
        """Start groups while the in-flight cap and the staleness capacity allow."""
        if self._stopping:
            return
        capacity = (self.staleness_bound + self.version + 1) * self.batch_groups
        while len(self._in_flight) - len(self._paused) < self.max_in_flight and self._started < capacity:
            self._start_group(self.queue.next())

    def _start_group(self, task: Task) -> None:
        self._group_ids += 1
        group = self.rollouts.start(task, f"{task.instance_id}#g{self._group_ids}")
        runner = asyncio.create_task(group.run(), name=group.group_id)
        self._in_flight[runner] = group
        self._started += 1
        runner.add_done_callback(self._group_done)

    def _group_done(self, runner: asyncio.Task) -> None:
        group = self._in_flight.pop(runner)
        self._paused.discard(runner)
        if runner.cancelled():
            return
        error = runner.exception()
        if error is not None:
            self._error = self._error or error
        else:
            trajectories = runner.result()
            if self._leaves_out(trajectories):
                self._started -= 1  # its place and its staleness capacity go to a new group
            else:
                self._complete.append((group, trajectories))
            if not (self.partial and len(self._complete) >= self.batch_groups):
                self._fill()  # in partial mode a full batch's places are filled once the rest is paused
        self._changed.set()

    def _leaves_out(self, trajectories: list[Trajectory]) -> bool:
        """Dynamic sampling: whether this complete group stays out of the batch (all rewards
        equal, and the batch has left out fewer than `rl.max_left_out_groups`); counts it if so."""
        if not self.dynamic_sampling or self._left_out_of_batch >= self.max_left_out:
            return False
        rewards = [t.reward for t in trajectories]
        if not bool(zero_signal_groups(rewards, len(rewards))[0]):
            return False
        self._left_out_of_batch += 1
        self._left_out_rewards.extend(rewards)
        self._left_out_resolved += all(t.metrics.get("resolved") for t in trajectories)
        return True

    def _drop_stale(self) -> None:
        """Drop complete groups holding a token older than trainer version − η; re-queue their tasks."""
        kept = []
        for group, trajectories in self._complete:
            if admissible(trajectories, self.version, self.staleness_bound):
                kept.append((group, trajectories))
            else:
                self._dropped += 1
                self._started -= 1
                self.queue.requeue(group.task)
        if len(kept) != len(self._complete):
            self._complete = kept
            self._fill()

    async def _stop(self) -> None:
        """Cancel what is still in flight (their sandboxes close) once the steps are done."""
        self._stopping = True
        runners = list(self._in_flight)
        for group in self._in_flight.values():
            group.release()
        for runner in runners:
            runner.cancel()
        await asyncio.gather(*runners, return_exceptions=True)

    # ------------------------------------------------------------------ reports

    def _report(
        self,
        step: int,
        trajectories: list[Trajectory],
        trained_under: int,
        metrics: dict[str, float],
        training_s: float,
        since: float,
        counts: dict[str, float],
    ) -> StepReport:
        versions = [policy_versions(t) for t in trajectories]
        policy_tokens = sum(len(v) for v in versions)
        off_policy = sum(1 for vs in versions for v in vs if v < trained_under)
        dropped, self._dropped = self._dropped, 0
        left_out, self._left_out_rewards = self._left_out_rewards, []
        left_out_resolved, self._left_out_resolved = self._left_out_resolved, 0
        sampled = [t.reward for t in trajectories] + left_out
        return StepReport(
            step=step,
            version=self.version,
            reward_mean=sum(t.reward for t in trajectories) / len(trajectories),
            resolved_share=sum(bool(t.metrics.get("resolved")) for t in trajectories) / len(trajectories),
            staleness=dict(Counter(staleness(t, trained_under) for t in trajectories)),
            off_policy_token_share=off_policy / policy_tokens if policy_tokens else 0.0,
            groups_dropped_stale=dropped,
            episodes_aborted=int(counts["aborted"]),
            episodes_resumed=int(counts["resumed"]),
            episodes_retried=int(counts["retried"]),
            episodes_failed=int(counts["failed"]),
            requests_resent=int(counts.get("requests_resent", 0)),
            groups_left_out=len(left_out) // self.rl.group_size,
            groups_left_out_resolved=left_out_resolved,
            sampled_reward_mean=sum(sampled) / len(sampled),
            episode_means=episode_means(trajectories),
            multi_version_trajectories=sum(len(set(vs)) > 1 for vs in versions),
            generation_idle_s=round(counts["idle_s"], 6),
            training_s=round(training_s, 6),
            tokens_generated=int(counts["tokens"]),
            wall_s=round(time.monotonic() - since, 6),
            train_metrics=dict(metrics),
            trajectories=trajectories,
            # A resume from this step loses the groups not yet trained on: their tasks come first.
            task_queue=self.queue.state(
                [group.task for group, _ in self._complete] + [g.task for g in self._in_flight.values()]
            ),
        )
