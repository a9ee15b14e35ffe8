"""SWE-bench instances over local checkouts: imported as a task set that checks, and whose gold
patch grades resolved; what cannot be imported is named."""

from __future__ import annotations

import json

import pytest
from tasks_helpers import make_numbers_repo, make_swebench_instance
from typer.testing import CliRunner

from overture.cli.main import app
from overture.tasks.spec import Task, TaskError, read_tasks, write_jsonl
from overture.tasks.swebench import checkout_of, export_commit, import_instances

runner = CliRunner()
REGRESSION = """from numbers_kit.core import clamp


def test_clamp_keeps_the_high_bound():
    assert clamp(15, 0, 10) == 10
"""


def _json(output: str) -> dict:
    return json.loads(output.strip().splitlines()[-1])


@pytest.fixture
def numbers_instance(tmp_path):
    checkouts = tmp_path / "checkouts"
    repo = make_numbers_repo(checkouts)
    (repo / ".git").rename(tmp_path / "not-a-git-dir")  # the helper's stand-in `.git`
    instance = make_swebench_instance(
        repo, "numbers_kit/core.py", "        return high\n", "        return value\n",
        "tests/test_regression.py", REGRESSION, ["tests/test_core.py::test_clamp_below_low_gives_low"],
    )  # fmt: skip
    instances = write_jsonl(tmp_path / "instances.jsonl", [instance])
    return checkouts, instances, instance


def test_an_instance_imports_checks_and_its_gold_patch_resolves(numbers_instance, tmp_path):
    checkouts, instances, instance = numbers_instance
    out = tmp_path / "set" / "tasks.jsonl"
    imported = runner.invoke(app, ["tasks", "import", str(instances), "--checkouts", str(checkouts),
                                   "--out", str(out), "--no-env"])  # fmt: skip
    assert imported.exit_code == 0, imported.output
    assert _json(imported.stdout) == {"out": str(out), "tasks": 1, "environments": []}
    (task,) = read_tasks(out)
    assert task.metadata["extra"]["environment_setup_commit"] == instance["environment_setup_commit"]
    base = tmp_path / "set" / "snapshots" / task.base
    assert "return value" in (base / "numbers_kit" / "core.py").read_text()
    assert not (base / ".git").exists()

    checked = runner.invoke(app, ["tasks", "check", str(out)])
    assert _json(checked.stdout) == {"checked": 1, "ok": 1, "bad": []}, checked.output
    gold = write_jsonl(tmp_path / "gold.jsonl", [
        {"instance_id": task.instance_id, "model_name_or_path": "gold", "model_patch": instance["patch"]},
    ])  # fmt: skip
    graded = runner.invoke(app, ["tasks", "grade", str(out), "--predictions", str(gold)])
    assert _json(graded.stdout)["resolved"] == 1, graded.output


def test_what_cannot_be_imported_is_named(numbers_instance, tmp_path):
    checkouts, _, instance = numbers_instance
    with pytest.raises(TaskError, match=r"example/elsewhere: no git checkout in .* \(looked for example__"):
        checkout_of(checkouts, "example/elsewhere")
    repo = checkout_of(checkouts, "example/numbers_kit")
    with pytest.raises(TaskError, match="commit 0123456789ab cannot be read"):
        export_commit(repo, "0123456789ab", tmp_path / "snapshots", "numbers_kit")
    with pytest.raises(TaskError, match="'HEAD; rm -rf /' is not a commit hash"):
        export_commit(repo, "HEAD; rm -rf /", tmp_path / "snapshots", "numbers_kit")
    no_base = Task.from_dict({**instance, "base_commit": ""})
    with pytest.raises(TaskError, match="no base_commit"):
        import_instances([no_base], checkouts, tmp_path / "set" / "tasks.jsonl", None)
