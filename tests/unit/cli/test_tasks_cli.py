"""`overture tasks synth | check | solve --oracle`: JSON on stdout, bad input named, exit statuses."""

from __future__ import annotations

import dataclasses
import json

from tasks_helpers import make_numbers_repo
from typer.testing import CliRunner

from overture.cli.main import app
from overture.tasks.spec import read_tasks, write_tasks

runner = CliRunner()
BM25 = ["--set", "agent.search_backend=bm25"]


def _json(output: str) -> dict:
    return json.loads(output.strip().splitlines()[-1])


def _flat(output: str) -> str:
    """The output with rich's box drawing and line wrapping undone."""
    return " ".join(output.replace("│", " ").split())


def _invoke(*args: str):
    return runner.invoke(app, ["tasks", *args])


def test_synth_writes_a_task_file_and_reports_what_it_made(tmp_path):
    repo = make_numbers_repo(tmp_path)
    out = tmp_path / "set" / "tasks.jsonl"
    result = _invoke("synth", "--repo", str(repo), "--out", str(out), "--n", "3", "--seed", "5")
    assert result.exit_code == 0, result.output
    summary = _json(result.stdout)
    assert summary["tasks"] == 3 == len(read_tasks(out))
    assert summary["repos"][0]["valid"] == 3
    assert summary["repos"][0]["clean_passing"] == 11
    assert (tmp_path / "set" / "snapshots").is_dir()


def test_check_and_oracle_solve_on_a_task_file(numbers_task_set, tmp_path):
    _, tasks = numbers_task_set
    subset = write_tasks(tmp_path / "two.jsonl", tasks[:2])
    checked = _invoke("check", str(subset))
    assert checked.exit_code == 0, checked.output
    assert _json(checked.stdout) == {"checked": 2, "ok": 2, "bad": []}

    demos = tmp_path / "demos.jsonl"
    solved = _invoke("solve", str(subset), "--oracle", "--demos", str(demos), *BM25)
    assert solved.exit_code == 0, solved.output
    summary = _json(solved.stdout)
    assert (summary["tasks"], summary["solved"], summary["failures"]) == (2, 2, [])
    assert len(demos.read_text().splitlines()) == 2


def test_check_exits_1_and_names_bad_tasks(numbers_task_set, tmp_path):
    _, tasks = numbers_task_set
    bad = dataclasses.replace(tasks[0], FAIL_TO_PASS=tasks[0].PASS_TO_PASS[:1])
    subset = write_tasks(tmp_path / "bad.jsonl", [bad])
    result = _invoke("check", str(subset))
    assert result.exit_code == 1
    (problem,) = _json(result.stdout)["bad"]
    assert problem["instance_id"] == bad.instance_id
    assert any("already pass before the fix" in p for p in problem["problems"])


def test_bad_input_is_named_without_a_traceback(tmp_path):
    broken = tmp_path / "tasks.jsonl"
    broken.write_text('{"instance_id": "x"}\n')
    result = _invoke("check", str(broken))
    assert result.exit_code == 2
    assert "tasks.jsonl:1: task x: missing field(s)" in _flat(result.output)
    result = _invoke("synth", "--repo", str(tmp_path / "nope"), "--out", "x.jsonl", "--n", "1")
    assert result.exit_code == 2 and "not a directory" in _flat(result.output)
    result = _invoke("solve", str(broken))
    assert result.exit_code == 2 and "--oracle" in _flat(result.output)
    empty = tmp_path / "empty"
    (empty / "tests").mkdir(parents=True)
    (empty / "tests" / "test_x.py").write_text("def test_x():\n    assert False\n")
    result = _invoke("synth", "--repo", str(empty), "--out", str(tmp_path / "o.jsonl"), "--n", "1")
    assert result.exit_code == 2 and "no test passes on the clean code" in _flat(result.output)
