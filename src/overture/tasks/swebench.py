"""SWE-bench instances as a task set: each repository's checkout at the instance's commit, its tests
in the environment of its `environment_setup_commit`.

A SWE-bench instance names a repository (`owner/name`), the commit its task starts from
(`base_commit`), the gold fix (`patch`), the tests that decide it (`test_patch`, `FAIL_TO_PASS`,
`PASS_TO_PASS`) and the commit its environment is built from (`environment_setup_commit`, kept in
`metadata["extra"]` by `Task.from_dict`). `import_instances` turns a file of them into a task set
over local git checkouts (`<checkouts>/<owner>__<name>`, SWE-bench's own naming, or
`<checkouts>/<name>`): the tree of each commit is taken with `git archive` into `snapshots/`
(no history), and each repository's environment is built once per setup commit by
`overture.tasks.environment` and recorded in `environments/`. The task set then checks, solves
and grades like a synthesized one; the gold patch, given as a prediction, is the reference fix.

What is supported: repositories whose tests run with pytest (the test ids are pytest node ids)
and whose dependencies install from the package registry on the Python overture runs on.
What is not: test ids of other runners (Django's `test_x (module.Class)`, SymPy's bare names),
per-instance installation scripts (SWE-bench's `pre_install`, `install` and `eval_commands` of
its harness specs, which live in the harness, not in the instances), other Python versions, and
builds that need system packages or compilers the machine lacks.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path

from overture.tasks.environment import ENVIRONMENTS, EnvironmentRequest, resolve_environment, write_record
from overture.tasks.run_failure import output_tail
from overture.tasks.snapshots import store_snapshot
from overture.tasks.spec import Task, TaskError, write_tasks
from overture.tasks.task_sets import SNAPSHOTS

COMMIT = re.compile(r"^[0-9a-fA-F]{7,40}$")
GIT_TIMEOUT_S = 600


def checkout_of(checkouts: Path, repo: str) -> Path:
    """The local checkout of `repo` (`owner/name`) under `checkouts`."""
    names = [repo.replace("/", "__"), repo.rsplit("/", 1)[-1]]
    for name in names:
        if (checkouts / name / ".git").exists():
            return checkouts / name
    raise TaskError(f"{repo}: no git checkout in {checkouts} (looked for {' and '.join(names)})")


def export_commit(checkout: Path, commit: str, snapshots: Path, name: str) -> Path:
    """The tree of `commit` in `checkout`, stored as a snapshot (`store_snapshot`); its path."""
    if not COMMIT.match(commit):
        raise TaskError(f"{checkout.name}: {commit!r} is not a commit hash")
    with tempfile.TemporaryDirectory(prefix="overture-swebench-") as folder:
        archive = subprocess.run(
            ["git", "-C", str(checkout), "archive", "--format=tar", commit],
            capture_output=True, timeout=GIT_TIMEOUT_S,
        )  # fmt: skip
        if archive.returncode != 0:
            said = output_tail(archive.stderr.decode(errors="replace"), 300)
            raise TaskError(f"{checkout.name}: commit {commit} cannot be read: {said}")
        unpacked = subprocess.run(
            ["tar", "-x", "-C", folder], input=archive.stdout, capture_output=True, timeout=GIT_TIMEOUT_S
        )
        if unpacked.returncode != 0:
            said = output_tail(unpacked.stderr.decode(errors="replace"), 300)
            raise TaskError(f"{checkout.name}: the tree of {commit} does not unpack: {said}")
        return store_snapshot(folder, snapshots, f"{name}-{commit[:12]}")


def import_instances(
    instances: list[Task], checkouts: Path, out: Path, environment: EnvironmentRequest | None
) -> list[Task]:
    """Write `instances` as a task set at `out` over the checkouts (see the module docstring)."""
    snapshots = out.parent / SNAPSHOTS
    records: dict[tuple[str, str], str] = {}
    for task in instances:
        if not task.base_commit:
            raise TaskError(f"task {task.instance_id}: no base_commit to start from")
        checkout = checkout_of(checkouts, task.repo)
        name = task.repo.rsplit("/", 1)[-1]
        task.base = str(export_commit(checkout, task.base_commit, snapshots, name))
        if environment is None:
            continue
        setup = str(task.metadata.get("extra", {}).get("environment_setup_commit") or task.base_commit)
        if (task.repo, setup) not in records:
            tree = export_commit(checkout, setup, snapshots, name)
            record, _ = resolve_environment(tree, environment.packages, environment.extras, name)
            path = out.parent / ENVIRONMENTS / f"{name}-{setup[:12]}.json"
            records[(task.repo, setup)] = str(write_record(path, record))
        task.environment = records[(task.repo, setup)]
    write_tasks(out, instances)
    return instances
