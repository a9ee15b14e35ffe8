"""Shared helpers of the task tests: a small real repository with a pytest suite (one function the
suite never calls), a task set synthesized from it once per session, and a sandbox runner."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
from pathlib import Path
from typing import Any

from overture.config import RunConfig
from overture.sandbox import SandboxPool
from overture.tasks.spec import Task
from overture.tasks.task_sets import build_task_set

CORE = '''"""Small numeric helpers."""


def clamp(value, low, high):
    """`value` limited to [low, high]."""
    if low > high:
        raise ValueError("low above high")
    if value < low:
        return low
    if value > high:
        return high
    return value


def mean(values):
    """Arithmetic mean of a non-empty list."""
    if not values:
        raise ValueError("mean of nothing")
    return sum(values) / len(values)


def running_total(values, start=0):
    """Prefix sums of `values`, beginning at `start`."""
    totals = []
    current = start
    for index in range(len(values)):
        current += values[index]
        totals.append(current)
    return totals


def untested(values):
    """No test calls this: no mutation of it can become a task."""
    best = values[0]
    for value in values[1:]:
        if value > best:
            best = value
    return best - 1
'''

TESTS = '''import pytest

from numbers_kit.core import clamp, mean, running_total


def test_clamp_below_low_gives_low():
    assert clamp(-5, 0, 10) == 0


def test_clamp_above_high_gives_high():
    assert clamp(15, 0, 10) == 10


def test_clamp_inside_is_unchanged():
    assert clamp(5, 0, 10) == 5


def test_clamp_rejects_inverted_bounds():
    with pytest.raises(ValueError, match="low above high"):
        clamp(1, 5, 0)


def test_mean_of_three():
    assert mean([1, 2, 6]) == 3


def test_mean_of_nothing_fails():
    with pytest.raises(ValueError, match="nothing"):
        mean([])


def test_running_total_with_start():
    assert running_total([1, 2, 3], 10) == [11, 13, 16]


@pytest.mark.parametrize("values, expected", [([], []), ([4], [4]), ([1, -1], [1, 0])])
def test_running_total_cases(values, expected):
    assert running_total(values) == expected


@pytest.mark.xfail(reason="documented limitation", strict=True)
def test_mean_of_strings():
    assert mean(["a"]) == "a"
'''


def make_numbers_repo(root: Path) -> Path:
    """A repository whose suite passes, with `.git` history and caches a snapshot must drop."""
    repo = root / "numbers_kit"
    (repo / "numbers_kit").mkdir(parents=True)
    (repo / "numbers_kit" / "__init__.py").write_text("")
    (repo / "numbers_kit" / "core.py").write_text(CORE)
    (repo / "tests").mkdir()
    (repo / "tests" / "test_core.py").write_text(TESTS)
    (repo / "pyproject.toml").write_text('[project]\nname = "numbers_kit"\nversion = "0.1.0"\n\n'
                                         '[tool.pytest.ini_options]\ntestpaths = ["tests"]\n')  # fmt: skip
    (repo / ".git").mkdir()
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (repo / "numbers_kit" / "__pycache__").mkdir()
    (repo / "numbers_kit" / "__pycache__" / "core.cpython-311.pyc").write_bytes(b"\0stale")
    return repo


def config(**tasks: Any) -> RunConfig:
    run = RunConfig()
    run.tasks = run.tasks.model_copy(update=tasks)
    run.agent = run.agent.model_copy(update={"search_backend": "bm25"})
    return run


def synthesize(root: Path, count: int, **tasks: Any) -> list[Task]:
    repo = make_numbers_repo(root)
    out = root / "set" / "tasks.jsonl"
    run = config(**tasks)
    found, _ = asyncio.run(build_task_set([repo], out, count, run.sandbox, run.tasks, seed=3))
    return found


def in_sandbox(base: Path, body) -> Any:
    """`await body(sandbox)` in a fresh sandbox over `base`; its result."""

    async def main():
        async with SandboxPool(RunConfig().sandbox) as pool, pool.sandbox(base) as box:
            return await body(box)

    return asyncio.run(main())


SRC_LAYOUT_PYPROJECT = """[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "chunky"
version = "0.3.0"
dependencies = ["more-itertools>=10"]

[project.optional-dependencies]
test = ["pytest-timeout"]

[tool.pytest.ini_options]
markers = ["slowish: tests that take a while"]
addopts = "--strict-markers"
"""

SRC_LAYOUT_CODE = '''"""Pairs and totals, over more-itertools."""

from importlib.metadata import version

from more_itertools import chunked

__version__ = version("chunky")


def pairs(items):
    return [tuple(chunk) for chunk in chunked(items, 2)]


def total(items):
    result = 0
    for item in items:
        result += item
    return result


def largest(items):
    best = None
    for item in items:
        if best is None or item > best:
            best = item
    return best
'''

SRC_LAYOUT_TESTS = '''import pytest

import chunky


def test_pairs():
    assert chunky.pairs([1, 2, 3, 4]) == [(1, 2), (3, 4)]


def test_pairs_of_odd_length():
    assert chunky.pairs([1, 2, 3]) == [(1, 2), (3,)]


@pytest.mark.timeout(30)
def test_total():
    assert chunky.total([1, 2, 3]) == 6


@pytest.mark.slowish
def test_largest():
    assert chunky.largest([3, 9, 2]) == 9
    assert chunky.largest([]) is None


def test_version_comes_from_the_metadata():
    assert chunky.__version__ == "0.3.0"
'''


def make_src_layout_repo(root: Path) -> Path:
    """A src-layout repository that needs what overture's Python lacks: a runtime dependency
    (more-itertools), a pytest plugin from its test extra (pytest-timeout, for a marker), strict
    markers of its own, its version read from its installed metadata, and hidden folders."""
    repo = root / "chunky"
    (repo / "src" / "chunky").mkdir(parents=True)
    (repo / "src" / "chunky" / "__init__.py").write_text(SRC_LAYOUT_CODE)
    (repo / "tests").mkdir()
    (repo / "tests" / "test_chunky.py").write_text(SRC_LAYOUT_TESTS)
    (repo / "pyproject.toml").write_text(SRC_LAYOUT_PYPROJECT)
    (repo / ".github" / "workflows").mkdir(parents=True)
    (repo / ".github" / "workflows" / "tests.yml").write_text("on: push\njobs: {}\n")
    (repo / ".pre-commit-config.yaml").write_text("repos: []\n")
    return repo


def git(repo: Path, *args: str) -> str:
    command = ["git", "-c", "user.name=overture", "-c", "user.email=tests@overture.invalid", "-C", str(repo)]
    return subprocess.run([*command, *args], check=True, capture_output=True, text=True).stdout.strip()


def make_swebench_instance(
    repo: Path, bug_file: str, clean: str, buggy: str, test_file: str, test_source: str, passing: list[str]
) -> dict:
    """Turn `repo` into a git checkout whose history makes one SWE-bench instance: the clean tree is
    the environment's setup commit, a commit that changes `clean` into `buggy` in `bug_file` is the
    base; the gold patch undoes it, the test patch adds `test_file`, whose tests are FAIL_TO_PASS
    and `passing` PASS_TO_PASS (lists JSON-encoded, as SWE-bench ships them)."""
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "clean")
    setup = git(repo, "rev-parse", "HEAD")
    source = (repo / bug_file).read_text()
    assert source.count(clean) == 1, f"{clean!r} is not once in {bug_file}"
    (repo / bug_file).write_text(source.replace(clean, buggy))
    git(repo, "commit", "-q", "-am", "a regression")
    base = git(repo, "rev-parse", "HEAD")
    gold = git(repo, "diff", base, setup, "--", bug_file) + "\n"
    (repo / test_file).write_text(test_source)
    git(repo, "add", test_file)
    test_patch = git(repo, "diff", "--cached", "HEAD") + "\n"
    git(repo, "reset", "-q", "--hard", base)
    names = re.findall(r"^def (test_\w+)", test_source, re.MULTILINE)
    return {
        "repo": f"example/{repo.name}", "instance_id": f"example__{repo.name}-1", "base_commit": base,
        "patch": gold, "test_patch": test_patch, "problem_statement": "A regression: see the new test.",
        "hints_text": "", "created_at": "2026-12-01T00:00:00Z", "version": "1.0",
        "FAIL_TO_PASS": json.dumps([f"{test_file}::{name}" for name in names]),
        "PASS_TO_PASS": json.dumps(passing), "environment_setup_commit": setup,
    }  # fmt: skip
