"""`overture tasks`: build a repository's environment, synthesize task sets from repositories or
import SWE-bench instances, re-validate them, solve them with the oracle, grade predicted patches.

Each command prints JSON on stdout (progress goes to stderr), so scripts can read the result:
`env` the environment's record and where it lies, `import` the task set it wrote, `synth` what it
produced, `check` the bad tasks (exit status 1 when there are any), `solve --oracle` what was
solved and why the rest was not, `grade` one report per prediction in the predictions file's
order, each printed once every earlier one is, then a summary as the last line (exit status 1
when an entry of the predictions file was malformed).
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from overture.cli.common import Overrides, console, reports_errors
from overture.config import load_config

tasks_app = typer.Typer(
    no_args_is_help=True,
    help="Verifiable coding tasks from your repositories. The path: `env --repo DIR` (the environment its "
    "tests run in; synth builds it too), `synth --repo DIR` (or `import` SWE-bench instances), `check`, "
    "`solve --oracle`, `grade --predictions`. Each prints JSON.",
)

TaskFile = Annotated[Path, typer.Argument(help="JSONL task file")]
ConfigOption = Annotated[
    Path | None, typer.Option(help="TOML run configuration (tasks, sandbox and agent sections)")
]
Jobs = Annotated[int | None, typer.Option(help="sandboxes working at once (default: CPU count)")]
WithPackages = Annotated[
    list[str] | None,
    typer.Option("--with", help="a package its environment also gets, as pip names it (repeatable)"),
]
Extras = Annotated[
    list[str] | None,
    typer.Option(
        "--extra", help="an extra of the repository to install (repeatable; default: test, tests, testing)"
    ),
]


def _request(with_: list[str] | None, extra: list[str] | None):
    from overture.tasks.environment import EnvironmentRequest

    if extra is None:
        return EnvironmentRequest(tuple(with_ or ()))
    return EnvironmentRequest(tuple(with_ or ()), tuple(extra))


def _prepare_environments(tasks) -> None:
    """Build (or find) the environments `tasks` name before their sandboxes start."""
    from overture.tasks.environment import prepare_environments

    if any(task.environment for task in tasks):
        with console.status("preparing the tasks' environments"):
            count = prepare_environments(tasks)
        console.print(f"{count} environment(s) ready")


def _progress() -> Progress:
    name, note = TextColumn("{task.description}"), TextColumn("{task.fields[note]}")
    return Progress(name, BarColumn(), MofNCompleteColumn(), note, TimeElapsedColumn(), console=console)


def _run_on_tasks(sandbox, label: str, total: int, counted: str, counts, work) -> list:
    """`await work(pool, show)` on a sandbox pool under a progress bar of `total` tasks; `show`
    advances it by one result and notes how many results `counts` (e.g. "3 solved")."""
    from overture.sandbox import SandboxPool

    async def run() -> list:
        async with SandboxPool(sandbox) as pool:
            with _progress() as bar:
                handle = bar.add_task(label, total=total, note="")
                seen = 0

                def show(result) -> None:
                    nonlocal seen
                    seen += counts(result)
                    bar.update(handle, advance=1, note=f"{seen} {counted}")

                return await work(pool, show)

    return asyncio.run(run())


def _jobs(jobs: int | None) -> int:
    if jobs is not None and jobs < 1:
        raise typer.BadParameter("must be at least 1", param_hint="--jobs")
    return jobs or os.cpu_count() or 1


@tasks_app.command("env")
@reports_errors
def env_command(
    task_file: Annotated[
        Path | None, typer.Argument(help="task file whose environments to build (from their records)")
    ] = None,
    repo: Annotated[Path | None, typer.Option(help="repository to build an environment for")] = None,
    with_: WithPackages = None,
    extra: Extras = None,
) -> None:
    """Build the Python environment a repository's tests run in — the repository's dependencies, its
    test extras and requirements files, pytest and its plugins, in a virtualenv cached by content
    (OVERTURE_ENVS, else ~/.cache/overture/envs) — or those a task set records, on a new machine."""
    import time

    from overture.tasks.environment import resolve_environment
    from overture.tasks.spec import read_tasks

    if (task_file is None) == (repo is None):
        raise typer.BadParameter("give a task file or --repo DIR (one of them)")
    started = time.monotonic()
    if repo is not None:
        if not repo.is_dir():
            raise typer.BadParameter(f"{repo}: not a directory", param_hint="--repo")
        request = _request(with_, extra)
        with console.status(f"building the environment of {repo}"):
            record, prefix = resolve_environment(repo, request.packages, request.extras)
        shown = {"repo": str(repo), "environment": str(prefix), "record": record.to_dict()}
        typer.echo(json.dumps({**shown, "seconds": round(time.monotonic() - started, 2)}))
        return
    tasks = read_tasks(task_file)
    _prepare_environments(tasks)
    environments = sorted({task.environment for task in tasks if task.environment})
    typer.echo(json.dumps({"environments": environments, "seconds": round(time.monotonic() - started, 2)}))


@tasks_app.command("import")
@reports_errors
def import_command(
    instances: Annotated[Path, typer.Argument(help="SWE-bench instances (JSONL)")],
    checkouts: Annotated[
        Path, typer.Option(help="folder of git checkouts, one per repository: owner__name or name")
    ],
    out: Annotated[Path, typer.Option(help="task file to write (snapshots/ and environments/ beside it)")],
    env: Annotated[
        bool, typer.Option("--env/--no-env", help="build each repository's environment (see `tasks env`)")
    ] = True,
    with_: WithPackages = None,
    extra: Extras = None,
) -> None:
    """Turn SWE-bench instances into a task set over local checkouts: each base_commit's tree as a
    snapshot, each environment_setup_commit's environment built and recorded. Then check, solve
    and grade it like any task set (the gold patch, as a prediction, resolves its task)."""
    from overture.tasks.spec import read_tasks
    from overture.tasks.swebench import import_instances

    if not checkouts.is_dir():
        raise typer.BadParameter(f"{checkouts}: not a directory", param_hint="--checkouts")
    tasks = read_tasks(instances)
    with console.status(f"importing {len(tasks)} instance(s)"):
        imported = import_instances(tasks, checkouts, out, _request(with_, extra) if env else None)
    environments = sorted({task.environment for task in imported if task.environment})
    typer.echo(json.dumps({"out": str(out), "tasks": len(imported), "environments": environments}))


@tasks_app.command("synth")
@reports_errors
def synth(
    out: Annotated[Path, typer.Option(help="task file to write (snapshots/ and environments/ beside it)")],
    n: Annotated[int, typer.Option("--n", help="tasks to synthesize, spread evenly over the repositories")],
    repo: Annotated[
        list[Path] | None, typer.Option(help="repository with a pytest suite (repeatable)")
    ] = None,
    bundled: Annotated[bool, typer.Option(help="also use every repository bundled with overture")] = False,
    seed: Annotated[int, typer.Option(help="seed of candidate order, test samples and splits")] = 0,
    test_cmd: Annotated[
        str, typer.Option(help="command that runs the repository's tests, with any pytest options it needs")
    ] = "python -m pytest",  # = tasks.spec.DEFAULT_TEST_CMD; overture.tasks loads only when needed
    env: Annotated[
        bool,
        typer.Option(
            "--env/--no-env",
            help="run each repository's tests in an environment built for it (see `tasks env`); "
            "--no-env runs them on overture's own Python, as the bundled repositories need",
        ),
    ] = True,
    with_: WithPackages = None,
    extra: Extras = None,
    jobs: Jobs = None,
    config: ConfigOption = None,
    set_: Overrides = None,
) -> None:
    """Synthesize bugs in Python repositories, keep those a test notices, and write them as tasks,
    with each repository's environment and measured run limits recorded: check, solve and grade
    need no flag."""
    from overture.tasks.task_sets import build_task_set, bundled_repos, summary

    if n < 1:
        raise typer.BadParameter("must be at least 1", param_hint="--n")
    repos = [*(repo or []), *(bundled_repos() if bundled else [])]
    if not repos:
        raise typer.BadParameter("give --repo DIR (repeatable) or --bundled")
    for path in repos:
        if not path.is_dir():
            raise typer.BadParameter(f"{path}: not a directory", param_hint="--repo")
    run_config = load_config(config, set_ or [])
    with _progress() as bar:
        bars: dict[str, int] = {}

        def show(stats) -> None:
            if stats.repo not in bars:
                bars[stats.repo] = bar.add_task(stats.repo, total=None, note="")
            note = f"{stats.candidates} tried, {stats.unnoticed} unnoticed, {stats.timed_out} timed out"
            bar.update(bars[stats.repo], completed=stats.valid, note=note)

        tasks, stats = asyncio.run(
            build_task_set(
                repos, out, n, run_config.sandbox, run_config.tasks, seed, test_cmd, _jobs(jobs), show,
                _request(with_, extra) if env else None,
            )
        )
    typer.echo(json.dumps({"out": str(out), **summary(tasks, stats)}))


@tasks_app.command("check")
@reports_errors
def check(
    task_file: TaskFile, jobs: Jobs = None, config: ConfigOption = None, set_: Overrides = None
) -> None:
    """Re-validate every task: fails on its starting workspace, passes with its reference fix."""
    from overture.tasks.check import check_tasks
    from overture.tasks.spec import read_tasks

    tasks = read_tasks(task_file)
    run_config = load_config(config, set_ or [])
    _prepare_environments(tasks)
    results = _run_on_tasks(
        run_config.sandbox, "checking", len(tasks), "bad", lambda result: not result.ok,
        lambda pool, show: check_tasks(tasks, pool, run_config.tasks, _jobs(jobs), show),
    )  # fmt: skip
    bad = [{"instance_id": r.instance_id, "problems": r.problems} for r in results if not r.ok]
    typer.echo(json.dumps({"checked": len(results), "ok": len(results) - len(bad), "bad": bad}))
    if bad:
        raise typer.Exit(1)


@tasks_app.command("solve")
@reports_errors
def solve(
    task_file: TaskFile,
    oracle: Annotated[
        bool, typer.Option(help="solve with the scripted oracle (uses the reference fix)")
    ] = False,
    split: Annotated[str | None, typer.Option(help="only tasks of this split (train or heldout)")] = None,
    limit: Annotated[int | None, typer.Option(help="only the first N tasks")] = None,
    demos: Annotated[
        Path | None, typer.Option(help="write the solved episodes as SFT demonstrations (JSONL)")
    ] = None,
    trajectories: Annotated[Path | None, typer.Option(help="write every trajectory (JSONL)")] = None,
    jobs: Jobs = None,
    config: ConfigOption = None,
    set_: Overrides = None,
) -> None:
    """Solve tasks through the real tools and grade them; print a JSON summary (solved, failed, why)."""
    from overture.tasks.oracle import solve_all
    from overture.tasks.spec import read_tasks, write_jsonl
    from overture.text import train_default_tokenizer

    if not oracle:
        raise typer.BadParameter("only --oracle is available here; a model is evaluated by `overture eval`")
    tasks = [task for task in read_tasks(task_file) if split is None or task.split == split]
    tasks = tasks[:limit] if limit is not None else tasks
    run_config = load_config(config, set_ or [])
    settings = run_config.tokenizer
    tokenizer = train_default_tokenizer(settings.vocab_size, settings.corpus)

    agent, rules, seed = run_config.agent, run_config.tasks, run_config.seed
    _prepare_environments(tasks)
    results = _run_on_tasks(
        run_config.sandbox, "solving", len(tasks), "solved", lambda result: result.solved,
        lambda pool, show: solve_all(tasks, pool, tokenizer, agent, rules, _jobs(jobs), show, seed),
    )  # fmt: skip
    if demos is not None:
        write_jsonl(demos, [r.demonstration for r in results if r.solved and r.demonstration])
    if trajectories is not None:
        write_jsonl(trajectories, [r.trajectory.to_dict() for r in results if r.trajectory is not None])
    solved = sum(r.solved for r in results)
    typer.echo(json.dumps({
        "tasks": len(results), "solved": solved, "failed": len(results) - solved,
        "solve_rate": solved / len(results) if results else 0.0,
        "failures": [{"instance_id": r.instance_id, "why": r.why} for r in results if not r.solved],
    }))  # fmt: skip


@tasks_app.command("grade")
@reports_errors
def grade_predictions_command(
    task_file: TaskFile,
    predictions_file: Annotated[
        Path, typer.Option("--predictions", help="SWE-bench predictions: JSONL, or a list in a .json file")
    ],
    out: Annotated[Path | None, typer.Option(help="also write the per-prediction reports (JSONL)")] = None,
    jobs: Jobs = None,
    config: ConfigOption = None,
    set_: Overrides = None,
) -> None:
    """Grade each prediction's patch on its task in a fresh sandbox; print a JSON report per
    prediction, then a summary. Malformed entries are named in the summary and exit with status 1."""
    from overture.tasks import predictions
    from overture.tasks.spec import read_tasks, write_jsonl

    tasks = read_tasks(task_file)
    accepted, malformed = predictions.check_predictions(
        *predictions.read_predictions(predictions_file), tasks
    )
    run_config = load_config(config, set_ or [])
    reports = []
    predicted = {prediction.instance_id for prediction in accepted}
    _prepare_environments([task for task in tasks if task.instance_id in predicted])
    if accepted:
        print_in_order = predictions.in_input_order(lambda report: typer.echo(json.dumps(report.to_dict())))

        def grade_all(pool, show):
            def finished(report) -> None:
                show(report)
                print_in_order(report)

            return predictions.grade_predictions(
                accepted, tasks, pool, run_config.tasks, _jobs(jobs), finished
            )

        reports = _run_on_tasks(
            run_config.sandbox, "grading", len(accepted), "resolved",
            lambda report: report.resolution == "resolved", grade_all,
        )  # fmt: skip
    if out is not None:
        write_jsonl(out, [report.to_dict() for report in reports])
    typer.echo(json.dumps(predictions.summarize(reports, malformed, tasks)))
    if malformed:
        raise typer.Exit(1)
