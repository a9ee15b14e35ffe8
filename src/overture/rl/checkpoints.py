"""Training checkpoints that resume exactly, written so that a crash never leaves one looking complete.

A checkpoint is a directory `CHECKPOINTS/step-00000042/` holding

    model/            the policy (`save_pretrained`; `load_pretrained` reads it)
    master/           float32 master weights, when the model trains in bfloat16
    reference/        the frozen KL reference policy, when rl.kl_coef > 0
    optimizer.pt      AdamW state
    rng.pt            torch CPU (and CUDA) generator states
    state.json        step, policy version, data position, Python and NumPy RNG states, extras
    trainer.json      what it trained under: training, optimizer (the phase's schedule), rl
    COMPLETE.json     written last: every file above with its size

It is assembled in a hidden `.incomplete-step-...` directory and renamed into place only after
the marker is written and flushed, so a crash leaves either nothing or a temp directory the
loader never looks at. The loader also re-checks the marker against the files and skips, with
a log line, any checkpoint that does not match (a copy cut short, a file deleted).

A sharded trainer (`Trainer.meshes`) saves the same directory: every rank takes part in
gathering the whole model and the optimizer state (`overture.distributed`: AdamW's state by
parameter index, as one process numbers it, plus the parameter names), rank 0 writes, and all
ranks return once the checkpoint is in place. Such a checkpoint loads into one process, and a
one-process checkpoint into any layout: each rank keeps its part of the whole files.
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from overture.distributed import (
    gather_optimizer_state,
    load_model_state,
    load_optimizer_state,
    save_model,
)
from overture.model import CheckpointError, load_pretrained, save_pretrained
from overture.rl.trainer import Trainer

log = logging.getLogger(__name__)

MARKER = "COMPLETE.json"
TRAINER_SETTINGS = "trainer.json"
_STEP_DIR = re.compile(r"^step-(\d+)$")


class TrainingCheckpointError(ValueError):
    """A training checkpoint that cannot be used; the message names the directory and the file."""


@dataclass
class RestoredState:
    """What a checkpoint gives back to the loop that wrote it."""

    path: Path
    step: int
    data_position: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


def _rng_states() -> tuple[dict[str, torch.Tensor | list[torch.Tensor]], dict[str, Any]]:
    tensors: dict[str, Any] = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        tensors["cuda"] = torch.cuda.get_rng_state_all()
    name, keys, position, has_gauss, cached = np.random.get_state()
    plain = {
        "python": random.getstate(),
        "numpy": [name, keys.tolist(), position, has_gauss, cached],
    }
    return tensors, plain


def _restore_rng(tensors: dict[str, Any], plain: dict[str, Any]) -> None:
    torch.set_rng_state(tensors["torch"])
    if "cuda" in tensors and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(tensors["cuda"])
    version, state, gauss = plain["python"]
    random.setstate((version, tuple(state), gauss))
    name, keys, position, has_gauss, cached = plain["numpy"]
    np.random.set_state((name, np.array(keys, dtype=np.uint32), position, has_gauss, cached))


def _fsync_tree(root: Path) -> None:
    for path in sorted(root.rglob("*")):
        if path.is_file():
            with path.open("rb") as handle:
                os.fsync(handle.fileno())


def _fsync_directory(directory: Path) -> None:
    """Make a rename inside `directory` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _file_sizes(root: Path) -> dict[str, int]:
    return {
        str(p.relative_to(root)): p.stat().st_size
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != MARKER
    }


def save_checkpoint(
    trainer: Trainer,
    root: str | Path,
    data_position: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
    keep: int | None = None,
) -> Path:
    """Write the trainer's full state as `root/step-N` atomically; keep the newest `keep` ones.
    Collective for a sharded trainer (every rank calls it; rank 0 writes)."""
    root = Path(root)
    final = root / f"step-{trainer.step:08d}"
    if trainer.meshes is None:
        _write_checkpoint(trainer, root, final, data_position, extra, keep, trainer.model, None)
        return final
    # Rank 0 makes the directory; the others must not gather into a path it has not chosen.
    temp = _temp_directory(root, trainer.step) if dist.get_rank() == 0 else None
    [temp] = _broadcast_from_rank0([temp])
    save_model(trainer.model, temp / "model")
    optimizer_state = gather_optimizer_state(trainer.optimizer, trainer.model)
    if dist.get_rank() == 0:
        _write_checkpoint(trainer, root, final, data_position, extra, keep, None, optimizer_state, temp)
    dist.barrier()
    return final


def _broadcast_from_rank0(values: list[Any]) -> list[Any]:
    """Rank 0's `values` on every rank (picklable objects)."""
    dist.broadcast_object_list(values, src=0)
    return values


def _temp_directory(root: Path, step: int) -> Path:
    """A fresh hidden directory under `root` to assemble the checkpoint of `step` in."""
    root.mkdir(parents=True, exist_ok=True)
    temp = root / f".incomplete-step-{step:08d}-{os.getpid()}"
    shutil.rmtree(temp, ignore_errors=True)
    temp.mkdir()
    return temp


def _write_checkpoint(
    trainer: Trainer,
    root: Path,
    final: Path,
    data_position: dict[str, Any] | None,
    extra: dict[str, Any] | None,
    keep: int | None,
    model: torch.nn.Module | None,
    optimizer_state: dict[str, Any] | None,
    temp: Path | None = None,
) -> None:
    """Everything but what the caller already wrote into `temp` (the gathered model), then the
    marker and the rename. `model`/`optimizer_state`: write the plain model / that state."""
    temp = temp or _temp_directory(root, trainer.step)
    if model is not None:
        save_pretrained(model, temp / "model")
    if trainer.master:
        save_pretrained(trainer.master.module, temp / "master")
    if trainer.reference:
        save_pretrained(trainer.reference, temp / "reference")
    state_dict = trainer.optimizer.state_dict() if optimizer_state is None else optimizer_state
    torch.save(state_dict, temp / "optimizer.pt")
    rng_tensors, rng_plain = _rng_states()
    torch.save(rng_tensors, temp / "rng.pt")
    state = {
        "step": trainer.step,
        "policy_version": trainer.policy_version,
        "data_position": data_position or {},
        "extra": extra or {},
        "rng": rng_plain,
    }
    (temp / "state.json").write_text(json.dumps(state))
    (temp / TRAINER_SETTINGS).write_text(json.dumps(trainer.settings(), indent=1))
    _fsync_tree(temp)
    marker = {"step": trainer.step, "files": _file_sizes(temp)}
    (temp / MARKER).write_text(json.dumps(marker))
    _fsync_tree(temp)
    # An existing checkpoint of this step is moved aside before the new one takes its name, and
    # removed only after: a crash in between leaves one complete copy under one of the names.
    replaced = final.with_name(f".replaced-{final.name}") if final.exists() else None
    if replaced is not None:
        if replaced.exists():
            shutil.rmtree(replaced)
        final.rename(replaced)
    temp.rename(final)
    _fsync_directory(root)
    if replaced is not None:
        shutil.rmtree(replaced)
    if keep:
        prune_checkpoints(root, keep)


def checkpoint_problem(path: Path) -> str | None:
    """Why `path` is not a complete checkpoint, or None when it is."""
    marker = path / MARKER
    if not marker.is_file():
        return f"no {MARKER} (the write did not finish)"
    try:
        expected = json.loads(marker.read_text())["files"]
    except (json.JSONDecodeError, KeyError, TypeError, UnicodeDecodeError):
        return f"{MARKER} is unreadable"
    actual = _file_sizes(path)
    for name, size in expected.items():
        if name not in actual:
            return f"{name} is missing"
        if actual[name] != size:
            return f"{name} has {actual[name]} bytes, {size} were written"
    return None


def complete_checkpoints(root: str | Path) -> list[Path]:
    """Complete checkpoints under `root`, oldest first; incomplete ones are logged and skipped."""
    root = Path(root)
    found = []
    if not root.is_dir():
        return found
    for path in root.iterdir():
        match = _STEP_DIR.match(path.name)
        if not match or not path.is_dir():
            continue
        problem = checkpoint_problem(path)
        if problem:
            log.warning("skipping incomplete checkpoint %s: %s", path, problem)
            continue
        found.append((int(match.group(1)), path))
    return [path for _, path in sorted(found)]


def latest_checkpoint(root: str | Path) -> Path | None:
    """The newest complete checkpoint under `root`, or None."""
    checkpoints = complete_checkpoints(root)
    return checkpoints[-1] if checkpoints else None


def prune_checkpoints(root: str | Path, keep: int) -> None:
    """Delete all but the newest `keep` complete checkpoints (and leftover temp directories)."""
    root = Path(root)
    for path in complete_checkpoints(root)[:-keep]:
        shutil.rmtree(path)
    for path in root.glob(".incomplete-step-*"):
        shutil.rmtree(path, ignore_errors=True)


def _copy_weights(source_dir: Path, target: torch.nn.Module, sharded: bool = False) -> None:
    loaded = load_pretrained(source_dir, dtype=next(target.parameters()).dtype)
    try:
        if sharded:
            load_model_state(target, loaded.state_dict(), source=str(source_dir))
        else:
            target.load_state_dict(loaded.state_dict())
    except (RuntimeError, ValueError) as exc:
        raise TrainingCheckpointError(
            f"{source_dir}: weights do not fit the model being trained: {exc}"
        ) from None


def load_checkpoint(trainer: Trainer, path: str | Path) -> RestoredState:
    """Restore the trainer (weights, optimizer, counters, RNG) from a complete checkpoint, whatever
    the layout that wrote it. For a sharded trainer every rank reads the whole files and keeps its
    part (no collective)."""
    path = Path(path)
    problem = checkpoint_problem(path)
    if problem:
        raise TrainingCheckpointError(f"{path}: incomplete checkpoint: {problem}")
    sharded = trainer.meshes is not None
    try:
        _copy_weights(path / "model", trainer.model, sharded)
        if trainer.master:
            _copy_weights(path / "master", trainer.master.module)
        if trainer.reference:
            _copy_weights(path / "reference", trainer.reference)
        optimizer_state = torch.load(path / "optimizer.pt", weights_only=True)
        if sharded:
            load_optimizer_state(trainer.optimizer, trainer.model, optimizer_state, source=str(path))
        else:
            trainer.optimizer.load_state_dict(optimizer_state)
        state = json.loads((path / "state.json").read_text())
        _restore_rng(torch.load(path / "rng.pt", weights_only=True), state["rng"])
    except CheckpointError as exc:
        raise TrainingCheckpointError(f"{path}: {exc}") from None
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        raise TrainingCheckpointError(f"{path}: cannot restore the trainer: {exc}") from None
    trainer.step = state["step"]
    trainer.policy_version = state["policy_version"]
    return RestoredState(
        path=path, step=trainer.step, data_position=state["data_position"], extra=state["extra"]
    )
