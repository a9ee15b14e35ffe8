"""Bug synthesis on a real repository: only mutations a test notices become tasks, statements never
show the change, snapshots carry no history, and splits hold out functions and repositories."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from tasks_helpers import config, make_numbers_repo

from overture.config import RunConfig
from overture.sandbox import SandboxPool
from overture.tasks.mutations import find_mutations
from overture.tasks.pytest_report import Failure, Frame
from overture.tasks.run_limits import RunLimits
from overture.tasks.snapshots import patched_files, starting_base, store_snapshot
from overture.tasks.spec import Task, read_tasks
from overture.tasks.statement import MIN_CONTAINED, write_statement
from overture.tasks.synthesis import (
    Synthesizer,
    assign_splits,
    changed_lines,
    ordered_candidates,
    run_baseline,
)

LIMITS_60S = RunLimits(60, 60)


def test_tasks_are_valid_and_cover_several_functions(numbers_task_set):
    root, tasks = numbers_task_set
    assert len(tasks) == 8
    assert read_tasks(root / "set" / "tasks.jsonl") == tasks
    assert len({task.metadata["function"] for task in tasks}) >= 3
    assert len({task.instance_id for task in tasks}) == len(tasks)
    for task in tasks:
        assert task.FAIL_TO_PASS and not set(task.FAIL_TO_PASS) & set(task.PASS_TO_PASS)
        assert patched_files(task.setup_patch) == ["numbers_kit/core.py"]
        assert task.metadata["function"] != "untested"


def test_statements_never_show_the_change(numbers_task_set):
    _, tasks = numbers_task_set
    for task in tasks:
        clean = (Path(task.base) / task.metadata["file"]).read_text()
        buggy = (starting_base(task) / task.metadata["file"]).read_text()
        statement_lines = [line.strip() for line in task.problem_statement.splitlines()]
        for line in changed_lines(clean, buggy):
            secret = line.strip()
            if len(secret) >= MIN_CONTAINED:
                assert secret not in task.problem_statement, (task.instance_id, secret)
            else:
                assert secret not in statement_lines, (task.instance_id, secret)
        assert "+++" not in task.problem_statement and "@@" not in task.problem_statement
        assert task.FAIL_TO_PASS[0] in task.problem_statement


def test_mutations_no_test_notices_are_rejected(tmp_path):
    repo = make_numbers_repo(tmp_path)
    snapshot = store_snapshot(repo, tmp_path / "snapshots")
    source = (snapshot / "numbers_kit" / "core.py").read_text()
    unnoticed = [m for m in find_mutations(source, "numbers_kit/core.py") if m.function == "untested"][:4]
    assert unnoticed

    async def main():
        async with SandboxPool(RunConfig().sandbox) as pool:
            baseline = await run_baseline(pool, "numbers_kit", snapshot, "python -m pytest", LIMITS_60S)
            synthesizer = Synthesizer(pool, baseline, config().tasks, seed=0)
            return await synthesizer.run(unnoticed, wanted=10, jobs=2, progress=None), synthesizer.stats

    found, stats = asyncio.run(main())
    assert found == []
    assert stats.unnoticed == len(unnoticed) and stats.valid == 0


def test_snapshot_drops_history_and_caches_and_is_stored_once(tmp_path):
    repo = make_numbers_repo(tmp_path)
    first = store_snapshot(repo, tmp_path / "snapshots")
    again = store_snapshot(repo, tmp_path / "snapshots")
    assert first == again
    assert not (first / ".git").exists()
    assert not (first / "numbers_kit" / "__pycache__").exists()
    assert (first / "numbers_kit" / "core.py").read_text() == (repo / "numbers_kit" / "core.py").read_text()
    (repo / "numbers_kit" / "core.py").write_text("# changed\n")
    assert store_snapshot(repo, tmp_path / "snapshots") != first


def test_starting_base_links_the_snapshot_and_copies_only_the_patched_file(numbers_task_set):
    _, tasks = numbers_task_set
    task = tasks[0]
    base = starting_base(task)
    assert starting_base(task) == base  # made once
    snapshot_file = os.path.join(task.base, "tests", "test_core.py")
    assert os.stat(base / "tests" / "test_core.py").st_ino == os.stat(snapshot_file).st_ino
    mutated = base / task.metadata["file"]
    assert os.stat(mutated).st_ino != os.stat(os.path.join(task.base, task.metadata["file"])).st_ino
    assert mutated.read_text() != (Path(task.base) / task.metadata["file"]).read_text()


def _task(repo: str, function: str) -> Task:
    return Task(f"{repo}-{function}", repo, "p", ["t.py::t"], metadata={"file": "a.py", "function": function})


def test_splits_hold_out_whole_repositories_and_whole_functions():
    tasks = [_task(repo, f"f{i}") for repo in ("alpha", "beta") for i in range(40) for _ in range(2)]
    assign_splits(tasks, heldout_repos=["beta"], fraction=0.25, seed=1)
    beta = [t for t in tasks if t.repo == "beta"]
    assert all(t.split == "heldout" and t.metadata["heldout_by"] == "repository" for t in beta)
    alpha = [t for t in tasks if t.repo == "alpha"]
    held = {t.metadata["function"] for t in alpha if t.split == "heldout"}
    trained = {t.metadata["function"] for t in alpha if t.split == "train"}
    assert not held & trained  # both tasks of a function fall on the same side
    assert 4 <= len(held) <= 18
    assert all(t.metadata["heldout_by"] == "function" for t in alpha if t.split == "heldout")


def test_a_task_share_holds_out_single_bugs_of_functions_that_keep_train_tasks():
    tasks = [
        Task(f"alpha-f{i}-{j}", "alpha", "p", ["t.py::t"], metadata={"file": "a.py", "function": f"f{i}"})
        for i in range(40) for j in range(4)
    ]  # fmt: skip
    assign_splits(tasks, heldout_repos=[], fraction=0.0, seed=1, task_fraction=0.25)
    held = [t for t in tasks if t.split == "heldout"]
    assert 20 <= len(held) <= 60
    assert all(t.metadata["heldout_by"] == "task" for t in held)
    trained = {t.metadata["function"] for t in tasks if t.split == "train"}
    assert len({t.metadata["function"] for t in held} & trained) >= 10  # same functions, other bugs
    again = [Task(t.instance_id, t.repo, "p", ["t.py::t"], metadata=dict(t.metadata)) for t in tasks]
    assign_splits(again, heldout_repos=[], fraction=0.0, seed=1, task_fraction=0.25)
    assert [t.split for t in again] == [t.split for t in tasks]  # fixed by the seed and the ids
    assign_splits(again, heldout_repos=[], fraction=0.0, seed=2, task_fraction=0.25)
    assert [t.split for t in again] != [t.split for t in tasks]
    assign_splits(again, heldout_repos=[], fraction=0.0, seed=1, task_fraction=0.0)
    assert all(t.split == "train" and "heldout_by" not in t.metadata for t in again)


def test_statement_quotes_test_lines_but_never_library_lines():
    failure = Failure(
        frames=[
            Frame("tests/test_core.py", 12, "test_mean", ["assert mean([1, 2, 6]) == 3"]),
            Frame("numbers_kit/core.py", 19, "mean", ["return len(values) / sum(values)"]),
        ],
        error=["ZeroDivisionError: division by zero"],
    )
    statement = write_statement(
        "numbers_kit", ["tests/test_core.py::test_mean"], {"tests/test_core.py::test_mean": failure},
        ["    return len(values) / sum(values)", "    return sum(values) / len(values)"], seed="x",
    )  # fmt: skip
    assert "assert mean([1, 2, 6]) == 3" in statement
    assert 'File "numbers_kit/core.py", line 19, in mean' in statement
    assert "len(values) / sum(values)" not in statement and "sum(values) / len(values)" not in statement
    assert "ZeroDivisionError: division by zero" in statement


def test_statement_hides_object_addresses_which_change_from_run_to_run():
    failure = Failure(
        frames=[Frame("tests/test_graph.py", 8, "test_edges", ["assert g.connected(0, 1)"])],
        error=["assert False", " +  where connected = <kit.Graph object at 0x7faf77abf950>.connected",
               "assert to_hex(255) == '0xff'"],
    )  # fmt: skip
    rerun = Failure(failure.frames, [line.replace("7faf77abf950", "7f01") for line in failure.error])
    test = "tests/test_graph.py::test_edges"
    statements = [write_statement("kit", [test], {test: f}, [], "x") for f in (failure, rerun)]
    assert statements[0] == statements[1]
    assert "<kit.Graph object at 0x...>.connected" in statements[0] and "'0xff'" in statements[0]


def test_nothing_a_sandbox_can_see_names_the_kind_of_bug(numbers_task_set):
    _, tasks = numbers_task_set
    for task in tasks:
        kind = task.metadata["kind"]
        assert kind not in task.instance_id
        assert kind not in str(starting_base(task)) and task.instance_id not in str(starting_base(task))


def test_bugs_go_only_into_functions_of_at_most_max_function_lines(tmp_path):
    snapshot = store_snapshot(make_numbers_repo(tmp_path), tmp_path / "snapshots")
    every = ordered_candidates(snapshot, ["numbers_kit/core.py"], seed=0)
    lines = {"clamp": 9, "mean": 5, "running_total": 8, "untested": 7}  # def to last line, in CORE
    assert {mutation.function for mutation in every} == set(lines)
    for limit in (9, 8, 7, 5, 4):
        kept = ordered_candidates(snapshot, ["numbers_kit/core.py"], seed=0, max_function_lines=limit)
        assert {mutation.function for mutation in kept} == {f for f, n in lines.items() if n <= limit}
        assert sorted(kept, key=repr) == sorted((m for m in every if lines[m.function] <= limit), key=repr)


def test_the_tasks_are_the_first_valid_candidates_whatever_finishes_first(tmp_path):
    repo = make_numbers_repo(tmp_path)
    snapshot = store_snapshot(repo, tmp_path / "snapshots")
    candidates = ordered_candidates(snapshot, ["numbers_kit/core.py"], seed=0)

    async def main(jobs: int) -> list[str]:
        async with SandboxPool(RunConfig().sandbox) as pool:
            baseline = await run_baseline(pool, "numbers_kit", snapshot, "python -m pytest", LIMITS_60S)
            synthesizer = Synthesizer(pool, baseline, config().tasks, seed=0)
            tasks = await synthesizer.run(candidates, wanted=5, jobs=jobs, progress=None)
            assert synthesizer.stats.valid == len(tasks)
            return [task.instance_id for task in tasks]

    one_at_a_time = asyncio.run(main(jobs=1))
    assert len(one_at_a_time) == 5
    assert asyncio.run(main(jobs=3)) == one_at_a_time
