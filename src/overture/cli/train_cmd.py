"""`overture train CONFIG`: the main job (tasks, SFT, evaluation, RL, evaluation) in one command.

Progress and the summary table go to stderr; the last line of stdout is the JSON summary.
"""

from __future__ import annotations

import json

import typer

from overture.cli.common import ConfigPath, Overrides, Overwrite, Resume, console, reports_errors
from overture.config import load_config


@reports_errors
def train(
    config: ConfigPath,
    set_: Overrides = None,
    overwrite: Overwrite = False,
    resume: Resume = False,
) -> None:
    """Build tasks, SFT on oracle demonstrations, evaluate, run RL, evaluate again; JSON summary."""
    from overture.recipes.main_job.job import train as run_train
    from overture.recipes.main_job.job_display import JobDisplay

    if overwrite and resume:
        raise typer.BadParameter("give --overwrite or --resume, not both")
    run_config = load_config(config, set_ or [])
    summary = run_train(run_config, overwrite=overwrite, resume=resume, display=JobDisplay(console))
    typer.echo(json.dumps(summary))
