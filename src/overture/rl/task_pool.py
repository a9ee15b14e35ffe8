"""Which train tasks RL deals (`rl.task_share`): those the SFT policy is closest to solving.

RL learns only from groups with signal (some episodes resolved, some not); with dynamic sampling
the others are generated and left out, and in the main job they were most of every step's work
(run g1: 180 groups left out for 48 trained). The SFT checkpoint's loss on a train task's oracle
demonstration says in advance which tasks those are: in run g2, 29 of the 48 tasks whose groups
had signal were among the quarter of train tasks with the lowest mean loss per trained token, 3
among the quarter with the highest (docs/benchmarks.md, "RL on the tasks SFT finds likeliest").

So with `rl.task_share` < 1 the job scores every train task's demonstration under the SFT
checkpoint (`Trainer.sample_losses`: one forward pass each, no update) and RL's task queue deals
only that share of the tasks, in its usual shuffled order. The share is spread over functions
(every function's likeliest task before any function's second): RL's held-out gain comes from
the functions it reaches (runs x1 and x2), and the likeliest tasks alone crowd into the few
functions the policy already writes well. Tasks the oracle left without a demonstration have no
score and come last. Only train tasks and their reference fixes are used; held-out tasks are not
looked at. The shipped config leaves it off: in its runs RL left fewer groups out but gained no
more held-out pass@1 than with every task, and the scoring took what the faster RL saved.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from overture.rl.demonstrations import demonstration_samples
from overture.rl.trainer import Trainer
from overture.tasks.spec import Task
from overture.text import Tokenizer

SCORING_CHUNK = 32  # demonstrations per `sample_losses` call: progress between calls


def demonstration_losses(
    trainer: Trainer,
    tokenizer: Tokenizer,
    records: list[dict[str, Any]],
    progress: Callable[[int], None] | None = None,
) -> dict[str, float]:
    """{task id: mean loss per trained token of its demonstration} under `trainer`'s model;
    `progress(n)` after each chunk of n demonstrations."""
    losses: dict[str, float] = {}
    max_tokens = trainer.config.training.seq_len
    for start in range(0, len(records), SCORING_CHUNK):
        chunk = records[start : start + SCORING_CHUNK]
        samples = demonstration_samples(tokenizer, chunk, max_tokens)
        for record, loss in zip(chunk, trainer.sample_losses(samples), strict=True):
            losses[record["task_id"]] = loss
        if progress is not None:
            progress(len(chunk))
    return losses


def likeliest_tasks(tasks: Sequence[Task], losses: dict[str, float], share: float) -> list[Task]:
    """The `share` of `tasks` (rounded up, at least one) the losses rank first, spread over the
    tasks' functions: every function's likeliest task (lowest loss) before any function's second,
    each round lowest loss first. Tasks without a loss rank after every scored one of their
    function."""
    if not 0 < share <= 1:
        raise ValueError(f"the share of tasks to keep must be in (0, 1], got {share}")

    def loss(task: Task) -> float:
        return losses.get(task.instance_id, math.inf)

    by_function: dict[str, list[Task]] = defaultdict(list)
    for task in sorted(tasks, key=lambda task: (loss(task), task.instance_id)):
        by_function[task.function].append(task)
    rounds = {task.instance_id: n for group in by_function.values() for n, task in enumerate(group)}
    ranked = sorted(tasks, key=lambda task: (rounds[task.instance_id], loss(task), task.instance_id))
    return ranked[: max(1, math.ceil(share * len(ranked)))]
