"""The run directory every training command writes: resolved config, metrics, TensorBoard, checkpoints.

Layout (DESIGN.md decision 8): `OUTPUT_DIR/NAME/{config.toml, metrics.jsonl, tb/, checkpoints/,
trajectories/}`, and the run's tokenizer with its record (`tokenizer.json`, `tokenizer_record.json`:
`overture.rl.setup.run_tokenizer`). Each metrics record is one JSON line with the step and the
wall-clock time.
"""

from __future__ import annotations

import json
import math
import shutil
import time
from pathlib import Path
from typing import Any

from overture.config import RunConfig, save_config


class RunDirError(ValueError):
    """A run directory that cannot be used as asked (e.g. it exists and would be overwritten)."""


class RunDir:
    """Creates (or reopens) a run directory and records metrics into it."""

    def __init__(self, config: RunConfig, overwrite: bool = False, resume: bool = False) -> None:
        self.path = Path(config.output_dir) / config.name
        if self.path.exists() and not resume:
            if not overwrite:
                raise RunDirError(
                    f"{self.path}: run directory exists; pick another name (--set name=...), "
                    "resume it, or pass --overwrite"
                )
            shutil.rmtree(self.path)
        for sub in ("checkpoints", "trajectories", "tb"):
            (self.path / sub).mkdir(parents=True, exist_ok=True)
        save_config(config, self.path / "config.toml")
        self._metrics = (self.path / "metrics.jsonl").open("a")
        self._tensorboard = None
        self._start = time.time()

    @property
    def checkpoints(self) -> Path:
        return self.path / "checkpoints"

    def _writer(self):
        if self._tensorboard is None:
            from torch.utils.tensorboard import SummaryWriter

            self._tensorboard = SummaryWriter(str(self.path / "tb"))
        return self._tensorboard

    def log(self, step: int, **metrics: Any) -> None:
        """Append one metrics record; numeric values also go to TensorBoard."""
        record = {"step": step, "time": round(time.time() - self._start, 3), **metrics}
        self._metrics.write(json.dumps(record) + "\n")
        self._metrics.flush()
        writer = self._writer()
        for key, value in metrics.items():
            if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
                writer.add_scalar(key, value, step)

    def close(self) -> None:
        self._metrics.close()
        if self._tensorboard is not None:
            self._tensorboard.close()


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """Every record of a run's metrics.jsonl (given the run directory or the file)."""
    path = Path(path)
    file = path / "metrics.jsonl" if path.is_dir() else path
    return [json.loads(line) for line in file.read_text().splitlines() if line.strip()]
