"""The Task record (DESIGN.md, SWE-bench field names) and task files in JSONL.

A task file holds one JSON object per line. SWE-bench instances load unchanged: their
`FAIL_TO_PASS` / `PASS_TO_PASS` may be JSON-encoded strings, and fields this record does not
know are kept in `metadata["extra"]`. Four fields go beyond SWE-bench's:

- `base`: the directory of the repository snapshot the task starts from (no `.git` history).
  In a file it is written relative to the file's directory when it lies below it, so a task
  set (file + `snapshots/`) moves as one folder; reading resolves it back to an absolute path.
  SWE-bench instances carry no `base`: a checkout of `repo` at `base_commit` must be given.
- `setup_patch`: a unified diff applied to `base` to make the task's starting workspace (the
  synthesized bug); empty for tasks whose snapshot already is the starting state. Many tasks
  share one snapshot and differ only by this patch.
- `split`: `train` or `heldout`; `metadata["heldout_by"]` says what of a held-out task is
  held out: its whole repository, its function, or the task alone.
- `environment`: the record of the Python environment its tests run in
  (`overture.tasks.environment`), a path written relative to the file like `base`; empty for a
  task whose tests run on overture's own Python (the bundled repositories').

`patch` is the reference fix (SWE-bench meaning): applied with `patch -p1` to the starting
workspace it makes every FAIL_TO_PASS and PASS_TO_PASS test pass. `test_patch`, when present,
is applied before grading (SWE-bench puts the new tests there).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

SPLITS = ("train", "heldout")
RELATIVE_PATHS = ("base", "environment")  # written relative to a task file's folder when below it
DEFAULT_TEST_CMD = "python -m pytest"


class TaskError(ValueError):
    """A task or task file that cannot be used; the message names the file, line or instance."""


@dataclass
class Task:
    """One verifiable coding task."""

    instance_id: str
    repo: str
    problem_statement: str
    FAIL_TO_PASS: list[str]
    PASS_TO_PASS: list[str] = field(default_factory=list)
    base: str = ""
    setup_patch: str = ""
    patch: str = ""
    test_patch: str = ""
    test_cmd: str = DEFAULT_TEST_CMD
    split: str = "train"
    environment: str = ""
    base_commit: str = ""
    hints_text: str = ""
    version: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        name = self.instance_id or "<no instance_id>"
        if not self.instance_id:
            raise TaskError("task without an instance_id")
        if not self.FAIL_TO_PASS:
            raise TaskError(f"task {name}: FAIL_TO_PASS is empty (nothing would check a fix)")
        for key in ("FAIL_TO_PASS", "PASS_TO_PASS"):
            ids = getattr(self, key)
            if not isinstance(ids, list) or not all(isinstance(i, str) and i for i in ids):
                raise TaskError(f"task {name}: {key} must be a list of test ids (non-empty strings)")
        if self.split not in SPLITS:
            raise TaskError(f"task {name}: split {self.split!r} is not one of {SPLITS}")
        if not self.test_cmd.strip():
            raise TaskError(f"task {name}: test_cmd is empty")

    @property
    def function(self) -> str:
        """The function the task's bug is in, `repo:file:function`, for a synthesized task (whose
        `metadata` names it); the task's own id for any other."""
        if not self.metadata.get("function"):
            return self.instance_id
        return f"{self.repo}:{self.metadata.get('file')}:{self.metadata['function']}"

    @property
    def test_ids(self) -> list[str]:
        """FAIL_TO_PASS then PASS_TO_PASS, each once."""
        return list(dict.fromkeys([*self.FAIL_TO_PASS, *self.PASS_TO_PASS]))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Task:
        """A task from a JSON object: SWE-bench's string-encoded test lists are decoded and
        unknown fields are kept under `metadata["extra"]`."""
        if not isinstance(data, dict):
            raise TaskError(f"a task must be a JSON object, got {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        values = {key: value for key, value in data.items() if key in known}
        extra = {key: value for key, value in data.items() if key not in known}
        name = values.get("instance_id", "<no instance_id>")
        if not isinstance(name, str):
            raise TaskError(f"task {name!r}: instance_id must be a string")
        for key in ("FAIL_TO_PASS", "PASS_TO_PASS"):
            if isinstance(values.get(key), str):
                try:
                    values[key] = json.loads(values[key])
                except json.JSONDecodeError as exc:
                    raise TaskError(f"task {name}: {key} is a string but not a JSON list: {exc}") from None
        missing = [
            key for key in ("instance_id", "repo", "problem_statement", "FAIL_TO_PASS") if key not in values
        ]
        if missing:
            raise TaskError(f"task {name}: missing field(s) {', '.join(missing)}")
        for key in (
            "base",
            "setup_patch",
            "patch",
            "test_patch",
            "test_cmd",
            "split",
            "environment",
            "repo",
            "problem_statement",
        ):
            if key in values and not isinstance(values[key], str):
                raise TaskError(f"task {name}: {key} must be a string, got {type(values[key]).__name__}")
        metadata = values.pop("metadata", None) or {}
        if not isinstance(metadata, dict) or not isinstance(metadata.get("extra", {}), dict):
            raise TaskError(f"task {name}: metadata (and metadata.extra) must be JSON objects")
        metadata = dict(metadata)
        if extra:
            metadata["extra"] = {**metadata.get("extra", {}), **extra}
        try:
            return cls(**values, metadata=metadata)
        except TypeError as exc:
            raise TaskError(f"task {name}: {exc}") from None


def read_tasks(path: str | Path) -> list[Task]:
    """Every task of a JSONL file, `base` resolved against the file's directory."""
    path = Path(path)
    if not path.is_file():
        raise TaskError(f"{path}: task file not found")
    tasks: list[Task] = []
    seen: set[str] = set()
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            task = Task.from_dict(json.loads(line))
        except json.JSONDecodeError as exc:
            raise TaskError(f"{path}:{number}: not valid JSON: {exc}") from None
        except TaskError as exc:
            raise TaskError(f"{path}:{number}: {exc}") from None
        if task.instance_id in seen:
            raise TaskError(f"{path}:{number}: instance_id {task.instance_id!r} appears twice")
        seen.add(task.instance_id)
        for key in RELATIVE_PATHS:
            value = getattr(task, key)
            if value and not os.path.isabs(value):
                setattr(task, key, str((path.parent / value).resolve()))
        tasks.append(task)
    return tasks


def write_jsonl(path: str | Path, records: Iterable[dict[str, Any]]) -> Path:
    """Write one JSON object per line, atomically (a reader never sees half a file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text("".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records))
    os.replace(partial, path)
    return path


def write_tasks(path: str | Path, tasks: list[Task]) -> Path:
    """Write `tasks` as JSONL (atomically); paths below the file's directory become relative."""
    path = Path(path)
    folder = path.parent.resolve()
    records = []
    for task in tasks:
        record = task.to_dict()
        for key in RELATIVE_PATHS:
            if record[key] and Path(record[key]).resolve().is_relative_to(folder):
                record[key] = Path(record[key]).resolve().relative_to(folder).as_posix()
        records.append(record)
    return write_jsonl(path, records)
