"""Shared helpers of the agent tests: a small real repository, a tokenizer, tool-call text, and a
runner that gives a coroutine a fresh sandbox over a base directory."""

from __future__ import annotations

import asyncio
import functools
import json
from pathlib import Path
from typing import Any

from overture.agent import ToolContext, ToolSet
from overture.config import AgentConfig, SandboxConfig
from overture.sandbox import SandboxPool
from overture.text import Tokenizer, ToolCall, render_tool_call, train_default_tokenizer

CALC = '''"""Arithmetic helpers."""


def add(a, b):
    """Sum of two numbers."""
    return a + b


def mean(values):
    """Arithmetic mean of a list of numbers."""
    return sum(values) / (len(values) + 1)


class Accumulator:
    """Keeps a running total."""

    def __init__(self):
        self.total = 0

    def push(self, value):
        self.total = add(self.total, value)
        return self.total
'''

TEST_CALC = """from calc import mean


def test_mean():
    assert mean([2, 4, 6]) == 4
"""


def make_repo(root: Path) -> Path:
    """A small Python project with a bug in `mean` and a test that catches it."""
    repo = root / "repo"
    (repo / "calc").mkdir(parents=True)
    (repo / "calc" / "__init__.py").write_text("from calc.core import add, mean, Accumulator\n")
    (repo / "calc" / "core.py").write_text(CALC)
    (repo / "tests").mkdir()
    (repo / "tests" / "test_calc.py").write_text(TEST_CALC)
    (repo / "README.md").write_text("# calc\n\nSmall arithmetic helpers. Run `python -m pytest -q`.\n")
    (repo / "notes.txt").write_text("".join(f"line {n}\n" for n in range(1, 601)))
    return repo


@functools.cache
def tokenizer() -> Tokenizer:
    return train_default_tokenizer()


def call_text(*calls: tuple[str, dict[str, Any]], prose: str = "") -> str:
    """An assistant turn's text with these calls, as a model would write it."""
    blocks = [render_tool_call(ToolCall(name, args)) for name, args in calls]
    return "\n".join([prose, *blocks] if prose else blocks)


def raw_call(body: str) -> str:
    """A `<tool_call>` block around any text (for malformed calls)."""
    return f"<tool_call>\n{body}\n</tool_call>"


def in_sandbox(base: Path, body, **agent: Any) -> Any:
    """`await body(sandbox, context)` in a fresh sandbox over `base`; its result."""

    async def main():
        async with SandboxPool(SandboxConfig()) as pool, pool.sandbox(base) as box:
            return await body(box, ToolContext(box, AgentConfig(**{"search_backend": "bm25", **agent})))

    return asyncio.run(main())


def run_calls(base: Path, text: str, **agent: Any) -> list[Any]:
    """Execute one assistant turn's text in a fresh sandbox; the call records."""
    tools = ToolSet()

    async def body(box, context):
        return await tools.execute(tools.parse(text), context)

    return in_sandbox(base, body, **agent)


def one(base: Path, name: str, **arguments: Any) -> Any:
    """The record of a single call."""
    (record,) = run_calls(base, call_text((name, arguments)))
    return record


def dumps(value: Any) -> str:
    return json.dumps(value)
