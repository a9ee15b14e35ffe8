"""Grading arbitrary patches given in SWE-bench's predictions format against a task file.

A predictions file holds one JSON object per line (JSONL), or — when its name ends in `.json`,
as SWE-bench also accepts — one JSON list of such objects (or an object of them keyed by
instance id). Each prediction has `instance_id` (a task of the task file), `model_patch` (a
unified diff for `patch -p1`; empty or null is no change) and `model_name_or_path`; other
fields are ignored.

`read_predictions` and `check_predictions` turn the file into the predictions to grade and the
entries that cannot be graded, each named by its line (or item) number and what is wrong: not
UTF-8, not JSON (deep nesting and huge numbers included), not an object, a missing field, a
field of the wrong type, an instance id no task has, or one an earlier entry already predicted
(the first is graded). A malformed entry never stops the others.

`grade_predictions` grades each prediction in its own fresh sandbox over its task's starting
workspace, `jobs` at a time: `model_patch` is applied (a patch that does not apply grades
`none`, with what `patch` said), then `overture.tasks.grading.grade` decides as it does for an
episode (an empty diff grades `none`, reason "empty diff"). Whatever fails on the host side
while grading one prediction grades that prediction `none` with the reason, never the others.
`summarize` counts the reports by resolution and names the tasks without a prediction and the
malformed entries.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from overture.config import TasksConfig
from overture.sandbox import SandboxPool
from overture.tasks.grading import Grade, grade, patch_workspace
from overture.tasks.parallel import map_bounded
from overture.tasks.spec import Task, TaskError
from overture.tasks.task_sandbox import task_sandbox

FIELDS = ("instance_id", "model_patch", "model_name_or_path")
RESOLUTIONS = ("resolved", "partial", "none", "tampering")
SHOWN_CHARS = 120  # of a value quoted in a problem: a hostile file's megabyte id is not repeated


class PredictionError(TaskError):
    """A predictions file that cannot be read at all (missing, or a `.json` file that is not JSON)."""


@dataclass
class Entry:
    """One line (or list item) of a predictions file, parsed; `problem` says why it could not be."""

    number: int
    value: Any = None
    problem: str = ""


@dataclass
class Prediction:
    """A well-formed prediction for a known task; `index` is its place among those graded."""

    index: int
    number: int
    instance_id: str
    model_patch: str
    model_name_or_path: str


@dataclass
class Malformed:
    """An entry that is not graded: where it is (`unit` "line" or "item", `number`) and why."""

    unit: str
    number: int
    problem: str
    unknown_id: str | None = None  # the instance id no task has, when that is the problem

    def to_dict(self) -> dict[str, Any]:
        return {self.unit: self.number, "problem": self.problem}


@dataclass
class PredictionReport:
    """The grade of one prediction, as printed: outcomes are test id -> pytest status (None: none)."""

    index: int
    instance_id: str
    model_name_or_path: str
    resolution: str
    score: float
    reason: str
    FAIL_TO_PASS: dict[str, str | None] = field(default_factory=dict)
    PASS_TO_PASS: dict[str, str | None] = field(default_factory=dict)
    restored: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "instance_id": self.instance_id, "model_name_or_path": self.model_name_or_path,
            "resolution": self.resolution, "score": self.score, "reason": self.reason,
            "FAIL_TO_PASS": self.FAIL_TO_PASS, "PASS_TO_PASS": self.PASS_TO_PASS,
            "restored": self.restored, "seconds": self.seconds,
        }  # fmt: skip


def cut(text: str) -> str:
    """`text` cut to `SHOWN_CHARS`, saying how long it was."""
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + f"... ({len(text)} characters)"


def shown(value: Any) -> str:
    """`value` quoted for a message, cut to `SHOWN_CHARS`."""
    return cut(repr(value))


def _parse_json(text: str) -> tuple[Any, str]:
    try:
        return json.loads(text), ""
    except RecursionError:
        return None, "not valid JSON: nested too deeply"
    except ValueError as exc:  # JSONDecodeError, and integers past Python's digit limit
        return None, f"not valid JSON: {exc}"


def read_predictions(path: str | Path) -> tuple[str, list[Entry]]:
    """The entries of a predictions file and what they are numbered by ("line" or "item")."""
    path = Path(path)
    if not path.is_file():
        raise PredictionError(f"{path}: predictions file not found")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise PredictionError(f"{path}: cannot be read: {exc}") from None
    if path.suffix == ".json":
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise PredictionError(f"{path}: not UTF-8 text: {exc}") from None
        value, problem = _parse_json(text)
        if problem:
            raise PredictionError(f"{path}: {problem}")
        if isinstance(value, dict):
            value = list(value.values())
        if not isinstance(value, list):
            raise PredictionError(f"{path}: a .json predictions file must hold a JSON list of predictions")
        return "item", [Entry(number, item) for number, item in enumerate(value, 1)]
    entries = []
    # Split on "\n" only: str.splitlines would also cut at characters JSON strings may hold raw.
    for number, raw in enumerate(data.split(b"\n"), 1):
        if not raw.strip():
            continue
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            entries.append(Entry(number, problem=f"not UTF-8 text: {exc}"))
            continue
        value, problem = _parse_json(line)
        entries.append(Entry(number, value, problem))
    return "line", entries


def _field_problem(value: dict[str, Any]) -> str:
    missing = [key for key in FIELDS if key not in value]
    if missing:
        return f"missing field(s) {', '.join(missing)}"
    instance_id, patch, model = (value[key] for key in FIELDS)
    if not isinstance(instance_id, str) or not instance_id:
        return f"instance_id must be a non-empty string, got {shown(instance_id)}"
    if patch is not None and not isinstance(patch, str):
        return f"model_patch must be a string (or null), got {type(patch).__name__}"
    if not isinstance(model, str):
        return f"model_name_or_path must be a string, got {type(model).__name__}"
    for key in FIELDS:
        try:
            (value[key] or "").encode("utf-8")
        except UnicodeEncodeError:
            return f"{key} holds an unpaired surrogate (\\ud800-\\udfff), which is not text"
    return ""


def check_predictions(
    unit: str, entries: Sequence[Entry], tasks: Sequence[Task]
) -> tuple[list[Prediction], list[Malformed]]:
    """The predictions to grade, in file order, and the entries that cannot be (module docstring)."""
    known = {task.instance_id for task in tasks}
    first_seen: dict[str, int] = {}
    predictions: list[Prediction] = []
    malformed: list[Malformed] = []
    for entry in entries:
        problem, unknown = entry.problem, None
        if not problem and not isinstance(entry.value, dict):
            problem = f"a prediction must be a JSON object, got {type(entry.value).__name__}"
        problem = problem or _field_problem(entry.value)
        if not problem:
            instance_id = entry.value["instance_id"]
            if instance_id not in known:
                problem, unknown = f"no task has instance_id {shown(instance_id)}", instance_id
            elif instance_id in first_seen:
                earlier = f"{unit} {first_seen[instance_id]}"
                problem = f"instance_id {shown(instance_id)} was already predicted ({earlier})"
        if problem:
            malformed.append(Malformed(unit, entry.number, problem, unknown))
            continue
        first_seen[instance_id] = entry.number
        predictions.append(Prediction(
            len(predictions), entry.number, instance_id,
            entry.value["model_patch"] or "", entry.value["model_name_or_path"],
        ))  # fmt: skip
    return predictions, malformed


async def grade_prediction(
    pool: SandboxPool, task: Task, prediction: Prediction, config: TasksConfig
) -> PredictionReport:
    """Grade one prediction in a fresh sandbox over its task's starting workspace."""
    started = time.monotonic()
    try:
        async with task_sandbox(pool, task) as box:
            patch = prediction.model_patch
            trouble = await patch_workspace(box, patch) if patch.strip() else ""
            if trouble:
                graded = Grade("none", 0.0, f"model_patch does not apply: {trouble}")
            else:
                graded = await grade(task, box, config)
    except Exception as exc:  # one prediction's failure is its own report, never the others' end
        graded = Grade("none", 0.0, f"grading failed: {exc.__class__.__name__}: {exc}")
    return PredictionReport(
        prediction.index, prediction.instance_id, prediction.model_name_or_path,
        graded.resolution, graded.score, graded.reason,
        {test: graded.outcomes.get(test) for test in task.FAIL_TO_PASS},
        {test: graded.outcomes.get(test) for test in task.PASS_TO_PASS},
        graded.restored, round(time.monotonic() - started, 3),
    )  # fmt: skip


async def grade_predictions(
    predictions: Sequence[Prediction],
    tasks: Sequence[Task],
    pool: SandboxPool,
    config: TasksConfig,
    jobs: int,
    progress: Callable[[PredictionReport], None] | None = None,
) -> list[PredictionReport]:
    """Grade every prediction, `jobs` at a time; `progress` sees each report as it finishes;
    reports in prediction order."""
    by_id = {task.instance_id: task for task in tasks}
    return await map_bounded(
        predictions,
        lambda prediction: grade_prediction(pool, by_id[prediction.instance_id], prediction, config),
        jobs,
        progress,
    )


def in_input_order(emit: Callable[[PredictionReport], None]) -> Callable[[PredictionReport], None]:
    """A callback for reports arriving in any order that hands them to `emit` in prediction order,
    each as soon as every earlier one has arrived."""
    waiting: dict[int, PredictionReport] = {}
    next_index = 0

    def arrive(report: PredictionReport) -> None:
        nonlocal next_index
        waiting[report.index] = report
        while next_index in waiting:
            emit(waiting.pop(next_index))
            next_index += 1

    return arrive


def summarize(
    reports: Sequence[PredictionReport], malformed: Sequence[Malformed], tasks: Sequence[Task]
) -> dict[str, Any]:
    """Counts by resolution, the resolved share of graded predictions, the tasks no graded
    prediction was for, the instance ids no task has, and every malformed entry."""
    counts = dict.fromkeys(RESOLUTIONS, 0)
    for report in reports:
        counts[report.resolution] = counts.get(report.resolution, 0) + 1
    predicted = {report.instance_id for report in reports}
    return {
        "tasks": len(tasks),
        "graded": len(reports),
        **counts,
        "resolved_share": counts["resolved"] / len(reports) if reports else 0.0,
        "no_prediction": [task.instance_id for task in tasks if task.instance_id not in predicted],
        "no_task": [cut(m.unknown_id) for m in malformed if m.unknown_id is not None],
        "malformed": [m.to_dict() for m in malformed],
    }
