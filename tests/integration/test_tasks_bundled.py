"""The bundled repositories: each is a real project whose own suite passes in a sandbox, and the
default task source; at scale (slow) they give 500+ valid tasks the oracle solves, and synthesis
works on a third-party project fetched from PyPI as source by `make test-slow`."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from tasks_helpers import config

from overture.config import RunConfig
from overture.sandbox import SandboxPool
from overture.tasks.check import check_tasks
from overture.tasks.oracle import solve_all
from overture.tasks.run_limits import RunLimits
from overture.tasks.synthesis import library_files, run_baseline
from overture.tasks.task_sets import build_task_set, bundled_repo, bundled_repos
from overture.text import train_default_tokenizer

LIMITS_120S = RunLimits(120, 120)

THIRD_PARTY = Path(__file__).parents[2] / ".cache" / "third-party" / "inflection-0.5.1"
JOBS = os.cpu_count() or 1


def test_every_bundled_repository_passes_its_own_suite():
    repos = bundled_repos()
    assert [repo.name for repo in repos] == ["calendarium", "gridpath", "ledger", "statbox", "textkit"]

    async def main():
        async with SandboxPool(RunConfig().sandbox) as pool:
            command = "python -m pytest"
            return [await run_baseline(pool, repo.name, repo, command, LIMITS_120S) for repo in repos]

    for repo, baseline in zip(repos, asyncio.run(main()), strict=True):
        assert len(baseline.passed) >= 70, repo.name
        assert len(library_files(repo)) >= 3, repo.name


def _synthesize_check_solve(repos: list[Path], root: Path, count: int, **tasks):
    run = config(**tasks)

    async def main():
        found, stats = await build_task_set(
            repos, root / "tasks.jsonl", count, run.sandbox, run.tasks, jobs=JOBS
        )
        async with SandboxPool(run.sandbox) as pool:
            checked = await check_tasks(found, pool, run.tasks, JOBS)
            solved = await solve_all(found, pool, train_default_tokenizer(), run.agent, run.tasks, JOBS)
        return found, stats, checked, solved

    return asyncio.run(main())


@pytest.mark.slow
def test_bundled_repositories_give_500_valid_tasks_that_check_and_that_the_oracle_solves(tmp_path):
    tasks, stats, checked, solved = _synthesize_check_solve(
        bundled_repos(), tmp_path, 520, heldout_repos=["statbox"]
    )
    assert len(tasks) >= 500, [(s.repo, s.valid, s.candidates) for s in stats]
    assert [(r.instance_id, r.problems) for r in checked if not r.ok] == []
    failures = [(r.instance_id, r.why) for r in solved if not r.solved]
    assert len(failures) <= 0.01 * len(tasks), failures
    assert {task.repo for task in tasks if task.split == "heldout"} >= {"statbox"}
    assert any(task.metadata.get("heldout_by") == "function" for task in tasks)


@pytest.mark.slow
def test_synthesis_works_on_a_third_party_project_from_pypi(tmp_path):
    if not THIRD_PARTY.is_dir():
        pytest.fail(f"{THIRD_PARTY} is missing: `make test-slow` fetches it (the tests download nothing)")
    tasks, (stats,), checked, solved = _synthesize_check_solve([THIRD_PARTY], tmp_path, 12)
    assert len(tasks) == 12 and stats.clean_passing > 400
    assert [r.problems for r in checked if not r.ok] == []
    assert [r.why for r in solved if not r.solved] == []


def test_bundled_repo_names_are_checked():
    assert bundled_repo("textkit").name == "textkit"
    with pytest.raises(ValueError, match="no bundled repository named 'nope'"):
        bundled_repo("nope")
