"""Hypothesis strategies for the fuzz tests: assistant turns whose tool-call blocks are good,
broken in arguments, or malformed, each labelled with the outcome the generator built it for.

The labels come from how a block was made (which key was dropped, which value was given a
wrong type, how the JSON was cut), never from the code under test: a `Block`'s `expected` is
"valid" (the call reaches its tool, which may still refuse it), "arguments" (the call names a
tool but its arguments break the schema) or "malformed" (the block is no usable call).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from overture.agent.tools import ALL_TOOLS, Tool
from overture.text.markers import IM_END, TOOL_CALL_CLOSE, TOOL_CALL_OPEN
from overture.text.tool_calls import MAX_JSON_DEPTH, MAX_NUMBER_DIGITS

TOOLS: dict[str, Tool] = {tool.name: tool for tool in ALL_TOOLS}
VALID, ARGUMENTS, MALFORMED = "valid", "arguments", "malformed"


def _tag_free(text: str) -> bool:
    """A tag inside a value would end or open a block where the generator does not expect it."""
    return TOOL_CALL_OPEN not in text and TOOL_CALL_CLOSE not in text


ODD_STRINGS = [
    "",
    " ",
    "\x00",
    "a\x00b",
    "\n\r\t",
    ".",
    "..",
    "../../etc/passwd",
    "/etc/passwd",
    "/workspace",
    "/workspace/../../etc",
    "/workspace/calc/core.py",
    "calc/core.py",
    "calc/../calc/core.py",
    "calc//./core.py",
    "calc",
    "pipe.py",
    "escape",
    "bad\\xff.py",
    "./" * 300 + "README.md",
    "../" * 2000,
    "/" + "a" * 5000,
    "a/" * 3000,
    "~",
    "$HOME",
    "-rf",
    "--",
    "*",
    "**/*.py",
    "[",
    "(?",
    "\\",
    "'\"`",
    "\u202e\ufeff\u200b",
    "é" * 300,
    "\U0001f600" * 100,
    "x" * 100_000,
]
"""Strings an attacker would try: NUL, traversal, absolute, very long, glob and regex syntax."""

text_values = st.one_of(
    st.text(max_size=30),  # any code points but surrogates
    st.sampled_from(ODD_STRINGS),
    st.binary(max_size=30).map(lambda data: data.decode("latin-1")),  # bytes as if they were text
).filter(_tag_free)

surrogate_texts = st.tuples(text_values, st.sampled_from(["\ud800", "\udcff", "\udfff"]), text_values).map(
    "".join
)
"""Strings with a lone surrogate (what `\\udcff` in JSON gives), which the tools' check refuses."""

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=10).filter(_tag_free),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


# ----------------------------------------------------------------- values by schema


def valid_value(spec: dict[str, Any]) -> st.SearchStrategy[Any]:
    """A value the property's schema accepts."""
    kind, minimum = spec["type"], spec.get("minimum")
    if "enum" in spec:
        return st.sampled_from(spec["enum"])
    if kind == "string":
        return text_values
    if kind == "integer":
        integers = st.integers(min_value=minimum) | st.sampled_from([10**100, 2**63]).filter(
            lambda n: minimum is None or n >= minimum
        )
        return integers | st.integers(min_value=minimum, max_value=10**6).map(float)  # 3.0 is an integer
    if kind == "number":
        low = minimum if minimum is not None else None
        floats = st.floats(min_value=low, allow_nan=False, allow_infinity=False)
        return floats | st.integers(min_value=math.ceil(low) if low is not None else None)
    if kind == "boolean":
        return st.booleans()
    if kind == "array":
        return st.lists(valid_value(spec["items"]), max_size=4)
    raise AssertionError(f"no strategy for schema type {kind!r}")


_BY_KIND = {
    "null": st.none(),
    "boolean": st.booleans(),
    "integer": st.integers(),
    "fraction": st.floats(allow_nan=False, allow_infinity=False).filter(lambda x: not x.is_integer()),
    "non-finite": st.sampled_from([math.nan, math.inf, -math.inf]),
    "string": text_values,
    "array": st.lists(json_values, max_size=3),
    "object": st.dictionaries(st.text(max_size=5).filter(_tag_free), json_values, max_size=3),
}
_WRONG_KINDS = {
    "string": ["null", "boolean", "integer", "fraction", "non-finite", "array", "object"],
    "integer": ["null", "boolean", "fraction", "non-finite", "string", "array", "object"],
    "number": ["null", "boolean", "non-finite", "string", "array", "object"],
    "boolean": ["null", "integer", "fraction", "string", "array", "object"],
    "array": ["null", "boolean", "integer", "fraction", "string", "object"],
}


def wrong_values(spec: dict[str, Any]) -> dict[str, st.SearchStrategy[Any]]:
    """Values the property's schema refuses, by what is wrong with them: another JSON type, below
    the minimum, outside the enum, an array item of the wrong type, a lone surrogate."""
    kind, minimum = spec["type"], spec.get("minimum")
    wrong = {other: _BY_KIND[other] for other in _WRONG_KINDS[kind]}
    if minimum is not None:
        wrong["below the minimum"] = st.integers(max_value=math.ceil(minimum) - 1)
    if "enum" in spec:
        wrong["outside the enum"] = text_values.filter(lambda text: text not in spec["enum"])
    elif kind == "string":
        wrong["lone surrogate"] = surrogate_texts
    if kind == "array":
        items = st.one_of([_BY_KIND[other] for other in _WRONG_KINDS["string"]]) | surrogate_texts
        pairs = st.tuples(st.lists(text_values, max_size=2), items)
        wrong["a wrong item"] = pairs.map(lambda pair: [*pair[0], pair[1]])
    return wrong


def wrong_value(spec: dict[str, Any]) -> st.SearchStrategy[Any]:
    return st.one_of(list(wrong_values(spec).values()))


# ----------------------------------------------------------------- calls


@dataclass
class Block:
    """One `<tool_call>` block as the generator wrote it, and what should become of it.

    `text` is the whole block (tags included, or only the opening tag for an unclosed one);
    `name` and `arguments` are set for a call that should reach the tools' argument check.
    """

    text: str
    expected: str
    name: str = ""
    arguments: dict[str, Any] | None = None


@st.composite
def good_arguments(draw: st.DrawFn, tool: Tool) -> dict[str, Any]:
    properties = tool.parameters["properties"]
    required = tool.parameters["required"]
    optional = [name for name in properties if name not in required]
    chosen = [*required, *draw(st.lists(st.sampled_from(optional), unique=True) if optional else st.just([]))]
    return {name: draw(valid_value(properties[name])) for name in chosen}


@st.composite
def bad_arguments(draw: st.DrawFn, tool: Tool) -> dict[str, Any]:
    """Good arguments with at least one break: a required key dropped, an unknown key added, or a
    value of a known key made wrong."""
    properties = tool.parameters["properties"]
    arguments = draw(good_arguments(tool))
    breaks = ["unknown", "wrong"] + (["missing"] if tool.parameters["required"] else [])
    for kind in draw(st.lists(st.sampled_from(breaks), min_size=1, max_size=3, unique=True)):
        if kind == "missing":
            del arguments[draw(st.sampled_from(tool.parameters["required"]))]
        elif kind == "unknown":
            key = draw(st.text(max_size=12).filter(lambda name: name not in properties and _tag_free(name)))
            arguments[key] = draw(json_values)
        else:
            name = draw(st.sampled_from(sorted(properties)))
            arguments[name] = draw(wrong_value(properties[name]))
    return arguments


def render(value: Any, draw: st.DrawFn) -> str:
    """JSON text as a model might write it: compact or indented, escaped or raw non-ASCII."""
    indent = draw(st.sampled_from([None, 0, 2]))
    return json.dumps(value, ensure_ascii=draw(st.booleans()), indent=indent)


def closed(body: str) -> str:
    return f"{TOOL_CALL_OPEN}\n{body}\n{TOOL_CALL_CLOSE}"


CALL_SHAPES = [
    "good",
    "bad arguments",
    "good",
    "malformed",
    "bad arguments",
    "good, arguments as a string",
    "good, extra top-level key",
]
"""How a closed block is made; repeats weigh the draw (hypothesis favours the first entries)."""


@st.composite
def call_blocks(draw: st.DrawFn, focus: str | None = None) -> Block:
    """A closed block calling `focus` most of the time (any tool otherwise): a good call, a call
    with bad arguments, or one malformed in one of many ways."""
    others = st.sampled_from(sorted(TOOLS))
    name = draw(others if focus is None else st.sampled_from([focus, focus, focus]) | others)
    tool = TOOLS[name]
    shape = draw(st.sampled_from(CALL_SHAPES))
    if shape == "malformed":
        return draw(malformed_blocks(tool))
    arguments = draw(bad_arguments(tool) if shape == "bad arguments" else good_arguments(tool))
    call: dict[str, Any] = {"name": tool.name, "arguments": arguments}
    if shape == "good, arguments as a string":
        call["arguments"] = render(arguments, draw)
    elif shape == "good, extra top-level key":
        call["id"] = draw(json_values)
    expected = ARGUMENTS if shape == "bad arguments" else VALID
    return Block(closed(render(call, draw)), expected, tool.name, arguments)


MALFORMATIONS = [
    "cut short",
    "not JSON",
    "not an object",
    "no name",
    "name not a string",
    "unknown tool",
    "no arguments",
    "arguments not an object",
    "arguments a string, not JSON",
    "arguments a string, not an object",
    "nested too deep",
    "number too long",
    "blank",
]


@st.composite
def malformed_blocks(draw: st.DrawFn, tool: Tool, kind: str | None = None) -> Block:
    """A closed block that is no usable call, broken in one of `MALFORMATIONS` (`kind`, or any)."""
    good = {"name": tool.name, "arguments": draw(good_arguments(tool))}
    good_text = render(good, draw)
    not_object = json_values.filter(lambda value: not isinstance(value, dict))
    kind = kind or draw(st.sampled_from(MALFORMATIONS))
    if kind == "cut short":  # a proper prefix of an object's text lacks its closing brace
        body = good_text[: draw(st.integers(0, len(good_text) - 1))]
    elif kind == "not JSON":
        body = "x" + draw(st.text(max_size=20).filter(_tag_free))
    elif kind == "not an object":
        body = render(draw(not_object), draw)
    elif kind == "no name":
        body = render({"arguments": good["arguments"]}, draw)
    elif kind == "name not a string":
        name = draw(st.just("") | json_values.filter(lambda value: not isinstance(value, str)))
        body = render({**good, "name": name}, draw)
    elif kind == "unknown tool":
        name = draw(
            st.text(min_size=1, max_size=20).filter(lambda text: text not in TOOLS and _tag_free(text))
        )
        body = render({**good, "name": name}, draw)
    elif kind == "no arguments":
        body = render({"name": tool.name}, draw)
    elif kind == "arguments not an object":
        value = draw(json_values.filter(lambda value: not isinstance(value, dict | str)))
        body = render({**good, "arguments": value}, draw)
    elif kind == "arguments a string, not JSON":
        body = render({**good, "arguments": "x" + draw(st.text(max_size=10))}, draw)
    elif kind == "arguments a string, not an object":
        body = render({**good, "arguments": json.dumps(draw(not_object))}, draw)
    elif kind == "nested too deep":
        # Inside the call object, so `levels` arrays reach one level deeper than their count.
        levels = MAX_JSON_DEPTH + draw(st.sampled_from([0, 1, 1000, 100_000]))
        deep = "[" * levels + "]" * levels
        body = good_text.replace('"arguments": ', f'"deep": {deep}, "arguments": ', 1)
    elif kind == "number too long":
        digits = "9" * draw(st.sampled_from([MAX_NUMBER_DIGITS + 1, 4301, 100_000]))
        body = good_text.replace('"arguments": ', f'"n": {digits}, "arguments": ', 1)
    else:
        body = draw(st.sampled_from(["", " ", "\n\t "]))
    return Block(closed(body), MALFORMED)


# ----------------------------------------------------------------- turns


@dataclass
class Turn:
    """An assistant turn's text and, in order, what each of its blocks should become."""

    text: str
    expected: list[Block]

    @property
    def invalid_count(self) -> int:
        return sum(block.expected != VALID for block in self.expected)


prose = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["<tool_call", "tool_call>", "</tool_call", "<tool_response>", IM_END + " more", "{}"]),
).filter(_tag_free)


BLOCK_KINDS = ["call", "call", "unclosed", "call", "stray close", "call"]


@st.composite
def turns(draw: st.DrawFn, max_blocks: int = 5, focus: str | None = None) -> Turn:
    """Prose and blocks in any order: closed calls (mostly of `focus` when given), unclosed blocks
    (before another opening tag or at the end) and stray closing tags (where no block is open),
    parts joined by newlines."""
    parts: list[str] = []
    blocks: list[Block] = []
    unclosed = False  # the last block was opened and not closed: no closing tag may come next
    for _ in range(draw(st.integers(0, max_blocks))):
        if draw(st.booleans()):
            parts.append(draw(prose))
        kind = draw(
            st.sampled_from([kind for kind in BLOCK_KINDS if not (unclosed and kind == "stray close")])
        )
        if kind == "call":
            block = draw(call_blocks(focus))
        elif kind == "unclosed":
            body = draw(call_blocks(focus)).text.removesuffix(TOOL_CALL_CLOSE)
            block = Block(body, MALFORMED)
        else:
            block = Block(TOOL_CALL_CLOSE, MALFORMED)
        unclosed = kind == "unclosed"
        parts.append(block.text)
        blocks.append(block)
    if not unclosed and draw(st.booleans()):
        parts.append(draw(prose))
    text = "\n".join(parts) + draw(st.sampled_from(["", IM_END, "\n" + IM_END]))
    return Turn(text, blocks)
