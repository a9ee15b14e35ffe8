"""Tools that run programs in the sandbox: grep (ripgrep), run_terminal_cmd, and finish.

`grep` builds a ripgrep argv (never a shell string, so a pattern cannot inject a command) and
runs it in the sandbox, where /usr is bound read-only and so `rg` is there. `finish` runs
nothing: the episode loop sees the call and ends the episode after the turn.
"""

from __future__ import annotations

import time
from typing import Any

from overture.agent.tools.base import Tool, ToolContext, ToolError, param, parameters
from overture.agent.tools.files import cut_line
from overture.sandbox import WORKSPACE_MOUNT, PathEscape
from overture.sandbox.files import inside_workspace

GREP_TIMEOUT_S = 30.0
MIN_COMMAND_TIMEOUT_S = 1.0


def _relative(path: str) -> str:
    try:
        return inside_workspace(path)
    except PathEscape as exc:
        raise ToolError(str(exc)) from None


def grep_argv(args: dict[str, Any]) -> list[str]:
    """The ripgrep command line of a grep call."""
    # Sorted by path so that the same search always reads the same (rg is multi-threaded).
    argv = ["rg", "--color=never", "--with-filename", "--sort", "path"]
    mode = args["output_mode"]
    if mode == "files_with_matches":
        argv.append("--files-with-matches")
    elif mode == "count":
        argv.append("--count")
    else:
        # A space before each line number (`path: 9: text`) makes it the token a call writes
        # (`"offset": 9`): a byte-level BPE reads ` 9` and `9` after a colon as different tokens.
        argv += ["--line-number", "--no-heading"]
        argv += ["--field-match-separator=: ", "--field-context-separator=- "]
        if args.get("context"):
            argv += ["--context", str(args["context"])]
    if args["case_insensitive"]:
        argv.append("--ignore-case")
    if args.get("glob"):
        argv += ["--glob", args["glob"]]
    # `--` so that a pattern beginning with '-' is a pattern, not an option.
    return [*argv, "--", args["pattern"], _relative(args["path"])]


async def grep(context: ToolContext, args: dict[str, Any]) -> str:
    result = await context.sandbox.exec(grep_argv(args), timeout=GREP_TIMEOUT_S)
    if result.timed_out:
        raise ToolError(f"grep timed out after {GREP_TIMEOUT_S:.0f}s; narrow the path or the glob")
    if result.exit_code == 1:
        return "no matches"
    if result.exit_code != 0:
        raise ToolError(f"ripgrep failed: {result.stderr.strip() or f'exit code {result.exit_code}'}")
    lines = [line.removeprefix("./") for line in result.stdout.splitlines()]
    limit = args.get("head_limit") or context.config.grep_head_limit
    shown = [cut_line(line, context.config.max_line_chars) for line in lines[:limit]]
    if len(lines) > limit:
        shown.append(f"[{len(lines) - limit} more lines not shown; narrow the search or raise head_limit]")
    return "\n".join(shown)


def command_timeout(context: ToolContext, asked: float | None) -> float:
    """The call's timeout, capped by 10x the default and by what is left of the episode's wall clock."""
    default = context.config.command_timeout_s
    timeout = min(asked if asked is not None else default, 10 * default)
    if context.deadline is not None:
        timeout = min(timeout, max(MIN_COMMAND_TIMEOUT_S, context.deadline - time.monotonic()))
    return timeout


async def run_terminal_cmd(context: ToolContext, args: dict[str, Any]) -> str:
    timeout = command_timeout(context, args.get("timeout"))
    result = await context.sandbox.exec(args["command"], timeout=timeout)
    parts = [f"exit code: {result.exit_code}"]
    if result.timed_out:
        parts[0] = f"timed out after {timeout:g}s (the command was killed)"
    if result.stdout:
        parts.append("stdout:\n" + result.stdout.rstrip("\n"))
    if result.stderr:
        parts.append("stderr:\n" + result.stderr.rstrip("\n"))
    if not result.stdout and not result.stderr:
        parts.append("(no output)")
    return "\n".join(parts)


async def finish(context: ToolContext, args: dict[str, Any]) -> str:
    return "episode finished"


SHELL_TOOLS = [
    Tool(
        "grep",
        "Search file contents with a regular expression (ripgrep syntax; .gitignore'd and hidden "
        "files are skipped). Modes: 'content' (matching lines as 'path: line: text', context lines "
        "as 'path- line- text'), 'files_with_matches' (paths), 'count' (path:count).",
        parameters(
            ["pattern"],
            pattern=param("string", "regular expression"),
            path=param("string", "file or directory to search", default="."),
            glob=param("string", "only files matching this glob, e.g. '*.py'"),
            case_insensitive=param("boolean", "ignore case", default=False),
            context=param("integer", "lines of context around each match (content mode)", minimum=0),
            output_mode=param(
                "string", "what to return", enum=["content", "files_with_matches", "count"], default="content"
            ),
            head_limit=param("integer", "at most this many output lines", minimum=1),
        ),
        grep,
    ),
    Tool(
        "run_terminal_cmd",
        f"Run a shell command in the workspace ({WORKSPACE_MOUNT}, no network) and return its exit "
        "code, stdout and stderr (long output is cut in the middle). The command is killed after "
        "timeout seconds.",
        parameters(
            ["command"],
            command=param("string", "shell command line (run by /bin/sh -c)"),
            timeout=param("number", "seconds before the command is killed", minimum=1),
        ),
        run_terminal_cmd,
        kind="run",
    ),
    Tool(
        "finish",
        "End the task: call it once the work is done (or cannot be done), with a short summary.",
        parameters(["summary"], summary=param("string", "what was done, in a few sentences")),
        finish,
        kind="finish",
    ),
]
