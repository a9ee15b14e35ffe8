"""The `overture` command line: configs, training, sandboxes, tools and the agent (`tasks` lives in
`tasks_cmd`). Errors are reported as `cli.common.reports_errors` says."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Annotated

import typer

from overture.cli.common import ConfigPath, Overrides, Overwrite, Resume, echo, reports_errors
from overture.cli.tasks_cmd import tasks_app
from overture.cli.train_cmd import train
from overture.cli.view_cmd import view
from overture.config import config_to_toml, load_config

app = typer.Typer(no_args_is_help=True, add_completion=False, help="overture: RL for agentic coding models.")
config_app = typer.Typer(no_args_is_help=True, help="Inspect run configurations.")
app.add_typer(config_app, name="config")
sandbox_app = typer.Typer(no_args_is_help=True, help="Run commands in isolated, copy-on-write sandboxes.")
app.add_typer(sandbox_app, name="sandbox")
tools_app = typer.Typer(no_args_is_help=True, help="Run the agent's tools, as an episode would.")
app.add_typer(tools_app, name="tools")
app.add_typer(tasks_app, name="tasks")
app.command()(train)
app.command()(view)


@config_app.command("show")
@reports_errors
def config_show(config: ConfigPath, set_: Overrides = None) -> None:
    """Print the resolved configuration (defaults, file and overrides) as TOML."""
    typer.echo(config_to_toml(load_config(config, set_ or [])), nl=False)


@app.command()
@reports_errors
def pretrain(
    config: ConfigPath,
    set_: Overrides = None,
    overwrite: Overwrite = False,
) -> None:
    """Language-model warm-up of the policy on the frozen corpus overture ships.

    `--set parallel.nproc=N` trains on N processes (as Ray actors with runtime.ray = true).
    """
    from overture.supervised.pretrain import pretrain as run_pretrain

    run_config = load_config(config, set_ or [])
    summary = run_pretrain(
        run_config,
        overwrite=overwrite,
        echo=echo,
    )
    typer.echo(json.dumps(summary))


@app.command()
@reports_errors
def sft(
    config: ConfigPath,
    set_: Overrides = None,
    overwrite: Overwrite = False,
    resume: Resume = False,
) -> None:
    """Supervised warm start on demonstration conversations; prints a JSON summary.

    `--set parallel.nproc=N` trains on N processes (as Ray actors with runtime.ray = true).
    """
    from overture.supervised.sft import sft as run_sft

    run_config = load_config(config, set_ or [])
    summary = run_sft(
        run_config,
        overwrite=overwrite,
        resume=resume,
        echo=echo,
    )
    typer.echo(json.dumps(summary))


@sandbox_app.command("run", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
@reports_errors
def sandbox_run(
    ctx: typer.Context,
    workspace: Annotated[Path, typer.Option(help="directory the sandbox starts from (never modified)")],
    timeout: Annotated[float | None, typer.Option(help="wall-clock limit in seconds")] = None,
    config: Annotated[Path | None, typer.Option(help="TOML run configuration for the sandbox limits")] = None,
    set_: Overrides = None,
    diff: Annotated[bool, typer.Option(help="include the workspace diff in the result")] = False,
) -> None:
    """Run one command (after `--`) in a fresh sandbox over DIR; print the result as JSON."""
    import asyncio

    from overture.sandbox import SandboxPool

    command = list(ctx.args)
    if not command:
        raise typer.BadParameter("give the command after --, e.g. overture sandbox run --workspace . -- ls")
    sandbox_config = load_config(config, set_ or []).sandbox

    async def run() -> dict:
        async with SandboxPool(sandbox_config) as pool, pool.sandbox(workspace) as box:
            result = (await box.exec(command, timeout=timeout)).to_dict()
            if diff:
                result["diff"] = box.diff()
            return result

    typer.echo(json.dumps(asyncio.run(run())))


@tools_app.command("run")
@reports_errors
def tools_run(
    workspace: Annotated[Path, typer.Option(help="directory the sandbox starts from (never modified)")],
    calls: Annotated[str, typer.Option(help="file holding an assistant turn's text with tool calls, or -")],
    config: Annotated[Path | None, typer.Option(help="TOML run configuration (sandbox, agent)")] = None,
    set_: Overrides = None,
    tokenizer: Annotated[
        Path | None, typer.Option(help="tokenizer directory for the response cap (default: overture's)")
    ] = None,
    diff: Annotated[bool, typer.Option(help="include the workspace diff in the result")] = False,
) -> None:
    """Execute one assistant turn's tool calls in a sandbox over DIR; print responses and timings as JSON."""
    import asyncio
    import sys

    from overture.cli.agent_run import load_tokenizer, run_tool_calls

    if calls == "-":
        text = _utf8(sys.stdin.buffer.read(), "standard input", "--calls")
    else:
        text = _read_text(Path(calls), "--calls")
    run_config = load_config(config, set_ or [])
    result = asyncio.run(run_tool_calls(workspace, text, run_config, load_tokenizer(tokenizer), diff))
    typer.echo(json.dumps(result))


@app.command()
@reports_errors
def agent(
    instruction: Annotated[str, typer.Argument(help="the task, in words")],
    repo: Annotated[Path, typer.Option(help="repository to work on (changed only with --apply)")],
    model: Annotated[Path | None, typer.Option(help="checkpoint directory (with tokenizer.json)")] = None,
    script: Annotated[
        Path | None, typer.Option(help="instead of a model: a JSON list of assistant turns to play")
    ] = None,
    tokenizer: Annotated[Path | None, typer.Option(help="tokenizer directory, if not the model's")] = None,
    engine_url: Annotated[
        str | None,
        typer.Option(
            help="a running vLLM server that serves --model (e.g. started by `vllm serve MODEL`): the "
            "episode generates there (engine.backend = vllm, engine.vllm_urls = [URL])"
        ),
    ] = None,
    apply: Annotated[bool, typer.Option(help="write the final diff back to the repository")] = False,
    out: Annotated[Path | None, typer.Option(help="write the trajectory (JSON) to this file")] = None,
    env: Annotated[
        bool,
        typer.Option(
            "--env/--no-env",
            help="its commands run in an environment built for the repository (`overture tasks env`: its "
            "dependencies, test extras, pytest and plugins), not on overture's own Python",
        ),
    ] = False,
    config: Annotated[Path | None, typer.Option(help="TOML run configuration")] = None,
    set_: Overrides = None,
) -> None:
    """Run a model as a coding agent on a repository in a copy-on-write sandbox; print the diff."""
    from overture.cli.agent_run import agent_policy, apply_diff, run_episode_sync

    if (model is None) == (script is None):
        raise typer.BadParameter("give exactly one of --model DIR or --script FILE")
    if not repo.is_dir():
        raise typer.BadParameter(f"{repo}: not a directory", param_hint="--repo")
    if engine_url is not None and model is None:
        raise typer.BadParameter("--engine-url needs --model: the checkpoint the server serves")
    served_by = []
    if engine_url is not None:
        served_by = ["engine.backend=vllm", f"engine.vllm_urls={json.dumps([engine_url])}"]
    run_config = load_config(config, [*(set_ or []), *served_by])
    python = None
    if env:
        from overture.tasks.environment import as_python, resolve_environment

        echo(f"── building the environment of {repo}")
        python = as_python(resolve_environment(repo)[1])
    with contextlib.ExitStack() as opened:
        try:
            policy, tok = opened.enter_context(agent_policy(model, script, tokenizer, run_config))
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None
        trajectory, diff = run_episode_sync(repo, instruction, policy, tok, run_config, echo, python)
    summary = {"status": trajectory.status, "reason": trajectory.status_reason, **trajectory.metrics}
    echo(f"── episode {trajectory.status} ({trajectory.status_reason}): {json.dumps(summary)}")
    if out is not None:
        out.write_text(json.dumps(trajectory.to_dict()))
    typer.echo(diff, nl=False)
    if apply:
        apply_diff(repo, diff)
        echo(f"── applied the diff to {repo}" if diff else "── no changes to apply")


@app.command("eval")
@reports_errors
def evaluate_checkpoint(
    config: ConfigPath,
    checkpoint: Annotated[Path, typer.Option(help="checkpoint directory (with tokenizer.json)")],
    tasks: Annotated[
        Path | None, typer.Option(help="task file (default: tasks.source; 'builtin' = the job's bundled set)")
    ] = None,
    split: Annotated[str, typer.Option(help="tasks of this split (heldout or train)")] = "heldout",
    samples: Annotated[int, typer.Option(help="episodes per task")] = 1,
    k: Annotated[list[int] | None, typer.Option("--k", help="report pass@k (repeatable; default 1)")] = None,
    limit: Annotated[
        int | None, typer.Option(help="only N tasks of the split, taken from each repository in turn")
    ] = None,
    trajectories: Annotated[Path | None, typer.Option(help="write every trajectory (JSONL)")] = None,
    set_: Overrides = None,
) -> None:
    """Held-out pass@1 (and pass@k) of a checkpoint as a coding agent on graded tasks; JSON."""
    import asyncio

    from overture.evaluation.held_out import evaluate
    from overture.model import read_model_config
    from overture.orchestration.rollout_engine import open_checkpoint_engine
    from overture.recipes.main_job.job_tasks import load_task_set, spread_over_repos
    from overture.tasks.spec import write_jsonl
    from overture.text import Tokenizer

    run_config = load_config(config, set_ or [])
    if tasks is not None:
        run_config.tasks.source = str(tasks)
    # Before the tasks (a synthesis, the first time): a directory that is no checkpoint is named as
    # such, not as a missing tokenizer.
    read_model_config(checkpoint)
    tokenizer = Tokenizer.from_dir(checkpoint)
    # 'builtin' is the bundled set `overture train` synthesizes for this config (made once, cached).
    every, origin = asyncio.run(load_task_set(run_config, echo))
    chosen = spread_over_repos([task for task in every if task.split == split], limit)
    if not chosen:
        raise typer.BadParameter(f"{origin.path}: no tasks in split {split!r}", param_hint="--split")
    # engine.backend: overture's engine here, or vLLM servers.
    with open_checkpoint_engine(run_config, checkpoint, tokenizer) as engine:
        try:
            sections = (run_config.agent, run_config.sandbox, run_config.tasks)
            report, episodes = asyncio.run(
                evaluate(chosen, engine.policy(), tokenizer, *sections, samples, k or [1])
            )
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None
    if trajectories is not None:
        write_jsonl(trajectories, [t.to_dict() for t in episodes])
    typer.echo(json.dumps({"checkpoint": str(checkpoint), "split": split, **report.to_dict()}))


def _read_text(path: Path, option: str) -> str:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise typer.BadParameter(f"{path}: {exc.strerror}", param_hint=option) from None
    return _utf8(data, str(path), option)


def _utf8(data: bytes, source: str, option: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        message = f"{source}: not UTF-8 text (byte {exc.start} is {data[exc.start]:#04x})"
        raise typer.BadParameter(message, param_hint=option) from None


def main() -> None:  # pragma: no cover - console-script entry point
    app()
