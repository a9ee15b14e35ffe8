"""Edit drills: short practice conversations cut from the reads of an oracle demonstration.

An edit applies only when its line numbers and new text are right, and a model trained from
scratch sees one such edit per demonstration. A drill gives it many more, on the same code: it
takes a `read_file` result of a demonstration, shows it with one synthesized bug in it (a
`Mutation` of the read lines, the same kinds the task suite is made of), and ends with the
`edit_lines` that puts the lines back — their numbers read off the listing above it, the
`new_string` the lines as they were. Three turns, a few hundred tokens:

    assistant: read_file(path, offset, limit)     (the demonstration's own call)
    tool:      the listing, with the bug in it
    assistant: <the demonstration's edit-turn text> edit_lines(path, start_line, end_line, new_string)

When the demonstration's edit rewrote all the lines its read listed (the oracle's
`tasks.oracle_edits = "functions"`), each drill's edit does too: the listing's first and last
line numbers and every line as it was.

What a drill shows is the demonstration's listing with the demonstration's own fix applied first,
so it never teaches the task's bug as correct code; drills come only from demonstrations of
training tasks (the caller's choice), so no held-out function is shown. A listing is used only
when it is whole: consecutive `N|text` lines (no line cut short, no middle cut by the response
budget) that parse as Python once dedented. Mutations that change the number of lines are
skipped, so the listing's line numbers stay true, and so are listings whose own fix does.
"""

from __future__ import annotations

import itertools
import re
import textwrap
from collections.abc import Iterator
from typing import Any

import libcst as cst

from overture.agent.tools.files import numbered
from overture.tasks.mutations import Mutation, MutationError, apply_mutation, find_mutations
from overture.text import NUMBERED_LINE

__all__ = ["edit_drills"]

_FOOTER = re.compile(r"^\[(lines \d+-\d+ of \d+;|end of file: lines)")


EDIT_TOOL = "edit_lines"


def edit_drills(record: dict[str, Any], per_read: int | None = None) -> list[dict[str, Any]]:
    """Drills (records in the demonstration `messages` format) from one demonstration record;
    at most `per_read` from each of its listings (all when None), in source order."""
    edit_turns = [message for message in record["messages"] if _calls(message, EDIT_TOOL)]
    if not edit_turns:
        return []
    edit_text = edit_turns[0].get("content", "")
    fixes = [call["arguments"] for message in edit_turns for call in _calls(message, EDIT_TOOL)]
    drills = []
    for arguments, listing in _reads(record["messages"]):
        fixes_here = [fix for fix in fixes if fix["file_path"] == arguments.get("path")]
        if not fixes_here:
            continue
        drilled = _listing_drills(arguments, listing, fixes_here)
        for shown, start, end, new in itertools.islice(drilled, per_read):
            edit = {"file_path": arguments["path"], "start_line": start, "end_line": end, "new_string": new}
            messages = [
                _call_turn("", "read_file", arguments),
                {"role": "tool", "content": shown},
                _call_turn(edit_text, EDIT_TOOL, edit),
            ]
            name = f"{record.get('task_id', '')}#drill-{len(drills)}"
            drills.append({"task_id": name, "messages": messages})
    return drills


def _call_turn(content: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": content, "tool_calls": [{"name": name, "arguments": arguments}]}


def _calls(message: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """The calls of `name` in a trained assistant message (an untrained one, such as an edit shown
    only to be refused, is no fix to drill)."""
    if message.get("role") != "assistant" or not message.get("train", True):
        return []
    return [call for call in message.get("tool_calls") or [] if call.get("name") == name]


def _reads(messages: list[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], str]]:
    """(arguments, result) of each successful `read_file` call, results matched in call order."""
    for index, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        results = []
        for later in messages[index + 1 :]:
            if later["role"] != "tool":
                break
            results.append(later["content"])
        for call, result in zip(message.get("tool_calls") or [], results, strict=False):
            if call["name"] == "read_file" and not result.startswith("Error"):
                yield call["arguments"], result


def _listing_drills(
    arguments: dict[str, Any], listing: str, fixes: list[dict[str, Any]]
) -> Iterator[tuple[str, int, int, str]]:
    """(listing with one bug, start_line, end_line, new_string) for each usable mutation of `listing`."""
    parsed = _parse_listing(listing)
    if parsed is None:
        return
    numbers, code, footer = parsed
    # A demonstration that rewrote the whole listing (`tasks.oracle_edits = "functions"`) gets
    # drills that do the same; otherwise each drill edits the changed lines only.
    whole = any((fix["start_line"], fix["end_line"]) == (numbers[0], numbers[-1]) for fix in fixes)
    code = _fixed(numbers[0], code, fixes)  # the listing as the code is meant to be
    if code is None:
        return
    source = "".join(line + "\n" for line in code)
    dedented = textwrap.dedent(source)
    indent = _common_indent(source, dedented)
    clean = _indented(dedented, indent)
    if clean != source.splitlines():  # whitespace-only lines that dedent would change
        return
    try:
        mutations = find_mutations(dedented, arguments["path"])
    except cst.ParserSyntaxError:  # a listing that is not whole Python gives no drills
        return
    for mutation in mutations:
        buggy = _mutated_lines(dedented, mutation, indent)
        if buggy is None or len(buggy) != len(clean):
            continue
        changed = [i for i, (a, b) in enumerate(zip(clean, buggy, strict=True)) if a != b]
        if not changed:
            continue
        first, last = (0, len(clean) - 1) if whole else (changed[0], changed[-1])
        new = "".join(line + "\n" for line in clean[first : last + 1])
        shown = numbered(buggy, numbers[0], max_chars=max(map(len, buggy)))  # as read_file prints
        yield "\n".join([shown, *footer]), numbers[0] + first, numbers[0] + last, new


def _fixed(first: int, code: list[str], fixes: list[dict[str, Any]]) -> list[str] | None:
    """The listed `code` (its first line numbered `first`) with the `edit_lines` fixes that fall in
    it applied in call order; None when one overlaps its edge or changes its number of lines."""
    code = list(code)
    for fix in fixes:
        start, end = fix["start_line"], fix["end_line"]
        if end < first or start > first + len(code) - 1:
            continue  # elsewhere in the file
        new = fix["new_string"].splitlines()
        if start < first or end > first + len(code) - 1 or len(new) != end - start + 1:
            return None
        code[start - first : end - first + 1] = new
    return code


def _parse_listing(listing: str) -> tuple[list[int], list[str], list[str]] | None:
    """(line numbers, code lines, footer lines) of a whole `read_file` listing, else None."""
    lines = listing.split("\n")
    footer = [line for line in lines[-1:] if _FOOTER.match(line)]
    body = lines[: len(lines) - len(footer)]
    numbers, code = [], []
    for line in body:
        match = NUMBERED_LINE.match(line)
        if match is None or "… [" in line:  # a cut, or a line shortened by the tool
            return None
        numbers.append(int(match.group(1)))
        code.append(match.group(2))
    if len(numbers) < 2 or numbers != list(range(numbers[0], numbers[0] + len(numbers))):
        return None
    return numbers, code, footer


def _common_indent(source: str, dedented: str) -> str:
    for original, stripped in zip(source.splitlines(), dedented.splitlines(), strict=True):
        if stripped.strip():
            return original[: len(original) - len(stripped)]
    return ""


def _mutated_lines(dedented: str, mutation: Mutation, indent: str) -> list[str] | None:
    try:
        return _indented(apply_mutation(dedented, mutation), indent)
    except MutationError:
        return None


def _indented(text: str, indent: str) -> list[str]:
    return [indent + line if line.strip() else line for line in text.splitlines()]
