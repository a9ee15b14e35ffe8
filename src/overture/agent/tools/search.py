"""The codebase_search tool: natural-language search over the episode's code chunks.

The episode's `EpisodeSearch` is created on the first call (building or reusing the base
repository's cached index) and told about every edit and command of the episode before it.
Ranking and index building are CPU work, so they run in a worker thread.
"""

from __future__ import annotations

import asyncio
from typing import Any

from overture.agent.search import EpisodeSearch, Hit, base_index
from overture.agent.tools.base import Tool, ToolContext, ToolError, param, parameters
from overture.agent.tools.files import numbered
from overture.sandbox import PathEscape
from overture.sandbox.files import inside_workspace

SNIPPET_LINES = 12


def episode_search(context: ToolContext) -> EpisodeSearch:
    """The episode's search, made on first use and brought up to date with earlier changes."""
    if context.search is None:
        config = context.config
        index = base_index(context.sandbox.base, config.search_backend, config.search_cache_dir)
        search = EpisodeSearch(index, context.sandbox.files)
        for path in context.edited:
            search.note_edit(path)
        if context.ran_command:
            search.note_command()
        context.search = search
    return context.search


def format_hit(rank: int, hit: Hit, max_chars: int) -> str:
    chunk = hit.chunk
    lines = chunk.text.splitlines()
    shown = [numbered(lines[:SNIPPET_LINES], chunk.start, max_chars)]
    if len(lines) > SNIPPET_LINES:
        rest = len(lines) - SNIPPET_LINES
        shown.append(f"[... {rest} more lines: read_file {chunk.path} offset={chunk.start + SNIPPET_LINES}]")
    title = f"{rank}. {chunk.path}:{chunk.start}-{chunk.end}" + (f" ({chunk.name})" if chunk.name else "")
    return f"{title}  score={hit.score:.3f}\n" + "\n".join(shown)


async def codebase_search(context: ToolContext, args: dict[str, Any]) -> str:
    query = args["query"].strip()
    if not query:
        raise ToolError("query is empty; describe in words what you are looking for")
    try:
        directory = inside_workspace(args["directory"])
    except PathEscape as exc:
        raise ToolError(str(exc)) from None

    def run() -> list[Hit]:
        return episode_search(context).search(query, directory, context.config.search_results)

    hits = await asyncio.to_thread(run)
    if not hits:
        return f"no code matches {query!r}" + (f" under {directory}" if directory != "." else "")
    max_chars = context.config.max_line_chars
    return "\n\n".join(format_hit(rank, hit, max_chars) for rank, hit in enumerate(hits, 1))


SEARCH_TOOLS = [
    Tool(
        "codebase_search",
        "Semantic search over the repository's code: describe in words what you look for (e.g. "
        "'where are user passwords hashed'). Returns the best-matching functions, classes or "
        "passages with their paths and line numbers.",
        parameters(
            ["query"],
            query=param("string", "what to look for, in natural language"),
            directory=param("string", "only search under this directory", default="."),
        ),
        codebase_search,
    ),
]
