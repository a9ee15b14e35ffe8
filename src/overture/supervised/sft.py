"""Supervised warm start (`overture sft CONFIG`): train the policy on demonstration conversations.

The loss is next-token cross-entropy on the policy's tokens only (loss mask 1: the assistant
bodies), token-mean over each batch. A share of the demonstrations is held out; its loss is
measured every `sft.eval_every` steps, the best weights so far are kept in
`checkpoints/best/`, and training stops early after `sft.patience` evaluations without an
improvement of at least `sft.min_delta`. Training checkpoints (`checkpoints.py`) hold both data positions
and the early-stopping state, so `--resume` continues exactly where a run stopped.

With `parallel.nproc` > 1 the same function runs on every rank of a `run_parallel` job (local
processes, torchrun, or Ray actors when `runtime.ray` is set): each rank builds the same model
and data from the seed, the trainer shards the model and splits each batch, and the held-out
losses it reports are those of the whole set, so every rank takes the same early-stopping
decisions. Rank 0 alone writes the run directory and echoes progress (relayed to the caller).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.distributed as dist

from overture.config import RunConfig
from overture.distributed import Meshes, launches_processes, meshes_for_run, run_parallel
from overture.rl.checkpoints import latest_checkpoint, load_checkpoint, save_checkpoint
from overture.rl.run_dir import RunDir
from overture.rl.samples import TrainingSample
from overture.rl.setup import build_model, load_tokenizer, run_tokenizer
from overture.rl.trainer import Trainer, check_sharded_training
from overture.runtime.devices import resolve_device
from overture.supervised.demonstrations import (
    demonstration_samples,
    read_demonstrations,
    synthetic_demonstrations,
)
from overture.text import Tokenizer


@dataclass
class DataOrder:
    """Position in a reshuffled-every-epoch pass over `size` items; the order of epoch e is a
    permutation seeded by (seed, e), so (epoch, index) alone restores it."""

    size: int
    seed: int
    epoch: int = 0
    index: int = 0

    def _permutation(self) -> list[int]:
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
        return torch.randperm(self.size, generator=generator).tolist()

    def take(self, count: int) -> list[int]:
        """The next `count` item indices, moving into the next epoch when this one runs out."""
        chosen: list[int] = []
        while len(chosen) < count:
            order = self._permutation()
            step = min(count - len(chosen), self.size - self.index)
            chosen += order[self.index : self.index + step]
            self.index += step
            if self.index == self.size:
                self.epoch, self.index = self.epoch + 1, 0
        return chosen

    def position(self) -> dict[str, int]:
        return {"epoch": self.epoch, "index": self.index}


@dataclass
class EarlyStopping:
    """Best held-out loss so far and how many evaluations have not beaten it."""

    patience: int
    min_delta: float
    best: float = float("inf")
    best_step: int = 0
    stale: int = 0

    def update(self, loss: float, step: int) -> bool:
        """Record an evaluation; True when it is a new best."""
        if loss < self.best - self.min_delta:
            self.best, self.best_step, self.stale = loss, step, 0
            return True
        self.stale += 1
        return False

    @property
    def should_stop(self) -> bool:
        return self.stale >= self.patience


def split_held_out(samples: Sequence[TrainingSample], fraction: float) -> tuple[list, list]:
    """(train, held out): every k-th sample held out, k = round(1 / fraction); at least one of each."""
    if len(samples) < 2:
        raise ValueError(f"need at least 2 demonstrations to hold some out, got {len(samples)}")
    every = max(2, round(1 / fraction))
    held = [s for i, s in enumerate(samples) if i % every == every - 1] or [samples[-1]]
    train = [s for s in samples if all(s is not h for h in held)]
    return train, held


def load_demonstration_records(config: RunConfig) -> tuple[list[dict], str]:
    """(records, source name): the demonstrations `sft.data` names, or the synthetic set when it
    is unset."""
    if config.sft.data:
        return read_demonstrations(config.sft.data), config.sft.data
    return synthetic_demonstrations(config.sft.synthetic_count, config.seed), "synthetic"


def load_demonstration_samples(config: RunConfig, tokenizer: Tokenizer) -> list[TrainingSample]:
    """The demonstrations `sft.data` names, or the synthetic set when it is unset."""
    records, source = load_demonstration_records(config)
    return demonstration_samples(tokenizer, records, config.training.seq_len, source)


def _save_best(trainer: Trainer, tokenizer: Tokenizer, path: Path, lead: bool = True) -> None:
    trainer.save_weights(path)
    if lead:
        tokenizer.save(path)


def silent(*_: object, **__: object) -> None:
    """What ranks other than 0 do instead of echoing and logging."""


def prepare_run_dir(config: RunConfig, overwrite: bool, resume: bool) -> None:
    """Create (or check) the run directory here, before processes start, so that its errors (it
    exists, ...) reach the caller as themselves; rank 0 then reopens it."""
    RunDir(config, overwrite=overwrite, resume=resume).close()


def sft(
    config: RunConfig,
    overwrite: bool = False,
    resume: bool = False,
    until_step: int | None = None,
    echo: Callable[[str], None] = print,
) -> dict:
    """Run (or resume) supervised fine-tuning; returns a summary dict.

    `until_step` stops after that optimizer step with a checkpoint, as a preempted job would;
    `resume` later continues from the newest complete checkpoint. With `parallel.nproc` > 1 the
    training runs on that many processes (see the module docstring); the summary is rank 0's.
    """
    prepared = False
    if launches_processes(config.parallel):
        check_sharded_training(config)
        prepare_run_dir(config, overwrite, resume)
        overwrite, prepared = False, True
    args = (config, overwrite, resume, until_step, prepared)
    return run_parallel(sft_rank, config.parallel, *args, runtime=config.runtime, echo=echo)[0]


def sft_rank(
    config: RunConfig,
    overwrite: bool,
    resume: bool,
    until_step: int | None,
    prepared: bool,
    echo: Callable[[str], None] = print,
) -> dict:
    """`sft` on this process: the whole run in one process, or this rank's part of a job.
    `prepared`: the launcher already made the run directory (rank 0 reopens it)."""
    torch.manual_seed(config.seed)
    device = resolve_device(config.runtime)
    meshes = meshes_for_run(config.parallel, device.type)
    lead = meshes is None or meshes.rank == 0
    run = RunDir(config, overwrite=overwrite, resume=resume or prepared) if lead else None
    _wait_for_rank0(meshes)
    log, echo = (run.log, echo) if run is not None else (silent, silent)
    # RunDir's layout (DESIGN.md decision 8); ranks other than 0 need its paths, not the object.
    run_path = Path(config.output_dir) / config.name
    checkpoints = run_path / "checkpoints"
    training, settings = config.training, config.sft
    started = time.time()
    tokenizer = run_tokenizer(config, run.path, resume) if run is not None else load_tokenizer(config)
    records, source = load_demonstration_records(config)
    samples = demonstration_samples(tokenizer, records, training.seq_len, source)
    train, held_out = split_held_out(samples, settings.val_fraction)
    model = build_model(config, tokenizer, device)
    trainer = Trainer(model, training, training.optimizer, meshes=meshes)
    order = DataOrder(len(train), config.seed)
    stopping = EarlyStopping(settings.patience, settings.min_delta)
    initial_val = None
    restored = latest_checkpoint(checkpoints) if resume else None
    if restored:
        state = load_checkpoint(trainer, restored)
        order = DataOrder(len(train), config.seed, **state.data_position)
        stopping = EarlyStopping(**state.extra["early_stopping"])
        initial_val = state.extra.get("initial_val_loss")
        echo(f"resumed from {restored} at step {trainer.step}")
    else:
        initial_val = trainer.lm_loss(held_out)
        log(0, val_loss=initial_val)
    where = f"{device} x {meshes.world_size} processes" if meshes else f"{device}"
    echo(
        f"sft {run_path}: {len(train)} demonstrations, {len(held_out)} held out, "
        f"held-out loss {initial_val:.3f} at start, {where}"
    )

    def checkpoint() -> Path:
        extra = {
            "early_stopping": asdict(stopping),
            "initial_val_loss": initial_val,
        }
        return save_checkpoint(trainer, checkpoints, order.position(), extra, training.keep_checkpoints)

    last = min(training.steps, until_step) if until_step else training.steps
    while trainer.step < last and not stopping.should_stop:
        batch = [train[i] for i in order.take(training.batch_size)]
        metrics = trainer.lm_step(batch)
        step = trainer.step
        if step % settings.eval_every == 0 or step == training.steps:
            metrics["val_loss"] = trainer.lm_loss(held_out)
            if stopping.update(metrics["val_loss"], step):
                _save_best(trainer, tokenizer, checkpoints / "best", lead)
        if step % training.log_every == 0 or "val_loss" in metrics:
            log(step, **metrics)
            held = f"  held-out {metrics['val_loss']:.3f}" if "val_loss" in metrics else ""
            echo(f"step {step:5d}  loss {metrics['loss']:.3f}{held}  {metrics['tokens_per_s']:,.0f} tok/s")
        if training.checkpoint_every and step % training.checkpoint_every == 0:
            checkpoint()
    last_checkpoint = checkpoint()
    finished = trainer.step >= training.steps or stopping.should_stop
    final = checkpoints / "final"
    if finished:
        _save_best(trainer, tokenizer, final, lead)
    if run is not None:
        run.close()
    summary = {
        "run_dir": str(run_path),
        "checkpoint": str(last_checkpoint),
        "final": str(final) if finished else None,
        "best": str(checkpoints / "best") if stopping.best_step else None,
        "steps": trainer.step,
        "stopped_early": stopping.should_stop,
        "initial_val_loss": initial_val,
        "best_val_loss": stopping.best if stopping.best_step else None,
        "best_step": stopping.best_step,
        "seconds": round(time.time() - started, 1),
    }
    echo(f"held-out loss {initial_val:.3f} -> best {stopping.best:.3f} at step {stopping.best_step}")
    return summary


def _wait_for_rank0(meshes: Meshes | None) -> None:
    # Rank 0 may be replacing the run directory (--overwrite under torchrun): the others must not
    # look for checkpoints in it before it is done.
    if meshes is not None:
        dist.barrier()
