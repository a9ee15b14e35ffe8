"""Grading an episode's workspace with SWE-bench semantics, and the reward it earns.

Before the tests run, every file the agent changed that could change what the tests say is put
back as the task's starting workspace had it (or removed, when the agent created it): test
files (`test_*.py`, `*_test.py`, anything under a `tests`/`test`/`testing` directory, the files
of the graded test ids), `conftest.py`, pytest and packaging configuration (`pytest.ini`,
`tox.ini`, `setup.cfg`, `pyproject.toml`, `setup.py`), and new top-level modules that would
shadow the standard library or pytest. Editing the tests therefore earns nothing. Then:

- an empty diff (nothing left changed) scores 0, reason `empty diff`;
- `test_patch`, when the task has one, is applied;
- FAIL_TO_PASS and PASS_TO_PASS run with pytest; a run past `tasks.test_timeout_s` scores 0,
  reason `timeout`.

A test passes when pytest reports PASSED or XFAIL; anything else (FAILED, ERROR, XPASS, skipped,
not collected) does not. `resolved`: every FAIL_TO_PASS passes and every PASS_TO_PASS still
passes; `partial`: some FAIL_TO_PASS pass, PASS_TO_PASS intact; otherwise `none`. The score is
1/0 for `resolved` (`tasks.reward = "binary"`) or the passing share of FAIL_TO_PASS with
PASS_TO_PASS intact (`"fraction"`). Efficiency terms (`tasks.turn_cost` per assistant turn,
`tasks.invalid_call_cost` per invalid call) are subtracted and reported on their own.
"""

from __future__ import annotations

import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from overture.config import TasksConfig
from overture.sandbox import Sandbox
from overture.sandbox.diff import read_entry
from overture.tasks.pytest_report import PASSING, run_pytest
from overture.tasks.spec import Task

Resolution = Literal["resolved", "partial", "none"]
TEST_DIRS = frozenset({"tests", "test", "testing"})
CONFIG_FILES = frozenset({"conftest.py", "pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml", "setup.py"})
SHADOWED = frozenset({*sys.stdlib_module_names, "pytest", "_pytest", "pluggy", "py"})


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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def decide(task: Task, outcomes: dict[str, str]) -> tuple[Resolution, list[str], list[str], list[str]]:
    """SWE-bench's verdict from per-test outcomes: (resolution, F2P passed, F2P failed, P2P failed)."""
    f2p_passed = [t for t in task.FAIL_TO_PASS if outcomes.get(t) in PASSING]
    f2p_failed = [t for t in task.FAIL_TO_PASS if outcomes.get(t) not in PASSING]
    p2p_failed = [t for t in task.PASS_TO_PASS if outcomes.get(t) not in PASSING]
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


def is_protected(rel: str, task: Task, base: Path) -> bool:
    """Whether a changed path is restored before grading (see the module docstring)."""
    path = PurePosixPath(rel)
    name = path.name
    if name in CONFIG_FILES or any(part in TEST_DIRS for part in path.parts[:-1]):
        return True
    if name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py")):
        return True
    if rel in {test.split("::", 1)[0] for test in task.test_ids}:
        return True
    top = path.parts[0].removesuffix(".py")
    return top in SHADOWED and not (base / path.parts[0]).exists()


async def restore_protected(task: Task, sandbox: Sandbox) -> list[str]:
    """Put protected paths back as the starting workspace had them; the paths restored."""
    base = sandbox.base
    changed = [rel for rel in sandbox.workspace.changed_paths() if is_protected(rel, task, base)]
    if not changed:
        return []
    # Whatever the agent put there (file, link, directory) goes; the base's file comes back.
    await sandbox.exec(["rm", "-rf", "--", *changed], timeout=30)
    for rel in changed:
        kind, content = read_entry(base, rel)
        if kind == "file":
            assert isinstance(content, bytes)
            sandbox.files.write_bytes(rel, content)
    return changed


async def patch_workspace(sandbox: Sandbox, patch: str) -> str:
    """Apply a `patch -p1` diff inside the sandbox; "" on success, else what `patch` said."""
    applied = await sandbox.exec(
        "patch -p1 --forward --batch --no-backup-if-mismatch -s", stdin=patch.encode(), timeout=30
    )
    if applied.exit_code == 0:
        return ""
    return (applied.stdout + applied.stderr).strip()[-300:] or f"patch exited with {applied.exit_code}"


async def grade(task: Task, sandbox: Sandbox, config: TasksConfig | None = None) -> Grade:
    """Grade the sandbox's workspace for `task` (the module docstring says how)."""
    config = config or TasksConfig()
    started = time.monotonic()
    restored = await restore_protected(task, sandbox)

    def zero(reason: str, **found: Any) -> Grade:
        return Grade("none", 0.0, reason, restored=restored, duration_s=time.monotonic() - started, **found)

    if not sandbox.diff().strip():
        return zero("empty diff")
    if task.test_patch:
        problem = await patch_workspace(sandbox, task.test_patch)
        if problem:
            return zero(f"test_patch does not apply: {problem}")
    run = await run_pytest(sandbox, task.test_cmd, task.test_ids, config.test_timeout_s)
    if run.result.timed_out:
        return zero(f"timeout: tests ran past {config.test_timeout_s:g}s", outcomes=run.outcomes)
    resolution, f2p_passed, f2p_failed, p2p_failed = decide(task, run.outcomes)
    reason = "" if run.outcomes else f"no test outcomes (pytest exit code {run.result.exit_code})"
    return Grade(
        resolution, score(task, resolution, f2p_passed, config.reward), reason,
        f2p_passed, f2p_failed, p2p_failed, run.outcomes, restored, time.monotonic() - started,
    )  # fmt: skip


def reward(
    grade: Grade, config: TasksConfig, turns: int = 0, invalid_calls: int = 0
) -> tuple[float, dict[str, Any]]:
    """The episode's reward and its terms: the task score minus the efficiency costs."""
    turn_cost = config.turn_cost * turns
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
    }
    return grade.score - turn_cost - invalid_cost, info
