"""Training checkpoints: resuming reproduces an uninterrupted run, a write cut short is never
taken for a checkpoint, and damaged checkpoints are skipped or refused with a clear error."""

from __future__ import annotations

import json
import logging
import random

import pytest
import torch
from conftest import tiny_model_config

from overture.config import RunConfig
from overture.model import Transformer, load_pretrained
from overture.rl.checkpoints import (
    TrainingCheckpointError,
    complete_checkpoints,
    latest_checkpoint,
    load_checkpoint,
    save_checkpoint,
)
from overture.rl.samples import TrainingSample
from overture.rl.trainer import Trainer, rl_trainer


def run_config(**rl) -> RunConfig:
    return RunConfig.model_validate(
        {
            "model": tiny_model_config(balance_bias=True).model_dump(),
            "training": {"lr": 1e-2, "warmup_steps": 2, "steps": 6},
            "rl": {"kl_coef": 0.05, "is_level": "sequence", **rl},
        }
    )


def random_batch(vocab: int = 96) -> list[TrainingSample]:
    """A batch drawn from the global RNGs, so that resuming must restore them to repeat it."""
    samples = []
    for _ in range(4):
        length = random.randint(6, 14)
        ids = torch.randint(0, vocab, (length,)).tolist()
        logprobs = (-torch.rand(length) * 3).tolist()
        mask = [0] * 3 + [1] * (length - 3)
        samples.append(TrainingSample(ids, mask, logprobs, [0] * length, advantage=random.uniform(-1, 1)))
    return samples


def train(trainer: Trainer, steps: int) -> list[float]:
    return [trainer.rl_step(random_batch())["loss"] for _ in range(steps)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_resumed_run_repeats_the_uninterrupted_losses(tmp_path, dtype):
    config = run_config()

    def policy() -> Transformer:
        return Transformer(config.model).to(dtype)

    torch.manual_seed(1)
    random.seed(1)
    uninterrupted = train(rl_trainer(policy(), config), 6)

    torch.manual_seed(1)
    random.seed(1)
    first = rl_trainer(policy(), config)
    before = train(first, 3)
    save_checkpoint(first, tmp_path, data_position={"batch": 3})
    # A fresh process: other weights, other RNG states; the checkpoint must restore all of it.
    torch.manual_seed(99)
    random.seed(99)
    resumed = rl_trainer(policy(), config)
    restored = load_checkpoint(resumed, latest_checkpoint(tmp_path))
    assert (restored.step, resumed.policy_version, restored.data_position) == (3, 3, {"batch": 3})
    after = train(resumed, 3)
    assert before + after == pytest.approx(uninterrupted, rel=1e-6, abs=1e-8)


def test_checkpoint_model_loads_as_a_hugging_face_checkpoint(tmp_path):
    config = run_config(kl_coef=0.0)
    trainer = rl_trainer(Transformer(config.model), config)
    train(trainer, 1)
    path = save_checkpoint(trainer, tmp_path)
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        torch.testing.assert_close(load_pretrained(path / "model")(ids).logits, trainer.model(ids).logits)
    assert (path / "COMPLETE.json").is_file()
    settings = json.loads((path / "trainer.json").read_text())
    assert settings["optimizer"] == trainer.optimizer_config.model_dump(mode="json")
    assert settings["rl"]["group_size"] == trainer.rl.group_size


def test_a_crash_while_writing_leaves_no_checkpoint_that_looks_complete(tmp_path, monkeypatch):
    config = run_config(kl_coef=0.0)
    trainer = rl_trainer(Transformer(config.model), config)
    train(trainer, 1)
    good = save_checkpoint(trainer, tmp_path)
    train(trainer, 1)

    def crash(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", crash)  # dies after the model files, before the rest
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(trainer, tmp_path)
    monkeypatch.undo()
    assert latest_checkpoint(tmp_path) == good
    assert not (tmp_path / "step-00000002").exists()


def test_incomplete_or_damaged_checkpoints_are_skipped_with_a_log_line(tmp_path, caplog):
    config = run_config(kl_coef=0.0)
    trainer = rl_trainer(Transformer(config.model), config)
    paths = []
    for _ in range(3):
        train(trainer, 1)
        paths.append(save_checkpoint(trainer, tmp_path))
    (paths[2] / "COMPLETE.json").unlink()  # interrupted before its marker
    optimizer_file = paths[1] / "optimizer.pt"
    optimizer_file.write_bytes(optimizer_file.read_bytes()[:100])  # cut short after the marker
    with caplog.at_level(logging.WARNING):
        assert latest_checkpoint(tmp_path) == paths[0]
    assert "step-00000003: no COMPLETE.json" in caplog.text
    assert "optimizer.pt has 100 bytes" in caplog.text
    with pytest.raises(TrainingCheckpointError, match=r"step-00000002: incomplete checkpoint: optimizer\.pt"):
        load_checkpoint(trainer, paths[1])


def test_checkpoint_of_another_architecture_is_refused(tmp_path):
    config = run_config(kl_coef=0.0)
    trainer = rl_trainer(Transformer(config.model), config)
    path = save_checkpoint(trainer, tmp_path)
    wider = RunConfig.model_validate(
        {**config.model_dump(), "model": tiny_model_config(hidden_size=64).model_dump()}
    )
    with pytest.raises(TrainingCheckpointError, match="weights do not fit the model being trained"):
        load_checkpoint(rl_trainer(Transformer(wider.model), wider), path)


def test_only_the_newest_checkpoints_are_kept(tmp_path):
    config = run_config(kl_coef=0.0)
    trainer = rl_trainer(Transformer(config.model), config)
    for _ in range(4):
        train(trainer, 1)
        save_checkpoint(trainer, tmp_path, keep=2)
    assert [p.name for p in complete_checkpoints(tmp_path)] == ["step-00000003", "step-00000004"]


def test_saving_a_step_again_replaces_it_cleanly(tmp_path):
    trainer = rl_trainer(Transformer(run_config().model), run_config())
    train(trainer, 1)
    first = save_checkpoint(trainer, tmp_path, data_position={"batch": 1})
    second = save_checkpoint(trainer, tmp_path, data_position={"batch": 2})
    assert first == second
    assert sorted(p.name for p in tmp_path.iterdir()) == [first.name]  # nothing left aside
    assert load_checkpoint(trainer, second).data_position == {"batch": 2}
