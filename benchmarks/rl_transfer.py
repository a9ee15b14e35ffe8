"""Where RL's held-out gain comes from: held-out tasks in functions RL trained on, and the others.

A held-out task of the main job's split is a new bug in a function that train tasks have other
bugs in, and every fix of a function ends in the same code: the function as it should be. So an
RL step on a train task of function F rehearses the very rewrite a held-out task of F needs.
This reads a run directory (`overture train` output, `RUN/NAME`) and splits the held-out tasks by
what RL's trained batches (`trajectories/rl-step-*.jsonl`: the groups with signal) held of their
function: a resolved episode, only failed ones, or nothing; and reports the pass rate of each part
before and after RL (`eval-before.jsonl`, `eval-after.jsonl`; every episode of a task counts).

    .venv/bin/python benchmarks/rl_transfer.py RUN/NAME [--tasks TASKS.jsonl]

Prints a table, then one JSON object on its last line.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from overture.config import load_config
from overture.recipes.main_job.job_tasks import TASK_FILE, builtin_cache_dir
from overture.tasks import read_tasks


def read_episodes(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="the run directory, RUN/NAME")
    parser.add_argument("--tasks", type=Path, help="the task file (default: the run's bundled task set)")
    args = parser.parse_args()
    config = load_config(args.run / "config.toml")
    tasks_file = args.tasks or Path(config.tasks.source)
    if args.tasks is None and config.tasks.source == "builtin":
        tasks_file = builtin_cache_dir(config) / TASK_FILE
    function = {task.instance_id: task.function for task in read_tasks(tasks_file)}
    trajectories = args.run / "trajectories"

    trained: dict[str, str] = {}  # function -> "resolved" (some trained episode resolved) or "failed"
    trained_tasks = 0
    for path in sorted(trajectories.glob("rl-step-*.jsonl")):
        for episode in read_episodes(path):
            trained_tasks += 1
            key = function[episode["task_id"]]
            if episode.get("reward", 0) > 0:
                trained[key] = "resolved"
            else:
                trained.setdefault(key, "failed")

    parts = ("resolved", "failed", "untrained")
    counts = {label: {part: [0, 0] for part in parts} for label in ("before", "after")}  # [solved, episodes]
    tasks_in = {part: set() for part in parts}
    for label in ("before", "after"):
        for episode in read_episodes(trajectories / f"eval-{label}.jsonl"):
            part = trained.get(function[episode["task_id"]], "untrained")
            tasks_in[part].add(episode["task_id"])
            counts[label][part][0] += episode.get("reward", 0) > 0
            counts[label][part][1] += 1

    def rate(solved_episodes: list[int]) -> float | None:
        solved, episodes = solved_episodes
        return round(solved / episodes, 4) if episodes else None

    result = {"benchmark": "rl_transfer", "run": str(args.run), "trained_episodes": trained_tasks,
              "functions_trained": len(trained),
              "functions_trained_resolved": sum(v == "resolved" for v in trained.values())}  # fmt: skip
    by_part: dict[str, dict] = defaultdict(dict)
    print(f"{'held-out tasks in functions RL trained':<44} {'tasks':>6} {'before':>8} {'after':>8}")
    for part in parts:
        before, after = counts["before"][part], counts["after"][part]
        by_part[part] = {"tasks": len(tasks_in[part]), "before": rate(before), "after": rate(after),
                         "episodes_before": before[1], "episodes_after": after[1]}  # fmt: skip
        name = {"resolved": "with a resolved episode", "failed": "with failed episodes only",
                "untrained": "not at all"}[part]  # fmt: skip
        print(f"  {name:<42} {len(tasks_in[part]):>6} {rate(before)!s:>8} {rate(after)!s:>8}")
    result["held_out"] = by_part
    print(json.dumps(result))


if __name__ == "__main__":
    main()
