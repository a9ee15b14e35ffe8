"""Task synthesis, checking, oracle solving and grading speed on one repository.

`--repo` names a bundled repository, or a directory: any repository with a pytest suite, whose
tests then run in an environment built for it (`overture.tasks.environment`; the time to build
it counts in synthesis). Synthesizes tasks from it (candidates validated in parallel sandboxes,
each running only the test files that call its function, `tasks.select_tests`), checks them
(`tasks check`), solves them with the oracle (`tasks solve --oracle`), and grades each task's
reference fix in a fresh sandbox the way an episode is graded, with the test bytecode the
baseline run kept in the snapshot and without it (a copy of the snapshot without `__pycache__`).
With `--whole-suite` (the default for a bundled repository) it synthesizes again with every
candidate running the whole suite and checks both give the same tasks (ids and FAIL_TO_PASS; each
PASS_TO_PASS is sampled from the tests that ran beside its bug). Reports the seconds of
each phase, candidates/s, valid tasks/s and grading latency percentiles.

Usage: python benchmarks/tasks.py [--repo NAME|DIR] [--n N] [--jobs J] [--whole-suite|--no-whole-suite]
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
from typing import Any

from overture.config import RunConfig
from overture.sandbox import SandboxPool
from overture.sandbox.pool import percentile
from overture.tasks.check import check_tasks
from overture.tasks.environment import EnvironmentRequest, python_for
from overture.tasks.grading import grade, patch_workspace
from overture.tasks.oracle import solve_all
from overture.tasks.snapshots import starting_base
from overture.tasks.spec import Task
from overture.tasks.task_sets import build_task_set, bundled_repo, bundled_repos
from overture.text import train_default_tokenizer


async def grade_reference_fixes(
    tasks: list[Task], config: RunConfig, jobs: int, bases: Path
) -> tuple[list[float], int]:
    """Latency of grading each task's reference fix (restore, diff, pytest, verdict); resolved count."""
    latencies: list[float] = []
    resolved = 0
    gate = asyncio.Semaphore(jobs)

    async def one(task) -> None:
        nonlocal resolved
        async with gate, pool.sandbox(starting_base(task, bases), python_for(task)) as box:
            assert not await patch_workspace(box, task.patch)
            started = time.perf_counter()
            result = await grade(task, box, config.tasks)
            latencies.append(time.perf_counter() - started)
            resolved += result.resolution == "resolved"

    async with SandboxPool(config.sandbox) as pool:
        await asyncio.gather(*(one(task) for task in tasks))
    return latencies, resolved


def synthesize(repo: Path, n: int, jobs: int, select: bool, scratch: Path) -> tuple[list[Task], Any, float]:
    """Tasks from `repo` (in an environment of its own unless it is bundled), with their seconds."""
    config = RunConfig.model_validate({"tasks": {"select_tests": select}})
    environment = None if repo in bundled_repos() else EnvironmentRequest()
    started = time.perf_counter()
    out = scratch / f"select-{select}" / "tasks.jsonl"
    tasks, (stats,) = asyncio.run(
        build_task_set([repo], out, n, config.sandbox, config.tasks, jobs=jobs, environment=environment)
    )
    return tasks, stats, time.perf_counter() - started


def check_and_solve(tasks: list[Task], config: RunConfig, jobs: int) -> tuple[int, float, int, float]:
    """(tasks that check, seconds, tasks the oracle solves, seconds), as `tasks check` and
    `tasks solve --oracle` do them."""
    tokenizer = train_default_tokenizer(config.tokenizer.vocab_size, config.tokenizer.corpus)

    async def main():
        async with SandboxPool(config.sandbox) as pool:
            started = time.perf_counter()
            checked = await check_tasks(tasks, pool, config.tasks, jobs)
            check_s = time.perf_counter() - started
            started = time.perf_counter()
            solved = await solve_all(tasks, pool, tokenizer, config.agent, config.tasks, jobs)
            solve_s = time.perf_counter() - started
            return sum(r.ok for r in checked), check_s, sum(r.solved for r in solved), solve_s

    return asyncio.run(main())


def repository(name: str) -> Path:
    """A directory as given, else the bundled repository of that name."""
    path = Path(name)
    return path.resolve() if path.is_dir() else bundled_repo(name)


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
    parser.add_argument("--repo", default="textkit", help="bundled repository, or a repository's directory")
    parser.add_argument("--n", type=int, default=60, help="tasks to synthesize")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--whole-suite", action=argparse.BooleanOptionalAction, default=None,
        help="also synthesize with whole-suite runs and compare (default: for a bundled repository)",
    )  # fmt: skip
    args = parser.parse_args()
    repo = repository(args.repo)
    compare = args.whole_suite if args.whole_suite is not None else not Path(args.repo).is_dir()
    config = RunConfig.model_validate({"agent": {"search_backend": "bm25"}})
    whole: dict = {}
    with tempfile.TemporaryDirectory(prefix="overture-bench-tasks-") as scratch_dir:
        scratch = Path(scratch_dir)
        tasks, stats, synth_s = synthesize(repo, args.n, args.jobs, True, scratch)
        checked, check_s, solved, solve_s = check_and_solve(tasks, config, args.jobs)
        if compare:
            whole_tasks, whole_stats, whole_s = synthesize(repo, args.n, args.jobs, False, scratch)
            # PASS_TO_PASS differ by design: each is sampled from the tests that ran beside the bug.
            same = sorted((t.instance_id, t.FAIL_TO_PASS) for t in tasks) == sorted(
                (t.instance_id, t.FAIL_TO_PASS) for t in whole_tasks
            )
            whole = {
                "synthesis_s": round(whole_s, 2),
                "candidates_per_s": round(whole_stats.candidates / whole_s, 2),
                "same_tasks": same,
            }
        latencies, resolved = asyncio.run(grade_reference_fixes(tasks, config, args.jobs, scratch / "bases"))
        plain_tasks = without_bytecode(tasks, scratch)
        plain, plain_resolved = asyncio.run(
            grade_reference_fixes(plain_tasks, config, args.jobs, scratch / "plain-bases")
        )
    result = {
        "benchmark": "tasks",
        "repo": repo.name,
        "jobs": args.jobs,
        "clean_suite_tests": stats.clean_passing,
        "clean_suite_s": round(stats.clean_seconds, 2),
        "candidates": stats.candidates,
        "valid": stats.valid,
        "unnoticed": stats.unnoticed,
        "uncovered": stats.uncovered,
        "timed_out": stats.timed_out,
        "synthesis_s": round(synth_s, 2),
        "candidates_per_s": round(stats.candidates / synth_s, 2),
        "valid_tasks_per_s": round(stats.valid / synth_s, 2),
        "checked_ok": checked,
        "check_s": round(check_s, 2),
        "oracle_solved": solved,
        "solve_s": round(solve_s, 2),
        "synth_check_solve_s": round(synth_s + check_s + solve_s, 2),
        "whole_suite": whole,
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
    print(f"{repo.name}: {stats.valid} tasks from {stats.candidates} candidates in {synth_s:.1f}s "
          f"(whole suites: {whole or 'not compared'}); {checked} check in {check_s:.1f}s, the oracle "
          f"solves {solved} in {solve_s:.1f}s; grading p50 "
          f"{result['grading_p50_s']}s p99 {result['grading_p99_s']}s "
          f"(without test bytecode {result['without_test_bytecode']['grading_p50_s']}s)")  # fmt: skip
    print(json.dumps(result))


if __name__ == "__main__":
    main()
