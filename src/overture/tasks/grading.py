"""Grading an episode's workspace with SWE-bench semantics, and the reward it earns.

Before the tests run, the workspace keeps only the changes a fix is made of — edits to (or
removals of) the base's existing files that are neither tests nor test configuration, and new
`.py` modules inside the base's existing packages. Every other changed path is put back as the
starting workspace had it, or removed: test files (`test_*.py`, `*_test.py`, `conftest.py`,
anything under a `tests`/`test`/`testing` folder), pytest and packaging configuration
(`pytest.ini`, `.pytest.ini`, `pytest.toml`, `.pytest.toml`, `tox.ini`, `setup.cfg`,
`pyproject.toml`, `setup.py`), bytecode caches, `.pth` files, hidden paths, and new files at
the top level or outside packages (which could shadow a module pytest imports, or register a
plugin through package metadata). Editing the tests therefore earns nothing. Then:

- an empty diff (nothing left changed) scores 0, reason `empty diff`; the diff that is graded
  (its first `GRADED_DIFF_CHARS` characters) is kept in the grade and in `reward_info["diff"]`;
- `test_patch`, when the task has one, is applied;
- the files of FAIL_TO_PASS and PASS_TO_PASS run with pytest under grading's witness
  (`overture.tasks.witness`): outcomes come from a plugin that reports each test phase over a
  pipe, keyed and numbered, not from printed output or a report file; a run past the task's
  limits (`overture.tasks.run_limits`: those its repository was measured to need, else
  `tasks.test_timeout_s`) scores 0, reason `timeout`.

A test passes when pytest reports PASSED or XFAIL (SWE-bench); a synthesized task lists in
`metadata["xfail"]` the tests that were XFAIL on the clean code, and for it XFAIL passes only
those (so code that calls `pytest.xfail()` does not turn a failure into a pass). Anything else —
FAILED, ERROR, SKIPPED, not reported — does not pass. `resolved`: every FAIL_TO_PASS passes and
every PASS_TO_PASS still passes; `partial`: some FAIL_TO_PASS pass, PASS_TO_PASS intact;
otherwise `none`. The score is 1/0 for `resolved` (`tasks.reward = "binary"`) or the passing
share of FAIL_TO_PASS with PASS_TO_PASS intact (`"fraction"`). Efficiency terms are taken off
the score and reported on their own: `tasks.turn_cost`, a share of the score per assistant turn
(so a failure costs nothing more for being long: RL is never taught to give up sooner, and being
right outweighs being fast while turn_cost × max_turns < 1), and `tasks.invalid_call_cost` per
invalid call. `grade` never raises: whatever fails inside it (restoring,
diffing, running, reading) is a grade of 0, resolution `none`, reason `grading failed: ...`.

Threat model. The code under test runs inside the pytest process, so it can change anything
there. What grading relies on, and what is caught:
- nothing of the workspace runs before the witness: it is loaded with `-p` from the sandbox's
  private `/tmp` under a random name, and what could run earlier (conftest files, configuration,
  `.pth` files, new top-level modules that shadow pytest's dependencies) is restored above;
- the witness's report is a pipe, not a file: records cannot be taken back, and reopening the
  pipe through `/proc` to read them away is refused by the kernel;
- lines written to the pipe by anyone else lack the per-run key's MAC, a record read away leaves
  a gap in the numbering, a process killed or exited early (`os._exit`, a killed parent) leaves
  no `end` or `exit`: each is `tampering`;
- tripwires for attacks on what grading does not read: code of pytest or pluggy changed during
  the session (a monkeypatched `_pytest.junitxml._NodeReporter`, `_multicall`), and the JUnit
  report named in argv — never read for outcomes — rewritten after the session (an `atexit`
  hook) are `tampering` too (functions and classes replaced or removed are named; additions are
  not, and state held in objects is left to the canaries);
- three canaries — clones of the task's own tests (FAIL_TO_PASS first) with the same node id,
  function and fixtures, one that must pass, one fail, one error — run among the tests; whatever
  makes failing tests pass (patched `Function.runtest` or `TestReport`, hook wrappers registered
  through the `Config` found with `gc` or through `pytest_plugins`, forging by the tests' names)
  turns them too, and a run with outcomes whose canaries are missing or wrong is `tampering`.
Not caught: code written against this witness in particular — one that finds the plugin in
memory, reads its key or its list of canary items, and forges records or spares the canaries by
object identity. Nothing inside one process can stop that; the remedy would be a test runner
whose verdict is computed outside the process that imports the code (e.g. each test in a fresh
process, judged by its exit alone). `tampering` scores 0 like `none`; it names the cause.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from overture.config import TasksConfig
from overture.sandbox import Sandbox, SandboxError
from overture.sandbox.diff import read_entry
from overture.tasks.pytest_report import is_test_file, outcome_passes
from overture.tasks.run_failure import output_tail
from overture.tasks.run_limits import task_limits
from overture.tasks.spec import Task
from overture.tasks.witness import run_witnessed

Resolution = Literal["resolved", "partial", "none", "tampering"]
CONFIG_FILES = frozenset({
    "pytest.ini", ".pytest.ini", "pytest.toml", ".pytest.toml",
    "tox.ini", "setup.cfg", "pyproject.toml", "setup.py",
})  # fmt: skip
NEVER_KEPT_SUFFIXES = (".pyc", ".pyo", ".pth")

GRADED_DIFF_CHARS = 65_536
REASON_CHARS = 500


@dataclass
class Grade:
    """What grading found; `reason` says why a grade is 0 without a test verdict."""

    resolution: Resolution
    score: float
    reason: str = ""
    f2p_passed: list[str] = field(default_factory=list)
    f2p_failed: list[str] = field(default_factory=list)
    p2p_failed: list[str] = field(default_factory=list)
    outcomes: dict[str, str] = field(default_factory=dict)
    restored: list[str] = field(default_factory=list)
    duration_s: float = 0.0
    diff: str = ""
    canaries: dict[str, str] = field(default_factory=dict)  # canary role → the status it came back with

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def passes(task: Task, test: str, status: str | None) -> bool:
    """Whether one outcome counts as passing for `task` (see the module docstring on XFAIL)."""
    return outcome_passes(test, status, task.metadata.get("xfail"))


def decide(task: Task, outcomes: dict[str, str]) -> tuple[Resolution, list[str], list[str], list[str]]:
    """SWE-bench's verdict from per-test outcomes: (resolution, F2P passed, F2P failed, P2P failed)."""
    f2p_passed = [t for t in task.FAIL_TO_PASS if passes(task, t, outcomes.get(t))]
    f2p_failed = [t for t in task.FAIL_TO_PASS if not passes(task, t, outcomes.get(t))]
    p2p_failed = [t for t in task.PASS_TO_PASS if not passes(task, t, outcomes.get(t))]
    if not f2p_failed and not p2p_failed:
        return "resolved", f2p_passed, f2p_failed, p2p_failed
    if f2p_passed and not p2p_failed:
        return "partial", f2p_passed, f2p_failed, p2p_failed
    return "none", f2p_passed, f2p_failed, p2p_failed


def score(task: Task, resolution: Resolution, f2p_passed: list[str], mode: str) -> float:
    if mode == "binary":
        return 1.0 if resolution == "resolved" else 0.0
    if resolution == "none":
        return 0.0
    return len(f2p_passed) / len(task.FAIL_TO_PASS)


def is_kept(rel: str, base: Path) -> bool:
    """Whether a changed path is part of a fix grading keeps (see the module docstring)."""
    path = PurePosixPath(rel)
    if (
        is_test_file(rel)
        or path.name in CONFIG_FILES
        or path.suffix in NEVER_KEPT_SUFFIXES
        or any(part.startswith(".") or part == "__pycache__" for part in path.parts)
    ):
        return False
    existing = base / rel
    if existing.is_file() and not existing.is_symlink():
        return all(not (base / parent).is_symlink() for parent in path.parents if str(parent) != ".")
    package = base / path.parent
    return (
        path.suffix == ".py" and len(path.parts) > 1
        and package.is_dir() and not package.is_symlink() and (package / "__init__.py").is_file()
    )  # fmt: skip


async def restore_unkept(sandbox: Sandbox) -> list[str]:
    """Put every changed path grading does not keep back as the starting workspace had it; those paths."""
    base = sandbox.base
    restored = [rel for rel in sandbox.changed_paths() if not is_kept(rel, base)]
    if not restored:
        return []
    # Whatever the agent put there (file, link, directory) goes; the base's file comes back.
    removal = await sandbox.exec(["rm", "-rf", "--", *restored], timeout=30)
    if removal.exit_code != 0:
        raise SandboxError(f"could not restore {restored[:3]}: {output_tail(removal.stderr, 200)}")
    for rel in restored:
        kind, content = read_entry(base, rel)
        if kind == "file":
            assert isinstance(content, bytes)
            sandbox.files.write_bytes(rel, content)
    return restored


async def patch_workspace(sandbox: Sandbox, patch: str) -> str:
    """Apply a `patch -p1` diff inside the sandbox; "" on success, else what `patch` said."""
    applied = await sandbox.exec(
        "patch -p1 --forward --batch --no-backup-if-mismatch -s", stdin=patch.encode(), timeout=30
    )
    if applied.exit_code == 0:
        return ""
    return output_tail(applied.stdout + applied.stderr, 300) or f"patch exited with {applied.exit_code}"


async def grade(task: Task, sandbox: Sandbox, config: TasksConfig | None = None) -> Grade:
    """Grade the sandbox's workspace for `task` (the module docstring says how). Never raises: a
    failure anywhere in grading is a grade of 0 whose reason names it."""
    config = config or TasksConfig()
    started = time.monotonic()
    found: dict[str, Any] = {}  # what grading learnt before anything failed
    try:
        return await _grade(task, sandbox, config, started, found)
    except Exception as exc:  # a workspace built to break the grader must still get an answer
        reason = f"grading failed: {_describe(exc)}"
        return Grade("none", 0.0, reason, duration_s=time.monotonic() - started, **found)


def _describe(exc: BaseException) -> str:
    try:
        text = f"{type(exc).__name__}: {exc}"
    except Exception:  # an exception whose message itself fails
        text = type(exc).__name__
    return text if len(text) <= REASON_CHARS else text[:REASON_CHARS] + "..."


async def _grade(task: Task, sandbox: Sandbox, config: TasksConfig, started: float, found: dict) -> Grade:
    try:
        restored = await restore_unkept(sandbox)
    except (SandboxError, OSError) as exc:
        return Grade("none", 0.0, f"the workspace could not be restored for grading: {exc}")
    found["restored"] = restored

    diff = sandbox.diff()
    if len(diff) > GRADED_DIFF_CHARS:
        diff = diff[:GRADED_DIFF_CHARS] + f"\n[diff cut: {len(diff)} characters in all]\n"
    found["diff"] = diff

    def without_verdict(reason: str, resolution: Resolution = "none", **more: Any) -> Grade:
        return Grade(resolution, 0.0, reason, duration_s=time.monotonic() - started, **found, **more)

    if not diff.strip():
        return without_verdict("empty diff")
    if task.test_patch:
        problem = await patch_workspace(sandbox, task.test_patch)
        if problem:
            return without_verdict(f"test_patch does not apply: {problem}")
    limits = task_limits(task, config, sandbox.config)
    run = await run_witnessed(
        sandbox, task.test_cmd, task.test_ids, limits.timeout_s, [task.FAIL_TO_PASS, task.PASS_TO_PASS],
        limits.cpu_seconds,
    )  # fmt: skip
    if run.result.timed_out:
        return without_verdict(f"timeout: tests ran past {limits.timeout_s:g}s", outcomes=run.outcomes)
    if run.tampering:
        return without_verdict(
            f"tampering: {run.tampering}", "tampering", outcomes=run.outcomes, canaries=run.canaries
        )
    if run.failure:
        return without_verdict(run.failure, outcomes=run.outcomes, canaries=run.canaries)
    resolution, f2p_passed, f2p_failed, p2p_failed = decide(task, run.outcomes)
    reason = "" if run.outcomes else f"no test outcomes (pytest exit code {run.result.exit_code})"
    return Grade(
        resolution, score(task, resolution, f2p_passed, config.reward), reason,
        f2p_passed, f2p_failed, p2p_failed, run.outcomes, restored, time.monotonic() - started, diff,
        run.canaries,
    )  # fmt: skip


def reward(
    grade: Grade, config: TasksConfig, turns: int = 0, invalid_calls: int = 0
) -> tuple[float, dict[str, Any]]:
    """The episode's reward and its terms: the task score less its share per turn
    (`tasks.turn_cost`), minus the cost of invalid calls."""
    turn_cost = grade.score * config.turn_cost * turns
    invalid_cost = config.invalid_call_cost * invalid_calls
    info = {
        "score": grade.score,
        "resolution": grade.resolution,
        "reason": grade.reason,
        "turn_cost": -turn_cost,
        "invalid_call_cost": -invalid_cost,
        "f2p_passed": len(grade.f2p_passed),
        "f2p_total": len(grade.f2p_passed) + len(grade.f2p_failed),
        "p2p_failed": len(grade.p2p_failed),
        "restored": grade.restored,
        "grading_s": round(grade.duration_s, 3),
        "diff": grade.diff,
    }
    return grade.score - turn_cost - invalid_cost, info
