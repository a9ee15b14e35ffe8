"""What the main job (`overture train`) shows while it runs and when it ends.

`JobDisplay` holds a rich console (stderr under the CLI): phase headings, a bar over each
evaluation (episodes done, tasks resolved so far), a bar over the RL steps (step, reward,
pass rate, tokens/s, staleness, partial rollouts, time left), and the closing summary table
(pass@1 before → after, steps, wall time, behaviour metrics).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from overture.agent import Trajectory
from overture.evaluation.held_out import EVAL_METRICS
from overture.orchestration.orchestrator import StepReport


class JobDisplay:
    """Progress and summary of one main-job run on `console`."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True)

    def echo(self, line: str) -> None:
        self.console.print(line, highlight=False, soft_wrap=True, markup=False)

    def phase(self, title: str) -> None:
        self.console.rule(title)

    def _progress(self, bar: bool = True) -> Progress:
        """Name, [bar,] done/total, note, elapsed and time left (the RL note is long: no bar)."""
        return Progress(
            TextColumn("{task.description}"),
            *([BarColumn()] if bar else []),
            MofNCompleteColumn(),
            TextColumn("{task.fields[note]}"),
            TimeElapsedColumn(),
            TextColumn("left"),
            TimeRemainingColumn(),
            console=self.console,
        )

    @contextmanager
    def evaluation(self, label: str, episodes: int) -> Iterator[Any]:
        """A bar over `episodes`; yields the per-trajectory callback `evaluate` takes."""
        with self._progress() as bar:
            handle = bar.add_task(label, total=episodes, note="")
            resolved = 0

            def seen(trajectory: Trajectory) -> None:
                nonlocal resolved
                resolved += trajectory.reward_info.get("resolution") == "resolved"
                bar.update(handle, advance=1, note=f"{resolved} resolved")

            yield seen

    @contextmanager
    def counting(self, label: str, total: int) -> Iterator[Any]:
        """A bar over `total` items; yields a callback taking how many more are done."""
        with self._progress() as bar:
            handle = bar.add_task(label, total=total, note="")
            yield lambda done: bar.update(handle, advance=done)

    @contextmanager
    def rl_steps(self, total: int, done: int) -> Iterator[Any]:
        """A bar over the RL steps; yields a callback taking (step, `StepReport`)."""
        with self._progress(bar=False) as bar:
            handle = bar.add_task("rl step", total=total, completed=done, note="")

            def step(number: int, report: StepReport) -> None:
                bar.update(handle, completed=number, note=step_note(report))

            yield step

    def summary(self, summary: dict[str, Any]) -> None:
        """The closing table and a line of totals."""
        before, after = summary["eval_before"], summary["eval_after"]
        table = Table(title=f"overture train: {summary['run_dir']}")
        table.add_column("held-out", style="bold")
        table.add_column("SFT", justify="right")
        table.add_column("after RL", justify="right")
        table.add_column("change", justify="right")
        rows = [(key, before["pass_at"][key], after["pass_at"][key]) for key in before["pass_at"]]
        # .get: a run resumed from an older version recorded fewer metrics before RL.
        rows += [(name, before["metrics"].get(name, 0.0), after["metrics"][name]) for name in EVAL_METRICS]
        for name, old, new in rows:
            table.add_row(name, f"{old:.3f}", f"{new:.3f}", f"{new - old:+.3f}")
        self.console.print(table)
        if paired := summary.get("behaviour_change"):
            changes = Table(title="paired by task (mean of each task's episodes)")
            for column in ("measure", "SFT", "after RL", "change", "std. error", "tasks"):
                changes.add_column(column, justify="left" if column == "measure" else "right")
            for name, c in paired.items():
                figures = (c["before"], c["after"], c["change"], c["standard_error"])
                changes.add_row(name, *(f"{x:.3f}" for x in figures), str(c["tasks"]))
            self.console.print(changes)
        change, samples = summary["pass@1_change"], {before["samples"], after["samples"]}
        episodes = " and ".join(str(n) for n in sorted(samples))
        self.echo(
            f"pass@1 change {change['change']:+.3f}, standard error {change['standard_error']:.3f} "
            f"(paired by task; {episodes} episodes a task)"
        )
        if sharp := summary.get("sharpening"):
            captured = "-" if sharp["captured"] is None else f"{sharp['captured']:.0%}"
            self.echo(
                f"sharpening headroom (pass@{sharp['k']} - pass@1 after SFT) {sharp['headroom']:.3f}; "
                f"RL's pass@1 change {sharp['pass@1_change']:+.3f} took {captured} of it"
            )
        rl = summary["rl"]
        self.echo(
            f"{summary['tasks']['train']} train / {summary['tasks']['heldout']} held-out tasks; "
            f"SFT {summary['sft']['steps']} steps (held-out loss {summary['sft']['initial_val_loss']:.3f} -> "
            f"{summary['sft']['best_val_loss'] or float('nan'):.3f}); RL {rl['steps']} steps "
            f"(reward {rl['reward_first']:.3f} -> {rl['reward_last']:.3f}, "
            f"max staleness {rl['max_staleness']}, "
            f"{rl['episodes_aborted']} aborted / {rl['episodes_resumed']} resumed partial rollouts); "
            f"wall time {summary['wall_s']:.0f} s"
        )


def step_note(report: StepReport) -> str:
    """One line of an RL step's figures for the progress bar."""
    lag = max(report.staleness, default=0)
    return (
        f"reward {report.sampled_reward_mean:.3f}  pass {report.resolved_share:.2f}  "
        f"{report.tokens_per_s:,.0f} tok/s  "
        f"staleness {lag}  partial {report.episodes_aborted}/{report.episodes_resumed}"
    )
