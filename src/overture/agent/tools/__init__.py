"""The production tool set: file reading and editing, ripgrep, semantic search, a terminal, finish."""

from overture.agent.tools.base import ArgumentError, Tool, ToolContext, ToolError
from overture.agent.tools.files import FILE_TOOLS, INVALID_PYTHON_REFUSAL
from overture.agent.tools.search import SEARCH_TOOLS
from overture.agent.tools.shell import SHELL_TOOLS

ALL_TOOLS: list[Tool] = [*FILE_TOOLS, *SEARCH_TOOLS, *SHELL_TOOLS]

__all__ = ["ALL_TOOLS", "INVALID_PYTHON_REFUSAL", "ArgumentError", "Tool", "ToolContext", "ToolError"]
