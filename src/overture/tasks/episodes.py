"""One task attempted by a policy: its starting workspace, the agent episode in a sandbox, the grade.

`run_task_episode` is the environment step the RL orchestrator and the evaluators share: the
policy works on the task's starting workspace through the agent's tools, then the same sandbox
is graded (`overture.tasks.grading`) and the trajectory gets its reward and `reward_info`.
An episode that failed (the policy raised, the sandbox died) is not graded: reward 0, with the
reason in `reward_info`. `grade_episode` is that grading step alone, for callers that keep
the sandbox open across an abort and a resume (the RL orchestrator's partial rollouts).
"""

from __future__ import annotations

from overture.agent import Episode, Policy, ToolSet, Trajectory
from overture.agent.episode import Observer
from overture.config import AgentConfig, TasksConfig
from overture.sandbox import Sandbox, SandboxError, SandboxPool
from overture.tasks.grading import grade, reward
from overture.tasks.spec import Task
from overture.tasks.task_sandbox import task_sandbox
from overture.text import Tokenizer


async def run_task_episode(
    task: Task,
    policy: Policy,
    pool: SandboxPool,
    tokenizer: Tokenizer,
    agent: AgentConfig,
    grading: TasksConfig,
    tools: ToolSet | None = None,
    group_id: str = "",
    observer: Observer | None = None,
) -> Trajectory:
    """Run one episode of `policy` on `task` under `agent`'s limits and grade it by `grading`'s
    rules (see the module docstring)."""
    async with task_sandbox(pool, task) as box:
        episode = Episode(
            policy, box, tokenizer, task.problem_statement, agent, tools,
            task_id=task.instance_id, group_id=group_id, observer=observer,
        )  # fmt: skip
        trajectory = await episode.run()
        return await grade_episode(task, box, trajectory, grading)


async def grade_episode(
    task: Task, sandbox: Sandbox, trajectory: Trajectory, grading: TasksConfig
) -> Trajectory:
    """Give `trajectory` (an episode on `task` that ended in `sandbox`) its reward and `reward_info`.

    A failed or aborted episode is not graded (reward 0, the reason in `reward_info`); nor is one
    whose grading cannot run (the sandbox broke). The sandbox stays open: its owner closes it.
    """
    if trajectory.status in ("failed", "aborted"):
        trajectory.reward = 0.0
        trajectory.reward_info.update(score=0.0, resolution="none", reason=f"episode {trajectory.status}")
        return trajectory
    try:
        result = await grade(task, sandbox, grading)
    except (SandboxError, OSError) as exc:
        trajectory.reward = 0.0
        trajectory.reward_info.update(score=0.0, resolution="none", reason=f"grading failed: {exc}")
        return trajectory
    trajectory.reward, info = reward(
        result,
        grading,
        turns=len(trajectory.turns),
        invalid_calls=trajectory.metrics.get("invalid_calls", 0),
    )
    trajectory.reward_info.update(info)
    trajectory.metrics["resolved"] = result.resolution == "resolved"
    return trajectory
