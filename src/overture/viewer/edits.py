"""The changes an episode made, as unified diff text: the recorded workspace diff when the
trajectory holds one, else the agent's successful edit calls turned into per-call diffs.

Grading records the diff it graded under `reward_info["diff"]` (`overture.tasks.grading`;
`metrics["diff"]` is read too), and that is shown as it is. Trajectories without one (episodes
that failed or were aborted, runs from before grading kept it) fall back to their successful
`search_replace`, `edit_lines`, `write_file` and `delete_file` calls, each a small diff of what
it asked for (an `edit_lines` call names the lines it replaced, not their text, so its diff shows
the new lines under a hunk header giving the old range): what the agent changed, though not
necessarily the final state (a terminal command can change files too).
"""

from __future__ import annotations

import difflib
from typing import Any

from overture.agent import Trajectory

RECORDED_DIFF_KEY = "diff"


def recorded_diff(trajectory: Trajectory) -> str | None:
    """The workspace diff the trajectory carries, if any."""
    for holder in (trajectory.reward_info, trajectory.metrics):
        value = holder.get(RECORDED_DIFF_KEY)
        if isinstance(value, str):
            return value
    return None


def _lines(text: str) -> list[str]:
    return [line if line.endswith("\n") else line + "\n" for line in text.splitlines(keepends=True)]


def _unified(old_name: str, new_name: str, before: str, after: str) -> str:
    return "".join(difflib.unified_diff(_lines(before), _lines(after), old_name, new_name))


def call_diff(call: dict[str, Any]) -> str:
    """A diff of what one successful edit call asked for ("" for other calls)."""
    arguments = call.get("arguments") or {}
    if call.get("error") or not isinstance(arguments, dict):
        return ""
    path = str(arguments.get("file_path", "?"))
    name = call.get("name")
    if name == "search_replace":
        old, new = str(arguments.get("old_string", "")), str(arguments.get("new_string", ""))
        return _unified(f"a/{path}", f"b/{path}", old, new)
    if name == "edit_lines":
        start, end = arguments.get("start_line"), arguments.get("end_line")
        if not isinstance(start, int) or not isinstance(end, int):
            return ""
        added = _lines(str(arguments.get("new_string", "")))
        header = f"--- a/{path}\n+++ b/{path}\n@@ -{start},{end - start + 1} +{start},{len(added)} @@\n"
        return header + "".join("+" + line for line in added)
    if name == "write_file":
        return _unified("/dev/null", f"b/{path}", "", str(arguments.get("contents", "")))
    if name == "delete_file":
        return f"--- a/{path}\n+++ /dev/null\n(deleted)\n"
    return ""


def episode_changes(trajectory: Trajectory) -> tuple[str, str]:
    """(`recorded` or `edit calls`, diff text) for the trajectory's changes."""
    recorded = recorded_diff(trajectory)
    if recorded is not None:
        return "recorded", recorded
    diffs = [call_diff(call) for turn in trajectory.turns for call in turn.get("calls", [])]
    return "edit calls", "".join(diff for diff in diffs if diff)
