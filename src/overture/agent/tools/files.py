"""File tools: read_file, list_dir, glob_file_search, search_replace, edit_lines, write_file, delete_file.

All of them go through the sandbox's confined file helpers (`Sandbox.files`), so no path can
leave the workspace; the blocking file calls run in a worker thread so that the calls of one
turn overlap. Outputs are plain text written for the model: numbered lines (`N|text`), what
remains after a capped read, and errors that say what to do instead. `list_dir` and
`glob_file_search` leave out bytecode caches (`__pycache__`): they are not source (task
snapshots keep their test modules' compiled bytecode there, `overture.tasks.snapshots`).

Edits of a Python file that would leave it unable to compile are refused and the file kept as it
was (`agent.refuse_syntax_errors`), with the compiler's message and the offending line, as
SWE-agent's linting edit command does: a file that does not compile fails every test that
imports it, and the model learns more from the refusal than from a broken workspace. A file
that did not compile before the edit is edited as asked.
"""

from __future__ import annotations

import asyncio
from typing import Any

from overture.agent.tools.base import Tool, ToolContext, ToolError, param, parameters
from overture.sandbox import PathEscape
from overture.sandbox.errors import NotRegularFile
from overture.sandbox.files import Entry, glob_to_regex, looks_binary
from overture.sandbox.printable import escape_name
from overture.text import numbered_lines

BYTECODE_CACHE = "__pycache__"
# In the error of every edit refused because its result would not compile (and only there).
INVALID_PYTHON_REFUSAL = "the result would not be valid Python"


def _file_error(path: str, exc: Exception) -> ToolError:
    """A filesystem exception as words for the model."""
    if isinstance(exc, PathEscape):
        return ToolError(f"{path}: outside the workspace ({exc})")
    if isinstance(exc, NotRegularFile):
        return ToolError(str(exc))
    if isinstance(exc, FileNotFoundError):
        return ToolError(f"{path}: no such file or directory")
    if isinstance(exc, IsADirectoryError):
        return ToolError(f"{path}: is a directory, not a file (use list_dir)")
    if isinstance(exc, NotADirectoryError):
        return ToolError(f"{path}: a parent of this path is a file, not a directory")
    return ToolError(f"{path}: {exc.__class__.__name__}: {exc}")


async def _in_thread(path: str, fn: Any, *args: Any) -> Any:
    try:
        return await asyncio.to_thread(fn, *args)
    except (OSError, PathEscape, NotRegularFile) as exc:
        raise _file_error(path, exc) from None


async def read_text(context: ToolContext, path: str) -> str:
    """The text of a workspace file; binary files are refused."""
    data: bytes = await _in_thread(path, context.sandbox.files.read_bytes, path)
    if looks_binary(data):
        raise ToolError(f"{path}: binary file ({len(data)} bytes); not shown")
    return data.decode("utf-8", errors="replace")


def cut_line(line: str, limit: int) -> str:
    return line if len(line) <= limit else f"{line[:limit]}… [{len(line) - limit} more characters]"


def numbered(lines: list[str], first: int, max_chars: int) -> str:
    """Lines as ` N|text` (`overture.text.numbered_lines`), each cut to `max_chars`."""
    return numbered_lines([cut_line(line, max_chars) for line in lines], first)


async def read_file(context: ToolContext, args: dict[str, Any]) -> str:
    path, offset = args["path"], args["offset"]
    cap = context.config.read_file_max_lines
    limit = min(args.get("limit") or cap, cap)
    lines = (await read_text(context, path)).splitlines()
    if not lines:
        return f"{path}: empty file"
    if offset > len(lines):
        raise ToolError(f"{path}: offset {offset} is past the end of the file ({len(lines)} lines)")
    shown = lines[offset - 1 : offset - 1 + limit]
    last = offset + len(shown) - 1
    body = numbered(shown, offset, context.config.max_line_chars)
    if last < len(lines):
        note = (
            f"[lines {offset}-{last} of {len(lines)}; {len(lines) - last} more: "
            f"call read_file with offset={last + 1}]"
        )
    else:
        note = f"[end of file: lines {offset}-{last} of {len(lines)}]"
    return f"{body}\n{note}"


def _entry_line(entry: Entry) -> str:
    """One entry as `list_dir` shows it, its name escaped (`overture.sandbox.printable`)."""
    name = escape_name(entry.name)
    if entry.kind == "dir":
        return f"{name}/"
    return f"{name}  ({entry.size} bytes)" if entry.kind == "file" else f"{name}  ({entry.kind})"


async def list_dir(context: ToolContext, args: dict[str, Any]) -> str:
    path = args["path"]
    entries = await _in_thread(path, context.sandbox.files.list_dir, path)
    ignore = [glob_to_regex(pattern) for pattern in args["ignore_globs"]]
    entries = [
        e for e in entries if e.name != BYTECODE_CACHE and not any(rule.fullmatch(e.name) for rule in ignore)
    ]
    if not entries:
        return f"{path}: empty directory"
    cap = context.config.list_dir_max_entries
    lines = [_entry_line(entry) for entry in entries[:cap]]
    if len(entries) > cap:
        lines.append(f"[{len(entries) - cap} more entries not shown]")
    return "\n".join(lines)


async def glob_file_search(context: ToolContext, args: dict[str, Any]) -> str:
    pattern, path = args["pattern"], args["path"]
    found: list[str] = await _in_thread(path, context.sandbox.files.glob, pattern, path)
    found = [file for file in found if BYTECODE_CACHE not in file.split("/")]
    if not found:
        return f"no files match {pattern!r}"
    cap = context.config.glob_max_results
    lines = [escape_name(file) for file in found[:cap]]
    if len(found) > cap:
        lines.append(f"[{len(found) - cap} more matches not shown; narrow the pattern]")
    return "\n".join(lines)


def compile_error(source: str, path: str) -> str | None:
    """Why `source` is not a module Python can compile (message and line), or None if it is."""
    try:
        compile(source, path, "exec", dont_inherit=True)
    except SyntaxError as exc:  # IndentationError and TabError included
        if not exc.lineno:
            return exc.msg
        lines = source.splitlines()
        line = lines[exc.lineno - 1].strip() if exc.lineno <= len(lines) else ""
        return f"{exc.msg} (line {exc.lineno}{f': {line!r}' if line else ''})"
    except (ValueError, RecursionError, MemoryError) as exc:  # null bytes, absurd nesting
        return f"{exc.__class__.__name__}: {exc}"
    return None


def refuse_breaking_python(context: ToolContext, path: str, before: str | None, after: str) -> None:
    """Raise if writing `after` over `before` (None: a new file) turns compiling Python into
    Python that does not compile; the caller has not written anything yet. (Compiling takes
    milliseconds a file: the tools call it in a worker thread, off the event loop.)"""
    if not context.config.refuse_syntax_errors or not path.endswith(".py"):
        return
    error = compile_error(after, path)
    if error is None or (before is not None and compile_error(before, path) is not None):
        return
    raise ToolError(
        f"{path}: edit not applied, the file is unchanged: {INVALID_PYTHON_REFUSAL}: "
        f"{error}. Fix the indentation, brackets or quotes of the new text and edit again."
    )


def _replace_once_or_all(text: str, old: str, new: str, replace_all: bool, path: str) -> tuple[str, int]:
    if not old:
        raise ToolError("old_string is empty; to create or overwrite a file use write_file")
    if old == new:
        raise ToolError("old_string and new_string are identical; nothing to change")
    count = text.count(old)
    if count == 0:
        raise ToolError(
            f"{path}: old_string not found (it must match exactly, whitespace and indentation "
            "included; read the file first)"
        )
    if count > 1 and not replace_all:
        raise ToolError(
            f"{path}: old_string occurs {count} times; include more surrounding lines to make it "
            "unique, or pass replace_all=true"
        )
    return text.replace(old, new), count


async def search_replace(context: ToolContext, args: dict[str, Any]) -> str:
    path = args["file_path"]
    text = await read_text(context, path)
    old, new = args["old_string"], args["new_string"]
    updated, count = _replace_once_or_all(text, old, new, args["replace_all"], path)
    await asyncio.to_thread(refuse_breaking_python, context, path, text, updated)
    await _in_thread(path, context.sandbox.files.write_text, path, updated)
    # Show the edited region so the model can check the result without another read.
    start = text[: text.find(old)].count("\n")  # where the (first) replacement begins
    lines = updated.splitlines()
    span = args["new_string"].count("\n") + 1
    first, last = max(0, start - 2), min(len(lines), start + span + 2)
    snippet = numbered(lines[first:last], first + 1, context.config.max_line_chars)
    noun = "occurrence" if count == 1 else "occurrences"
    return f"{path}: replaced {count} {noun}.\n{snippet}"


def _replace_lines(text: str, start: int, end: int, new: str, path: str) -> str:
    """`text` with its lines `start`..`end` (1-based, inclusive) replaced by the lines of `new`;
    `end == start - 1` inserts before `start`. A missing final newline of `new` is added, except
    where the replaced lines ended the file without one."""
    lines = text.splitlines(keepends=True)
    if end < start - 1:
        raise ToolError(f"{path}: end_line {end} is before start_line {start}")
    if start > len(lines) + 1:
        raise ToolError(f"{path}: start_line {start} is past the end of the file ({len(lines)} lines)")
    if end > len(lines):
        raise ToolError(f"{path}: end_line {end} is past the end of the file ({len(lines)} lines)")
    if new and not new.endswith("\n"):
        new += "\n"
    if new and end == len(lines) and lines and not lines[-1].endswith("\n"):
        new = new[:-1]  # the file ended without a newline; so does the edited one
    return "".join([*lines[: start - 1], new, *lines[end:]])


async def edit_lines(context: ToolContext, args: dict[str, Any]) -> str:
    path, start, end, new = args["file_path"], args["start_line"], args["end_line"], args["new_string"]
    text = await read_text(context, path)
    updated = _replace_lines(text, start, end, new, path)
    if updated == text:
        raise ToolError(f"{path}: lines {start}-{end} already hold new_string; nothing to change")
    await asyncio.to_thread(refuse_breaking_python, context, path, text, updated)
    await _in_thread(path, context.sandbox.files.write_text, path, updated)
    lines = updated.splitlines()
    span = len(new.splitlines())
    first, last = max(0, start - 3), min(len(lines), start - 1 + span + 2)
    snippet = numbered(lines[first:last], first + 1, context.config.max_line_chars)
    removed, added = end - start + 1, span
    return f"{path}: replaced {removed} line{'s' * (removed != 1)} with {added}.\n{snippet}"


async def write_file(context: ToolContext, args: dict[str, Any]) -> str:
    path, content = args["file_path"], args["contents"]
    existed = await _in_thread(path, context.sandbox.files.exists, path)
    if existed and path.endswith(".py") and context.config.refuse_syntax_errors:
        try:
            before: str | None = await read_text(context, path)
        except ToolError:  # a binary or unreadable file is not Python that compiles
            before = "\0"
    else:
        before = None
    await asyncio.to_thread(refuse_breaking_python, context, path, before, content)
    await _in_thread(path, context.sandbox.files.write_text, path, content)
    verb = "overwrote" if existed else "created"
    return f"{path}: {verb} ({len(content.splitlines())} lines, {len(content.encode())} bytes)"


async def delete_file(context: ToolContext, args: dict[str, Any]) -> str:
    path = args["file_path"]
    await _in_thread(path, context.sandbox.files.delete, path)
    return f"{path}: deleted"


FILE_TOOLS = [
    Tool(
        "read_file",
        "Read a text file of the workspace. Returns numbered lines (`N|text`), at most a capped "
        "number per call, and says how many lines remain and which offset to read next.",
        parameters(
            ["path"],
            path=param("string", "file path, relative to the workspace root"),
            offset=param("integer", "first line to read, 1-based", default=1, minimum=1),
            limit=param("integer", "number of lines to read (capped)", minimum=1),
        ),
        read_file,
        kind="read",
        path_argument="path",
    ),
    Tool(
        "list_dir",
        "List a directory of the workspace: sub-directories end with '/', files show their size.",
        parameters(
            [],
            path=param("string", "directory, relative to the workspace root", default="."),
            ignore_globs=param(
                "array",
                "entry names to leave out, as globs (e.g. '*.pyc')",
                items={"type": "string"},
                default=[],
            ),
        ),
        list_dir,
    ),
    Tool(
        "glob_file_search",
        "Find files by glob pattern ('*.py' matches at any depth, '**/' any directories, "
        "'src/*.py' one level). Returns matching paths, sorted.",
        parameters(
            ["pattern"],
            pattern=param("string", "glob pattern"),
            path=param("string", "directory to search under", default="."),
        ),
        glob_file_search,
    ),
    Tool(
        "search_replace",
        "Edit a file by replacing an exact string. old_string must occur exactly once (include "
        "enough surrounding lines) unless replace_all is true. Shows the edited region.",
        parameters(
            ["file_path", "old_string", "new_string"],
            file_path=param("string", "file to edit"),
            old_string=param("string", "the exact text to replace, whitespace included"),
            new_string=param("string", "the text to put in its place"),
            replace_all=param("boolean", "replace every occurrence", default=False),
        ),
        search_replace,
        kind="edit",
        path_argument="file_path",
    ),
    Tool(
        "edit_lines",
        "Edit a file by line numbers, as read_file prints them: lines start_line to end_line "
        "(inclusive) become new_string (no lines when it is empty; end_line = start_line - 1 "
        "inserts before start_line). Shows the edited region.",
        parameters(
            ["file_path", "start_line", "end_line", "new_string"],
            file_path=param("string", "file to edit"),
            start_line=param("integer", "first line to replace, 1-based", minimum=1),
            end_line=param("integer", "last line to replace, inclusive", minimum=0),
            new_string=param("string", "the new text of those lines, indentation included"),
        ),
        edit_lines,
        kind="edit",
        path_argument="file_path",
    ),
    Tool(
        "write_file",
        "Create a file, or overwrite one, with the given contents (parent directories are created).",
        parameters(
            ["file_path", "contents"],
            file_path=param("string", "file to write"),
            contents=param("string", "the whole new contents of the file"),
        ),
        write_file,
        kind="edit",
        path_argument="file_path",
    ),
    Tool(
        "delete_file",
        "Delete a file (not a directory).",
        parameters(["file_path"], file_path=param("string", "file to delete")),
        delete_file,
        kind="edit",
        path_argument="file_path",
    ),
]
