"""Re-validating tasks: each must fail on its starting workspace and pass with its reference fix.

For every task, in its own sandbox over the task's starting workspace (`test_patch` applied
first when there is one): every FAIL_TO_PASS test must not pass and every PASS_TO_PASS test
must pass; then, with the reference `patch` applied, every test of both lists must pass.
Anything else is a problem, named in the task's `CheckResult`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from overture.config import SandboxConfig, TasksConfig
from overture.sandbox import SandboxError, SandboxPool
from overture.tasks.grading import decide, passes, patch_workspace
from overture.tasks.parallel import map_bounded
from overture.tasks.pytest_report import PytestRun, run_pytest
from overture.tasks.run_failure import explain_run
from overture.tasks.run_limits import RunLimits, task_limits
from overture.tasks.spec import Task, TaskError
from overture.tasks.task_sandbox import task_sandbox

MAX_NAMED = 5


@dataclass
class CheckResult:
    instance_id: str
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


def _named(tests: list[str]) -> str:
    shown = ", ".join(tests[:MAX_NAMED])
    return shown + (f" and {len(tests) - MAX_NAMED} more" if len(tests) > MAX_NAMED else "")


def _whole_run_problem(run: PytestRun, when: str, limits: RunLimits, sandbox: SandboxConfig) -> str:
    """Why the run failed as a whole — it timed out, or reported no test at all — or "". (A bug
    that stops a test file from being collected is a way for its tests to fail: a run without
    outcomes is a problem only where tests should have passed.)"""
    if run.result.timed_out or not run.outcomes:
        return f"{when}: {explain_run(run.result, limits, sandbox)}"
    return ""


async def check_task(pool: SandboxPool, task: Task, config: TasksConfig) -> CheckResult:
    """The problems of one task (none for a valid task)."""
    started = time.monotonic()
    result = CheckResult(task.instance_id)
    problems = result.problems
    if not task.patch.strip():
        problems.append("no reference fix (`patch` is empty)")
    try:
        async with task_sandbox(pool, task) as box:
            if task.test_patch and (trouble := await patch_workspace(box, task.test_patch)):
                problems.append(f"test_patch does not apply: {trouble}")
            limits = task_limits(task, config, pool.config)
            timeout, cpu = limits.timeout_s, limits.cpu_seconds
            before = await run_pytest(box, task.test_cmd, task.test_ids, timeout, cpu_seconds=cpu)
            _, early, _, broken = decide(task, before.outcomes)
            whole = _whole_run_problem(before, "before the fix", limits, pool.config)
            if before.result.timed_out:
                problems.append(whole)
            else:
                if early:
                    problems.append(f"FAIL_TO_PASS already pass before the fix: {_named(early)}")
                if broken:  # the cause when the run reported nothing, not every test it failed
                    problems.append(whole or f"PASS_TO_PASS do not pass before the fix: {_named(broken)}")
            if task.patch.strip():
                if trouble := await patch_workspace(box, task.patch):
                    problems.append(f"the reference fix does not apply: {trouble}")
                else:
                    after = await run_pytest(box, task.test_cmd, task.test_ids, timeout, cpu_seconds=cpu)
                    whole = _whole_run_problem(after, "with the fix", limits, pool.config)
                    failing = [t for t in task.test_ids if not passes(task, t, after.outcomes.get(t))]
                    if failing or after.result.timed_out:
                        listed = f"tests do not pass with the reference fix: {_named(failing)}"
                        problems.append(whole or listed)
    except (TaskError, SandboxError, OSError) as exc:
        problems.append(f"{exc.__class__.__name__}: {exc}")
    result.seconds = round(time.monotonic() - started, 3)
    return result


async def check_tasks(
    tasks: Sequence[Task],
    pool: SandboxPool,
    config: TasksConfig,
    jobs: int,
    progress: Callable[[CheckResult], None] | None = None,
) -> list[CheckResult]:
    """Check every task, `jobs` at a time; results in task order."""
    return await map_bounded(tasks, lambda task: check_task(pool, task, config), jobs, progress)
