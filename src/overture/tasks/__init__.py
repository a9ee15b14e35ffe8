"""Layer 4: verifiable coding tasks — the SWE-bench-compatible task record, bug synthesis on any
Python repository with a pytest suite, grading with SWE-bench semantics, and the oracle solver.

Knows nothing of RL: a task is a starting workspace, a problem statement and the tests that
decide whether it was solved; `run_task_episode` runs any `Policy` on one and grades it.
"""

from overture.tasks.check import CheckResult, check_task, check_tasks
from overture.tasks.episodes import run_task_episode
from overture.tasks.grading import Grade, decide, grade, reward
from overture.tasks.oracle import OracleResult, solve_all, solve_with_oracle
from overture.tasks.snapshots import starting_base, store_snapshot
from overture.tasks.spec import Task, TaskError, read_tasks, write_tasks
from overture.tasks.synthesis import SynthesisStats, synthesize_repo
from overture.tasks.task_sets import REPOS_FOLDER, build_task_set, bundled_repo, bundled_repos

__all__ = [
    "REPOS_FOLDER",
    "CheckResult",
    "Grade",
    "OracleResult",
    "SynthesisStats",
    "Task",
    "TaskError",
    "build_task_set",
    "bundled_repo",
    "bundled_repos",
    "check_task",
    "check_tasks",
    "decide",
    "grade",
    "read_tasks",
    "reward",
    "run_task_episode",
    "solve_all",
    "solve_with_oracle",
    "starting_base",
    "store_snapshot",
    "synthesize_repo",
    "write_tasks",
]
