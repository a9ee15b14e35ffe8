"""Tool calls in an assistant turn: the records, and the parser that finds them.

`parse_assistant` reads the text of one assistant turn and returns its prose and every
`<tool_call>` block in it. A block that cannot be used (bad JSON, wrong shape, unknown tool,
unclosed or stray tag) is reported as a `MalformedCall` with a reason the model can read;
nothing is dropped silently. Blocks are numbered in the order they appear, good and bad
alike, so that tool responses can be matched to them by position.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
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
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        return None, f"invalid JSON: {exc}"
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
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as exc:
            return None, f'"arguments" is a string that is not valid JSON: {exc}'
    if not isinstance(arguments, dict):
        return None, f'"arguments" must be a JSON object, got {json_type(arguments)}'
    return arguments, ""


def json_type(value: Any, show_numbers: bool = False) -> str:
    """The JSON name of a decoded value's type ("a string", "null"...); a number with its value
    when `show_numbers` ("the number 3")."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return f"the number {value!r}" if show_numbers else "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"
