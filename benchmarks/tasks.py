"""Task synthesis and grading speed on a bundled repository.

Synthesizes tasks from one bundled repository twice (candidates validated in parallel sandboxes):
each candidate running only the test files that call its function (`tasks.select_tests`, the
default), and each running the whole suite; checks both give the same tasks. Then grades each
task's reference fix in a fresh sandbox the way an episode is graded, with the test bytecode the
baseline run kept in the snapshot and without it (a copy of the snapshot without `__pycache__`),
and reports candidates/s, valid tasks/s and grading latency percentiles.

Usage: python benchmarks/tasks.py [--repo NAME] [--n N] [--jobs J]
Prints a human summary, then one JSON object on the last line.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path

from overture.config import RunConfig
from overture.sandbox import SandboxPool
from overture.sandbox.pool import percentile
from overture.tasks.grading import grade, patch_workspace
from overture.tasks.snapshots import starting_base
from overture.tasks.spec import Task
from overture.tasks.task_sets import build_task_set, bundled_repo


async def grade_reference_fixes(
    tasks: list[Task], config: RunConfig, jobs: int, bases: Path
) -> tuple[list[float], int]:
    """Latency of grading each task's reference fix (restore, diff, pytest, verdict); resolved count."""
    latencies: list[float] = []
    resolved = 0
    gate = asyncio.Semaphore(jobs)

    async def one(task) -> None:
        nonlocal resolved
        async with gate, pool.sandbox(starting_base(task, bases)) as box:
            assert not await patch_workspace(box, task.patch)
            started = time.perf_counter()
            result = await grade(task, box, config.tasks)
            latencies.append(time.perf_counter() - started)
            resolved += result.resolution == "resolved"

    async with SandboxPool(config.sandbox) as pool:
        await asyncio.gather(*(one(task) for task in tasks))
    return latencies, resolved


def synthesize(repo: str, n: int, jobs: int, select: bool, scratch: Path) -> tuple[list[Task], object, float]:
    config = RunConfig.model_validate({"tasks": {"select_tests": select}})
    started = time.perf_counter()
    out = scratch / f"select-{select}" / "tasks.jsonl"
    tasks, (stats,) = asyncio.run(
        build_task_set([bundled_repo(repo)], out, n, config.sandbox, config.tasks, jobs=jobs)
    )
    return tasks, stats, time.perf_counter() - started


def without_bytecode(tasks: list[Task], scratch: Path) -> list[Task]:
    """The tasks over a copy of their snapshot with no `__pycache__`."""
    copies: dict[str, str] = {}
    for task in tasks:
        if task.base not in copies:
            copy = scratch / "no-bytecode" / Path(task.base).name
            shutil.copytree(task.base, copy, ignore=shutil.ignore_patterns("__pycache__"))
            copies[task.base] = str(copy)
    return [dataclasses.replace(task, base=copies[task.base]) for task in tasks]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", default="textkit", help="bundled repository")
    parser.add_argument("--n", type=int, default=60, help="tasks to synthesize")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    config = RunConfig()
    with tempfile.TemporaryDirectory(prefix="overture-bench-tasks-") as scratch_dir:
        scratch = Path(scratch_dir)
        tasks, stats, synth_s = synthesize(args.repo, args.n, args.jobs, True, scratch)
        whole_tasks, whole_stats, whole_s = synthesize(args.repo, args.n, args.jobs, False, scratch)
        same = sorted((t.instance_id, t.FAIL_TO_PASS, t.PASS_TO_PASS) for t in tasks) == sorted(
            (t.instance_id, t.FAIL_TO_PASS, t.PASS_TO_PASS) for t in whole_tasks
        )
        latencies, resolved = asyncio.run(grade_reference_fixes(tasks, config, args.jobs, scratch / "bases"))
        plain_tasks = without_bytecode(tasks, scratch)
        plain, plain_resolved = asyncio.run(
            grade_reference_fixes(plain_tasks, config, args.jobs, scratch / "plain-bases")
        )
    result = {
        "benchmark": "tasks",
        "repo": args.repo,
        "jobs": args.jobs,
        "clean_suite_tests": stats.clean_passing,
        "candidates": stats.candidates,
        "valid": stats.valid,
        "unnoticed": stats.unnoticed,
        "uncovered": stats.uncovered,
        "timed_out": stats.timed_out,
        "synthesis_s": round(synth_s, 2),
        "candidates_per_s": round(stats.candidates / synth_s, 2),
        "valid_tasks_per_s": round(stats.valid / synth_s, 2),
        "whole_suite": {
            "synthesis_s": round(whole_s, 2),
            "candidates_per_s": round(whole_stats.candidates / whole_s, 2),
            "same_tasks": same,
        },
        "graded": len(latencies),
        "reference_fix_resolved": resolved,
        "grading_p50_s": round(percentile(latencies, 50), 3),
        "grading_p99_s": round(percentile(latencies, 99), 3),
        "without_test_bytecode": {
            "reference_fix_resolved": plain_resolved,
            "grading_p50_s": round(percentile(plain, 50), 3),
            "grading_p99_s": round(percentile(plain, 99), 3),
        },
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
    }
    print(f"{args.repo}: {stats.valid} tasks from {stats.candidates} candidates in {synth_s:.1f}s "
          f"({whole_s:.1f}s running whole suites, same tasks: {same}); grading p50 "
          f"{result['grading_p50_s']}s p99 {result['grading_p99_s']}s "
          f"(without test bytecode {result['without_test_bytecode']['grading_p50_s']}s)")  # fmt: skip
    print(json.dumps(result))


if __name__ == "__main__":
    main()
