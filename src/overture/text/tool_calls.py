"""Tool calls in an assistant turn: the records, and the parser that finds them.

`parse_assistant` reads the text of one assistant turn and returns its prose and every
`<tool_call>` block in it. A block that cannot be used (bad JSON, wrong shape, unknown tool,
unclosed or stray tag) is reported as a `MalformedCall` with a reason the model can read;
nothing is dropped silently. Blocks are numbered in the order they appear, good and bad
alike, so that tool responses can be matched to them by position.

A block's JSON is read within bounds (`MAX_CALL_CHARS`, `MAX_JSON_DEPTH`, `MAX_NUMBER_DIGITS`):
whatever the text, parsing answers with a call or a reason, never an exception.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from overture.text.markers import ENDOFTEXT, IM_END, TOOL_CALL_CLOSE, TOOL_CALL_OPEN


@dataclass
class ToolCall:
    """One call of a tool: its name and its arguments (a JSON object)."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass
class MalformedCall:
    """A `<tool_call>` block that could not be used.

    `index` is the block's position among the turn's blocks, `raw` the block as written
    (tags included), `reason` what is wrong, in words meant for the model.
    """

    index: int
    raw: str
    reason: str


@dataclass
class ParsedTurn:
    """An assistant turn taken apart: its prose, its good calls and its malformed blocks.

    `call_indices[i]` is the block position of `calls[i]`; `blocks()` gives calls and
    errors together in the order they were written.
    """

    content: str
    calls: list[ToolCall] = field(default_factory=list)
    errors: list[MalformedCall] = field(default_factory=list)
    call_indices: list[int] = field(default_factory=list)

    def blocks(self) -> list[ToolCall | MalformedCall]:
        """Calls and malformed blocks in turn order."""
        indexed: list[tuple[int, ToolCall | MalformedCall]] = list(
            zip(self.call_indices, self.calls, strict=True)
        )
        indexed += [(error.index, error) for error in self.errors]
        return [item for _, item in sorted(indexed, key=lambda pair: pair[0])]

    @property
    def block_count(self) -> int:
        return len(self.calls) + len(self.errors)


_TAG = re.compile(re.escape(TOOL_CALL_OPEN) + "|" + re.escape(TOOL_CALL_CLOSE))
_END_MARKERS = (IM_END, ENDOFTEXT)


def parse_assistant(text: str, tool_names: Collection[str] | None = None) -> ParsedTurn:
    """Parse one assistant turn's text (with or without its final `<|im_end|>`).

    When `tool_names` is given, a call to any other name is reported as malformed.
    """
    text = _strip_end_marker(text)
    turn = ParsedTurn(content="")
    outside: list[str] = []
    position = 0
    open_at: int | None = None  # where the current, not yet closed, block began
    for match in _TAG.finditer(text):
        if match.group() == TOOL_CALL_OPEN:
            if open_at is None:
                outside.append(text[position : match.start()])
            else:
                _add_error(turn, text[open_at : match.start()], _UNCLOSED_BEFORE_NEXT)
            open_at = match.start()
        elif open_at is None:
            outside.append(text[position : match.start()])
            _add_error(turn, match.group(), _STRAY_CLOSE)
        else:
            _add_block(turn, text[open_at : match.end()], tool_names)
            open_at = None
        position = match.end()
    if open_at is None:
        outside.append(text[position:])
    else:
        _add_error(turn, text[open_at:], _UNCLOSED_AT_END)
    turn.content = "".join(outside).strip()
    return turn


_UNCLOSED_BEFORE_NEXT = f"unclosed {TOOL_CALL_OPEN}: a new {TOOL_CALL_OPEN} began before {TOOL_CALL_CLOSE}"
_UNCLOSED_AT_END = f"unclosed {TOOL_CALL_OPEN}: the turn ended before {TOOL_CALL_CLOSE} (output cut off?)"
_STRAY_CLOSE = f"stray {TOOL_CALL_CLOSE} without a matching {TOOL_CALL_OPEN}"


def _strip_end_marker(text: str) -> str:
    stripped = text.rstrip()
    for marker in _END_MARKERS:
        if stripped.endswith(marker):
            return stripped[: -len(marker)]
    return text


def _next_index(turn: ParsedTurn) -> int:
    return turn.block_count


def _add_error(turn: ParsedTurn, raw: str, reason: str) -> None:
    turn.errors.append(MalformedCall(index=_next_index(turn), raw=raw, reason=reason))


def _add_block(turn: ParsedTurn, raw: str, tool_names: Collection[str] | None) -> None:
    """Parse one closed block (`raw` includes both tags) into a call or an error."""
    body = raw[len(TOOL_CALL_OPEN) : -len(TOOL_CALL_CLOSE)]
    call, reason = call_from_json(body, tool_names)
    if call is None:
        _add_error(turn, raw, reason)
    else:
        turn.call_indices.append(_next_index(turn))
        turn.calls.append(call)


def call_from_json(body: str, tool_names: Collection[str] | None = None) -> tuple[ToolCall | None, str]:
    """Turn the JSON inside a `<tool_call>` block into a call, or say what is wrong with it.

    Returns `(call, "")` or `(None, reason)`.
    """
    if not body.strip():
        return None, 'empty tool call: expected {"name": ..., "arguments": {...}}'
    if len(body) > MAX_CALL_CHARS:
        return None, f"a tool call of {len(body):,} characters; at most {MAX_CALL_CHARS:,} are read"
    data, reason = load_json(body)
    if reason:
        return None, reason
    if not isinstance(data, dict):
        return None, f'expected a JSON object with "name" and "arguments", got {json_type(data)}'
    if "name" not in data:
        return None, 'missing "name"'
    name = data["name"]
    if not isinstance(name, str) or not name:
        return None, f'"name" must be a non-empty string, got {json_type(name)}'
    arguments, reason = _arguments(data)
    if arguments is None:
        return None, reason
    if tool_names is not None and name not in tool_names:
        available = ", ".join(sorted(tool_names)) or "none"
        return None, f"unknown tool {name!r}; available tools: {available}"
    return ToolCall(name=name, arguments=arguments), ""


def _arguments(data: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """The call's arguments object; a JSON string holding an object is accepted too."""
    if "arguments" not in data:
        return None, 'missing "arguments" (use {} for a call without arguments)'
    arguments = data["arguments"]
    if isinstance(arguments, str):
        arguments, reason = load_json(arguments)
        if reason:
            return None, f'"arguments" is a string that is not valid JSON: {reason}'
    if not isinstance(arguments, dict):
        return None, f'"arguments" must be a JSON object, got {json_type(arguments)}'
    return arguments, ""


MAX_CALL_CHARS = 1 << 20
"""Characters of one block's JSON read at most. A turn is a few thousand tokens, so a longer
block is runaway output; refusing it before parsing bounds the parser's time and memory."""

MAX_JSON_DEPTH = 32
"""Levels of nesting a call may have (a call with an array argument has three). Deeper values
would only reach code that walks them recursively (records, trajectories, JSON output)."""

MAX_NUMBER_DIGITS = 1000
"""Characters of one JSON number read at most. Turning a long digit string into an int takes
time quadratic in its length (Python refuses past 4300 digits with a ValueError)."""


class _NumberTooLong(ValueError):
    """A JSON number longer than `MAX_NUMBER_DIGITS`; its message is the reason for the model."""


def _bounded(convert: Callable[[str], int | float]) -> Callable[[str], int | float]:
    def parse(text: str) -> int | float:
        if len(text) > MAX_NUMBER_DIGITS:
            limit = f"at most {MAX_NUMBER_DIGITS:,} are read"
            raise _NumberTooLong(f"a number of {len(text):,} characters; {limit}")
        return convert(text)

    return parse


_DECODER = json.JSONDecoder(parse_int=_bounded(int), parse_float=_bounded(float))


def load_json(text: str) -> tuple[Any, str]:
    """`(value, "")` for the JSON in `text`, or `(None, reason)` naming what is wrong: bad syntax,
    nesting deeper than `MAX_JSON_DEPTH`, or a number longer than `MAX_NUMBER_DIGITS`."""
    too_deep = f"JSON nested more than {MAX_JSON_DEPTH} levels deep"
    try:
        value = _DECODER.decode(text)
    except RecursionError:  # the C decoder recurses once per level: a very deep value ends here
        return None, too_deep
    except ValueError as exc:  # bad syntax (JSONDecodeError), a long number, an interpreter's int limit
        return None, f"invalid JSON: {exc}"
    if _deeper_than(value, MAX_JSON_DEPTH):
        return None, too_deep
    return value, ""


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether arrays and objects in `value` nest more than `limit` levels (walked without recursion)."""
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > limit:
            return True
        pending.extend((child, depth + 1) for child in children)
    return False


_SHOWN_DIGITS = 30  # a longer integer is named by its length, not printed


def json_type(value: Any, show_numbers: bool = False) -> str:
    """The JSON name of a decoded value's type ("a string", "null"...); a number with its value
    when `show_numbers` ("the number 3")."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int) and show_numbers and len(digits := str(abs(value))) > _SHOWN_DIGITS:
        return f"a number of {len(digits)} digits"
    if isinstance(value, int | float):
        return f"the number {value!r}" if show_numbers else "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"
