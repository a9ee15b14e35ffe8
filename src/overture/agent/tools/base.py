"""What every tool is made of: its schema, its argument check, and the context it runs in.

A tool is a `Tool`: a name, a description, JSON-schema parameters (announced to the model in
the system turn) and an async `run(context, arguments) -> str`. Arguments are checked against
the schema before `run` (missing, unknown and wrong-typed arguments, and strings that are no
valid text, become an `ArgumentError` the model can read). A tool that cannot do what was asked
raises `ToolError`; both end up as a tool response, never as an exception out of the loop.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from overture.config import AgentConfig
from overture.sandbox import Sandbox
from overture.sandbox.printable import SURROGATES
from overture.text.tool_calls import json_type


class ToolError(Exception):
    """A tool could not do what the call asked (missing file, ambiguous edit, bad regex...)."""


class ArgumentError(ToolError):
    """A call's arguments do not fit the tool's schema."""


@dataclass
class ToolContext:
    """What a tool runs against: the episode's sandbox, the limits, and shared helpers.

    `search` is the codebase search index of this episode (see `search/`), `deadline` the
    monotonic time at which the episode's wall clock runs out (None: no limit).
    """

    sandbox: Sandbox
    config: AgentConfig
    search: Any = None
    deadline: float | None = None
    edited: set[str] = field(default_factory=set)
    ran_command: bool = False

    def note_edit(self, path: str) -> None:
        """A call wrote or deleted `path`: the search index must look at it again."""
        self.edited.add(path)
        if self.search is not None:
            self.search.note_edit(path)

    def note_command(self) -> None:
        """A command ran and may have changed any file."""
        self.ran_command = True
        if self.search is not None:
            self.search.note_command()


ToolFn = Callable[[ToolContext, dict[str, Any]], Awaitable[str]]


@dataclass(frozen=True)
class Tool:
    """One tool: name, description, parameters (a JSON schema object) and the coroutine that runs it.

    `kind` sorts tools for the behaviour metrics: "read" (read/list/search), "edit", "run",
    "finish". `path_argument` names the argument holding the file a call touches, so that
    calls of one turn touching the same file run in call order.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    run: ToolFn
    kind: str = "read"
    path_argument: str | None = None

    def schema(self) -> dict[str, Any]:
        """The function schema announced to the model."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}

    def check_arguments(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The arguments with defaults filled in; `ArgumentError` naming every problem otherwise."""
        properties: dict[str, Any] = self.parameters.get("properties", {})
        problems = [
            f"missing required argument {name!r}"
            for name in self.parameters.get("required", [])
            if name not in arguments
        ]
        problems += [
            f"unknown argument {name!r} (expected: {', '.join(properties) or 'none'})"
            for name in arguments
            if name not in properties
        ]
        for name, value in arguments.items():
            spec = properties.get(name)
            if spec is None:
                continue
            if not _fits(value, spec):
                got = json_type(value, show_numbers=True)
                problems.append(f"argument {name!r} must be {_describe(spec)}, got {got}")
            elif surrogate := _lone_surrogate(value):
                problems.append(f"argument {name!r} is not valid text: it holds {surrogate}")
        if problems:
            raise ArgumentError(f"{self.name}: " + "; ".join(problems))
        defaults = {k: spec["default"] for k, spec in properties.items() if "default" in spec}
        given = {
            name: int(value) if properties[name].get("type") == "integer" else value
            for name, value in arguments.items()
        }
        return {**defaults, **given}


def param(kind: str, description: str, **extra: Any) -> dict[str, Any]:
    """One property of a tool's parameter schema."""
    return {"type": kind, "description": description, **extra}


def parameters(required: list[str], **properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


_PYTHON_TYPES: dict[str, type | tuple[type, ...]] = {
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
    "array": list,
    "object": dict,
}


def _fits(value: Any, spec: dict[str, Any]) -> bool:
    kind = spec.get("type")
    if kind is None:
        return True
    # bool is an int in Python but not in JSON: `true` is no line number.
    if isinstance(value, bool) and kind in ("integer", "number"):
        return False
    if isinstance(value, float) and not math.isfinite(value):
        return False  # NaN and Infinity parse from JSON but are no timeout or line number
    if kind == "integer" and isinstance(value, float) and value.is_integer():
        return True
    if not isinstance(value, _PYTHON_TYPES[kind]):
        return False
    if "enum" in spec and value not in spec["enum"]:
        return False
    if "minimum" in spec and value < spec["minimum"]:
        return False
    items = spec.get("items")
    return not (kind == "array" and items and not all(_fits(item, items) for item in value))


def _lone_surrogate(value: Any) -> str:
    """Where a string (or a string in an array) holds a lone surrogate, which JSON's `\\ud800`
    escapes can make but no file, path or command can hold; "" when none does."""
    for text in value if isinstance(value, list) else [value]:
        found = SURROGATES.search(text) if isinstance(text, str) else None
        if found:
            return f"the lone surrogate {found.group()!r} at character {found.start()}"
    return ""


def _describe(spec: dict[str, Any]) -> str:
    names = {"integer": "an integer", "array": "an array", "object": "an object", "boolean": "true or false"}
    text = names.get(spec.get("type", ""), f"a {spec.get('type')}")
    if spec.get("type") == "array" and spec.get("items"):
        text += f" of {spec['items'].get('type')}s"
    if "enum" in spec:
        text += " (one of " + ", ".join(repr(v) for v in spec["enum"]) + ")"
    if "minimum" in spec:
        text += f" >= {spec['minimum']}"
    return text
