"""Running one assistant turn's tool calls: all at once, answers in call order, nothing dropped.

`ToolSet.execute` takes a parsed turn (`overture.text.ParsedTurn`) and returns one
`CallRecord` per `<tool_call>` block, in the order the blocks were written. Good calls start
together; a call that touches a file an earlier call of the turn writes (or writes a file an
earlier call touches) waits for that call, so writes to one file apply in call order. Malformed
blocks, bad arguments, tool errors and unexpected exceptions each become an error response the
model can read (`Error: ...`), marked in the record; none escapes as an exception.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from overture.agent.responses import cap_response
from overture.agent.tools import ALL_TOOLS, Tool, ToolContext, ToolError
from overture.agent.tools.base import ArgumentError
from overture.config import AgentConfig, ConfigError
from overture.sandbox import PathEscape
from overture.sandbox.files import inside_workspace
from overture.sandbox.printable import escape_text
from overture.text import MalformedCall, ParsedTurn, Tokenizer, ToolCall, parse_assistant


@dataclass
class CallRecord:
    """One block of a turn and what became of it.

    `error` is "" for a call that ran, "malformed" (the block could not be parsed or names no
    tool), "arguments" (they do not fit the schema) or "tool" (the tool refused or failed).
    `started_s`/`ended_s` are seconds from the start of the turn's execution.
    """

    index: int
    name: str
    arguments: dict[str, Any] | None
    response: str
    error: str = ""
    truncated: bool = False
    started_s: float = 0.0
    ended_s: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.error

    @property
    def invalid(self) -> bool:
        """A call the model wrote wrongly (as opposed to a valid call the tool refused)."""
        return self.error in ("malformed", "arguments")

    @property
    def duration_s(self) -> float:
        return self.ended_s - self.started_s

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "duration_s": round(self.duration_s, 6)}


class ToolSet:
    """A set of tools by name: their schemas for the system turn, and turn execution."""

    def __init__(self, tools: Sequence[Tool] = ALL_TOOLS) -> None:
        self.tools = {tool.name: tool for tool in tools}

    @classmethod
    def for_agent(cls, config: AgentConfig) -> ToolSet:
        """The tools `config.tools` names, in the order of `ALL_TOOLS`; every tool when unset.
        A name that is no tool is a `ConfigError`."""
        if config.tools is None:
            return cls()
        known = [tool.name for tool in ALL_TOOLS]
        unknown = [name for name in config.tools if name not in known]
        if unknown:
            named = ", ".join(map(repr, unknown))
            raise ConfigError(f"agent.tools: no tool named {named} (tools: {', '.join(known)})")
        return cls([tool for tool in ALL_TOOLS if tool.name in config.tools])

    @property
    def names(self) -> list[str]:
        return list(self.tools)

    def schemas(self) -> list[dict[str, Any]]:
        return [tool.schema() for tool in self.tools.values()]

    def parse(self, text: str) -> ParsedTurn:
        return parse_assistant(text, self.names)

    async def execute(
        self,
        turn: ParsedTurn,
        context: ToolContext,
        tokenizer: Tokenizer | None = None,
        max_response_tokens: int | None = None,
    ) -> list[CallRecord]:
        """Run every block of `turn` (concurrently, see the module docstring); records in block order."""
        started = time.monotonic()
        blocks = turn.blocks()
        done = [asyncio.Event() for _ in blocks]
        touched = [self._touched_path(block) for block in blocks]

        async def one(position: int, block: ToolCall | MalformedCall) -> CallRecord:
            try:
                for earlier in self._conflicts(position, blocks, touched):
                    await done[earlier].wait()
                record = await self._run_block(position, block, context, started)
            finally:
                done[position].set()
            if tokenizer is not None and max_response_tokens is not None:
                capped = cap_response(record.response, tokenizer, max_response_tokens)
                record.response, record.truncated = capped
            return record

        return list(await asyncio.gather(*(one(i, block) for i, block in enumerate(blocks))))

    # ----------------------------------------------------------------- ordering

    def _touched_path(self, block: ToolCall | MalformedCall) -> str | None:
        """The normalised workspace path a call reads or writes through its path argument."""
        if isinstance(block, MalformedCall) or block.name not in self.tools:
            return None
        argument = self.tools[block.name].path_argument
        value = block.arguments.get(argument) if argument else None
        if not isinstance(value, str):
            return None
        try:
            return inside_workspace(value)
        except PathEscape:
            return None

    def _writes(self, block: ToolCall | MalformedCall) -> bool:
        tool = self.tools.get(block.name) if isinstance(block, ToolCall) else None
        return tool is not None and tool.kind == "edit"

    def _conflicts(
        self, position: int, blocks: list[ToolCall | MalformedCall], touched: list[str | None]
    ) -> list[int]:
        """Earlier calls of the turn this one must wait for: same file, and one of the two writes."""
        path = touched[position]
        if path is None:
            return []
        return [
            earlier
            for earlier in range(position)
            if touched[earlier] == path and (self._writes(blocks[earlier]) or self._writes(blocks[position]))
        ]

    # ----------------------------------------------------------------- one call

    async def _run_block(
        self, position: int, block: ToolCall | MalformedCall, context: ToolContext, origin: float
    ) -> CallRecord:
        begin = time.monotonic() - origin
        if isinstance(block, MalformedCall):
            response = f"Error: malformed tool call: {block.reason}"
            record = CallRecord(position, "", None, response, "malformed")
        else:
            record = await self._run_call(position, block, context)
        # Names and output a command made may hold bytes that are not UTF-8 (as surrogate escapes):
        # shown as \xNN, so that the response can be tokenized and saved.
        record.response = escape_text(record.response)
        record.started_s, record.ended_s = begin, time.monotonic() - origin
        return record

    async def _run_call(self, position: int, call: ToolCall, context: ToolContext) -> CallRecord:
        record = CallRecord(position, call.name, call.arguments, "")
        tool = self.tools.get(call.name)
        if tool is None:  # the parser checks names too; this guards a ParsedTurn made elsewhere
            record.response, record.error = f"Error: unknown tool {call.name!r}", "malformed"
            return record
        try:
            arguments = tool.check_arguments(call.arguments)
            record.response = await tool.run(context, arguments)
        except ArgumentError as exc:
            record.response, record.error = f"Error: {exc}", "arguments"
        except ToolError as exc:
            record.response, record.error = f"Error: {call.name}: {exc}", "tool"
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # whatever a tool hits (bad regex, sandbox error, ...) is an answer
            record.response = f"Error: {call.name} failed: {exc.__class__.__name__}: {exc}"
            record.error = "tool"
        finally:
            self._note_effects(tool, call, context)
        return record

    @staticmethod
    def _note_effects(tool: Tool, call: ToolCall, context: ToolContext) -> None:
        """Tell the context (and so the search index) what the call may have changed."""
        if tool.kind == "run":
            context.note_command()
        elif tool.kind == "edit" and tool.path_argument:
            value = call.arguments.get(tool.path_argument)
            if isinstance(value, str):
                # A path outside was refused: nothing was written, nothing to re-index.
                with contextlib.suppress(PathEscape):
                    context.note_edit(inside_workspace(value))
