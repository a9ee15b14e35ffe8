"""Reading a run directory for the viewer: its config, metrics records, trajectory files and tokenizer.

A run in progress is read as it stands: a trajectory line that does not parse (or does not make a
`Trajectory`) is skipped and counted in `RunData.problems`, so the page shows what there is and
says what it left out. Trajectory files are ordered as the run wrote them: `eval-before`, the RL
steps, `eval-after`, then any other `*.jsonl` under `trajectories/`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from overture.agent import Trajectory
from overture.config import ConfigError, RunConfig, load_config
from overture.rl.run_dir import RunDirError
from overture.rl.tokenizer_record import TokenizerMismatch, check_saved_tokenizer
from overture.text import Tokenizer, TokenizerError

RL_STEP_FILE = re.compile(r"rl-step-(\d+)$")
TRAJECTORY_FIELDS = frozenset(f.name for f in fields(Trajectory))
# Where the main job saves a tokenizer: its run directory (when it starts), then its checkpoints.
SAVED_TOKENIZER_DIRS = (".", "checkpoints/final", "sft/checkpoints/best", "sft/checkpoints/final")


@dataclass
class TrajectorySource:
    """One trajectory file: `name` is its stem (`rl-step-000003`, `eval-before`), `step` the RL step
    it belongs to, `kind` `rl`, `eval` or `other`."""

    name: str
    kind: str
    step: int
    label: str
    trajectories: list[Trajectory] = field(default_factory=list)


@dataclass
class RunData:
    """What the viewer shows of one run directory."""

    path: Path
    name: str
    config: RunConfig | None
    metrics: list[dict[str, Any]]
    sources: list[TrajectorySource]
    tokenizer: Tokenizer | None
    problems: list[str] = field(default_factory=list)

    @property
    def rl_records(self) -> list[dict[str, Any]]:
        return [r for r in self.metrics if r.get("phase") == "rl"]

    @property
    def eval_records(self) -> list[dict[str, Any]]:
        return [r for r in self.metrics if r.get("phase") == "eval"]


def load_run(path: str | Path) -> RunData:
    """Read the run directory at `path` (a RunDirError naming it when it is not one)."""
    path = Path(path)
    if not path.is_dir():
        raise RunDirError(f"{path}: no such run directory")
    if not (path / "metrics.jsonl").is_file() and not (path / "trajectories").is_dir():
        raise RunDirError(f"{path}: not a run directory (no metrics.jsonl, no trajectories/)")
    problems: list[str] = []
    config = _read_config(path, problems)
    metrics = _read_metrics(path / "metrics.jsonl", problems)
    sources = _read_sources(path / "trajectories", metrics, problems)
    tokenizer = find_tokenizer(path, config, problems)
    name = config.name if config is not None else path.name
    return RunData(path, name, config, metrics, sources, tokenizer, problems)


def _read_config(path: Path, problems: list[str]) -> RunConfig | None:
    file = path / "config.toml"
    if not file.is_file():
        problems.append("config.toml: missing")
        return None
    try:
        return load_config(file)
    except ConfigError as exc:
        problems.append(f"config.toml: {exc}")
        return None


def _json_lines(file: Path, problems: list[str]) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL file; lines that are not one are counted as a problem."""
    records, bad = [], 0
    for line in file.read_text(encoding="utf-8", errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            bad += 1
            continue
        if isinstance(record, dict):
            records.append(record)
        else:
            bad += 1
    if bad:
        problems.append(f"{file.name}: {bad} line(s) skipped (not a JSON object)")
    return records


def _read_metrics(file: Path, problems: list[str]) -> list[dict[str, Any]]:
    if not file.is_file():
        problems.append("metrics.jsonl: missing")
        return []
    return _json_lines(file, problems)


def _eval_step(metrics: list[dict[str, Any]], when: str, default: int) -> int:
    steps = [r.get("step", default) for r in metrics if r.get("phase") == "eval" and r.get("when") == when]
    return int(steps[-1]) if steps else default


def _describe_source(stem: str, metrics: list[dict[str, Any]], last_rl_step: int) -> TrajectorySource:
    matched = RL_STEP_FILE.fullmatch(stem)
    if matched:
        step = int(matched.group(1))
        return TrajectorySource(stem, "rl", step, f"RL step {step}")
    if stem == "eval-before":
        return TrajectorySource(stem, "eval", _eval_step(metrics, "before", 0), "eval before RL")
    if stem == "eval-after":
        return TrajectorySource(stem, "eval", _eval_step(metrics, "after", last_rl_step), "eval after RL")
    return TrajectorySource(stem, "other", last_rl_step, stem)


def _source_order(source: TrajectorySource) -> tuple[int, int, str]:
    rank = {"eval-before": 0, "eval-after": 2}.get(source.name, 1 if source.kind == "rl" else 3)
    return rank, source.step, source.name


def _read_sources(folder: Path, metrics: list[dict[str, Any]], problems: list[str]) -> list[TrajectorySource]:
    if not folder.is_dir():
        return []
    files = sorted(f for f in folder.glob("*.jsonl") if not f.name.startswith(".") and f.is_file())
    rl_steps = [int(m.group(1)) for f in files if (m := RL_STEP_FILE.fullmatch(f.stem))]
    last_rl_step = max(rl_steps, default=0)
    sources = []
    for file in files:
        source = _describe_source(file.stem, metrics, last_rl_step)
        bad = 0
        for record in _json_lines(file, problems):
            try:
                # Keys this version of Trajectory does not know (an older or newer run) are left out.
                known = {key: value for key, value in record.items() if key in TRAJECTORY_FIELDS}
                source.trajectories.append(Trajectory.from_dict(known))
            except (TypeError, ValueError):
                bad += 1
        if bad:
            problems.append(f"{file.name}: {bad} record(s) skipped (not a trajectory)")
        sources.append(source)
    return sorted(sources, key=_source_order)


def find_tokenizer(path: Path, config: RunConfig | None, problems: list[str]) -> Tokenizer | None:
    """The run's own tokenizer: the one it saved (checked against its record), else the directory
    its config names. Never one trained here: a run's ids are read only with the tokenizer that
    made them, and a saved tokenizer that is not the one recorded is refused, named in `problems`."""
    candidates = [path / sub for sub in SAVED_TOKENIZER_DIRS]
    candidates += [Path(config.tokenizer.path)] if config is not None and config.tokenizer.path else []
    for directory in candidates:
        if (directory / "tokenizer.json").is_file():
            try:
                return check_saved_tokenizer(directory)
            except (TokenizerError, TokenizerMismatch) as exc:
                problems.append(f"tokenizer: {exc}; turns are shown as their recorded text")
                return None
    problems.append("tokenizer: none found; turns are shown as their recorded text")
    return None
