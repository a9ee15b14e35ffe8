"""Three real projects from PyPI, end to end through the README's commands: an environment built
for each, 20 tasks synthesized, checked, solved by the oracle and their reference fixes graded.

cachetools has a src layout, inflect runtime dependencies (more_itertools, typeguard) and hidden
folders, humanize a src layout, pytest plugins from its test extra (freezegun, pytest-benchmark,
pytest-cov), pytest's TOML configuration with `--doctest-modules` and warnings as errors.
`make test-real` fetches their sdists (the tests download nothing themselves; the environments
install from the package registry) and runs these tests. A SWE-bench instance made from the
cachetools sdist (a git history: the release, then a regression) imports, and its gold patch
resolves.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from tasks_helpers import make_swebench_instance
from typer.testing import CliRunner

from overture.cli.main import app
from overture.tasks.spec import read_tasks, write_jsonl

THIRD_PARTY = Path(__file__).parents[2] / ".cache" / "third-party"
REAL = ["cachetools-8.0.3", "inflect-7.6.0", "humanize-4.17.0"]  # = the Makefile's REAL_REPOS
TASKS = 20
runner = CliRunner()


def _run(*args: str) -> dict:
    result = runner.invoke(app, ["tasks", *args])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.real
@pytest.mark.parametrize("name", REAL)
def test_a_real_repository_gives_tasks_that_check_solve_and_grade(name, tmp_path):
    repo = THIRD_PARTY / name
    if not repo.is_dir():
        pytest.fail(f"{repo} is missing: `make test-real` fetches it (the tests download nothing)")
    out = tmp_path / "set" / "tasks.jsonl"
    made = _run("synth", "--repo", str(repo), "--out", str(out), "--n", str(TASKS))
    assert made["tasks"] == TASKS, made
    tasks = read_tasks(out)
    assert all(task.environment and task.metadata["run_limits"] for task in tasks)

    checked = _run("check", str(out))
    assert checked["ok"] >= 0.95 * TASKS, checked["bad"]
    solved = _run("solve", "--oracle", str(out), "--set", "agent.search_backend=bm25")
    assert solved["solved"] >= 0.95 * TASKS, solved["failures"]

    predictions = write_jsonl(tmp_path / "predictions.jsonl", [
        {"instance_id": task.instance_id, "model_name_or_path": "reference", "model_patch": task.patch}
        for task in tasks
    ])  # fmt: skip
    graded = _run("grade", str(out), "--predictions", str(predictions))
    assert graded["resolved"] >= 0.95 * TASKS, graded


# hashkey's line, not methodkey's (the same line, further down): with its docstring in front.
HASHKEY_BODY = '    """Return a cache key for the specified hashable arguments."""\n\n    if kwargs:\n'
HASHKEY_BODY += "        return args + _kwmark + "

KEYS_REGRESSION = """from cachetools.keys import hashkey


def test_keyword_arguments_are_part_of_the_key():
    assert hashkey(1, a=2) != hashkey(1, a=3)
"""


@pytest.mark.real
def test_a_swebench_instance_from_a_real_sdist_imports_and_its_gold_patch_resolves(tmp_path):
    source = THIRD_PARTY / "cachetools-8.0.3"
    if not source.is_dir():
        pytest.fail(f"{source} is missing: `make test-real` fetches it (the tests download nothing)")
    checkouts = tmp_path / "checkouts"
    repo = shutil.copytree(source, checkouts / "cachetools")
    instance = make_swebench_instance(
        repo, "src/cachetools/keys.py", HASHKEY_BODY + "tuple(sorted(kwargs.items()))\n",
        HASHKEY_BODY + "()\n", "tests/test_regression.py", KEYS_REGRESSION,
        [f"tests/test_keys.py::CacheKeysTest::test_{name}" for name in ("methodkey", "typedkey")],
    )  # fmt: skip
    instances = write_jsonl(tmp_path / "instances.jsonl", [instance])
    out = tmp_path / "set" / "tasks.jsonl"
    imported = _run("import", str(instances), "--checkouts", str(checkouts), "--out", str(out))
    assert imported["tasks"] == 1 and len(imported["environments"]) == 1
    assert _run("check", str(out))["ok"] == 1
    prediction = {"instance_id": instance["instance_id"], "model_name_or_path": "gold"}
    gold = write_jsonl(tmp_path / "gold.jsonl", [{**prediction, "model_patch": instance["patch"]}])
    assert _run("grade", str(out), "--predictions", str(gold))["resolved"] == 1
