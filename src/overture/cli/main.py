"""The `overture` command line.

Every command turns the project's known errors (bad config, bad checkpoint, bad tokenizer,
an existing run directory) into one clear message and exit status 2, never a traceback.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from overture.config import ConfigError, config_to_toml, load_config

app = typer.Typer(no_args_is_help=True, add_completion=False, help="overture: RL for agentic coding models.")
config_app = typer.Typer(no_args_is_help=True, help="Inspect run configurations.")
app.add_typer(config_app, name="config")
sandbox_app = typer.Typer(no_args_is_help=True, help="Run commands in isolated, copy-on-write sandboxes.")
app.add_typer(sandbox_app, name="sandbox")
console = Console(stderr=True)

ConfigPath = Annotated[Path, typer.Argument(help="TOML run configuration, e.g. configs/tiny.toml")]
Overrides = Annotated[list[str] | None, typer.Option("--set", help="override a key: section.key=value")]


def reports_errors(command: Callable) -> Callable:
    """Turn the project's input errors into a message naming what is wrong and exit status 2."""

    @wraps(command)
    def run(*args, **kwargs):
        from overture.model import CheckpointError
        from overture.rl.checkpoints import TrainingCheckpointError
        from overture.rl.demonstrations import DemonstrationError
        from overture.rl.run_dir import RunDirError
        from overture.sandbox import SandboxError
        from overture.text import TokenizerError

        known = (
            SandboxError,
            ConfigError,
            CheckpointError,
            TokenizerError,
            RunDirError,
            TrainingCheckpointError,
            DemonstrationError,
        )
        try:
            return command(*args, **kwargs)
        except known as exc:
            console.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None

    return run


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
    overwrite: Annotated[
        bool, typer.Option(help="replace an existing run directory of the same name")
    ] = False,
) -> None:
    """Language-model warm-up of the policy on the corpus overture ships (the demo until RL lands)."""
    from overture.rl.pretrain import pretrain as run_pretrain

    run_config = load_config(config, set_ or [])
    summary = run_pretrain(
        run_config,
        overwrite=overwrite,
        echo=lambda line: console.print(line, highlight=False, soft_wrap=True),
    )
    typer.echo(json.dumps(summary))


@app.command()
@reports_errors
def sft(
    config: ConfigPath,
    set_: Overrides = None,
    overwrite: Annotated[
        bool, typer.Option(help="replace an existing run directory of the same name")
    ] = False,
    resume: Annotated[
        bool, typer.Option(help="continue the run from its newest complete checkpoint")
    ] = False,
) -> None:
    """Supervised warm start on demonstration conversations; prints a JSON summary."""
    from overture.rl.sft import sft as run_sft

    run_config = load_config(config, set_ or [])
    summary = run_sft(
        run_config,
        overwrite=overwrite,
        resume=resume,
        echo=lambda line: console.print(line, highlight=False, soft_wrap=True),
    )
    typer.echo(json.dumps(summary))


@sandbox_app.command("run", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
@reports_errors
def sandbox_run(
    ctx: typer.Context,
    workspace: Annotated[Path, typer.Option(help="directory the sandbox starts from (never modified)")],
    timeout: Annotated[float | None, typer.Option(help="wall-clock limit in seconds")] = None,
    config: Annotated[
        Path | None, typer.Option(help="TOML run configuration for the [sandbox] limits")
    ] = None,
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


def main() -> None:  # pragma: no cover - console-script entry point
    app()
