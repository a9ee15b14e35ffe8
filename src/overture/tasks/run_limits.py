"""How long a repository's tests may run: measured once at synthesis, recorded in each task.

Synthesis runs a repository's whole suite once on the clean code under generous limits
(`tasks.clean_run_timeout_s` of wall clock, and as many seconds of CPU time per process, in
place of `sandbox.cpu_seconds`), and measures it. From then on the repository's test runs —
validating candidates, `tasks check`, grading — run under limits scaled to that measurement,
`SUITE_MARGIN` times it and at least `MIN_LIMIT_S`, recorded in each task's
`metadata["run_limits"]`, so that a slow suite is not killed by limits made for a fast one and
a fast suite's looping bug is stopped in seconds. A task without a record (written by hand, a
SWE-bench instance) runs under `tasks.test_timeout_s` and `sandbox.cpu_seconds`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from overture.config import SandboxConfig, TasksConfig
from overture.tasks.spec import Task

SUITE_MARGIN = 5.0
MIN_LIMIT_S = 10.0
RECORD_KEY = "run_limits"
RECORDED = "the task's run_limits, measured at synthesis"


@dataclass(frozen=True)
class RunLimits:
    """The wall-clock and CPU-time limits of one test run, and what sets each (for messages)."""

    timeout_s: float
    cpu_seconds: int
    timeout_setting: str = "tasks.test_timeout_s"
    cpu_setting: str = "sandbox.cpu_seconds"

    def to_record(self) -> dict[str, Any]:
        return {"timeout_s": self.timeout_s, "cpu_seconds": self.cpu_seconds}


def clean_run_limits(tasks: TasksConfig) -> RunLimits:
    """The limits of synthesis's clean run, the measurement."""
    limit = tasks.clean_run_timeout_s
    return RunLimits(limit, math.ceil(limit), "tasks.clean_run_timeout_s", "tasks.clean_run_timeout_s")


def suite_limits(clean_seconds: float) -> RunLimits:
    """The limits of a repository's test runs, from how long its clean suite took."""
    limit = round(max(MIN_LIMIT_S, SUITE_MARGIN * clean_seconds), 1)
    return RunLimits(limit, math.ceil(limit), RECORDED, RECORDED)


def task_limits(task: Task, tasks: TasksConfig, sandbox: SandboxConfig) -> RunLimits:
    """The limits of `task`'s test runs: its record's, else the configuration's."""
    recorded = task.metadata.get(RECORD_KEY)
    if isinstance(recorded, dict):
        timeout, cpu = recorded.get("timeout_s"), recorded.get("cpu_seconds")
        if isinstance(timeout, int | float) and isinstance(cpu, int) and timeout > 0 and cpu > 0:
            return RunLimits(float(timeout), cpu, RECORDED, RECORDED)
    return RunLimits(tasks.test_timeout_s, sandbox.cpu_seconds)
