"""Run limits: measured on the clean suite, recorded in each task, used by check and grading."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from overture.config import SandboxConfig, TasksConfig
from overture.sandbox import ExecResult, SandboxPool
from overture.tasks.grading import grade
from overture.tasks.run_failure import explain_run
from overture.tasks.run_limits import (
    MIN_LIMIT_S,
    SUITE_MARGIN,
    RunLimits,
    clean_run_limits,
    suite_limits,
    task_limits,
)
from overture.tasks.snapshots import store_snapshot
from overture.tasks.synthesis import SynthesisError, run_baseline
from overture.tasks.task_sandbox import task_sandbox

BURNS_CPU = """import time


def test_burns_cpu():
    end = time.process_time() + 2.5
    while time.process_time() < end:
        pass
"""
SLEEPS = "import time\n\n\ndef test_sleeps():\n    time.sleep(30)\n"


def _snapshot(tmp_path, test_source):
    repo = tmp_path / "slow_kit"
    (repo / "tests").mkdir(parents=True)
    (repo / "tests" / "test_slow.py").write_text(test_source)
    return store_snapshot(repo, tmp_path / "snapshots", "slow_kit")


def _baseline(snapshot, sandbox, limits):
    async def main():
        async with SandboxPool(sandbox) as pool:
            return await run_baseline(pool, "slow_kit", snapshot, "python -m pytest", limits, map_tests=False)

    return asyncio.run(main())


def test_limits_scale_with_the_suite_and_a_task_without_them_uses_the_configuration(numbers_tasks):
    assert suite_limits(0.4).timeout_s == MIN_LIMIT_S
    measured = suite_limits(30.0)
    assert (measured.timeout_s, measured.cpu_seconds) == (SUITE_MARGIN * 30.0, 150)
    assert "measured at synthesis" in measured.timeout_setting

    task = numbers_tasks[0]
    recorded = task.metadata["run_limits"]
    assert recorded["timeout_s"] >= MIN_LIMIT_S and recorded["cpu_seconds"] >= recorded["timeout_s"]
    tasks, sandbox = TasksConfig(test_timeout_s=77), SandboxConfig(cpu_seconds=33)
    assert task_limits(task, tasks, sandbox).timeout_s == recorded["timeout_s"]
    unmeasured = dataclasses.replace(task, metadata={})
    configured = task_limits(unmeasured, tasks, sandbox)
    assert (configured.timeout_s, configured.cpu_seconds) == (77, 33)
    assert configured.cpu_setting == "sandbox.cpu_seconds"


def test_the_clean_run_is_not_held_to_the_cpu_limit_of_an_agents_command(tmp_path):
    # 2.5 s of CPU: past a 1 s `sandbox.cpu_seconds`, inside the clean run's own limits.
    snapshot = _snapshot(tmp_path, BURNS_CPU)
    sandbox = SandboxConfig(cpu_seconds=1)
    baseline = _baseline(snapshot, sandbox, clean_run_limits(TasksConfig(clean_run_timeout_s=60)))
    assert baseline.passed == ["tests/test_slow.py::test_burns_cpu"]
    with pytest.raises(SynthesisError, match=r"CPU-time limit \(sandbox.cpu_seconds = 1\)"):
        _baseline(snapshot, sandbox, RunLimits(60, sandbox.cpu_seconds))


def test_a_clean_run_past_its_limit_names_the_setting_to_raise(tmp_path):
    snapshot = _snapshot(tmp_path, SLEEPS)
    limits = clean_run_limits(TasksConfig(clean_run_timeout_s=2))
    with pytest.raises(SynthesisError, match=r"time limit \(tasks.clean_run_timeout_s = 2s\)"):
        _baseline(snapshot, SandboxConfig(), limits)


def test_grading_stops_a_looping_fix_at_the_tasks_measured_limit(numbers_tasks):
    task = dataclasses.replace(numbers_tasks[0], metadata={**numbers_tasks[0].metadata})
    task.metadata["run_limits"] = {"timeout_s": 3.0, "cpu_seconds": 3}
    target = task.metadata["file"]

    async def main():
        async with SandboxPool(SandboxConfig()) as pool, task_sandbox(pool, task) as box:
            source = box.files.read_text(target)
            box.files.write_text(target, "import time\ntime.sleep(60)\n" + source)
            return await grade(task, box, TasksConfig(test_timeout_s=120))

    graded = asyncio.run(main())
    assert graded.reason == "timeout: tests ran past 3s"
    assert graded.duration_s < 60


def test_explain_run_names_whatever_set_the_limit():
    killed = ExecResult(137, "", "Killed\n", False, False, 4.0)
    said = explain_run(killed, clean_run_limits(TasksConfig(clean_run_timeout_s=300)), SandboxConfig())
    assert "CPU-time limit (tasks.clean_run_timeout_s = 300)" in said
