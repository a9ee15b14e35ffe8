"""Where a task's fix is, and whether an episode looked there: an evaluation's localization metrics.

A fix can only be written by an agent that has seen the code it changes, so pass@1 alone does
not say which step failed. Per episode, from its turn records and the task's reference patch:

- `read_fix_lines`: a `read_file` listing, as the agent saw it, showed a line the patch changes;
- `edited_fix_file`: an edit that applied changed a file the patch changes.

Read beside the share of episodes that edited at all and pass@1, they tell apart an agent that
never finds the code, one that finds it and edits elsewhere, and one that edits the right place
wrongly. "A line the patch changes" is counted in the files as the task starts: a removed or
replaced line, and for a pure insertion the line it goes before.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from overture.agent.metrics import EDIT_TOOLS
from overture.sandbox.files import PathEscape, inside_workspace
from overture.text import NUMBERED_LINE

__all__ = ["LOCALIZATION_METRICS", "fix_lines", "localization"]

LOCALIZATION_METRICS = ("read_fix_lines", "edited_fix_file")
_OLD_FILE = re.compile(r"^--- (?:a/)?(\S+)")
_NEW_FILE = re.compile(r"^\+\+\+ (?:b/)?(\S+)")
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,(\d+))? @@")


def fix_lines(patch: str) -> dict[str, set[int]]:
    """Per file a unified diff changes, the numbers of its lines (before the patch) that it
    removes or replaces, or inserts before; a file the patch creates maps to no lines."""
    changed: dict[str, set[int]] = {}
    old_path: str | None = None
    lines: set[int] = set()
    line = old_left = new_left = 0  # inside a hunk while lines of it are left
    replacing = False  # the `+` lines that follow `-` lines replace them
    for text in patch.splitlines():
        if old_left > 0 or new_left > 0:
            kind = text[:1] or " "  # (an empty context line may have lost its space)
            if kind == "\\":
                continue  # "\ No newline at end of file"
            if kind == "-":
                lines.add(line)
                line, old_left, replacing = line + 1, old_left - 1, True
            elif kind == "+":
                if old_path is not None and not replacing:
                    lines.add(line)  # a line inserted before this one
                new_left -= 1
            else:
                line, old_left, new_left, replacing = line + 1, old_left - 1, new_left - 1, False
        elif header := _OLD_FILE.match(text):
            old_path = None if header.group(1) == "/dev/null" else header.group(1)
        elif header := _NEW_FILE.match(text):
            lines = changed.setdefault(old_path or header.group(1), set())
        elif hunk := _HUNK.match(text):
            line, replacing = int(hunk.group(1)), False
            old_left = int(hunk.group(2) or 1)
            new_left = int(hunk.group(3) or 1)
    return changed


def localization(patch: str, turns: Sequence[dict[str, Any]]) -> dict[str, bool]:
    """`LOCALIZATION_METRICS` of an episode whose turn records are `turns`."""
    changed = fix_lines(patch)
    read = edited = False
    for call in (call for turn in turns for call in turn["calls"]):
        if call["error"]:
            continue
        arguments = call.get("arguments") or {}
        if call["name"] in EDIT_TOOLS:
            edited = edited or _relative(arguments.get("file_path")) in changed
        elif call["name"] == "read_file" and (lines := changed.get(_relative(arguments.get("path")))):
            shown = (NUMBERED_LINE.match(text) for text in call["response"].splitlines())
            read = read or any(int(match.group(1)) in lines for match in shown if match)
    return {"read_fix_lines": read, "edited_fix_file": edited}


def _relative(path: Any) -> str | None:
    """A path as the agent gave it, as the patch names files (workspace-relative), or None."""
    try:
        return inside_workspace(path) if isinstance(path, str) else None
    except PathEscape:
        return None
