"""Task sets: the bundled repositories, and building a task file from several repositories.

A task set is a JSONL file plus the `snapshots/` folder next to it that its tasks' `base`
paths point into (one snapshot per repository), and, for repositories whose tests run in an
environment of their own, the `environments/` folder of their records. The bundled
repositories — small pure-Python libraries written for this project, each with a pytest suite —
ship inside the package under `overture/tasks/repos/` and are the default source of tasks for
the embedded demo.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from importlib.resources import files
from pathlib import Path
from typing import Any

from overture.config import SandboxConfig, TasksConfig
from overture.sandbox import SandboxPool
from overture.tasks.environment import EnvironmentRequest
from overture.tasks.spec import DEFAULT_TEST_CMD, Task, TaskError, write_tasks
from overture.tasks.synthesis import SynthesisStats, assign_splits, synthesize_repo

SNAPSHOTS = "snapshots"
REPOS_FOLDER = "tasks/repos"  # where the bundled repositories lie, relative to the overture package


def bundled_repos() -> list[Path]:
    """The bundled repositories, by name."""
    root = Path(str(files("overture") / REPOS_FOLDER))
    return sorted(path for path in root.iterdir() if (path / "pyproject.toml").is_file())


def bundled_repo(name: str) -> Path:
    for path in bundled_repos():
        if path.name == name:
            return path
    known = ", ".join(path.name for path in bundled_repos())
    raise TaskError(f"no bundled repository named {name!r} (bundled: {known})")


def split_evenly(total: int, parts: int) -> list[int]:
    """`total` split into `parts` near-equal counts, the larger ones first."""
    return [total // parts + (index < total % parts) for index in range(parts)]


async def build_task_set(
    repos: list[Path],
    out: Path,
    count: int,
    sandbox: SandboxConfig,
    config: TasksConfig,
    seed: int = 0,
    test_cmd: str = DEFAULT_TEST_CMD,
    jobs: int | None = None,
    progress: Callable[[SynthesisStats], None] | None = None,
    environment: EnvironmentRequest | None = None,
) -> tuple[list[Task], list[SynthesisStats]]:
    """Synthesize `count` tasks spread evenly over `repos` in sandboxes of `sandbox`'s limits by
    `config`'s rules, assign splits and write `out`; with `environment`, each repository's tests
    run in an environment built for it, recorded in `environments/`."""
    if not repos:
        raise TaskError("no repository to synthesize tasks from")
    names = [repo.resolve().name for repo in repos]
    if len(set(names)) != len(names):
        raise TaskError(f"repositories must have distinct directory names, got {names}")
    tasks: list[Task] = []
    stats: list[SynthesisStats] = []
    async with SandboxPool(sandbox) as pool:
        for repo, wanted in zip(repos, split_evenly(count, len(repos)), strict=True):
            if wanted == 0:
                continue
            found, repo_stats = await synthesize_repo(
                pool, repo, out.parent / SNAPSHOTS, wanted, config, seed, test_cmd, jobs, progress,
                environment,
            )  # fmt: skip
            tasks += found
            stats.append(repo_stats)
    assign_splits(
        tasks, config.heldout_repos, config.heldout_function_fraction, seed, config.heldout_task_fraction
    )
    write_tasks(out, tasks)
    return tasks, stats


def summary(tasks: list[Task], stats: list[SynthesisStats]) -> dict[str, Any]:
    """What a synthesis run produced, JSON-ready."""
    kinds: dict[str, int] = {}
    for task in tasks:
        kind = str(task.metadata.get("kind", "?"))
        kinds[kind] = kinds.get(kind, 0) + 1
    return {
        "tasks": len(tasks),
        "train": sum(task.split == "train" for task in tasks),
        "heldout": sum(task.split == "heldout" for task in tasks),
        "by_kind": dict(sorted(kinds.items())),
        "repos": [asdict(s) for s in stats],
    }
