"""Grading: SWE-bench semantics on constructed outcome sets, pytest report parsing, and real
grading in sandboxes — a fix earns reward, an empty diff or an edited test does not."""

from __future__ import annotations

import pytest
from tasks_helpers import in_sandbox

from overture.config import TasksConfig
from overture.tasks.grading import decide, grade, reward, score
from overture.tasks.pytest_report import parse_failures, parse_outcomes
from overture.tasks.snapshots import starting_base
from overture.tasks.spec import Task

F2P = ["t.py::test_a", "t.py::test_b"]
P2P = ["t.py::test_c", "t.py::test_d"]
TASK = Task("x__1", "x", "broken", F2P, P2P)


def outcomes_of(a: str | None, b: str | None, c: str | None, d: str | None) -> dict[str, str]:
    """Outcomes of F2P a, b and P2P c, d; None leaves a test out of the report (skipped, not collected)."""
    statuses = zip([*F2P, *P2P], (a, b, c, d), strict=True)
    return {test: status for test, status in statuses if status is not None}


@pytest.mark.parametrize(
    "statuses, expected",
    [
        (("PASSED", "PASSED", "PASSED", "PASSED"), "resolved"),
        (("XFAIL", "PASSED", "XFAIL", "PASSED"), "resolved"),
        (("PASSED", "FAILED", "PASSED", "PASSED"), "partial"),
        (("PASSED", None, "PASSED", "PASSED"), "partial"),  # a skipped F2P test fails
        (("PASSED", "PASSED", "FAILED", "PASSED"), "none"),  # P2P broken
        (("PASSED", "PASSED", "PASSED", None), "none"),  # P2P missing
        (("XPASS", "ERROR", "PASSED", "PASSED"), "none"),
        ((None, None, None, None), "none"),
    ],
)
def test_verdicts_follow_swe_bench(statuses, expected):
    assert decide(TASK, outcomes_of(*statuses))[0] == expected


def test_scores_binary_and_fraction():
    resolution, passed, failed, broken = decide(TASK, outcomes_of("PASSED", "FAILED", "PASSED", "PASSED"))
    assert (resolution, passed, failed, broken) == ("partial", ["t.py::test_a"], ["t.py::test_b"], [])
    assert score(TASK, resolution, passed, "binary") == 0.0
    assert score(TASK, resolution, passed, "fraction") == 0.5
    assert score(TASK, "none", passed, "fraction") == 0.0  # P2P broken: no partial credit


REPORT = """\
============================= test session starts ==============================
collected 5 items

tests/test_x.py .F.xs                                                    [100%]

=================================== FAILURES ===================================
_______________________________ test_b[a - b] ________________________________
tests/test_x.py:9: in test_b
    assert helper(2) == 5
lib/core.py:3: in helper
    return n * 2
E   assert 4 == 5
E    +  where 4 = helper(2)
=========================== short test summary info ============================
PASSED tests/test_x.py::test_a
PASSED tests/test_x.py::test_c
FAILED tests/test_x.py::test_b[a - b] - assert 4 == 5
XFAIL tests/test_x.py::test_d - known
SKIPPED [1] tests/test_x.py:20: no network
============== 1 failed, 2 passed, 1 skipped, 1 xfailed in 0.05s ===============
"""


def test_report_parsing_reads_summary_ids_even_with_dashes_in_parameters():
    known = ["tests/test_x.py::test_a", "tests/test_x.py::test_b[a - b]", "tests/test_x.py::test_e"]
    outcomes = parse_outcomes(REPORT, known)
    assert outcomes == {
        "tests/test_x.py::test_a": "PASSED",
        "tests/test_x.py::test_c": "PASSED",
        "tests/test_x.py::test_b[a - b]": "FAILED",
        "tests/test_x.py::test_d": "XFAIL",
    }
    failure = parse_failures(REPORT)["test_b[a - b]"]
    assert [(f.path, f.line, f.function) for f in failure.frames] == [
        ("tests/test_x.py", 9, "test_b"),
        ("lib/core.py", 3, "helper"),
    ]
    assert failure.frames[1].source == ["return n * 2"]
    assert failure.error == ["assert 4 == 5", " +  where 4 = helper(2)"]


def _grade_after(task: Task, edit, config: TasksConfig | None = None):
    async def body(box):
        await edit(box)
        return await grade(task, box, config or TasksConfig())

    return in_sandbox(starting_base(task), body)


def _fix(task: Task):
    async def edit(box):
        assert (await box.exec("patch -p1 -s", stdin=task.patch.encode())).exit_code == 0

    return edit


def test_the_reference_fix_resolves_and_an_empty_diff_scores_zero(numbers_task_set):
    _, tasks = numbers_task_set
    task = tasks[0]
    fixed = _grade_after(task, _fix(task))
    assert (fixed.resolution, fixed.score, fixed.reason) == ("resolved", 1.0, "")
    assert set(fixed.outcomes) >= set(task.test_ids)

    async def nothing(box):
        pass

    untouched = _grade_after(task, nothing)
    assert (untouched.resolution, untouched.score, untouched.reason) == ("none", 0.0, "empty diff")


def test_editing_the_tests_cannot_earn_reward(numbers_task_set):
    _, tasks = numbers_task_set
    task = tasks[0]
    test_file = task.FAIL_TO_PASS[0].split("::")[0]

    async def cheat(box):
        box.files.write_text(test_file, "def test_nothing():\n    pass\n")
        box.files.write_text("conftest.py", "import pytest\ncollect_ignore_glob = ['*']\n")
        box.files.write_text("pytest.ini", "[pytest]\naddopts = -p no:python\n")

    graded = _grade_after(task, cheat)
    assert sorted(graded.restored) == sorted([test_file, "conftest.py", "pytest.ini"])
    assert (graded.score, graded.reason) == (0.0, "empty diff")

    async def cheat_and_touch_library(box):
        await cheat(box)
        library = task.metadata["file"]
        box.files.write_text(library, box.files.read_text(library) + "\n# looked at it\n")

    graded = _grade_after(task, cheat_and_touch_library)
    assert graded.resolution == "none" and graded.score == 0.0
    assert graded.f2p_failed == task.FAIL_TO_PASS


def test_a_fix_that_hangs_scores_zero_with_timeout_reason(numbers_task_set):
    _, tasks = numbers_task_set
    task = tasks[0]
    library = task.metadata["file"]

    async def hang(box):
        box.files.write_text(library, "while True:\n    pass\n")

    graded = _grade_after(task, hang, TasksConfig(test_timeout_s=2))
    assert graded.score == 0.0
    assert graded.reason.startswith("timeout")


def test_partial_credit_in_fraction_mode_and_efficiency_terms_reported_apart(numbers_task_set):
    _, tasks = numbers_task_set
    task = tasks[0]
    kept = task.FAIL_TO_PASS[0]
    # The reference fix makes `kept` pass; the second FAIL_TO_PASS test does not exist, so no fix can.
    config = TasksConfig(reward="fraction", turn_cost=0.01, invalid_call_cost=0.1)
    f2p = [kept, "tests/test_core.py::test_gone"]
    partial_task = Task(task.instance_id, task.repo, "p", f2p, task.PASS_TO_PASS, task.base, task.setup_patch,
                        task.patch)  # fmt: skip
    graded = _grade_after(partial_task, _fix(partial_task), config)
    assert graded.resolution == "partial"
    assert graded.score == 0.5
    total, info = reward(graded, config, turns=4, invalid_calls=2)
    assert info["score"] == 0.5
    assert info["turn_cost"] == pytest.approx(-0.04)
    assert info["invalid_call_cost"] == pytest.approx(-0.2)
    assert total == pytest.approx(0.5 - 0.04 - 0.2)
