"""Per-repository environments: built with uv from what the repository declares, recorded with its
tasks, rebuilt from the record elsewhere, and what sandboxes run."""

from __future__ import annotations

import asyncio
import json
import shutil

import pytest
from agent_helpers import call_text
from tasks_helpers import make_numbers_repo, make_src_layout_repo
from typer.testing import CliRunner

from overture.cli.main import app
from overture.config import SandboxConfig
from overture.sandbox import SandboxPool
from overture.sandbox.python_env import PythonEnvironment
from overture.tasks.environment import (
    EnvironmentRecord,
    RepositoryEnvironmentError,
    as_python,
    import_paths,
    read_record,
    resolve_environment,
    write_record,
)
from overture.tasks.spec import Task, read_tasks, write_tasks

runner = CliRunner()


def _json(output: str) -> dict:
    return json.loads(output.strip().splitlines()[-1])


def _run(base, python, command):
    async def main():
        async with SandboxPool(SandboxConfig()) as pool, pool.sandbox(base, python) as box:
            return await box.exec(command)

    return asyncio.run(main())


# ----------------------------------------------------------------------------- records


def test_a_record_round_trips_and_its_key_is_its_content(tmp_path):
    record = EnvironmentRecord("3.11", ("pytest==9.2.0",), ("chunky",), ("src",), ("pytest-timeout",))
    path = write_record(tmp_path / "environments" / "chunky.json", record)
    assert read_record(path) == record
    assert read_record(path).key == record.key
    assert EnvironmentRecord("3.11", ("pytest==9.1.0",), ("chunky",), ("src",)).key != record.key


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("{not json", "not JSON"),
        ('{"format": 7}', "format 1"),
        ('{"format": 1, "python": "3.11"}', "requirements must be a list of strings"),
        ('{"format": 1, "python": "3.11", "requirements": "pytest==9"}', "requirements must be a list"),
        ('{"format": 1, "python": 3.11, "requirements": []}', "python must be a version string"),
        (
            '{"format": 1, "python": "3.11", "requirements": ["--index-url=http://x/"]}',
            "'--index-url=http://x/' is not name==version",
        ),
        (
            '{"format": 1, "python": "3.11", "requirements": [], "import_paths": ["../up"]}',
            "leaves the workspace",
        ),
    ],
)
def test_a_bad_record_is_named(tmp_path, text, named):
    path = tmp_path / "env.json"
    path.write_text(text)
    with pytest.raises(RepositoryEnvironmentError, match=named):
        read_record(path)
    with pytest.raises(RepositoryEnvironmentError, match="not readable"):
        read_record(tmp_path / "missing.json")


def test_import_paths_follow_the_layout(tmp_path):
    assert import_paths(make_src_layout_repo(tmp_path)) == ("src",)
    assert import_paths(make_numbers_repo(tmp_path)) == (".",)


def test_a_task_file_keeps_its_environment_path_relative(tmp_path):
    base, environment = tmp_path / "snapshots" / "c", tmp_path / "environments" / "c.json"
    task = Task("t-1", "chunky", "fix it", ["t.py::a"], base=str(base), environment=str(environment))
    path = write_tasks(tmp_path / "tasks.jsonl", [task])
    assert json.loads(path.read_text())["environment"] == "environments/c.json"
    moved = tmp_path / "moved"
    shutil.copytree(tmp_path, moved, ignore=shutil.ignore_patterns("moved"))
    assert read_tasks(moved / "tasks.jsonl")[0].environment == str(moved / "environments" / "c.json")


# ----------------------------------------------------------------------------- sandboxes


def test_overtures_python_loads_no_plugin_and_an_environment_loads_its_own(tmp_path):
    repo = make_src_layout_repo(tmp_path)
    show = 'python -c "import sys; print(sys.prefix)"; echo "autoload=${PYTEST_DISABLE_PLUGIN_AUTOLOAD:-on}"'
    own = _run(repo, None, show)
    assert own.stdout.splitlines() == [PythonEnvironment.running().prefix, "autoload=1"]
    _, prefix = resolve_environment(repo)
    theirs = _run(repo, as_python(prefix), show + "; python -c 'import chunky, more_itertools'")
    assert theirs.exit_code == 0, theirs.stderr
    assert theirs.stdout.splitlines() == [str(prefix.resolve()), "autoload=on"]
    # The repository's code is the workspace's, not a copy in the environment.
    assert not list(prefix.glob("lib/python*/site-packages/chunky/"))
    imported = _run(repo, as_python(prefix), "python -c 'import chunky; print(chunky.__file__)'")
    assert imported.stdout.strip() == "/workspace/src/chunky/__init__.py"


def test_what_uv_cannot_install_is_named(tmp_path):
    repo = make_src_layout_repo(tmp_path)
    with pytest.raises(RepositoryEnvironmentError, match="no-such-package-overture-test"):
        resolve_environment(repo, packages=("no-such-package-overture-test",))


# ----------------------------------------------------------------------------- end to end


def test_a_src_layout_repository_with_dependencies_and_plugins_end_to_end(tmp_path, monkeypatch):
    repo = make_src_layout_repo(tmp_path)
    out = tmp_path / "set" / "tasks.jsonl"
    made = runner.invoke(app, ["tasks", "synth", "--repo", str(repo), "--out", str(out), "--n", "4"])
    assert made.exit_code == 0, made.output
    summary = _json(made.stdout)
    assert summary["tasks"] == 4 and summary["repos"][0]["clean_passing"] == 5
    tasks = read_tasks(out)
    (record_path,) = {task.environment for task in tasks}
    record = read_record(record_path)
    assert record.import_paths == ("src",) and record.projects == ("chunky",)
    pinned = {pin.split("==")[0] for pin in record.requirements}
    assert {"more-itertools", "pytest", "pytest-timeout"} <= pinned

    # Moved to another machine: a new environment cache, the same record, no flag repeated.
    moved = tmp_path / "elsewhere"
    shutil.copytree(out.parent, moved)
    monkeypatch.setenv("OVERTURE_ENVS", str(tmp_path / "fresh-cache"))
    built = runner.invoke(app, ["tasks", "env", str(moved / "tasks.jsonl")])
    assert built.exit_code == 0, built.output
    assert list((tmp_path / "fresh-cache").glob(f"chunky-{record.key}/bin/python"))
    checked = runner.invoke(app, ["tasks", "check", str(moved / "tasks.jsonl")])
    assert checked.exit_code == 0, checked.output
    assert _json(checked.stdout) == {"checked": 4, "ok": 4, "bad": []}
    solved = runner.invoke(app, ["tasks", "solve", "--oracle", str(moved / "tasks.jsonl"),
                                 "--set", "agent.search_backend=bm25"])  # fmt: skip
    assert solved.exit_code == 0, solved.output
    assert _json(solved.stdout)["solved"] == 4


def test_the_agent_on_a_users_repository_runs_its_tests_in_the_repositorys_environment(tmp_path):
    repo = make_src_layout_repo(tmp_path)
    script = tmp_path / "script.json"
    script.write_text(json.dumps([
        call_text(("run_terminal_cmd", {"command": "python -m pytest -q 2>&1 | tail -1"})),
        call_text(("finish", {"summary": "ran the tests"})),
    ]))  # fmt: skip
    out = tmp_path / "trajectory.json"
    args = ["agent", "--repo", str(repo), "--script", str(script), "--out", str(out), "--env",
            "--set", "agent.search_backend=bm25", "Run the tests."]  # fmt: skip
    ran = runner.invoke(app, args)
    assert ran.exit_code == 0, ran.output
    assert "5 passed" in json.dumps(json.loads(out.read_text())["turns"])
