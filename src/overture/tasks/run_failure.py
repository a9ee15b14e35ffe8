"""Why a test run gave no outcomes to use, in words a user can act on.

A run of a repository's tests that fails as a whole — the clean run of synthesis, `tasks check`
before or after the fix — is explained by `explain_run`, which names the cause when the output or
the exit says it:

- a module the sandbox's Python cannot import (`ModuleNotFoundError`), by name: the repository
  needs an environment that has it;
- a resource limit that stopped it — wall clock, CPU time, memory, file size, processes, open
  files — with the setting that holds it and its value;
- pytest's own refusal: collection errors (the first lines of the first one), an internal
  error, bad usage, no tests collected;

and otherwise quotes the end of the output. Quoted output is cut at a line boundary
(`output_tail`), never inside a word.
"""

from __future__ import annotations

import re

from overture.config import SandboxConfig
from overture.sandbox import ExecResult
from overture.tasks.run_limits import RunLimits

TAIL_CHARS = 600
SIGKILL_EXIT = 137  # a shell's 128 + 9: what the sandbox reports when the kernel kills the command
MISSING_MODULE = re.compile(r"No module named '([\w.]+)'")
COLLECTION_ERROR = re.compile(r"^_+ ERROR collecting (.+?) _+$", re.MULTILINE)
# pytest's exit codes (`pytest.ExitCode`).
PYTEST_EXITS = {2: "was interrupted", 3: "failed internally", 4: "was used wrongly", 5: "collected no tests"}
# Errors a process prints when it hits a limit it is not killed for: the setting behind each.
LIMIT_ERRORS = (
    ("MemoryError", "memory", "memory_mb", "MB"),
    ("Cannot allocate memory", "memory", "memory_mb", "MB"),
    ("File too large", "file size", "max_file_mb", "MB"),
    ("Too many open files", "open files", "max_open_files", ""),
    ("can't start new thread", "processes", "max_processes", ""),
    ("fork: Resource temporarily unavailable", "processes", "max_processes", ""),
)


def output_tail(text: str, limit: int = TAIL_CHARS) -> str:
    """The end of `text` within `limit` characters, starting at a line (or, for one long line, at
    a word), with "…" where something was cut off before it."""
    text = text.strip()
    if len(text) <= limit:
        return text
    window = text[-limit:]
    cut = window.find("\n")
    if cut < 0:
        cut = window.find(" ")
    return "…" + (window[cut + 1 :] if 0 <= cut < len(window) - 1 else window).lstrip()


def missing_modules(text: str) -> list[str]:
    """The modules an import failed to find, in the order the output names them, each once."""
    return list(dict.fromkeys(MISSING_MODULE.findall(text)))


def explain_run(result: ExecResult, run: RunLimits, limits: SandboxConfig) -> str:
    """Why the test run `result` (run under `run`'s time limits, in sandboxes of `limits`)
    produced no usable outcomes; the first cause its exit or output shows."""
    output = f"{result.stdout}\n{result.stderr}"
    if result.timed_out:
        return f"the tests ran past the time limit ({run.timeout_setting} = {run.timeout_s:g}s)"
    if result.exit_code == SIGKILL_EXIT:
        return _killed(result, run, limits)
    if modules := missing_modules(output):
        return (
            f"the sandbox's Python cannot import {', '.join(modules)}: the repository's tests or code "
            "need it, and the environment they run in does not have it"
        )
    for marker, what, setting, unit in LIMIT_ERRORS:
        if marker in output:
            value = getattr(limits, setting)
            return f"the tests hit the {what} limit (sandbox.{setting} = {value}{' ' if unit else ''}{unit})"
    if collected := COLLECTION_ERROR.search(output):
        first = output[collected.end() :].strip().splitlines()[:8]
        body = "\n".join(first)
        return f"pytest could not collect {collected.group(1)}:\n{output_tail(body)}"
    if "INTERNALERROR" in output:
        return f"pytest failed internally:\n{output_tail(_from_first(output, 'INTERNALERROR'))}"
    doing = PYTEST_EXITS.get(result.exit_code)
    said = output_tail(output)
    if doing:
        return f"pytest {doing} (exit code {result.exit_code})" + (f":\n{said}" if said else "")
    return f"the test command exited with {result.exit_code}" + (f":\n{said}" if said else "")


def _killed(result: ExecResult, run: RunLimits, limits: SandboxConfig) -> str:
    """A kill by the kernel: past the CPU-time limit, or the memory limit of the sandbox's cgroup
    (the exit does not say which)."""
    return (
        f"the tests were killed after {result.duration_s:.0f}s, by the CPU-time limit "
        f"({run.cpu_setting} = {run.cpu_seconds}) or the memory limit "
        f"(sandbox.memory_mb = {limits.memory_mb} MB)"
    )


def _from_first(text: str, marker: str) -> str:
    """`text` from the line holding the first `marker` on."""
    start = text.find(marker)
    return text[text.rfind("\n", 0, start) + 1 :]
