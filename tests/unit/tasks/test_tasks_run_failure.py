"""A test run that fails as a whole names its cause: a missing module, the limit that stopped it,
pytest's refusal; quoted output never starts inside a word."""

from __future__ import annotations

import asyncio
import dataclasses
import difflib

import pytest

from overture.config import RunConfig, SandboxConfig
from overture.sandbox import ExecResult, SandboxPool
from overture.tasks.check import check_tasks
from overture.tasks.run_failure import explain_run, missing_modules, output_tail
from overture.tasks.run_limits import RunLimits
from overture.tasks.snapshots import starting_base, store_snapshot
from overture.tasks.synthesis import SynthesisError, run_baseline

LIMITS_60S = RunLimits(60, 60)

LIMITS = SandboxConfig(cpu_seconds=45, memory_mb=1500, max_file_mb=32)


def result(stdout: str = "", stderr: str = "", exit_code: int = 1, timed_out: bool = False) -> ExecResult:
    return ExecResult(exit_code, stdout, stderr, timed_out, truncated=False, duration_s=12.0)


def test_the_tail_starts_at_a_line_or_a_word_never_inside_one():
    lines = "\n".join(f"line {i} of the output, some words" for i in range(100))
    tail = output_tail(lines, 200)
    assert tail.startswith("…line ") and tail.endswith("line 99 of the output, some words")
    assert len(tail) <= 201
    one_line = " ".join(f"word{i}" for i in range(200))
    tail = output_tail(one_line, 100)
    assert tail.startswith("…word") and tail.endswith("word199") and len(tail) <= 101
    assert output_tail("  short  ", 100) == "short"
    assert output_tail("x" * 300, 100) == "…" + "x" * 100  # no line or word to cut at


CAUSES = [
    (result(timed_out=True, exit_code=-9), "time limit (tasks.test_timeout_s = 60s)"),
    (
        result(stderr="Killed\n", exit_code=137),
        "sandbox.cpu_seconds = 45) or the memory limit (sandbox.memory_mb = 1500 MB)",
    ),
    (result(stdout="E   ModuleNotFoundError: No module named 'typeguard'\n" * 3), "cannot import typeguard:"),
    (result(stdout="    x = bytearray(n)\nE   MemoryError\n"), "memory limit (sandbox.memory_mb = 1500 MB)"),
    (result(stderr="OSError: [Errno 27] File too large\n"), "file size limit (sandbox.max_file_mb = 32 MB)"),
    (result(stdout="no tests ran\n", exit_code=5), "collected no tests (exit code 5):\nno tests ran"),
    (
        result(stdout="INTERNALERROR> Traceback\nINTERNALERROR> KeyError: 'x'\n", exit_code=3),
        "failed internally:\nINTERNALERROR> Traceback",
    ),
    (result(stdout="FAILED tests/test_a.py::test_a\n1 failed\n"), "exited with 1:\nFAILED tests/test_a.py"),
]


@pytest.mark.parametrize(("run", "says"), CAUSES)
def test_each_cause_is_named_with_the_setting_behind_it(run, says):
    assert says in explain_run(run, RunLimits(60, 45), LIMITS)


def test_a_collection_error_shows_its_first_lines():
    output = (
        "============ ERRORS ============\n"
        "____ ERROR collecting tests/test_dates.py ____\n"
        "'no_cover' not found in `markers` configuration option\n"
        "=========== short test summary info ===========\n"
    )
    said = explain_run(result(stdout=output, exit_code=2), RunLimits(60, 45), LIMITS)
    assert said.startswith("pytest could not collect tests/test_dates.py:\n'no_cover' not found")


def test_modules_are_named_once_in_the_order_seen():
    text = "No module named 'b'\nNo module named 'a.sub'\nNo module named 'b'\n"
    assert missing_modules(text) == ["b", "a.sub"]


def test_synthesis_names_the_module_a_clean_run_misses(tmp_path):
    repo = tmp_path / "needs_dep"
    (repo / "needs_dep").mkdir(parents=True)
    (repo / "needs_dep" / "__init__.py").write_text("import not_installed_anywhere\n")
    (repo / "tests").mkdir()
    (repo / "tests" / "test_it.py").write_text("import needs_dep\n\n\ndef test_it():\n    assert needs_dep\n")
    snapshot = store_snapshot(repo, tmp_path / "snapshots", "needs_dep")

    async def main():
        async with SandboxPool(RunConfig().sandbox) as pool:
            await run_baseline(pool, "needs_dep", snapshot, "python -m pytest", LIMITS_60S)

    with pytest.raises(SynthesisError) as raised:
        asyncio.run(main())
    assert "cannot import not_installed_anywhere" in str(raised.value)


def test_check_names_the_environment_error_instead_of_every_failing_test(numbers_tasks):
    task = dataclasses.replace(
        numbers_tasks[0], test_cmd="python -c 'import not_installed_anywhere' && python -m pytest"
    )

    async def main():
        async with SandboxPool(RunConfig().sandbox) as pool:
            return await check_tasks([task], pool, RunConfig().tasks, jobs=1)

    (checked,) = asyncio.run(main())
    assert len(checked.problems) == 2, checked.problems  # before the fix and with it, nothing else
    assert all("cannot import not_installed_anywhere" in problem for problem in checked.problems)
    assert not any("PASS_TO_PASS" in problem for problem in checked.problems)


def test_a_bug_that_stops_collection_before_the_fix_is_a_valid_task(numbers_tasks):
    """Failing at import is one way for FAIL_TO_PASS to fail: `check` takes the run without
    outcomes as a problem only where tests should pass."""
    task = next(t for t in numbers_tasks if all("[" not in test for test in t.FAIL_TO_PASS))
    path, _, function = task.FAIL_TO_PASS[0].partition("::")
    before = (starting_base(task) / path).read_text()
    after = before + f"\n{function}()  # at import: the module fails to collect while the bug is there\n"
    diff = "".join(difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), f"a/{path}", f"b/{path}"
    ))  # fmt: skip
    collecting = dataclasses.replace(task, test_patch=diff, PASS_TO_PASS=[])

    async def main():
        async with SandboxPool(RunConfig().sandbox) as pool:
            return await check_tasks([collecting], pool, RunConfig().tasks, jobs=1)

    (checked,) = asyncio.run(main())
    assert checked.problems == []
