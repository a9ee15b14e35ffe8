"""One trajectory as the page's script reads it: a JSON-ready dict of its grade, metrics, task
statement, changes and turns, each turn's policy tokens decoded in runs of one policy version.

Token text comes from the run's own tokenizer (`Tokenizer.decode` over each run of same-version
tokens, so a resumed partial rollout shows where the newer policy took over). When no tokenizer
is at hand, or its text disagrees with the turn's recorded text, the recorded text is shown as
one run of unknown version instead: the page never shows text the model did not write.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from overture.agent import Trajectory
from overture.orchestration.rollout_groups import policy_versions, staleness
from overture.text import Tokenizer, TokenizerError
from overture.viewer.edits import RECORDED_DIFF_KEY, episode_changes
from overture.viewer.run_data import TrajectorySource

CALL_FIELDS = ("index", "name", "arguments", "response", "error", "truncated", "duration_s")


def version_runs(versions: list[int]) -> list[tuple[int, int, int]]:
    """(start, end, version) of each maximal run of equal versions."""
    runs: list[tuple[int, int, int]] = []
    start = 0
    for position in range(1, len(versions) + 1):
        if position == len(versions) or versions[position] != versions[start]:
            runs.append((start, position, versions[start]))
            start = position
    return runs


def turn_segments(
    trajectory: Trajectory, turn: dict[str, Any], tokenizer: Tokenizer | None
) -> list[list[Any]]:
    """[[version or None, text], ...] covering the turn's policy tokens in order."""
    start, end = int(turn.get("body_start", 0)), int(turn.get("body_end", 0))
    recorded = str(turn.get("text", ""))
    ids, versions = trajectory.token_ids[start:end], trajectory.versions[start:end]
    if tokenizer is None or not ids:
        return [[None, recorded]] if recorded else []
    try:
        segments = [[v, tokenizer.decode(ids[a:b])] for a, b, v in version_runs(versions)]
    except TokenizerError:
        return [[None, recorded]] if recorded else []
    if recorded and "".join(text for _, text in segments) != recorded:
        return [[None, recorded]]
    return segments


def call_view(call: dict[str, Any]) -> dict[str, Any]:
    return {key: call.get(key) for key in CALL_FIELDS}


def turn_view(trajectory: Trajectory, turn: dict[str, Any], tokenizer: Tokenizer | None) -> dict[str, Any]:
    return {
        "index": turn.get("index", 0),
        "finish_reason": turn.get("finish_reason", ""),
        "generation_s": turn.get("generation_s", 0.0),
        "tool_wall_s": turn.get("tool_wall_s", 0.0),
        "responses_appended": bool(turn.get("responses_appended")),
        "segments": turn_segments(trajectory, turn, tokenizer),
        "calls": [call_view(call) for call in turn.get("calls", [])],
    }


def trainer_version_of(source: TrajectorySource, metrics: list[dict[str, Any]]) -> int | None:
    """The version an RL step trained under (its record's version, less the update it made)."""
    if source.kind != "rl":
        return None
    for record in metrics:
        if record.get("phase") == "rl" and record.get("step") == source.step and "version" in record:
            skipped = bool(record.get("train_skipped"))
            return int(record["version"]) - (0 if skipped else 1)
    return None


def trajectory_view(
    trajectory: Trajectory,
    source: TrajectorySource,
    position: int,
    tokenizer: Tokenizer | None,
    trainer_version: int | None,
    systems: list[str],
) -> dict[str, Any]:
    """The page's record of one trajectory; `systems` collects distinct system prompts (shared)."""
    if trajectory.system not in systems:
        systems.append(trajectory.system)
    origin, diff = episode_changes(trajectory)
    policy = policy_versions(trajectory)
    return {
        "id": f"{source.name}:{position}",
        "source": source.name,
        "source_label": source.label,
        "kind": source.kind,
        "step": source.step,
        "task_id": trajectory.task_id,
        "group_id": trajectory.group_id,
        "status": trajectory.status,
        "status_reason": trajectory.status_reason,
        "reward": trajectory.reward,
        "reward_info": {k: v for k, v in trajectory.reward_info.items() if k != RECORDED_DIFF_KEY},
        "metrics": {k: v for k, v in trajectory.metrics.items() if k != RECORDED_DIFF_KEY},
        "version_tokens": sorted(Counter(policy).items()),
        "lag": staleness(trajectory, trainer_version) if trainer_version is not None and policy else None,
        "system": systems.index(trajectory.system),
        "statement": trajectory.prompt,
        "changes": {"origin": origin, "diff": diff},
        "turns": [turn_view(trajectory, turn, tokenizer) for turn in trajectory.turns],
    }
