"""Evaluation: a policy on held-out tasks, graded, summarised as pass@k and behaviour metrics.

Each task is attempted `samples` times (independent episodes, each in its own sandbox, all
sharing one engine so that they batch together). pass@k uses the unbiased estimator of Chen et
al. (2021, "Evaluating Large Language Models Trained on Code"): with n samples of which c pass,
pass@k = 1 − C(n − c, k) / C(n, k), averaged over tasks. A task passes when grading says
`resolved`. Sampling is whatever the policy does (the engine's configured temperature, top-p,
top-k), so two checkpoints compare fairly only under the same settings.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from math import comb, sqrt
from statistics import stdev
from typing import Any

from overture.agent import Policy, ToolSet, Trajectory
from overture.agent.metrics import RL_BEHAVIOUR
from overture.config import AgentConfig, SandboxConfig, TasksConfig
from overture.sandbox import SandboxPool
from overture.tasks import Task, run_task_episode
from overture.tasks.localization import LOCALIZATION_METRICS, localization
from overture.tasks.parallel import map_bounded
from overture.text import Tokenizer


def pass_at_k(samples: int, passed: int, k: int) -> float:
    """Unbiased pass@k of one task from `samples` attempts of which `passed` resolved it."""
    if not 0 <= passed <= samples or not 1 <= k <= samples:
        raise ValueError(f"pass@{k} needs 1 <= k <= samples and 0 <= passed <= samples ({samples}, {passed})")
    if samples - passed < k:
        return 1.0
    return 1.0 - comb(samples - passed, k) / comb(samples, k)


@dataclass
class EvalReport:
    """Per-task results and their summary."""

    tasks: int
    samples: int
    pass_at: dict[int, float]
    resolved: dict[str, int] = field(default_factory=dict)  # instance_id -> resolved attempts
    metrics: dict[str, float] = field(default_factory=dict)  # behaviour metrics, mean per episode
    statuses: dict[str, int] = field(default_factory=dict)
    # pass@1 of each repository's tasks: a held-out repository (unseen code) and the held-out
    # functions of trained-on repositories (new bugs in seen code) are different questions.
    pass1_by_repo: dict[str, float] = field(default_factory=dict)
    # Tasks by how many of their `samples` attempts resolved them (0..samples). Those between 0
    # and `samples` are what sharpening can still turn: made reliable, they would lift pass@1 to
    # the share resolved at least once (pass@samples), and no further.
    times_resolved: dict[int, int] = field(default_factory=dict)
    # instance_id -> each `PAIRED_MEASURES` value of the task (pass@k by the estimator, the
    # others the mean over its episodes; `turns_resolved` only when one of them resolved it):
    # what `paired_changes` compares between two evaluations of the same tasks.
    by_task: dict[str, dict[str, float]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        summary = asdict(self)
        summary["pass_at"] = {f"pass@{k}": value for k, value in self.pass_at.items()}
        return summary


# "edited": share of episodes that changed the repository; "edit_calls" and "edits_applied": edit
# calls per episode and those of them that changed a file (an edit is the step a fix cannot skip);
# "edits_refused": those the tools refused because the file would no longer compile.
MEAN_METRICS = (
    "turns", "tool_calls_per_turn", "parallel_turn_share", "reads_before_first_edit", "edited",
    "edit_calls", "edits_applied", "edits_refused", "invalid_call_rate",
)  # fmt: skip
# Then the shares of episodes that read the lines the reference fix changes and that edited its
# files (`overture.tasks.localization`): where an agent that does not solve a task stops.
EVAL_METRICS = (*MEAN_METRICS, *LOCALIZATION_METRICS)
# Compared task by task between two evaluations (`paired_changes`), with pass@k: the behaviour RL
# should move, and the turns of the episodes that resolved their task.
PAIRED_MEASURES = (*RL_BEHAVIOUR, "turns_resolved")


def summarize(
    tasks: Sequence[Task], trajectories: Sequence[Trajectory], samples: int, ks: Sequence[int]
) -> EvalReport:
    """pass@k and mean behaviour and localization metrics (`EVAL_METRICS`) of `samples`
    trajectories per task (in task order)."""
    resolved = {task.instance_id: 0 for task in tasks}
    statuses: dict[str, int] = {}
    for trajectory in trajectories:
        resolved[trajectory.task_id] += trajectory.reward_info.get("resolution") == "resolved"
        statuses[trajectory.status] = statuses.get(trajectory.status, 0) + 1
    pass_at = {k: _mean([pass_at_k(samples, count, k) for count in resolved.values()]) for k in ks}
    metrics = {name: _mean([float(t.metrics.get(name, 0.0)) for t in trajectories]) for name in MEAN_METRICS}
    patches = {task.instance_id: task.patch for task in tasks}
    located = [localization(patches[t.task_id], t.turns) for t in trajectories]
    metrics.update({name: _mean([float(each[name]) for each in located]) for name in LOCALIZATION_METRICS})
    by_repo: dict[str, list[float]] = {}
    for task in tasks:
        by_repo.setdefault(task.repo, []).append(pass_at_k(samples, resolved[task.instance_id], 1))
    pass1_by_repo = {repo: _mean(values) for repo, values in sorted(by_repo.items())}
    times_resolved = {times: 0 for times in range(samples + 1)}
    for count in resolved.values():
        times_resolved[count] += 1
    episodes: dict[str, list[Trajectory]] = {task.instance_id: [] for task in tasks}
    for trajectory in trajectories:
        episodes[trajectory.task_id].append(trajectory)
    by_task = {task: _task_measures(own, samples, ks) for task, own in episodes.items()}
    return EvalReport(
        len(tasks), samples, pass_at, resolved, metrics, statuses, pass1_by_repo, times_resolved, by_task
    )


def _task_measures(own: Sequence[Trajectory], samples: int, ks: Sequence[int]) -> dict[str, float]:
    """One task's pass@k and `PAIRED_MEASURES` over its episodes `own`."""
    won = [t for t in own if t.reward_info.get("resolution") == "resolved"]
    measures = {f"pass@{k}": pass_at_k(samples, len(won), k) for k in ks}
    for name in PAIRED_MEASURES:
        episodes = won if name == "turns_resolved" else own
        key = "turns" if name == "turns_resolved" else name
        if episodes:
            measures[name] = _mean([float(t.metrics.get(key, 0.0)) for t in episodes])
    return measures


def paired_change(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
    """The change of one per-task measure between two evaluations, over the tasks both have it
    for: the means before and after, their difference, and its standard error paired by task (the
    standard deviation of the per-task changes over the root of their count; NaN under two tasks)."""
    common = [task for task in before if task in after]
    changes = [after[task] - before[task] for task in common]
    error = stdev(changes) / sqrt(len(changes)) if len(changes) >= 2 else float("nan")
    return {
        "before": _mean([before[task] for task in common]),
        "after": _mean([after[task] for task in common]),
        "change": _mean(changes),
        "standard_error": error,
        "tasks": len(common),
    }


def paired_changes(
    before: Mapping[str, Mapping[str, float]], after: Mapping[str, Mapping[str, float]]
) -> dict[str, dict[str, float]]:
    """`paired_change` of every measure two evaluations' `EvalReport.by_task` share (pass@k and
    `PAIRED_MEASURES`). Every task must be in both: pairing two different task sets means nothing."""
    _require_same_tasks(before, after, "paired changes")
    names = sorted({name for measures in before.values() for name in measures})
    names = [name for name in names if any(name in measures for measures in after.values())]
    return {
        name: paired_change(
            {task: m[name] for task, m in before.items() if name in m},
            {task: m[name] for task, m in after.items() if name in m},
        )
        for name in names
    }


def pass1_change(
    before: Mapping[str, int], before_samples: int, after: Mapping[str, int], after_samples: int
) -> tuple[float, float]:
    """The change of pass@1 between two evaluations of the same tasks (`EvalReport.resolved` and
    `samples` of each), and its standard error paired by task (`paired_change`). Pairing takes
    out how hard each task is, which two independent pass@1s would count as noise; what is left
    is the sampling of episodes."""
    _require_same_tasks(before, after, "pass@1 change")
    rates = (
        {task: count / before_samples for task, count in before.items()},
        {task: count / after_samples for task, count in after.items()},
    )
    paired = paired_change(*rates)
    return paired["change"], paired["standard_error"]


def _require_same_tasks(before: Mapping[str, Any], after: Mapping[str, Any], what: str) -> None:
    """Pairing two different task sets means nothing: a clear error naming how many differ."""
    if before.keys() != after.keys():
        only_one = len(before.keys() ^ after.keys())
        raise ValueError(f"{what}: the evaluations differ in their tasks ({only_one} in one only)")


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


async def evaluate(
    tasks: Sequence[Task],
    policy: Policy,
    tokenizer: Tokenizer,
    agent: AgentConfig,
    sandbox: SandboxConfig,
    grading: TasksConfig,
    samples: int = 1,
    ks: Sequence[int] = (1,),
    concurrency: int | None = None,
    progress: Callable[[Trajectory], None] | None = None,
) -> tuple[EvalReport, list[Trajectory]]:
    """Run `samples` graded episodes of `policy` per task, `concurrency` at a time (by default
    `sandbox.max_live`: an episode holds its sandbox from its first turn to its grade)."""
    concurrency = concurrency or sandbox.max_live
    if samples < 1:
        raise ValueError(f"samples must be at least 1, got {samples}")
    if any(k > samples for k in ks):
        raise ValueError(f"pass@k needs k <= samples ({samples}); got k = {max(ks)}")
    tools = ToolSet.for_agent(agent)
    attempts = [(task, index) for task in tasks for index in range(samples)]
    async with SandboxPool(sandbox) as pool:

        def attempt(item: tuple[Task, int]) -> Awaitable[Trajectory]:
            task, index = item
            group = f"eval-{task.instance_id}-{index}"
            return run_task_episode(task, policy, pool, tokenizer, agent, grading, tools, group_id=group)

        trajectories = await map_bounded(attempts, attempt, concurrency, progress)
    return summarize(tasks, trajectories, samples, ks), trajectories
