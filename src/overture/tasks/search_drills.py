"""Search drills: a demonstration's opening with the function renamed, so that its name has to be
copied from the report rather than recalled from the task.

An oracle demonstration starts by grepping for `def NAME`, where NAME is the function the bug is
in, and by reading that function from the line number the grep printed. A model trained on a few
hundred such demonstrations can learn each task's NAME by heart instead of reading it off the
report (the failing tests' names, the call in the assertion, the traceback), which does not help
on a task it has not seen. A drill is the demonstration's first two turns with NAME replaced
everywhere (statement, calls, tool output) by another function's name, and the line number of
its definition in the grep's output (and the read's `offset`) by another number:

    user:      the statement, NAME -> OTHER
    assistant: grep("def OTHER\\b") and codebase_search, in parallel
    tool:      their output, NAME -> OTHER and `path: N: def OTHER` -> `path: M: def OTHER`
    assistant: read_file(path, offset=M, limit) and the grep of the failing test

Only the opening is kept: the rest of a demonstration (the listing, the fix) would show a
renamed function the model knows under its own name. Identifiers that merely contain NAME
(`NAME2`, `myNAME`) are left alone; `test_NAME_...` names are renamed, since that is how the
failing tests name the function.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from typing import Any

__all__ = ["search_drills"]

_DEFINITION = re.compile(r"^def (\w+)\\b$")
LINE_RANGE = (1, 300)  # where a renumbered definition may be said to start


def search_drills(records: list[dict[str, Any]], per_record: int, seed: int = 0) -> list[dict[str, Any]]:
    """Up to `per_record` drills (demonstration `messages` records) from each of `records`, each
    with the name of another of their functions; the same records and seed give the same drills."""
    openings = [(record, *found) for record in records if (found := _opening(record)) is not None]
    names = sorted({name for _, _, name, _ in openings})
    drills = []
    for index, (record, messages, name, read) in enumerate(openings):
        rng = random.Random(f"{seed}:{index}")
        others = [other for other in names if other != name]
        for k, other in enumerate(rng.sample(others, min(per_record, len(others)))):
            line = rng.randint(*LINE_RANGE)
            rename = _renamer(name, other)
            drilled = [_renamed(message, rename) for message in messages]
            _renumber(drilled, read, other, line)
            drills.append({"task_id": f"{record.get('task_id', '')}#search-{k}", "messages": drilled})
    return drills


def _opening(record: dict[str, Any]) -> tuple[list[dict[str, Any]], str, dict[str, Any]] | None:
    """(the messages from the statement to the read, the function's name, the read's arguments)."""
    messages = [message for message in record["messages"] if message["role"] != "system"]
    assistants = [i for i, message in enumerate(messages) if message["role"] == "assistant"]
    if len(assistants) < 2 or messages[0]["role"] != "user":
        return None
    first, second = (messages[i].get("tool_calls") or [] for i in assistants[:2])
    patterns = [call["arguments"].get("pattern", "") for call in first if call["name"] == "grep"]
    names = [match.group(1) for match in map(_DEFINITION.match, patterns) if match]
    reads = [call["arguments"] for call in second if call["name"] == "read_file"]
    if len(names) != 1 or len(reads) != 1 or names[0] in reads[0].get("path", ""):
        return None  # (a file named after the function would be renamed with it)
    return messages[: assistants[1] + 1], names[0], reads[0]


def _renamer(name: str, other: str) -> Callable[[str], str]:
    """NAME -> OTHER as a whole name, and `NAME with spaces` (a search query) -> `OTHER with spaces`."""
    pairs = {name.replace("_", " "): other.replace("_", " "), name: other}  # a name without `_`: once
    whole = re.compile("|".join(rf"(?<![A-Za-z0-9]){re.escape(old)}(?![A-Za-z0-9])" for old in pairs))
    return lambda text: whole.sub(lambda match: pairs[match.group(0)], text)


def _renamed(value: Any, rename: Callable[[str], str]) -> Any:
    """`value` (a message, or any part of one) with every string in it renamed."""
    if isinstance(value, str):
        return rename(value)
    if isinstance(value, dict):
        return {key: _renamed(item, rename) for key, item in value.items()}
    if isinstance(value, list):
        return [_renamed(item, rename) for item in value]
    return value


def _renumber(messages: list[dict[str, Any]], read: dict[str, Any], name: str, line: int) -> None:
    """The definition's line in the grep output and the read's `offset` become `line` (in place)."""
    printed = re.compile(rf"^({re.escape(read['path'])}: ){read['offset']}(: def {re.escape(name)}\b)", re.M)
    for message in messages:
        if message["role"] == "tool":
            message["content"] = printed.sub(rf"\g<1>{line}\g<2>", message["content"])
        for call in message.get("tool_calls") or []:
            if call["name"] == "read_file":
                call["arguments"]["offset"] = line
