"""Task synthesis and grading speed on a bundled repository.

Synthesizes tasks from one bundled repository (candidates validated in parallel sandboxes,
each running the repository's whole suite), then grades each task's reference fix in a fresh
sandbox the way an episode is graded, and reports candidates/s, valid tasks/s and grading
latency percentiles.

Usage: python benchmarks/tasks.py [--repo NAME] [--n N] [--jobs J]
Prints a human summary, then one JSON object on the last line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import tempfile
import time
from pathlib import Path

from overture.config import RunConfig
from overture.sandbox import SandboxPool
from overture.sandbox.pool import percentile
from overture.tasks.grading import grade, patch_workspace
from overture.tasks.snapshots import starting_base
from overture.tasks.task_sets import build_task_set, bundled_repo


async def grade_reference_fixes(tasks, config: RunConfig, jobs: int) -> tuple[list[float], int]:
    """Latency of grading each task's reference fix (restore, diff, pytest, verdict); resolved count."""
    latencies: list[float] = []
    resolved = 0
    gate = asyncio.Semaphore(jobs)

    async def one(task) -> None:
        nonlocal resolved
        async with gate, pool.sandbox(starting_base(task)) as box:
            assert not await patch_workspace(box, task.patch)
            started = time.perf_counter()
            result = await grade(task, box, config.tasks)
            latencies.append(time.perf_counter() - started)
            resolved += result.resolution == "resolved"

    async with SandboxPool(config.sandbox) as pool:
        await asyncio.gather(*(one(task) for task in tasks))
    return latencies, resolved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", default="textkit", help="bundled repository")
    parser.add_argument("--n", type=int, default=60, help="tasks to synthesize")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    config = RunConfig()
    with tempfile.TemporaryDirectory(prefix="overture-bench-tasks-") as scratch:
        started = time.perf_counter()
        out = Path(scratch) / "tasks.jsonl"
        repos = [bundled_repo(args.repo)]
        tasks, (stats,) = asyncio.run(build_task_set(repos, out, args.n, config, jobs=args.jobs))
        synth_s = time.perf_counter() - started
        latencies, resolved = asyncio.run(grade_reference_fixes(tasks, config, args.jobs))
    result = {
        "benchmark": "tasks",
        "repo": args.repo,
        "jobs": args.jobs,
        "clean_suite_tests": stats.clean_passing,
        "candidates": stats.candidates,
        "valid": stats.valid,
        "unnoticed": stats.unnoticed,
        "timed_out": stats.timed_out,
        "synthesis_s": round(synth_s, 2),
        "candidates_per_s": round(stats.candidates / synth_s, 2),
        "valid_tasks_per_s": round(stats.valid / synth_s, 2),
        "graded": len(latencies),
        "reference_fix_resolved": resolved,
        "grading_p50_s": round(percentile(latencies, 50), 3),
        "grading_p99_s": round(percentile(latencies, 99), 3),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
    }
    print(f"{args.repo}: {stats.valid} tasks from {stats.candidates} candidates in {synth_s:.1f}s; "
          f"grading p50 {result['grading_p50_s']}s p99 {result['grading_p99_s']}s")  # fmt: skip
    print(json.dumps(result))


if __name__ == "__main__":
    main()
