"""RL's task pool (`rl.task_share`): demonstrations scored under a checkpoint, and the share of
train tasks with the lowest loss kept, unscored tasks last."""

from __future__ import annotations

import pytest
from conftest import tiny_model_config

from overture.config import RunConfig
from overture.model import Transformer
from overture.rl.demonstrations import demonstration_samples, synthetic_demonstrations
from overture.rl.task_pool import SCORING_CHUNK, demonstration_losses, likeliest_tasks
from overture.rl.trainer import Trainer
from overture.tasks.spec import Task
from overture.text import train_default_tokenizer

VOCAB = 1024


def task(instance_id: str, function: str = "") -> Task:
    metadata = {"file": "lib.py", "function": function} if function else {}
    return Task(instance_id, "repo", "fix it", ["tests/test_x.py::test_x"], split="train", metadata=metadata)


def ids(tasks: list[Task]) -> list[str]:
    return [t.instance_id for t in tasks]


def test_the_share_with_the_lowest_loss_is_kept_and_unscored_tasks_come_last():
    tasks = [task(name) for name in ("a", "b", "c", "d", "e")]  # each its own function
    losses = {"a": 0.9, "b": 0.1, "c": 0.5, "e": 0.3}  # d: the oracle left it without a demonstration
    assert ids(likeliest_tasks(tasks, losses, 0.4)) == ["b", "e"]
    assert ids(likeliest_tasks(tasks, losses, 0.5)) == ["b", "e", "c"]  # rounded up
    assert ids(likeliest_tasks(tasks, losses, 1.0)) == ["b", "e", "c", "a", "d"]
    assert ids(likeliest_tasks(tasks, losses, 0.01)) == ["b"]  # never none
    with pytest.raises(ValueError, match="share"):
        likeliest_tasks(tasks, losses, 0.0)


def test_every_function_gives_its_likeliest_task_before_any_gives_a_second():
    tasks = [task(name, name[0]) for name in ("f1", "f2", "f3", "g1", "g2", "h1")]
    losses = {"f1": 0.01, "f2": 0.02, "f3": 0.03, "g1": 0.5, "g2": 0.04, "h1": 0.9}
    assert ids(likeliest_tasks(tasks, losses, 0.5)) == ["f1", "g2", "h1"]
    assert ids(likeliest_tasks(tasks, losses, 1.0)) == ["f1", "g2", "h1", "f2", "g1", "f3"]


def test_a_demonstration_the_model_was_trained_on_scores_lowest():
    tokenizer = train_default_tokenizer(VOCAB)
    config = RunConfig.model_validate({
        "model": tiny_model_config(vocab_size=VOCAB).model_dump(),
        "training": {"lr": 1e-2, "warmup_steps": 0, "seq_len": 512},
    })  # fmt: skip
    # More than one chunk: the losses of later chunks keep their tasks.
    demonstrations = synthetic_demonstrations(SCORING_CHUNK + 3)
    records = [{**record, "task_id": f"task-{n}"} for n, record in enumerate(demonstrations)]
    trainer = Trainer(Transformer(config.model), config)
    learned = records[SCORING_CHUNK + 1]
    for _ in range(30):
        trainer.lm_step(demonstration_samples(tokenizer, [learned], 512))
    done = []
    losses = demonstration_losses(trainer, tokenizer, records, done.append)
    assert done == [SCORING_CHUNK, 3]
    assert set(losses) == {record["task_id"] for record in records}
    assert min(losses, key=losses.get) == learned["task_id"]
    assert losses[learned["task_id"]] < 0.5 * sorted(losses.values())[1]
