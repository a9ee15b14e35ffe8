"""`job_state.json`: the main job's finished phases and their results, saved after each one."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

STATE_FILE = "job_state.json"


class JobState:
    """The finished phases of a run and their results, saved after each one (`job_state.json`),
    and the seconds each phase took."""

    def __init__(self, path: Path, fresh: bool) -> None:
        self.path = path / STATE_FILE
        self.data: dict[str, Any] = (
            {} if fresh or not self.path.is_file() else json.loads(self.path.read_text())
        )

    def get(self, key: str) -> Any:
        return self.data.get(key)

    def record(self, key: str, value: Any) -> Any:
        self.data[key] = value
        partial = self.path.with_name(f".{self.path.name}.partial")
        partial.write_text(json.dumps(self.data))
        os.replace(partial, self.path)
        return value

    def add_seconds(self, phase: str, seconds: float) -> None:
        """Add `seconds` to the time recorded for `phase` (a resumed phase adds to its first run's)."""
        spent = dict(self.get("seconds") or {})
        spent[phase] = round(spent.get(phase, 0.0) + seconds, 1)
        self.record("seconds", spent)
