"""Grading: SWE-bench semantics on constructed outcome sets, pytest report parsing, and real
grading in sandboxes — a fix earns reward, an empty diff or an edited test does not."""

from __future__ import annotations

import dataclasses

import pytest
from tasks_helpers import in_sandbox, make_numbers_repo

from overture.config import TasksConfig
from overture.tasks.grading import decide, grade, is_kept, reward, score
from overture.tasks.pytest_report import run_pytest
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


REPORTED = """\
import pytest


class TestGroup:
    def test_in_class(self):
        assert True


@pytest.mark.parametrize("text", ["a - b", "c"])
def test_dashes(text):
    print("=========== short test summary info ===========")
    print("PASSED tests/test_x.py::test_never_ran")
    assert text == "c"


@pytest.mark.xfail(strict=True)
def test_expected_failure():
    assert False


def test_skipped():
    pytest.skip("not here")


def test_error(missing_fixture):
    pass
"""


def test_outcomes_come_from_the_junit_report_not_from_printed_output(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text(REPORTED)

    async def body(box):
        return await run_pytest(box, "python -m pytest", ["tests/test_x.py::test_dashes[a - b]"], 60)

    run = in_sandbox(tmp_path, body)
    assert run.outcomes == {
        "tests/test_x.py::TestGroup::test_in_class": "PASSED",
        "tests/test_x.py::test_dashes[a - b]": "FAILED",
        "tests/test_x.py::test_dashes[c]": "PASSED",
        "tests/test_x.py::test_expected_failure": "XFAIL",
        "tests/test_x.py::test_skipped": "SKIPPED",
        "tests/test_x.py::test_error": "ERROR",
    }
    failure = run.failures["tests/test_x.py::test_dashes[a - b]"]
    assert [(f.path, f.function) for f in failure.frames] == [("tests/test_x.py", "test_dashes")]
    assert failure.frames[0].source == ['assert text == "c"']
    assert failure.error[0] == "AssertionError: assert 'a - b' == 'c'"
    assert not [p for p in tmp_path.rglob("*.xml")]  # the report is read and removed


@pytest.mark.parametrize(
    "path, kept",
    [
        ("numbers_kit/core.py", True),  # an edited module
        ("numbers_kit/helpers.py", True),  # a new module in an existing package
        ("tests/test_core.py", False),
        ("numbers_kit/test_inline.py", False),
        ("conftest.py", False),
        ("numbers_kit/conftest.py", False),
        ("pytest.ini", False),
        (".pytest.ini", False),
        ("pytest.toml", False),
        ("pyproject.toml", False),
        ("helpers.py", False),  # new at the top level: could shadow a module
        ("iniconfig.py", False),
        ("evil-1.0.dist-info/entry_points.txt", False),
        ("numbers_kit/__pycache__/core.cpython-311.pyc", False),
        ("numbers_kit/x.pth", False),
        ("newpkg/__init__.py", False),
        ("numbers_kit/data.json", False),  # new non-Python file
    ],
)
def test_only_the_changes_a_fix_is_made_of_are_kept(tmp_path, path, kept):
    repo = make_numbers_repo(tmp_path)
    assert is_kept(path, repo) is kept


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


PLUGIN = """import pytest


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    report.outcome = "passed"
    return report
"""


def _write(box, files: dict[str, str]) -> None:
    for path, text in files.items():
        box.files.write_text(path, text)


HOSTILE = {
    "pytest.ini with a plugin": {".pytest.ini": "[pytest]\naddopts = -p evilplug\n", "evilplug.py": PLUGIN},
    "pytest.toml with a plugin": {
        "pytest.toml": '[pytest]\naddopts = ["-p", "evilplug"]\n', "evilplug.py": PLUGIN
    },
    "entry point": {
        "evil-1.0.dist-info/METADATA": "Name: evil\nVersion: 1.0\n",
        "evil-1.0.dist-info/entry_points.txt": "[pytest11]\nevil = evilplug\n",
        "evilplug.py": PLUGIN,
    },
    "conftest plugin": {"numbers_kit/conftest.py": PLUGIN},
    "shadowed pytest dependency": {"iniconfig.py": "import os\nprint('1 passed')\nos._exit(0)\n"},
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_workspaces_earn_nothing(numbers_task_set, name):
    _, tasks = numbers_task_set
    task = tasks[0]
    library = task.metadata["file"]

    async def cheat(box):
        _write(box, HOSTILE[name])
        box.files.write_text(library, box.files.read_text(library) + "\n# looked at it\n")

    graded = _grade_after(task, cheat)
    assert (graded.resolution, graded.score) == ("none", 0.0)
    assert graded.f2p_failed == task.FAIL_TO_PASS
    assert set(HOSTILE[name]) <= set(graded.restored)


def test_printing_a_fake_summary_or_calling_xfail_earns_nothing(numbers_task_set):
    _, tasks = numbers_task_set
    task = tasks[0]
    library = task.metadata["file"]
    ids = "\\n".join(f"PASSED {t}" for t in task.test_ids)
    fake = f'print("=== short test summary info ===\\n{ids}\\n=== 9 passed in 0.01s ===")\n'
    xfail = "import pytest\n\n\ndef _give_up(*args, **kwargs):\n    pytest.xfail('known')\n\n\n"

    async def print_fake(box):
        box.files.write_text(library, fake + box.files.read_text(library))

    async def xfail_everything(box):
        source = box.files.read_text(library)
        function = task.metadata["function"]
        box.files.write_text(library, xfail + source + f"\n\n{function} = _give_up\n")

    for cheat in (print_fake, xfail_everything):
        graded = _grade_after(task, cheat)
        assert (graded.resolution, graded.score) == ("none", 0.0), cheat.__name__


def test_forged_bytecode_and_a_symlinked_test_folder_are_undone(numbers_task_set):
    _, tasks = numbers_task_set
    task = tasks[0]

    async def cheat(box):
        box.files.write_bytes("tests/__pycache__/test_core.cpython-311-pytest-9.2.0.pyc", b"forged")
        await box.exec("mv tests elsewhere && ln -s /tmp tests")
        await _fix(task)(box)

    graded = _grade_after(task, cheat)
    assert (graded.resolution, graded.score) == ("resolved", 1.0)  # the real fix still counts
    assert "tests" in graded.restored


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
    assert info["turn_cost"] == pytest.approx(-0.5 * 0.04)  # 1% of the score a turn, four turns
    assert info["invalid_call_cost"] == pytest.approx(-0.2)
    assert total == pytest.approx(0.5 * (1 - 0.04) - 0.2)
    failed = dataclasses.replace(graded, score=0.0, resolution="none")
    assert reward(failed, config, turns=8)[1]["turn_cost"] == 0.0  # no cost for a long failure

