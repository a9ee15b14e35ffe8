"""Search drills: a demonstration's opening with the function renamed, so that its name has to be
copied from the report rather than recalled from the task.

An oracle demonstration starts by grepping for `def NAME`, where NAME is the function the bug is
in, and by reading that function from the line number the grep printed. A model trained on a few
hundred such demonstrations learns each task's NAME by heart instead of reading it off the report
(the failing tests' names, the call in the assertion, the traceback), which does not help on a
task it has not seen. A drill is the demonstration's first two turns with NAME replaced
everywhere (statement, calls, tool output) by a made-up name, and the line number of its
definition in the grep's output (and the read's `offset`) by another number:

    user:      the statement, NAME -> MADE_UP
    assistant: grep("def MADE_UP\\b") and codebase_search, in parallel
    tool:      their output, NAME -> MADE_UP and `path: N: def MADE_UP` -> `path: M: def MADE_UP`
    assistant: read_file(path, offset=M, limit) and the grep of the failing test

A made-up name joins two or three words of the demonstrations' function names (`span_total`,
`parse_week_ratio`) and is none of their names nor a word of the opening, so no model knows it:
it can only be copied. (Another task's name would do less: the model knows that one, and can
learn to recall it from the rest of the report, which the rename leaves as it was.) Only the
opening is kept: the rest of a demonstration (the listing, the fix) would show a renamed function
the model knows under its own name. Identifiers that merely contain NAME (`NAME2`, `myNAME`) are
left alone; `test_NAME_...` names are renamed, since that is how the failing tests name the
function. Special methods (`__init__`) are not renamed: their names are not made up by anyone.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from typing import Any

__all__ = ["search_drills"]

_DEFINITION = re.compile(r"^def (\w+)\\b$")
LINE_RANGE = (1, 300)  # where a renumbered definition may be said to start
WORDS_PER_NAME = (2, 3)  # a made-up name joins this many words


def search_drills(records: list[dict[str, Any]], per_record: int, seed: int = 0) -> list[dict[str, Any]]:
    """`per_record` drills (demonstration `messages` records) from each of `records` whose opening
    greps for a definition and reads it, each under a made-up name; the same records and seed
    give the same drills."""
    openings = [(record, *found) for record in records if (found := _opening(record)) is not None]
    known = {name for _, _, name, _ in openings}
    words = sorted({word for name in known for word in name.split("_") if len(word) > 1 and word.isalpha()})
    drills = []
    for index, (record, messages, name, read) in enumerate(openings):
        rng = random.Random(f"{seed}:{index}")
        text = json.dumps(messages)
        for k, made_up in enumerate(_made_up_names(name, words, known, text, per_record, rng)):
            line = rng.randint(*LINE_RANGE)
            rename = _renamer(name, made_up)
            drilled = [_renamed(message, rename) for message in messages]
            _renumber(drilled, read, made_up, line)
            drills.append({"task_id": f"{record.get('task_id', '')}#search-{k}", "messages": drilled})
    return drills


def _made_up_names(
    name: str, words: list[str], known: set[str], text: str, count: int, rng: random.Random
) -> list[str]:
    """`count` different names of WORDS_PER_NAME words (NAME's leading underscores kept), none of
    them a known name or a word of `text`; fewer when the words run out of combinations."""
    prefix = name[: len(name) - len(name.lstrip("_"))]
    names: list[str] = []
    for _ in range(count * 20):
        if len(names) == count or len(words) < 2:
            break
        candidate = prefix + "_".join(rng.sample(words, min(rng.choice(WORDS_PER_NAME), len(words))))
        if candidate in known or candidate in names or _whole(candidate).search(text):
            continue
        names.append(candidate)
    return names


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
    if names[0].startswith("__") and names[0].endswith("__"):
        return None  # a special method
    return messages[: assistants[1] + 1], names[0], reads[0]


def _renamer(name: str, other: str) -> Callable[[str], str]:
    """NAME -> OTHER as a whole name, and `NAME with spaces` (a search query) -> `OTHER with spaces`."""
    pairs = {name.replace("_", " "): other.replace("_", " "), name: other}  # a name without `_`: once
    whole = re.compile("|".join(_whole(old).pattern for old in pairs))
    return lambda text: whole.sub(lambda match: pairs[match.group(0)], text)


def _whole(name: str) -> re.Pattern[str]:
    """`name` where it is not part of a longer name other than by `_` (`test_NAME_x` counts)."""
    return re.compile(rf"(?<![A-Za-z0-9]){re.escape(name)}(?![A-Za-z0-9])")


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
