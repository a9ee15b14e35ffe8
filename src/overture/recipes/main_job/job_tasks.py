"""Tasks and demonstrations of the main job (`overture train`).

- `load_task_set`: the tasks `tasks.source` names. `"builtin"` synthesizes a task set from the
  bundled repositories with `overture.tasks.build_task_set` (the code behind
  `overture tasks synth --bundled`), `tasks.train_size + tasks.eval_size` tasks, once: the set is
  cached under `OUTPUT_DIR/task-sets/`, keyed by seed, size and the synthesis settings, and a
  later run with the same key reads it back. Any other value is a JSONL task file, read as is.
- `split_tasks`: the train split (for SFT and RL, at most `tasks.train_size`) and the held-out
  split (for evaluation, at most `tasks.eval_size`), a cap taking tasks from every repository in
  turn (`spread_over_repos`).
- `write_oracle_demonstrations`: the oracle (`overture.tasks.oracle.solve_all`) on the train
  tasks; the episodes it solved, as SFT demonstrations in the `messages` JSONL format.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from overture.config import RunConfig
from overture.sandbox import SandboxPool
from overture.tasks import Task, TaskError, build_task_set, bundled_repos, read_tasks, solve_all
from overture.tasks.snapshots import content_hash, repository_files
from overture.tasks.spec import write_jsonl
from overture.text import Tokenizer

TASK_FILE = "tasks.jsonl"
MIN_DEMONSTRATIONS = 2  # SFT holds at least one out for its validation loss


@dataclass
class TaskSource:
    """Where the job's tasks came from."""

    path: Path
    cached: bool  # read from the bundled-task cache rather than synthesized now


def jobs() -> int:
    return os.cpu_count() or 1


def builtin_size(config: RunConfig) -> int:
    """Tasks to synthesize: enough for both splits (the `tasks.heldout_*` settings set the held-out share)."""
    return config.tasks.train_size + config.tasks.eval_size


def builtin_cache_dir(config: RunConfig) -> Path:
    """`OUTPUT_DIR/task-sets/bundled-seed{S}-n{N}-{key}`: key = hash of every synthesis setting and
    of the bundled repositories' contents (an edited repository is synthesized again)."""
    tasks = config.tasks
    settings = {
        "repos": {repo.name: content_hash(repo, repository_files(repo)) for repo in bundled_repos()},
        "pass_to_pass": tasks.pass_to_pass,
        "heldout_function_fraction": tasks.heldout_function_fraction,
        "heldout_task_fraction": tasks.heldout_task_fraction,
        "heldout_repos": sorted(tasks.heldout_repos),
        "max_candidates": tasks.max_candidates,
        "test_timeout_s": tasks.test_timeout_s,
    }
    if tasks.max_function_lines:  # absent when unset: the task sets cached before it keep their keys
        settings["max_function_lines"] = tasks.max_function_lines
    key = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:10]
    name = f"bundled-seed{config.seed}-n{builtin_size(config)}-{key}"
    return Path(config.output_dir) / "task-sets" / name


async def load_task_set(
    config: RunConfig, echo: Callable[[str], None] = print
) -> tuple[list[Task], TaskSource]:
    """Every task of the configured source (see the module docstring)."""
    if config.tasks.source != "builtin":
        path = Path(config.tasks.source)
        if not path.is_file():
            raise TaskError(f"tasks.source = {config.tasks.source!r}: no such task file (or use 'builtin')")
        return read_tasks(path), TaskSource(path, cached=False)
    folder = builtin_cache_dir(config)
    if (folder / TASK_FILE).is_file():
        echo(f"tasks: reusing {folder / TASK_FILE}")
        return read_tasks(folder / TASK_FILE), TaskSource(folder / TASK_FILE, cached=True)
    echo(f"tasks: synthesizing {builtin_size(config)} from the bundled repositories into {folder}")
    # Built beside its final name and renamed into place: a run cut short leaves no half cache.
    building = folder.with_name(f".building-{folder.name}-{os.getpid()}")
    shutil.rmtree(building, ignore_errors=True)
    await build_task_set(
        bundled_repos(),
        building / TASK_FILE,
        builtin_size(config),
        config.sandbox,
        config.tasks,
        config.seed,
        jobs=jobs(),
    )
    try:
        building.rename(folder)
    except OSError:  # another run finished the same set first: use theirs
        shutil.rmtree(building, ignore_errors=True)
    return read_tasks(folder / TASK_FILE), TaskSource(folder / TASK_FILE, cached=False)


def spread_over_repos(tasks: list[Task], limit: int | None) -> list[Task]:
    """At most `limit` of `tasks`, taken in turn from each repository (in the order each first
    appears, each repository's tasks in their own order): a cap leaves every repository its share
    rather than the first repositories of the file all of it. All of them, as they are, when they fit."""
    if limit is None or len(tasks) <= limit:
        return tasks
    by_repo: dict[str, list[Task]] = {}
    for task in tasks:
        by_repo.setdefault(task.repo, []).append(task)
    rounds = itertools.zip_longest(*by_repo.values())
    return [task for turn in rounds for task in turn if task is not None][:limit]


def split_tasks(tasks: list[Task], config: RunConfig) -> tuple[list[Task], list[Task]]:
    """(train, held out), capped at `tasks.train_size` and `tasks.eval_size` with
    `spread_over_repos`; an empty one is an error."""
    train = spread_over_repos([task for task in tasks if task.split == "train"], config.tasks.train_size)
    heldout = spread_over_repos([task for task in tasks if task.split == "heldout"], config.tasks.eval_size)
    if not train:
        raise TaskError(f"tasks.source = {config.tasks.source!r}: no train tasks")
    if not heldout:
        raise TaskError(
            f"tasks.source = {config.tasks.source!r}: no held-out tasks to evaluate on; raise "
            "tasks.eval_size (at least 1), tasks.heldout_function_fraction or tasks.heldout_task_fraction, "
            "or name tasks.heldout_repos"
        )
    return train, heldout


async def write_oracle_demonstrations(
    tasks: list[Task], tokenizer: Tokenizer, config: RunConfig, out: Path, echo: Callable[[str], None] = print
) -> dict[str, int]:
    """Solve `tasks` with the oracle and write the solved episodes to `out` as demonstrations."""
    async with SandboxPool(config.sandbox) as pool:
        results = await solve_all(
            tasks, pool, tokenizer, config.agent, config.tasks, jobs(), seed=config.seed
        )
    demonstrations = [r.demonstration for r in results if r.solved and r.demonstration]
    failed = [r for r in results if not r.solved]
    if len(demonstrations) < MIN_DEMONSTRATIONS:
        reasons = "; ".join(f"{r.instance_id}: {r.why}" for r in failed[:3])
        raise TaskError(
            f"the oracle solved {len(demonstrations)} of {len(tasks)} train tasks, SFT needs at least "
            f"{MIN_DEMONSTRATIONS} (the oracle needs agent.max_turns >= 5 and an agent.max_new_tokens "
            f"that holds its edits): {reasons}"
        )
    write_jsonl(out, demonstrations)
    parallel = sum(r.parallel for r in results if r.solved and r.demonstration)
    echo(
        f"demonstrations: the oracle solved {len(demonstrations)} of {len(tasks)} train tasks, "
        f"{parallel} of them with parallel calls -> {out}"
    )
    return {
        "demonstrations": len(demonstrations),
        "oracle_failed": len(failed),
        "parallel_demonstrations": parallel,
    }
