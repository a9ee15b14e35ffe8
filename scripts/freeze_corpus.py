"""Make a new version of the frozen corpus the default tokenizer and the LM warm-up train on.

    python scripts/freeze_corpus.py v2

writes `src/overture/text/corpora/v2.jsonl.gz` and prints the SHA-256 to pin in
`overture.text.corpus.CORPORA`. The documents are every `.py` file of the installed `overture`
package as it stands now (sorted by path; the bundled task repositories included), then
`CONVERSATION_COUNT` agent conversations in the chat format, each drawn from one of those files
with a fixed seed, so that the tokenizer learns the wire format. A version, once shipped, is never
made again: token ids of the runs trained on it depend on its every byte. Version v1 was made by
this script from the package as it stood when the corpus was frozen.
"""

from __future__ import annotations

import random
import re
import sys
from pathlib import Path
from typing import Any

from overture.text.chat import render_assistant, render_system, render_tool_responses, render_user
from overture.text.corpus import CorpusDocument, corpus_path, package_sources, write_corpus
from overture.text.listing import numbered_lines
from overture.text.tool_calls import ToolCall

CONVERSATION_COUNT = 24
CONVERSATION_SEED = 20250101


def documents() -> list[CorpusDocument]:
    """The package's sources, then the conversations drawn from them."""
    sources = package_sources()
    files = [CorpusDocument(path, "", text) for path, text in sources]
    chats = [
        CorpusDocument(f"conversations/{number:03d}", source, text)
        for number, (source, text) in enumerate(sample_conversations(sources))
    ]
    return files + chats


def main(version: str, folder: Path | None = None) -> None:
    if not re.fullmatch(r"v[0-9]+", version):
        sys.exit(f"{version!r}: a corpus version is v and a number (tokenizer.corpus), e.g. v2")
    path = folder / f"{version}.jsonl.gz" if folder is not None else corpus_path(version)
    if path.exists():
        sys.exit(f"{path} exists: a shipped version is never made again; pick a new version")
    digest = write_corpus(path, documents())
    print(f"{path}: pin it as CORPORA[{version!r}] = {digest!r}")


# ----------------------------------------------------------------------------- sample chats

SYSTEM_PROMPT = (
    "You are a coding agent working in a repository. Read the code before you change it, "
    "make the smallest edit that fixes the problem, and run the tests."
)

TOOL_SCHEMAS: list[dict[str, Any]] = [
    {
        "name": "read_file",
        "description": "Read lines of a file, numbered as N|text.",
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "offset": {"type": "integer", "description": "first line, 1-based"},
                "limit": {"type": "integer", "description": "at most this many lines"},
            },
            "required": ["path"],
        },
    },
    {
        "name": "grep",
        "description": "Search files for a regular expression.",
        "parameters": {
            "type": "object",
            "properties": {
                "pattern": {"type": "string"},
                "path": {"type": "string"},
                "glob": {"type": "string"},
            },
            "required": ["pattern"],
        },
    },
    {
        "name": "search_replace",
        "description": "Replace old_string, which must occur exactly once, by new_string.",
        "parameters": {
            "type": "object",
            "properties": {
                "file_path": {"type": "string"},
                "old_string": {"type": "string"},
                "new_string": {"type": "string"},
            },
            "required": ["file_path", "old_string", "new_string"],
        },
    },
    {
        "name": "edit_lines",
        "description": "Replace lines start_line to end_line by new_string.",
        "parameters": {
            "type": "object",
            "properties": {
                "file_path": {"type": "string"},
                "start_line": {"type": "integer"},
                "end_line": {"type": "integer"},
                "new_string": {"type": "string"},
            },
            "required": ["file_path", "start_line", "end_line", "new_string"],
        },
    },
    {
        "name": "run_terminal_cmd",
        "description": "Run a shell command in the workspace.",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string"}, "timeout": {"type": "integer"}},
            "required": ["command"],
        },
    },
]

_TASKS = (
    "The tests in {path} fail after the last change. Find the bug and fix it.",
    "Something in {path} returns the wrong value for empty input. Please fix it.",
    "Add a clearer error message to the function that reads {path}'s input.",
)
_FALLBACK_SOURCE = "def first(items):\n    return items[0] if items else None\n"
_WORDS = ("def", "return", "raise", "self", "import", "class", "len", "None", "list")


def sample_conversations(sources: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """(the file it was drawn from, the rendered conversation) for a few agent conversations
    that use the tools on overture's own files."""
    files_with_code = [(p, t) for p, t in sources if t.strip()] or [("example.py", _FALLBACK_SOURCE)]
    rng = random.Random(CONVERSATION_SEED)
    return [_conversation(rng, files_with_code) for _ in range(CONVERSATION_COUNT)]


def _conversation(rng: random.Random, sources: list[tuple[str, str]]) -> tuple[str, str]:
    package_path, source = rng.choice(sources)
    path = "src/overture/" + package_path
    lines = source.splitlines() or [""]
    word = rng.choice(_WORDS)
    start = rng.choice([n for n, line in enumerate(lines) if line.strip()] or [0])
    limit = rng.randint(5, 40)
    first = [
        ToolCall("read_file", {"path": path, "offset": start + 1, "limit": limit}),
        ToolCall("grep", {"pattern": rf"\b{word}\b", "path": path.rpartition("/")[0] or "."}),
    ]
    old = lines[start]
    new = old.replace(word, word.upper()) if word in old else old + "  # checked"
    by_text = ToolCall("search_replace", {"file_path": path, "old_string": old, "new_string": new})
    line = {"start_line": start + 1, "end_line": start + 1}
    by_line = ToolCall("edit_lines", {"file_path": path, **line, "new_string": new + "\n"})
    second = [
        rng.choice([by_text, by_line]),
        ToolCall("run_terminal_cmd", {"command": "python -m pytest -q", "timeout": 120}),
    ]
    return package_path, "".join(
        [
            render_system(SYSTEM_PROMPT, TOOL_SCHEMAS),
            render_user(rng.choice(_TASKS).format(path=path)),
            render_assistant("I will read the file and look for related code.", first),
            render_tool_responses([_numbered(lines, start, limit), _grep_output(path, lines, word)]),
            render_assistant("", second) if rng.random() < 0.5 else render_assistant("Fixing it.", second),
            render_tool_responses([f"Replaced 1 occurrence in {path}.", f"{rng.randint(3, 90)} passed"]),
            render_assistant(f"Done: the line in {path} is fixed and the tests pass.", []),
        ]
    )


def _numbered(lines: list[str], start: int, limit: int) -> str:
    chosen = lines[start : start + limit]
    body = numbered_lines(chosen, start + 1)
    remaining = len(lines) - start - len(chosen)
    return body + (f"\n... {remaining} more lines" if remaining > 0 else "")


def _grep_output(path: str, lines: list[str], word: str) -> str:
    hits = [f"{path}: {n}: {line}" for n, line in enumerate(lines, 1) if word in line][:10]  # as grep prints
    return "\n".join(hits) if hits else "No matches found."


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: python scripts/freeze_corpus.py VERSION [FOLDER]")
    main(sys.argv[1], Path(sys.argv[2]) if len(sys.argv) == 3 else None)
