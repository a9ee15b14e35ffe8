"""Fuzzing the tool-call parser and every tool's arguments (hypothesis): whatever a turn holds,
no exception escapes it, every bad call gets an `Error:` response in its place, and the count of
invalid calls is the count the generator broke (see `tool_call_strategies`).

Turns run against a real sandbox over a real repository. Examples are derandomized and no
example database is kept, so every run tries the same cases.
"""

from __future__ import annotations

import asyncio
import json
import os

import pytest
from agent_helpers import make_repo, tokenizer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tool_call_strategies import (
    MALFORMATIONS,
    MALFORMED,
    TOOLS,
    VALID,
    bad_arguments,
    good_arguments,
    malformed_blocks,
    turns,
    wrong_values,
)

from overture.agent import ToolContext, ToolSet
from overture.agent.tools import ArgumentError
from overture.config import AgentConfig, SandboxConfig
from overture.sandbox import SandboxPool
from overture.text import MalformedCall, ToolCall, parse_assistant

FUZZ = settings(
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)
# Commands the fuzzer writes are nonsense that exits at once; a short default bounds the odd one.
AGENT = AgentConfig(search_backend="bm25", command_timeout_s=2.0, tool_response_tokens=256)


def same_json(a, b) -> bool:
    """Equal as JSON text (NaN equals NaN, which Python's == denies)."""
    return json.dumps(a) == json.dumps(b)


@pytest.mark.parametrize("focus", sorted(TOOLS))
@settings(FUZZ, max_examples=25)
@given(data=st.data())
def test_the_parser_finds_every_block_and_breaks_only_what_was_broken(focus: str, data):
    turn = data.draw(turns(focus=focus))
    parsed = parse_assistant(turn.text, list(TOOLS))
    blocks = parsed.blocks()
    assert len(blocks) == len(turn.expected)
    for block, expected in zip(blocks, turn.expected, strict=True):
        if expected.expected == MALFORMED:
            assert isinstance(block, MalformedCall) and block.reason
        else:
            assert isinstance(block, ToolCall), block.reason
            assert block.name == expected.name and same_json(block.arguments, expected.arguments)


@pytest.mark.parametrize("name", sorted(TOOLS))
@settings(FUZZ, max_examples=40)
@given(data=st.data(), broken=st.booleans())
def test_argument_checks_refuse_exactly_the_broken_arguments(name: str, data, broken: bool):
    tool = TOOLS[name]
    arguments = data.draw(bad_arguments(tool) if broken else good_arguments(tool))
    if broken:
        with pytest.raises(ArgumentError, match=f"^{name}: "):
            tool.check_arguments(arguments)
    else:
        checked = tool.check_arguments(arguments)
        assert set(arguments) <= set(checked) <= set(tool.parameters["properties"])


@pytest.mark.parametrize("kind", MALFORMATIONS)
@settings(FUZZ, max_examples=12)
@given(data=st.data(), name=st.sampled_from(sorted(TOOLS)))
def test_every_way_a_block_can_be_malformed_is_named(kind: str, data, name: str):
    block = data.draw(malformed_blocks(TOOLS[name], kind))
    (error,) = parse_assistant(block.text, list(TOOLS)).blocks()
    assert isinstance(error, MalformedCall) and error.raw == block.text and 0 < len(error.reason) < 300


WRONG_CASES = [
    (tool.name, name, wrongness)
    for tool in TOOLS.values()
    for name, spec in tool.parameters["properties"].items()
    for wrongness in wrong_values(spec)
]


@pytest.mark.parametrize(("tool_name", "name", "wrongness"), WRONG_CASES)
@settings(FUZZ, max_examples=5)
@given(data=st.data())
def test_every_way_a_value_can_be_wrong_is_named(tool_name: str, name: str, wrongness: str, data):
    tool = TOOLS[tool_name]
    arguments = data.draw(good_arguments(tool))
    arguments[name] = data.draw(wrong_values(tool.parameters["properties"][name])[wrongness])
    with pytest.raises(ArgumentError, match=f"argument '{name}' (must be|is not valid text)"):
        tool.check_arguments(arguments)


def make_hostile_repo(root):
    """The agent tests' repository with what a command could leave behind: a name and contents that
    are not UTF-8, a FIFO, and a symlink out of the workspace."""
    base = make_repo(root)
    (base / os.fsdecode(b"bad\xff.py")).write_bytes(b"x = '\xfe'\n")
    os.mkfifo(base / "pipe.py")
    (base / "escape").symlink_to("/etc/passwd")
    return base


@pytest.fixture(scope="module")
def sandboxes(tmp_path_factory):
    """A loop, a pool and a repository kept for the module: each example takes a fresh sandbox."""
    base = make_hostile_repo(tmp_path_factory.mktemp("fuzz"))
    loop = asyncio.new_event_loop()
    pool = SandboxPool(SandboxConfig())
    loop.run_until_complete(pool.__aenter__())
    try:
        yield loop, pool, base
    finally:
        loop.run_until_complete(pool.__aexit__(None, None, None))
        loop.close()


def run_turn(sandboxes, text: str):
    loop, pool, base = sandboxes
    tools = ToolSet()

    async def run():
        async with pool.sandbox(base) as box:
            context = ToolContext(box, AGENT)
            turn = tools.parse(text)
            return await tools.execute(turn, context, tokenizer(), AGENT.tool_response_tokens)

    return loop.run_until_complete(run())


@pytest.mark.parametrize("focus", sorted(TOOLS))
@settings(FUZZ, max_examples=6)
@given(data=st.data())
def test_a_fuzzed_turn_in_a_sandbox_answers_every_block(sandboxes, focus: str, data):
    turn = data.draw(turns(max_blocks=4, focus=focus))
    records = run_turn(sandboxes, turn.text)
    assert [record.index for record in records] == list(range(len(turn.expected)))
    for record, expected in zip(records, turn.expected, strict=True):
        record.response.encode("utf-8")  # valid text: it can be tokenized and saved
        json.dumps(record.to_dict())  # as `tools run` prints it and a trajectory keeps it
        if record.error:
            assert record.response.startswith("Error:"), record.response
        if expected.expected == VALID:
            assert record.error in ("", "tool"), record.response
        else:
            assert record.error == expected.expected and record.invalid, record.response
        if expected.expected != MALFORMED:
            assert record.name == expected.name and same_json(record.arguments, expected.arguments)
    assert sum(record.invalid for record in records) == turn.invalid_count
