"""What every `overture` command shares: the error console, argument types, and error reporting.

Every command turns the project's known errors (bad config, bad checkpoint, bad tokenizer, bad
task file, an existing run directory) into one clear message and exit status 2, never a
traceback.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from overture.config import ConfigError

console = Console(stderr=True)


def echo(line: str) -> None:
    """A progress line on stderr, printed as it is (no markup, no highlighting)."""
    console.print(line, highlight=False, soft_wrap=True, markup=False)

ConfigPath = Annotated[Path, typer.Argument(help="TOML run configuration, e.g. configs/tiny.toml")]
Overrides = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        help="override a key, repeatable: section.key=value (e.g. sandbox.cpu_seconds=120, "
        "tasks.test_timeout_s=300), or a top-level key=value (name, output_dir, seed); "
        "`overture config show CONFIG` lists every key",
    ),
]
Overwrite = Annotated[bool, typer.Option(help="replace an existing run directory of the same name")]
Resume = Annotated[bool, typer.Option(help="continue the run from its newest complete checkpoint")]


def reports_errors(command: Callable) -> Callable:
    """Turn the project's input errors into a message naming what is wrong and exit status 2."""

    @wraps(command)
    def run(*args, **kwargs):
        from overture.model import CheckpointError
        from overture.rl.checkpoints import TrainingCheckpointError
        from overture.rl.run_dir import RunDirError
        from overture.sandbox import SandboxError
        from overture.supervised.demonstrations import DemonstrationError
        from overture.tasks.spec import TaskError
        from overture.text import TokenizerError

        known = (
            SandboxError,
            ConfigError,
            CheckpointError,
            TokenizerError,
            RunDirError,
            TrainingCheckpointError,
            DemonstrationError,
            TaskError,
        )
        try:
            return command(*args, **kwargs)
        except known as exc:
            console.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None

    return run
