"""The Task record and task files: SWE-bench instances load unchanged, bases stay relative on disk,
and a bad file is refused with the line at fault."""

from __future__ import annotations

import json

import pytest

from overture.tasks.spec import Task, TaskError, read_tasks, write_tasks

SWE_BENCH_INSTANCE = {
    "repo": "astropy/astropy",
    "instance_id": "astropy__astropy-12907",
    "base_commit": "d16bfe05a744909de4b27f5875fe0d4ed41ce607",
    "patch": "diff --git a/astropy/modeling/separable.py b/astropy/modeling/separable.py\n",
    "test_patch": "diff --git a/astropy/modeling/tests/test_separable.py b/...\n",
    "problem_statement": "Modeling's `separability_matrix` does not compute separability correctly",
    "hints_text": "",
    "created_at": "2022-03-03T15:14:54Z",
    "version": "4.3",
    "FAIL_TO_PASS": '["astropy/modeling/tests/test_separable.py::test_separable[compound_model6-result6]"]',
    "PASS_TO_PASS": '["astropy/modeling/tests/test_separable.py::test_coord_matrix"]',
    "environment_setup_commit": "298ccb478e6bf092953bca67a3d29dc6c35f6752",
}


def test_swe_bench_instance_loads_unchanged():
    task = Task.from_dict(SWE_BENCH_INSTANCE)
    assert task.FAIL_TO_PASS == [
        "astropy/modeling/tests/test_separable.py::test_separable[compound_model6-result6]"
    ]
    assert task.PASS_TO_PASS == ["astropy/modeling/tests/test_separable.py::test_coord_matrix"]
    assert task.base_commit.startswith("d16bfe05")
    assert task.version == "4.3"
    assert task.metadata["extra"] == {
        "created_at": "2022-03-03T15:14:54Z",
        "environment_setup_commit": "298ccb478e6bf092953bca67a3d29dc6c35f6752",
    }
    assert task.base == "" and task.setup_patch == ""


def test_write_then_read_keeps_every_field_and_relative_base(tmp_path):
    snapshot = tmp_path / "snapshots" / "lib-abc"
    snapshot.mkdir(parents=True)
    task = Task("lib__1", "lib", "it breaks", ["tests/test_a.py::test_x"], ["tests/test_a.py::test_y"],
                base=str(snapshot), setup_patch="--- a/x\n+++ b/x\n", patch="p", split="heldout",
                metadata={"kind": "off_by_one", "heldout_by": "function"})  # fmt: skip
    path = write_tasks(tmp_path / "tasks.jsonl", [task])
    assert json.loads(path.read_text())["base"] == "snapshots/lib-abc"
    (loaded,) = read_tasks(path)
    assert loaded == task


HEAD = '{"instance_id": "a", "repo": "r", "problem_statement": "p"'


@pytest.mark.parametrize(
    "line, message",
    [
        ("{not json", "not valid JSON"),
        (HEAD + "}", "missing field(s) FAIL_TO_PASS"),
        (HEAD + ', "FAIL_TO_PASS": []}', "FAIL_TO_PASS is empty"),
        (HEAD + ', "FAIL_TO_PASS": "[1"}', "not a JSON list"),
        (HEAD + ', "FAIL_TO_PASS": [3]}', "list of test ids"),
        (HEAD + ', "FAIL_TO_PASS": ["t"], "split": "dev"}', "split 'dev'"),
        (HEAD + ', "FAIL_TO_PASS": ["t"], "patch": 1}', "patch must be a string"),
        ("[1, 2]", "must be a JSON object"),
        (HEAD.replace('"a"', "5") + ', "FAIL_TO_PASS": ["t"]}', "instance_id must be a string"),
        (HEAD + ', "FAIL_TO_PASS": ["t"], "metadata": "x"}', "must be JSON objects"),
        (HEAD + ', "FAIL_TO_PASS": ["t"], "metadata": {"extra": 3}, "more": 1}', "must be JSON objects"),
    ],
)
def test_bad_task_lines_name_the_line_and_the_problem(tmp_path, line, message):
    path = tmp_path / "tasks.jsonl"
    good = '{"instance_id": "ok", "repo": "r", "problem_statement": "p", "FAIL_TO_PASS": ["t"]}'
    path.write_text(f"{good}\n{line}")
    with pytest.raises(TaskError) as caught:
        read_tasks(path)
    assert str(caught.value).startswith(f"{path}:2: ")
    assert message in str(caught.value)


def test_duplicate_instance_ids_are_refused(tmp_path):
    line = '{"instance_id": "same", "repo": "r", "problem_statement": "p", "FAIL_TO_PASS": ["t"]}\n'
    path = tmp_path / "tasks.jsonl"
    path.write_text(line * 2)
    with pytest.raises(TaskError, match=r"tasks.jsonl:2: instance_id 'same' appears twice"):
        read_tasks(path)


def test_missing_task_file_is_named(tmp_path):
    with pytest.raises(TaskError, match="task file not found"):
        read_tasks(tmp_path / "nope.jsonl")
