"""Rollout groups: what the RL orchestrator keeps in flight.

A `RolloutGroup` is `rl.group_size` episodes of one task sharing a group id; it is complete when
every episode has ended (finished, truncated or failed) and been graded. Each episode runs in an
`EpisodeSlot`, which

- holds its own sandbox over the task's starting workspace for the whole episode, so that an
  episode aborted for a weight update resumes (`Episode.resume`) in the workspace it left;
- parks while paused: `pause()` aborts the episode's generation (its tokens, logprobs and versions
  are kept in the aborted trajectory) and `release()` lets it continue, under whatever weights
  the engine serves by then;
- calls the policy through `group_policy`, which keeps a group's requests on one engine replica
  where the policy can (`GroupAffinePolicy`);
- grades the finished episode in its sandbox (`overture.tasks.episodes.grade_episode`);
- retries an episode whose sandbox died (or could not start) once, from the start in a fresh
  sandbox, and keeps a second death as a failed trajectory (reward 0) with its reason; a second
  failure to start raises, as the pool is then broken.

`TaskQueue` deals train tasks in a seeded shuffled order, cycling, with re-queued tasks first; its
`state()` goes into RL checkpoints, so that a resumed run deals the tasks the interrupted one
had not yet dealt instead of starting the order again;
`RolloutStats` counts what happened (aborts, resumes, retries, tokens, generation-idle time).

The orchestrator starts groups through a `Rollouts` handle: `LocalRollouts` runs them in its own
event loop; `overture.orchestration.ray_actors.RemoteRollouts` runs them in rollout-worker actors, each with
its own sandbox pool, by this same code.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from overture.agent import Episode, Policy, ToolSet, Trajectory
from overture.config import AgentConfig, TasksConfig
from overture.sandbox import Sandbox, SandboxError, SandboxPool
from overture.tasks.episodes import grade_episode
from overture.tasks.spec import Task
from overture.tasks.task_sandbox import task_sandbox
from overture.text import Tokenizer

SANDBOX_DIED = "sandbox died"


class TaskQueue:
    """Tasks in a seeded shuffled order, reshuffled each pass; re-queued tasks come first."""

    def __init__(self, tasks: Sequence[Task], seed: int) -> None:
        self.tasks = list(tasks)
        if not self.tasks:
            raise ValueError("the task queue needs at least one task")
        self._rng = random.Random(seed)
        self._order: deque[Task] = deque()

    def next(self) -> Task:
        if not self._order:
            order = list(self.tasks)
            self._rng.shuffle(order)
            self._order.extend(order)
        return self._order.popleft()

    def requeue(self, task: Task) -> None:
        self._order.appendleft(task)

    def state(self, first: Sequence[Task] = ()) -> dict[str, Any]:
        """Where the queue stands, JSON-ready, with `first` (tasks whose groups a checkpoint
        does not keep: in flight, complete and not yet trained on) dealt again before the rest."""
        version, internal, gauss = self._rng.getstate()
        return {
            "order": [task.instance_id for task in [*first, *self._order]],
            "rng": [version, list(internal), gauss],
        }

    def restore(self, state: dict[str, Any]) -> None:
        """Continue from a `state()` of a queue over the same tasks; a clear error if the tasks
        differ."""
        by_id = {task.instance_id: task for task in self.tasks}
        unknown = [i for i in state["order"] if i not in by_id]
        if unknown:
            raise ValueError(
                f"the task queue's saved state names {len(unknown)} tasks this run does "
                f"not train on (first: {unknown[0]!r}): resume with the task set it was saved with"
            )
        version, internal, gauss = state["rng"]
        self._rng.setstate((version, tuple(internal), gauss))
        self._order = deque(by_id[i] for i in state["order"])


@dataclass
class RolloutStats:
    """Counters since the last `take()`, and a clock of the time no episode was running."""

    aborted: int = 0
    resumed: int = 0
    retried: int = 0
    failed: int = 0
    tokens: int = 0
    idle_s: float = 0.0
    running: int = 0
    _idle_since: float | None = field(default_factory=time.monotonic)

    def episode_started(self) -> None:
        if self.running == 0 and self._idle_since is not None:
            self.idle_s += time.monotonic() - self._idle_since
            self._idle_since = None
        self.running += 1

    def episode_stopped(self) -> None:
        self.running -= 1
        if self.running == 0:
            self._idle_since = time.monotonic()

    def take(self) -> dict[str, float]:
        """The counts since the last call (idle time up to now), and start counting afresh."""
        now = time.monotonic()
        if self._idle_since is not None:
            self.idle_s += now - self._idle_since
            self._idle_since = now
        counts = {
            "aborted": self.aborted,
            "resumed": self.resumed,
            "retried": self.retried,
            "failed": self.failed,
            "tokens": self.tokens,
            "idle_s": self.idle_s,
        }
        self.aborted = self.resumed = self.retried = self.failed = self.tokens = 0
        self.idle_s = 0.0
        return counts


@runtime_checkable
class GroupAffinePolicy(Protocol):
    """A policy over several engine replicas that can keep a group's requests on one of them
    (`VllmPolicy`, and `RemoteEnginePolicy`, which passes the group to the engine actor): the
    group shares its prompt, which that replica then prefills once."""

    def for_group(self, group_id: str) -> Policy: ...


def group_policy(policy: Policy, group_id: str) -> Policy:
    """The policy a group's episodes call: kept on one replica where `policy` can do that."""
    return policy.for_group(group_id) if isinstance(policy, GroupAffinePolicy) else policy


@dataclass
class RolloutEnv:
    """What every episode needs: the policy (the engine's), sandboxes, tokenizer, the agent's
    limits, the grading rules, the tools; and how many episodes a group runs."""

    policy: Policy
    pool: SandboxPool
    tokenizer: Tokenizer
    agent: AgentConfig
    grading: TasksConfig
    group_size: int
    tools: ToolSet | None = None


class EpisodeSlot:
    """One episode of a group, from its first token to its grade (see the module docstring)."""

    def __init__(self, task: Task, group_id: str, env: RolloutEnv, stats: RolloutStats) -> None:
        self.task, self.group_id, self.env, self.stats = task, group_id, env, stats
        self._gate = asyncio.Event()
        self._gate.set()
        self._episode: Episode | None = None

    def pause(self) -> None:
        """Abort the episode's generation and hold it until `release()` (a no-op once it has ended)."""
        self._gate.clear()
        if self._episode is not None:
            self._episode.abort()

    def release(self) -> None:
        self._gate.set()

    async def run(self) -> Trajectory:
        """Play the episode (retried once if its sandbox dies or fails to start) and grade it."""
        env = self.env
        for attempt in (1, 2):
            started = False
            try:
                async with task_sandbox(env.pool, self.task) as box:
                    started = True
                    trajectory = await self._play(box)
                    self._episode = None
                    if not box.alive:
                        if attempt == 1:
                            self.stats.retried += 1
                            continue
                        trajectory.status = "failed"
                        trajectory.status_reason = f"{SANDBOX_DIED} (twice): {trajectory.status_reason}"
                    if trajectory.status == "failed":
                        self.stats.failed += 1
                    return await grade_episode(self.task, box, trajectory, env.grading)
            except SandboxError:
                if started or attempt == 2:
                    raise  # a pool that cannot start sandboxes twice in a row is broken, not unlucky
                self.stats.retried += 1
        raise AssertionError("unreachable: the second attempt returns or raises")

    async def _play(self, box: Sandbox) -> Trajectory:
        """Run the episode in `box`, parking it whenever it is aborted, until it ends or the box dies."""
        env = self.env
        policy = group_policy(env.policy, self.group_id)
        episode = Episode(
            policy, box, env.tokenizer, self.task.problem_statement, env.agent, env.tools,
            task_id=self.task.instance_id, group_id=self.group_id,
        )  # fmt: skip
        counted = 0
        while True:
            self._episode = episode
            await self._gate.wait()
            self.stats.episode_started()
            try:
                trajectory = await episode.run()
            finally:
                self.stats.episode_stopped()
            policy_tokens = sum(trajectory.loss_mask)
            self.stats.tokens += policy_tokens - counted
            counted = policy_tokens
            if trajectory.status != "aborted" or not box.alive:
                return trajectory
            self.stats.aborted += 1
            await self._gate.wait()
            self.stats.resumed += 1
            episode = Episode.resume(
                trajectory, policy, box, env.tokenizer, env.agent, env.tools
            )  # fmt: skip


class RolloutGroup:
    """`rl.group_size` episodes of one task; `run()` returns their graded trajectories, in order."""

    def __init__(self, task: Task, group_id: str, env: RolloutEnv, stats: RolloutStats) -> None:
        self.task, self.group_id = task, group_id
        self.slots = [EpisodeSlot(task, group_id, env, stats) for _ in range(env.group_size)]

    async def run(self) -> list[Trajectory]:
        return list(await asyncio.gather(*(slot.run() for slot in self.slots)))

    def pause(self) -> None:
        for slot in self.slots:
            slot.pause()

    def release(self) -> None:
        for slot in self.slots:
            slot.release()


class GroupRun(Protocol):
    """A started rollout group, wherever it runs."""

    task: Task
    group_id: str

    async def run(self) -> list[Trajectory]: ...

    def pause(self) -> None: ...

    def release(self) -> None: ...


class Rollouts(Protocol):
    """Where the orchestrator's groups run: `start` them, `take_stats` of what happened since."""

    def start(self, task: Task, group_id: str) -> GroupRun: ...

    async def take_stats(self) -> dict[str, float]: ...


class LocalRollouts:
    """Groups run in this process's event loop, on `env`. Its stats count, as `requests_resent`,
    the requests the policy sent again because its engine died under them (a policy over another
    process's engine keeps that count as `requests_resent`)."""

    def __init__(self, env: RolloutEnv) -> None:
        self.env = env
        self.stats = RolloutStats()
        self._resent_reported = 0

    def start(self, task: Task, group_id: str) -> RolloutGroup:
        return RolloutGroup(task, group_id, self.env, self.stats)

    async def take_stats(self) -> dict[str, float]:
        counts = self.stats.take()
        resent = getattr(self.env.policy, "requests_resent", 0)
        counts["requests_resent"], self._resent_reported = resent - self._resent_reported, resent
        return counts


def policy_versions(trajectory: Trajectory) -> list[int]:
    """The policy version of each policy token (those with loss mask 1)."""
    return [v for v, m in zip(trajectory.versions, trajectory.loss_mask, strict=True) if m]


def staleness(trajectory: Trajectory, trainer_version: int) -> int:
    """Trainer version minus the oldest version among the trajectory's policy tokens (0 if none)."""
    versions = policy_versions(trajectory)
    return trainer_version - min(versions) if versions else 0


def admissible(trajectories: Sequence[Trajectory], trainer_version: int, bound: int) -> bool:
    """AReaL's rule: a group joins a batch only if no policy token is more than `bound` versions old."""
    return all(staleness(t, trainer_version) <= bound for t in trajectories)
