"""Code chunks for search: Python split by function and class, other text files by line windows.

A chunk is a span of lines of one file with its text. Python files are parsed with `ast`:
every function and class (methods too) is a chunk, and the module-level code between them
is cut into windows; a file that does not parse falls back to windows. Long definitions are
split into windows too, so that no chunk is too long to embed well.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from overture.runtime.python_source import parse_python

WINDOW_LINES = 40
WINDOW_OVERLAP = 10
MAX_CHUNK_LINES = 80
MAX_FILE_BYTES = 512 * 1024
TEXT_SUFFIXES = frozenset(
    {
        ".py",
        ".pyi",
        ".md",
        ".rst",
        ".txt",
        ".toml",
        ".cfg",
        ".ini",
        ".json",
        ".yaml",
        ".yml",
        ".sh",
        ".c",
        ".h",
        ".cc",
        ".cpp",
        ".hpp",
        ".rs",
        ".go",
        ".java",
        ".js",
        ".ts",
        ".tsx",
        ".jsx",
        ".rb",
        ".php",
        ".html",
        ".css",
        ".sql",
        ".kt",
        ".swift",
        ".scala",
        ".lua",
        ".r",
        ".jl",
        ".tex",
    }
)
SKIPPED_DIRS = frozenset({".git", ".hg", ".svn", ".venv", "venv", "node_modules", "__pycache__", ".tox"})


@dataclass(frozen=True)
class Chunk:
    """Lines `start..end` (1-based, inclusive) of `path`; `name` is the definition, if any."""

    path: str
    start: int
    end: int
    text: str
    name: str = ""


def indexable(path: str, size: int | None = None) -> bool:
    """Whether a file is worth indexing: a known text suffix, not in a tool directory, not huge."""
    parts = path.split("/")
    if any(part in SKIPPED_DIRS or part.endswith(".egg-info") for part in parts[:-1]):
        return False
    suffix = "." + parts[-1].rsplit(".", 1)[-1].lower() if "." in parts[-1] else ""
    return suffix in TEXT_SUFFIXES and (size is None or size <= MAX_FILE_BYTES)


def chunk_file(path: str, text: str) -> list[Chunk]:
    """The chunks of one file."""
    lines = text.splitlines()
    if not lines:
        return []
    if path.endswith((".py", ".pyi")):
        try:
            return _python_chunks(path, lines, parse_python(text))
        except (SyntaxError, ValueError):
            pass  # not parseable: windows still make it searchable
    return windows(path, lines, 1, len(lines))


def windows(path: str, lines: list[str], first: int, last: int, name: str = "") -> list[Chunk]:
    """Overlapping windows over lines `first..last` (1-based, inclusive)."""
    chunks = []
    start = first
    while start <= last:
        end = min(last, start + WINDOW_LINES - 1)
        text = "\n".join(lines[start - 1 : end])
        if text.strip():
            chunks.append(Chunk(path, start, end, text, name))
        if end == last:
            break
        start = end + 1 - WINDOW_OVERLAP
    return chunks


def _python_chunks(path: str, lines: list[str], tree: ast.Module) -> list[Chunk]:
    chunks: list[Chunk] = []
    covered = [False] * (len(lines) + 1)
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        last = node.end_lineno or node.lineno
        if last - first + 1 > MAX_CHUNK_LINES:
            chunks += windows(path, lines, first, last, node.name)
        else:
            chunks.append(Chunk(path, first, last, "\n".join(lines[first - 1 : last]), node.name))
        for line in range(first, last + 1):
            covered[line] = True
    chunks += _uncovered_windows(path, lines, covered)
    return sorted(chunks, key=lambda chunk: (chunk.start, chunk.end))


def _uncovered_windows(path: str, lines: list[str], covered: list[bool]) -> list[Chunk]:
    """Windows over the runs of module-level lines that no definition covers (imports, constants)."""
    chunks: list[Chunk] = []
    line = 1
    while line <= len(lines):
        if covered[line]:
            line += 1
            continue
        end = line
        while end + 1 <= len(lines) and not covered[end + 1]:
            end += 1
        chunks += windows(path, lines, line, end)
        line = end + 1
    return chunks
