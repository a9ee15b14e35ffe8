"""The witness's report: what the grader accepts (keyed, numbered, whole, canaries right) and what
it calls tampering; grading that answers whatever fails; and honest grading on the bundled tasks."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import sys
import types

import pytest
from tasks_helpers import config, in_sandbox

from overture.config import TasksConfig
from overture.sandbox import ExecResult, SandboxPool
from overture.tasks.grading import grade
from overture.tasks.snapshots import starting_base
from overture.tasks.spec import Task
from overture.tasks.task_sets import build_task_set, bundled_repos
from overture.tasks.witness import read_report

KEY = b"k" * 32
RESULT = ExecResult(0, "", "", False, False, 0.1)
TEST = "tests/test_x.py::test_a"


def _line(seq: int, record: dict, key: bytes = KEY) -> bytes:
    signed = f"{seq} {json.dumps(record)}".encode()
    return signed + b" " + hmac.new(key, signed, hashlib.sha256).hexdigest().encode() + b"\n"


def _phases(test: str, outcome: str = "passed", canary: str = "", failed_when: str = "call") -> list[dict]:
    records = []
    for when in ("setup", "call", "teardown"):
        result = outcome if when == failed_when else "passed"
        records.append({"id": test, "when": when, "outcome": result, "xfail": False, "canary": canary})
    return records


def _honest(test_outcome: str = "passed") -> list[dict]:
    return [
        {"event": "start"},
        {"event": "canaries", "placed": {"pass": TEST, "fail": TEST, "error": TEST}, "problem": ""},
        *_phases(TEST, "failed", "fail"),
        *_phases(TEST, test_outcome),
        *_phases(TEST, "passed", "pass"),
        *_phases(TEST, "failed", "error", failed_when="setup"),
        {"event": "end", "exitstatus": 0, "changed": []},
        {"event": "exit", "report_rewritten": False},
    ]


def _report(records: list[dict]) -> bytes:
    return b"".join(_line(seq, record) for seq, record in enumerate(records))


def test_an_honest_report_gives_outcomes_and_canaries_apart():
    run = read_report(_report(_honest()), False, KEY, RESULT)
    assert (run.tampering, run.failure) == ("", "")
    assert run.outcomes == {TEST: "PASSED"}
    assert run.canaries == {"pass": "PASSED", "fail": "FAILED", "error": "ERROR"}
    assert read_report(_report(_honest("failed")), False, KEY, RESULT).outcomes == {TEST: "FAILED"}


def _swap_fail_canary(records: list[dict]) -> list[dict]:
    return [{**r, "outcome": "passed"} if r.get("canary") == "fail" else r for r in records]


@pytest.mark.parametrize(
    "report, reason",
    [
        (_report(_honest()) + b"0 {} " + b"0" * 64 + b"\n", "is not the witness's"),
        (_report(_honest())[:-1], "middle of a line"),
        (b"".join(_line(s, r) for s, r in enumerate(_honest()) if s != 3), "came where record 3 belongs"),
        (b"".join(_line(s, r, b"x" * 32) for s, r in enumerate(_honest())), "is not the witness's"),
        (_report(_honest()[:-2]), "stops before the session's end"),
        (_report(_honest()[:-1]), "stops before the process's exit"),
        (_report([*_honest()[:-1], _honest()[-2], _honest()[-1]]), "stops before the process's exit"),
        (_report([*_honest(), {"event": "start"}]), "does not begin"),
        (
            _report([*_honest()[:-2], {"event": "end", "changed": ["_pytest.junitxml._NodeReporter.f"]},
                     _honest()[-1]]),
            "pytest's own code was changed during the run: _pytest.junitxml._NodeReporter.f",
        ),
        (_report([*_honest()[:-1], {"event": "exit", "report_rewritten": True}]), "JUnit report was"),
        (_report(_honest()[1:]), "does not begin"),
        (_report(_swap_fail_canary(_honest())), "the canary that must fail came back PASSED"),
        (_report([r for r in _honest() if r.get("canary") != "error"]), "must error came back without"),
        (_report([r for r in _honest() if r.get("event") != "canaries"]), "were not all run"),
        (_report([*_honest()[:-2], {"id": 3}, *_honest()[-2:]]), "without id, phase or outcome"),
        (_report([*_honest()[:-2], {**_honest()[3], "canary": "x"}, *_honest()[-2:]]), "role that does not"),
    ],
)
def test_a_report_that_is_not_whole_or_whose_canaries_turned_is_tampering(report, reason):
    run = read_report(report, False, KEY, RESULT)
    assert reason in run.tampering
    assert run.failure == ""


def test_overflow_is_tampering_and_no_report_at_all_is_a_failure_without_verdict():
    assert "grew past" in read_report(b"", True, KEY, RESULT).tampering
    silent = read_report(b"", False, KEY, ExecResult(127, "", "sh: nosuch: not found", False, False, 0.1))
    assert silent.tampering == "" and "never reported" in silent.failure and "nosuch" in silent.failure


def test_a_run_without_outcomes_needs_no_canaries():
    records = [
        {"event": "start"}, {"event": "canaries", "placed": {}, "problem": ""},
        {"event": "end", "changed": []}, {"event": "exit", "report_rewritten": False},
    ]  # fmt: skip
    run = read_report(_report(records), False, KEY, RESULT)
    assert (run.outcomes, run.tampering, run.failure) == ({}, "", "")


def _fixed(task: Task):
    async def body(box):
        assert (await box.exec("patch -p1 -s", stdin=task.patch.encode())).exit_code == 0
        graded = await grade(task, box, TasksConfig(test_timeout_s=120))
        return graded, box.changed_paths()

    return body


def test_the_witness_leaves_the_workspace_as_the_fix_left_it(numbers_task_set):
    task = numbers_task_set[1][0]
    graded, changed = in_sandbox(starting_base(task), _fixed(task))
    assert graded.resolution == "resolved"
    assert changed == [task.metadata["file"]]


def test_a_test_command_that_runs_no_pytest_gives_no_verdict(numbers_task_set):
    task = numbers_task_set[1][0]
    other = Task(task.instance_id, task.repo, "s", task.FAIL_TO_PASS, task.PASS_TO_PASS, task.base,
                 task.setup_patch, task.patch, test_cmd="true")  # fmt: skip
    graded, _ = in_sandbox(starting_base(other), _fixed(other))
    assert (graded.resolution, graded.score) == ("none", 0.0)
    assert "never reported" in graded.reason


def test_any_failure_inside_grading_is_a_zero_grade_with_its_reason(numbers_task_set):
    task = numbers_task_set[1][0]
    broken = Task(task.instance_id, task.repo, "s", task.FAIL_TO_PASS, task.PASS_TO_PASS, task.base,
                  task.setup_patch, task.patch, metadata={**task.metadata, "xfail": 5})  # fmt: skip
    graded, _ = in_sandbox(starting_base(broken), _fixed(broken))
    assert (graded.resolution, graded.score) == ("none", 0.0)
    assert graded.reason.startswith("grading failed: TypeError")
    assert graded.restored == [] and graded.diff  # what was learnt before the failure is kept

    async def closed_first(box):
        await box.close()
        return await grade(task, box)

    graded = in_sandbox(starting_base(task), closed_first)
    assert (graded.resolution, graded.score) == ("none", 0.0)
    assert graded.reason


def test_the_reference_fix_resolves_every_bundled_repositorys_tasks(tmp_path):
    repos = bundled_repos()
    run = config()

    async def main():
        found, _ = await build_task_set(
            repos, tmp_path / "tasks.jsonl", 2 * len(repos), run.sandbox, run.tasks, seed=5, jobs=2
        )
        async with SandboxPool(run.sandbox) as pool:
            grades = []
            for task in found:
                async with pool.sandbox(starting_base(task)) as box:
                    grades.append((task, *await _fixed(task)(box)))
        return grades

    grades = asyncio.run(main())
    assert {task.repo for task, _, _ in grades} == {repo.name for repo in repos}
    for task, graded, _ in grades:
        assert (graded.resolution, graded.score, graded.reason) == ("resolved", 1.0, ""), task.instance_id
        assert graded.canaries == {"pass": "PASSED", "fail": "FAILED", "error": "ERROR"}


PROBE = """
class Reporter:
    def fail(self):
        return 'failed'

    def passed(self):
        return 'passed'


def helper(x=1):
    return x


RUNNER_CLASS = None
"""


def test_the_code_tripwire_names_replaced_code_and_not_what_pytest_adds(monkeypatch):
    from overture.tasks import witness_plugin

    probe = types.ModuleType("_pytest._overture_probe")
    exec(PROBE, probe.__dict__)
    monkeypatch.setitem(sys.modules, probe.__name__, probe)
    before = witness_plugin.code_of_pytest()
    assert witness_plugin.changed_code(before) == []
    probe.RUNNER_CLASS = type("Runner", (), {})  # as `_pytest.doctest` sets its runner lazily
    probe.Reporter.extra = lambda self: 3
    assert witness_plugin.changed_code(before) == []
    probe.helper.__code__ = (lambda x=1: x + 1).__code__  # the same function object, other code
    probe.Reporter.fail = probe.Reporter.passed
    assert witness_plugin.changed_code(before) == [
        "_pytest._overture_probe.Reporter.fail", "_pytest._overture_probe.helper",
    ]  # fmt: skip
