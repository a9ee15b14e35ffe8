"""The chat format: ChatML turns with Hermes-style tool calls, rendered as text.

Every turn is first built as a list of `Piece`s: either a *marker* (a special token such as
`<|im_start|>` or `<tool_call>`, inserted by id at the token level) or plain *text* (encoded
as content). `render_*` join the pieces into text; `Conversation` tokenizes the same pieces,
so the text and the tokens of a conversation agree by construction.

Layout (`{…}` are holes):

    <|im_start|>system\\n{system}[tools section]<|im_end|>\\n
    <|im_start|>user\\n{text}<|im_end|>\\n
    <|im_start|>assistant\\n{text}\\n<tool_call>\\n{json}\\n</tool_call>\\n<tool_call>…<|im_end|>\\n
    <|im_start|>user\\n<tool_response>\\n{result}\\n</tool_response>\\n<tool_response>…<|im_end|>\\n
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from overture.text.markers import (
    IM_END,
    IM_START,
    SPECIAL_TOKENS,
    TOOL_CALL_CLOSE,
    TOOL_CALL_OPEN,
    TOOL_RESPONSE_CLOSE,
    TOOL_RESPONSE_OPEN,
)
from overture.text.tool_calls import ToolCall

TURN_SEPARATOR = "\n"  # after each <|im_end|>: template text, never the policy's


@dataclass(frozen=True)
class Piece:
    """A stretch of a rendered turn: a special-token marker or plain text."""

    text: str
    marker: bool = False


def _text(value: str) -> Piece:
    return Piece(value)


def _marker(value: str) -> Piece:
    return Piece(value, marker=True)


def render(pieces: Sequence[Piece]) -> str:
    """The text of `pieces`."""
    return "".join(piece.text for piece in pieces)


_MARKER_SPLIT = re.compile("(" + "|".join(re.escape(marker) for marker in SPECIAL_TOKENS) + ")")


def split_markers(text: str) -> list[Piece]:
    """`text` as pieces: every marker string a marker, the stretches between them text."""
    return [Piece(part, marker=part in SPECIAL_TOKENS) for part in _MARKER_SPLIT.split(text) if part]


# ----------------------------------------------------------------------------- system turn

TOOLS_INTRO = (
    "# Tools\n\n"
    "You can call the functions below. Each line inside <tools></tools> is the JSON schema "
    "of one function.\n<tools>\n"
)
CALL_INSTRUCTION_HEAD = "\n</tools>\n\nTo call a function, write a block like this:\n"
CALL_EXAMPLE = '\n{"name": <function name>, "arguments": <JSON object with the arguments>}\n'
CALL_INSTRUCTION_TAIL = (
    "\nYou may write several blocks in one turn when the calls do not depend on each other: "
    "they run in parallel, and their results come back in the same order. Wait for a result "
    "before a call that needs it."
)


def tool_schema_line(tool: dict[str, Any]) -> str:
    """One tool as a line of JSON: `{"type": "function", "function": {...}}`.

    `tool` may be that whole object or just the function schema (`name`, `description`,
    `parameters`).
    """
    if not isinstance(tool, dict):
        raise ValueError(f"a tool must be a dict (a JSON schema), got {type(tool).__name__}")
    already_wrapped = tool.get("type") == "function" and "function" in tool
    wrapped = tool if already_wrapped else {"type": "function", "function": tool}
    function = wrapped["function"]
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise ValueError(f'tool schema has no string "name": {json.dumps(tool)[:200]}')
    return json.dumps(wrapped, ensure_ascii=False)


def system_pieces(system: str, tools: Sequence[dict[str, Any]] | None = None) -> list[Piece]:
    """The system turn, with the tools section when `tools` is non-empty."""
    pieces = [_marker(IM_START), _text("system\n" + system)]
    if tools:
        lead = "\n\n" if system else ""
        schemas = "\n".join(tool_schema_line(tool) for tool in tools)
        pieces += [
            _text(lead + TOOLS_INTRO + schemas + CALL_INSTRUCTION_HEAD),
            _marker(TOOL_CALL_OPEN),
            _text(CALL_EXAMPLE),
            _marker(TOOL_CALL_CLOSE),
            _text(CALL_INSTRUCTION_TAIL),
        ]
    return [*pieces, *turn_end_pieces()]


def render_system(system: str, tools: Sequence[dict[str, Any]] | None = None) -> str:
    return render(system_pieces(system, tools))


# ----------------------------------------------------------------------------- user turns


def user_pieces(content: str) -> list[Piece]:
    return [_marker(IM_START), _text("user\n" + content), *turn_end_pieces()]


def render_user(content: str) -> str:
    return render(user_pieces(content))


def tool_response_pieces(results: Sequence[str]) -> list[Piece]:
    """One user turn holding a `<tool_response>` block per result, in call order."""
    if not results:
        raise ValueError("a tool-response turn needs at least one result")
    pieces = [_marker(IM_START), _text("user\n")]
    for position, result in enumerate(results):
        if not isinstance(result, str):
            raise ValueError(f"tool result {position} must be a str, got {type(result).__name__}")
        if position:
            pieces.append(_text("\n"))
        pieces += [_marker(TOOL_RESPONSE_OPEN), _text("\n" + result + "\n"), _marker(TOOL_RESPONSE_CLOSE)]
    return [*pieces, *turn_end_pieces()]


def render_tool_responses(results: Sequence[str]) -> str:
    return render(tool_response_pieces(results))


# ----------------------------------------------------------------------------- assistant turns


def assistant_header_pieces() -> list[Piece]:
    """What precedes the policy's output: the prompt ends here."""
    return [_marker(IM_START), _text("assistant\n")]


def call_json(call: ToolCall) -> str:
    """The JSON of a call, with marker strings inside it escaped.

    An argument may contain `</tool_call>` or `<|im_end|>` (an edit of this very file, say);
    written as `\\u003c/tool_call>` it still decodes to the same string but cannot end the
    block early. Outside strings JSON has no `<`, so the replacement only touches strings.
    """
    encoded = json.dumps({"name": call.name, "arguments": call.arguments}, ensure_ascii=False)
    for special in SPECIAL_TOKENS:
        encoded = encoded.replace(special, "\\u003c" + special[1:])
    return encoded


def tool_call_pieces(call: ToolCall) -> list[Piece]:
    return [_marker(TOOL_CALL_OPEN), _text("\n" + call_json(call) + "\n"), _marker(TOOL_CALL_CLOSE)]


def render_tool_call(call: ToolCall) -> str:
    return render(tool_call_pieces(call))


def assistant_body_pieces(content: str, calls: Sequence[ToolCall] = ()) -> list[Piece]:
    """The policy's part of a turn: text, call blocks, then `<|im_end|>`."""
    pieces: list[Piece] = []
    if content:
        pieces.append(_text(content))
    for position, call in enumerate(calls):
        if content or position:
            pieces.append(_text("\n"))
        pieces += tool_call_pieces(call)
    pieces.append(_marker(IM_END))
    return pieces


def turn_end_pieces() -> list[Piece]:
    """`<|im_end|>` and the newline after it."""
    return [_marker(IM_END), _text(TURN_SEPARATOR)]


def render_assistant(content: str, calls: Sequence[ToolCall] = ()) -> str:
    """A whole assistant turn: header, body, `<|im_end|>` and the trailing newline."""
    return render([*assistant_header_pieces(), *assistant_body_pieces(content, calls), _text(TURN_SEPARATOR)])


def render_assistant_header() -> str:
    return render(assistant_header_pieces())
