"""Bug synthesis: tasks from any local Python repository with a pytest suite.

1. The repository is snapshotted (no history) and its suite runs once on the clean code in a
   sandbox, which measures the limits of every later run of its tests (`overture.tasks.run_limits`,
   recorded in each task); tests that do not pass there are ignored from then on. That run also records which
   test files call which functions (`overture.tasks.test_map`, with `tasks.select_tests`) and
   leaves the test modules' rewritten bytecode in the snapshot (`keep_test_bytecode`).
2. Every function of every non-test module (of at most `tasks.max_function_lines` lines, when
   set) yields candidate mutations (`overture.tasks.mutations`); candidates are shuffled with
   the seed and interleaved across functions, so that a budget of N tasks spreads over the code
   base. Candidates whose mutated file is identical to an earlier one are dropped.
3. Candidates are validated concurrently, each in its own sandbox over the snapshot: the
   mutated file is written in and the test files that call the mutated function run (the whole
   suite without a test map; none, and the candidate is dropped as unnoticed, when no test calls
   it). A candidate becomes a task only if at least one test that passed on the clean code no
   longer passes: those tests are FAIL_TO_PASS; PASS_TO_PASS is a sample of the tests that ran
   beside them and still passed. (Not of the files that were not run: a test there can still
   see the bug, through state the bug leaves behind — a cleanup it skips — when grading runs its
   file after the task's, and checking each would cost a second run of most of the suite.) A
   run past the repository's run limits (a mutation that loops) is dropped.
4. The problem statement is written from the failure (`overture.tasks.statement`), never from
   the change. `setup_patch` makes the bug from the snapshot; `patch` is the reference fix.
5. Splits: all tasks of a repository in `tasks.heldout_repos`, all tasks of a share
   (`tasks.heldout_function_fraction`) of the functions, chosen by a hash of the function's
   name and the seed, and a share (`tasks.heldout_task_fraction`) of the other tasks, each
   drawn alone by a hash of its id (new bugs in functions that train tasks also have bugs in),
   are `heldout`; the rest `train`.
"""

from __future__ import annotations

import asyncio
import difflib
import hashlib
import os
import random
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from overture.config import TasksConfig
from overture.sandbox import SandboxPool
from overture.sandbox.diff import file_diff
from overture.sandbox.python_env import PythonEnvironment
from overture.tasks.environment import (
    ENVIRONMENTS,
    EnvironmentRequest,
    as_python,
    resolve_environment,
    write_record,
)
from overture.tasks.fixed_draw import fixed_draw
from overture.tasks.mutations import Mutation, MutationError, apply_mutation, find_mutations
from overture.tasks.pytest_report import is_test_file, outcome_passes, run_pytest, test_files
from overture.tasks.run_failure import explain_run
from overture.tasks.run_limits import RECORD_KEY as RUN_LIMITS
from overture.tasks.run_limits import RunLimits, clean_run_limits, suite_limits
from overture.tasks.snapshots import BYTECODE_WRITES, keep_test_bytecode, repository_files, store_snapshot
from overture.tasks.source_functions import enclosing_function
from overture.tasks.spec import DEFAULT_TEST_CMD, Task, TaskError
from overture.tasks.statement import write_statement
from overture.tasks.test_map import TestMap, install_plugin, read_test_map

NON_LIBRARY = frozenset({"setup.py", "conftest.py", "noxfile.py"})


class SynthesisError(TaskError):
    """A repository that cannot be synthesized from (its suite does not run or nothing passes)."""


@dataclass
class SynthesisStats:
    """Counts of one synthesis run, by outcome."""

    repo: str = ""
    candidates: int = 0
    duplicates: int = 0
    valid: int = 0
    unnoticed: int = 0  # no test went from pass to fail
    uncovered: int = 0  # of those, no test calls the function (known from the test map, not run)
    timed_out: int = 0
    errors: int = 0
    clean_passing: int = 0
    clean_seconds: float = 0.0  # the suite's run on the clean code, which set the run limits
    seconds: float = 0.0


@dataclass
class Baseline:
    """A repository's snapshot and what its suite does on the clean code."""

    repo: str
    snapshot: Path
    test_cmd: str
    passed: list[str]
    xfail: list[str]  # the passing tests that pass by failing as expected
    seconds: float
    test_map: TestMap | None = None  # which test files call which functions (`overture.tasks.test_map`)
    python: PythonEnvironment | None = None  # the repository's environment, None for the pool's Python
    environment: str = ""  # its record, which the tasks name


Progress = Callable[[SynthesisStats], None]


def library_files(snapshot: Path) -> list[str]:
    """The Python files of a snapshot that bugs go into: not tests, not packaging scripts."""
    return [
        rel for rel in repository_files(snapshot)
        if rel.endswith(".py") and not is_test_file(rel) and Path(rel).name not in NON_LIBRARY
        and not (snapshot / rel).is_symlink()
    ]  # fmt: skip


async def run_baseline(
    pool: SandboxPool,
    repo: str,
    snapshot: Path,
    test_cmd: str,
    limits: RunLimits,
    map_tests: bool = True,
    python: PythonEnvironment | None = None,
) -> Baseline:
    """Run the suite on the clean snapshot under `limits` (in `python`, when given); the tests
    that pass there, and with `map_tests` which test files call which functions. The run's test
    bytecode is kept in the snapshot."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    async with pool.sandbox(snapshot, python) as box:
        setup = BYTECODE_WRITES + (install_plugin(box) if map_tests else "")
        run = await run_pytest(box, test_cmd, [], limits.timeout_s, setup, limits.cpu_seconds)
        test_map = read_test_map(box) if map_tests and not run.result.timed_out else None
        await asyncio.to_thread(keep_test_bytecode, box, snapshot)
    passed = [test for test in run.outcomes if test in run.passed]
    if run.result.timed_out or not passed:
        why = explain_run(run.result, limits, pool.config)
        raise SynthesisError(f"{repo}: no test passes on the clean code (`{test_cmd}`): {why}")
    return Baseline(repo, snapshot, test_cmd, passed, run.xfailed, loop.time() - started, test_map, python)


def ordered_candidates(
    snapshot: Path, files: list[str], seed: int, max_function_lines: int = 0
) -> list[Mutation]:
    """Every mutation of `files`, shuffled with `seed` and interleaved across functions; with
    `max_function_lines`, only those in functions of at most that many lines."""
    by_function: dict[tuple[str, str], list[Mutation]] = defaultdict(list)
    for rel in files:
        try:
            source = (snapshot / rel).read_text()
            mutations = find_mutations(source, rel)
        except (MutationError, UnicodeDecodeError):
            continue  # a file libcst cannot parse has no candidates
        for mutation in mutations:
            if max_function_lines and not _fits(source, mutation.line, max_function_lines):
                continue
            by_function[(mutation.path, mutation.function)].append(mutation)
    rng = random.Random(seed)
    groups = [by_function[key] for key in sorted(by_function)]
    rng.shuffle(groups)
    for group in groups:
        rng.shuffle(group)
    ordered = []
    for depth in range(max((len(g) for g in groups), default=0)):
        ordered += [group[depth] for group in groups if depth < len(group)]
    return ordered


def _fits(source: str, line: int, max_lines: int) -> bool:
    """Whether the function around `line` spans at most `max_lines` lines."""
    span = enclosing_function(source, line)
    return span is not None and span[1] - span[0] + 1 <= max_lines


def changed_lines(before: str, after: str) -> list[str]:
    """The lines that differ between two versions of a file (both sides)."""
    lines = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(
        None, before.splitlines(), after.splitlines(), autojunk=False
    ).get_opcodes():
        if tag != "equal":
            lines += before.splitlines()[i1:i2] + after.splitlines()[j1:j2]
    return lines


def candidate_digest(path: str, mutated: str) -> str:
    """Identity of a candidate: its file and that file's mutated text."""
    return hashlib.sha256(f"{path}\0{mutated}".encode()).hexdigest()


class Synthesizer:
    """Validates candidates of one repository and turns the valid ones into tasks."""

    def __init__(self, pool: SandboxPool, baseline: Baseline, config: TasksConfig, seed: int) -> None:
        self.pool, self.baseline, self.config = pool, baseline, config
        self.seed = seed
        self.limits = suite_limits(baseline.seconds)
        self.stats = SynthesisStats(
            repo=baseline.repo, clean_passing=len(baseline.passed), clean_seconds=round(baseline.seconds, 2)
        )
        self._sources: dict[str, str] = {}
        self._seen: set[str] = set()

    def source(self, rel: str) -> str:
        if rel not in self._sources:
            self._sources[rel] = (self.baseline.snapshot / rel).read_text()
        return self._sources[rel]

    def mutate(self, mutation: Mutation) -> str | None:
        """The mutated file, or None for a duplicate of an earlier candidate."""
        try:
            mutated = apply_mutation(self.source(mutation.path), mutation)
        except MutationError:
            self.stats.errors += 1
            return None
        key = candidate_digest(mutation.path, mutated)
        if key in self._seen or mutated == self.source(mutation.path):
            self.stats.duplicates += 1
            return None
        self._seen.add(key)
        return mutated

    def files_to_run(self, mutation: Mutation) -> list[str] | None:
        """The test files a candidate runs: None for the whole suite (see the module docstring)."""
        test_map = self.baseline.test_map
        return None if test_map is None else test_map.files_for(mutation.path, mutation.function)

    async def validate(self, mutation: Mutation, mutated: str) -> Task | None:
        """Run the tests that call the mutated function on the mutated code; the task, if some
        test notices."""
        files = self.files_to_run(mutation)
        if files == []:
            self.stats.unnoticed += 1
            self.stats.uncovered += 1
            return None
        async with self.pool.sandbox(self.baseline.snapshot, self.baseline.python) as box:
            box.files.write_text(mutation.path, mutated)
            targets, limits = [] if files is None else files, self.limits
            run = await run_pytest(
                box, self.baseline.test_cmd, targets, limits.timeout_s, cpu_seconds=limits.cpu_seconds
            )
        if run.result.timed_out:
            self.stats.timed_out += 1
            return None
        passed, xfail = self.baseline.passed, self.baseline.xfail
        tested = passed if files is None else [test for test in passed if test_files([test])[0] in files]
        broken = [test for test in tested if not outcome_passes(test, run.outcomes.get(test), xfail)]
        if not broken:
            self.stats.unnoticed += 1
            return None
        # No hint of the kind of bug in the id (nor in any path the agent can see).
        instance_id = f"{self.baseline.repo}-{candidate_digest(mutation.path, mutated)[:10]}"
        noticed = set(broken)
        still = [test for test in tested if test not in noticed]
        rng = random.Random(f"{self.seed}:{instance_id}")
        sampled = set(rng.sample(still, min(self.config.pass_to_pass, len(still))))
        clean = self.source(mutation.path)
        broken_set = set(broken)
        statement = write_statement(
            self.baseline.repo, broken, {test: run.failures.get(test) for test in broken},
            changed_lines(clean, mutated), seed=instance_id,
        )  # fmt: skip
        return Task(
            instance_id=instance_id,
            repo=self.baseline.repo,
            problem_statement=statement,
            FAIL_TO_PASS=broken,
            PASS_TO_PASS=[test for test in still if test in sampled],
            base=str(self.baseline.snapshot),
            setup_patch=file_diff(mutation.path, clean.encode(), mutated.encode()),
            patch=file_diff(mutation.path, mutated.encode(), clean.encode()),
            test_cmd=self.baseline.test_cmd,
            environment=self.baseline.environment,
            metadata={
                "kind": mutation.kind,
                "file": mutation.path,
                "function": mutation.function,
                "line": mutation.line,
                "description": mutation.description,
                "synthesized": True,
                "xfail": [test for test in self.baseline.xfail if test in broken_set or test in sampled],
                RUN_LIMITS: self.limits.to_record(),
            },
        )

    async def run(
        self, candidates: list[Mutation], wanted: int, jobs: int, progress: Progress | None
    ) -> list[Task]:
        """Validate candidates `jobs` at a time until `wanted` tasks or no candidates are left.

        The tasks are the first `wanted` valid candidates in candidate order, in that order,
        whichever validation finishes first: a worker takes no new candidate once `wanted` are
        found, and every candidate before the last one taken has been validated by the end."""
        found: list[tuple[int, Task]] = []
        limit = self.config.max_candidates or len(candidates)
        # Shared by the workers: one event loop, no await inside next().
        queue = enumerate(candidates[:limit])

        async def worker() -> None:
            while len(found) < wanted:
                index, mutation = next(queue, (-1, None))
                if mutation is None:
                    return
                mutated = self.mutate(mutation)
                if mutated is None:
                    continue
                self.stats.candidates += 1
                task = await self.validate(mutation, mutated)
                if task is not None:
                    found.append((index, task))
                    self.stats.valid = min(len(found), wanted)
                if progress is not None:
                    progress(self.stats)

        await asyncio.gather(*(worker() for _ in range(jobs)))
        return [task for _, task in sorted(found, key=lambda pair: pair[0])[:wanted]]


def assign_splits(
    tasks: list[Task], heldout_repos: list[str], fraction: float, seed: int, task_fraction: float = 0.0
) -> None:
    """Mark held-out tasks: whole repositories, then a share of functions, then a share of the
    remaining tasks one by one (see the module docstring)."""
    for task in tasks:
        task.metadata.pop("heldout_by", None)
        task.split = "train"
        if task.repo in heldout_repos:
            task.split, task.metadata["heldout_by"] = "heldout", "repository"
        elif fixed_draw(f"{seed}:{task.function}") < fraction:
            task.split, task.metadata["heldout_by"] = "heldout", "function"
        elif fixed_draw(f"{seed}:task:{task.instance_id}") < task_fraction:
            task.split, task.metadata["heldout_by"] = "heldout", "task"


async def synthesize_repo(
    pool: SandboxPool,
    repo_dir: Path,
    snapshots: Path,
    wanted: int,
    config: TasksConfig,
    seed: int = 0,
    test_cmd: str = DEFAULT_TEST_CMD,
    jobs: int | None = None,
    progress: Progress | None = None,
    environment: EnvironmentRequest | None = None,
) -> tuple[list[Task], SynthesisStats]:
    """Up to `wanted` valid tasks from one repository (see the module docstring); with
    `environment`, in an environment built for it and recorded beside `snapshots`."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    name = repo_dir.resolve().name
    snapshot = store_snapshot(repo_dir, snapshots, name)
    python, record_path = None, ""
    if environment is not None:
        record, prefix = await asyncio.to_thread(
            resolve_environment, snapshot, environment.packages, environment.extras, name
        )
        python = as_python(prefix)
        record_path = str(write_record(snapshots.parent / ENVIRONMENTS / f"{snapshot.name}.json", record))
    baseline = await run_baseline(
        pool, name, snapshot, test_cmd, clean_run_limits(config), config.select_tests, python
    )
    baseline.environment = record_path
    candidates = await asyncio.to_thread(
        ordered_candidates, snapshot, library_files(snapshot), seed, config.max_function_lines
    )
    synthesizer = Synthesizer(pool, baseline, config, seed)
    tasks = await synthesizer.run(candidates, wanted, jobs or os.cpu_count() or 1, progress)
    synthesizer.stats.seconds = loop.time() - started
    return tasks, synthesizer.stats
