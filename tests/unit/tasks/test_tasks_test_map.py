"""The baseline run's test map (which test files call which functions) and test bytecode: a
mutant runs only the files that call its function, synthesis makes the same tasks as with the
whole suite, and the kept bytecode never stands in for a changed test file."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from overture.config import RunConfig
from overture.sandbox import SandboxPool
from overture.tasks.check import check_task
from overture.tasks.mutations import find_mutations
from overture.tasks.pytest_report import run_pytest
from overture.tasks.pytest_report import test_files as files_of
from overture.tasks.run_limits import RunLimits
from overture.tasks.snapshots import repository_files, store_snapshot
from overture.tasks.synthesis import Synthesizer, ordered_candidates, run_baseline

LIMITS_60S = RunLimits(60, 60)

CORE = '''"""Helpers that tests reach in different ways."""
import threading


def double(x):
    return x * 2


def square(x):
    return x * x


def table():
    return [square(i) for i in range(4)]


def collected():
    return 3


def in_thread():
    return 5


def run_in_thread():
    out = []
    worker = threading.Thread(target=lambda: out.append(in_thread()))
    worker.start()
    worker.join()
    return out[0]


def untested(x):
    return x - 1


def scaled(x):
    return x * 10


class Box:
    def size(self):
        return 1 + 1

    def nested(self):
        def helper(v):
            return v + 1

        return helper(1)
'''

CONFTEST = '''import pytest

from mini_kit.core import table


@pytest.fixture(scope="session")
def squares():
    return table()
'''

TEST_A = '''from mini_kit.core import Box, double, run_in_thread


def test_double():
    assert double(2) == 4


def test_box():
    assert Box().size() == 2
    assert Box().nested() == 2


def test_thread():
    assert run_in_thread() == 5
'''

TEST_B = '''from mini_kit.core import collected

THREE = collected()


def test_squares(squares):
    assert squares == [0, 1, 4, 9]


def test_three():
    assert THREE == 3


def test_factor():
    from mini_kit.extra import FACTOR  # first imported here: its top level runs in this test

    assert FACTOR == 20
'''


def make_repo(root: Path) -> Path:
    repo = root / "mini_kit"
    files = {
        "mini_kit/__init__.py": "",
        "mini_kit/core.py": CORE,
        "mini_kit/extra.py": "from mini_kit.core import scaled\n\nFACTOR = scaled(2)\n",
        "tests/conftest.py": CONFTEST,
        "tests/test_a.py": TEST_A,
        "tests/test_b.py": TEST_B,
    }
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    return repo


@pytest.fixture
def snapshot(tmp_path):
    return store_snapshot(make_repo(tmp_path), tmp_path / "snapshots")


def baseline_of(snapshot: Path, map_tests: bool = True):
    async def main():
        async with SandboxPool(RunConfig().sandbox) as pool:
            return await run_baseline(pool, "mini_kit", snapshot, "python -m pytest", LIMITS_60S, map_tests)

    return asyncio.run(main())


def test_each_function_maps_to_the_test_files_that_call_it(snapshot):
    test_map = baseline_of(snapshot).test_map
    assert test_map is not None
    expected = {
        "double": ["tests/test_a.py"],
        "Box.size": ["tests/test_a.py"],
        "Box.nested": ["tests/test_a.py"],
        "Box.nested.helper": ["tests/test_a.py"],  # a nested function, named as mutation sites name it
        "in_thread": ["tests/test_a.py"],  # called in a thread the test started
        # What a module's top level calls, any test may see: every file runs for these.
        "collected": None,  # a test module's, at collection
        "scaled": None,  # a library module's, first imported by one test
        "table": None,  # a session-scoped fixture's
        "square": None,
        "untested": [],
    }
    source = (snapshot / "mini_kit/core.py").read_text()
    mutated = {m.function for m in find_mutations(source, "mini_kit/core.py")}
    assert {"double", "Box.size", "Box.nested.helper", "untested"} <= mutated
    for function, files in expected.items():
        assert test_map.files_for("mini_kit/core.py", function) == files, function


def test_without_a_map_every_candidate_runs_the_whole_suite(snapshot):
    baseline = baseline_of(snapshot, map_tests=False)
    assert baseline.test_map is None
    synthesizer = Synthesizer(None, baseline, RunConfig().tasks, seed=0)  # type: ignore[arg-type]
    candidates = ordered_candidates(snapshot, ["mini_kit/core.py"], seed=0)
    assert {synthesizer.files_to_run(m) is None for m in candidates} == {True}


def without_addresses(text: str) -> str:
    """A statement with the object addresses a failure's repr prints (`at 0x7f...`) blanked."""
    return re.sub(r"0x[0-9a-f]+", "0x?", text)


def test_selected_tests_give_the_same_tasks_as_the_whole_suite(tmp_path):
    repo = make_repo(tmp_path)

    def synthesize(select: bool):
        config = RunConfig.model_validate({"tasks": {"select_tests": select, "pass_to_pass": 3}})
        snapshot = store_snapshot(repo, tmp_path / f"snapshots-{select}")

        async def main():
            async with SandboxPool(config.sandbox) as pool:
                command = "python -m pytest"
                baseline = await run_baseline(pool, "mini_kit", snapshot, command, LIMITS_60S, select)
                synthesizer = Synthesizer(pool, baseline, config.tasks, seed=0)
                candidates = ordered_candidates(snapshot, ["mini_kit/core.py"], seed=0)
                tasks = await synthesizer.run(candidates, wanted=100, jobs=2, progress=None)
                return {t.instance_id: t for t in tasks}, synthesizer.stats, baseline.test_map

        return asyncio.run(main())

    (selected, stats, test_map), (whole, whole_stats, _) = synthesize(True), synthesize(False)
    assert list(selected) == list(whole) and len(selected) >= 5  # the same tasks in the same order
    for instance_id, task in selected.items():
        other = whole[instance_id]
        assert (task.FAIL_TO_PASS, without_addresses(task.problem_statement)) == (
            other.FAIL_TO_PASS, without_addresses(other.problem_statement),
        )  # fmt: skip
    # PASS_TO_PASS: tests that ran beside the bug, so only of the files that call its function
    # (all files for a function called everywhere: at import, from a session fixture).
    where = {key: (t.metadata["file"], t.metadata["function"]) for key, t in selected.items()}
    calling = {key: test_map.files_for(*site) for key, site in where.items()}
    assert any(files is not None for files in calling.values())
    for instance_id, task in selected.items():
        files = calling[instance_id]
        assert task.PASS_TO_PASS and (files is None or set(files_of(task.PASS_TO_PASS)) <= set(files))
    assert stats.uncovered > 0 and whole_stats.uncovered == 0  # `untested` never ran
    assert stats.unnoticed == whole_stats.unnoticed and stats.valid == whole_stats.valid


def test_baseline_keeps_test_bytecode_in_the_snapshot_and_a_changed_test_runs_anew(snapshot, tmp_path):
    files_before = repository_files(snapshot)
    baseline_of(snapshot)
    kept = sorted(path.name for path in snapshot.rglob("*.pyc"))
    assert [name.split(".")[0] for name in kept] == ["conftest", "test_a", "test_b"]
    assert all("-pytest-" in name for name in kept)  # test modules only: no library bytecode
    assert repository_files(snapshot) == files_before
    assert store_snapshot(make_repo(tmp_path / "again"), snapshot.parent) == snapshot  # same content hash

    async def run_changed():
        async with SandboxPool(RunConfig().sandbox) as pool, pool.sandbox(snapshot) as box:
            box.files.write_text("tests/test_a.py", TEST_A.replace("== 4", "== 5"))
            return await run_pytest(box, "python -m pytest", ["tests/test_a.py"], 60)

    run = asyncio.run(run_changed())
    assert run.outcomes["tests/test_a.py::test_double"] == "FAILED"
    assert run.outcomes["tests/test_a.py::test_box"] == "PASSED"


LEAKY_STATE = '''_current = {"locale": None}


def activate(locale):
    _current["locale"] = locale


def deactivate():
    _current["locale"] = None


def greet():
    return "hello" if _current["locale"] is None else "bonjour"
'''
LEAKY_I18N_TESTS = '''from leaky.state import activate, deactivate, greet


def test_activate_then_deactivate():
    activate("fr")
    assert greet() == "bonjour"
    deactivate()
    assert greet() == "hello"
'''
LEAKY_GREET_TESTS = "from leaky.state import greet\n\n\n" + "".join(
    f"def test_greet_{i}():\n    assert greet() == 'hello'\n\n\n" for i in range(3)
)


def test_pass_to_pass_leaves_out_tests_a_bug_breaks_through_state_it_leaves_behind(tmp_path):
    # `deactivate` is called by one test file only; with it broken, the locale that file sets stays
    # set, and the other file's tests (which never call it) fail when both run, as grading runs them.
    repo = tmp_path / "leaky"
    (repo / "leaky").mkdir(parents=True)
    (repo / "leaky" / "__init__.py").write_text("")
    (repo / "leaky" / "state.py").write_text(LEAKY_STATE)
    (repo / "tests").mkdir()
    (repo / "tests" / "test_i18n.py").write_text(LEAKY_I18N_TESTS)
    (repo / "tests" / "test_greet.py").write_text(LEAKY_GREET_TESTS)
    snapshot = store_snapshot(repo, tmp_path / "snapshots")
    config = RunConfig.model_validate({"tasks": {"pass_to_pass": 10}})

    async def main():
        async with SandboxPool(config.sandbox) as pool:
            baseline = await run_baseline(pool, "leaky", snapshot, "python -m pytest", LIMITS_60S)
            synthesizer = Synthesizer(pool, baseline, config.tasks, seed=0)
            candidates = [
                mutation for mutation in ordered_candidates(snapshot, ["leaky/state.py"], seed=0)
                if mutation.function == "deactivate" and mutation.kind == "remove_statement"
            ]  # fmt: skip
            (task,) = await synthesizer.run(candidates, wanted=1, jobs=1, progress=None)
            return task, await check_task(pool, task, config.tasks)

    task, checked = asyncio.run(main())
    assert task.FAIL_TO_PASS == ["tests/test_i18n.py::test_activate_then_deactivate"]
    assert not any(test.startswith("tests/test_greet.py") for test in task.PASS_TO_PASS)
    assert checked.ok, checked.problems
