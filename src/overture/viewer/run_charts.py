"""The run's charts: reward and held-out pass@1 over steps, staleness, off-policy tokens, and the
agent's behaviour over training, from metrics.jsonl and the trajectory files.

RL records give reward, resolved share, staleness and off-policy share per step; behaviour
metrics of the training rollouts are averaged from each step's trajectories (`metrics` of each,
as `overture.agent.behaviour_metrics` computed them), and the held-out evaluations' own averages
come from their metrics records.
"""

from __future__ import annotations

from collections import Counter
from statistics import fmean
from typing import Any

from overture.viewer.run_data import RunData
from overture.viewer.svg_charts import Series, bar_chart, format_number, format_percent, line_chart

TRAIN, HELDOUT, SECOND = "#2563eb", "#ea580c", "#16a34a"

# (trajectory metrics key, chart title, shown as a share)
BEHAVIOUR_CHARTS = (
    ("tool_calls_per_turn", "Tool calls per turn", False),
    ("parallel_turn_share", "Turns with parallel calls", True),
    ("turns", "Turns per episode", False),
    ("reads_before_first_edit", "Reads and searches before the first edit", False),
    ("policy_tokens", "Generated tokens per episode", False),
    ("invalid_call_rate", "Invalid call rate", True),
)


def _numeric(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def record_series(records: list[dict[str, Any]], key: str) -> list[tuple[float, float]]:
    return [(r["step"], float(r[key])) for r in records if _numeric(r.get(key)) and _numeric(r.get("step"))]


def rollout_means(run: RunData, key: str, resolved_only: bool = False) -> list[tuple[float, float]]:
    """Per RL step, the mean of one behaviour metric over that step's trajectories (those that
    resolved their task only, with `resolved_only`)."""
    points = []
    for source in run.sources:
        values = [
            float(t.metrics[key])
            for t in source.trajectories
            if _numeric(t.metrics.get(key))
            and (not resolved_only or t.reward_info.get("resolution") == "resolved")
        ]
        if source.kind == "rl" and values:
            points.append((float(source.step), fmean(values)))
    return points


def staleness_counts(run: RunData) -> list[tuple[str, float]]:
    total: Counter[int] = Counter()
    for record in run.rl_records:
        for lag, count in (record.get("staleness") or {}).items():
            total[int(lag)] += int(count)
    return [(str(lag), float(total[lag])) for lag in sorted(total)]


def multi_version_share(run: RunData) -> list[tuple[float, float]]:
    points = []
    for record in run.rl_records:
        admitted = sum((record.get("staleness") or {}).values())
        if admitted and _numeric(record.get("multi_version_trajectories")):
            points.append((float(record["step"]), record["multi_version_trajectories"] / admitted))
    return points


def run_charts(run: RunData) -> list[str]:
    """Every chart of the run, as `<figure>` markup, in reading order."""
    rl, evals = run.rl_records, run.eval_records
    charts = [
        line_chart(
            "Reward",
            [
                Series("mean reward", record_series(rl, "reward_mean"), TRAIN),
                Series("resolved share", record_series(rl, "resolved_share"), SECOND, dashed=True),
            ],
            note="training rollouts, per RL step",
            y_floor=0.0,
            y_ceiling=1.0,
        ),
        line_chart(
            "Held-out pass@1",
            [Series("pass@1", record_series(evals, "pass@1"), HELDOUT)],
            note="evaluation before and after RL",
            fmt=format_percent,
            y_ceiling=1.0,
        ),
        bar_chart(
            "Staleness",
            staleness_counts(run),
            TRAIN,
            note="trajectories by version lag (trainer − oldest token)",
            x_label="lag",
        ),
        line_chart(
            "Off-policy tokens",
            [
                Series("token share", record_series(rl, "off_policy_token_share"), TRAIN),
                Series("multi-version trajectories", multi_version_share(run), SECOND, dashed=True),
            ],
            note="policy tokens older than the trained version",
            fmt=format_percent,
            y_ceiling=1.0,
        ),
    ]
    for key, title, share in BEHAVIOUR_CHARTS:
        charts.append(
            line_chart(
                title,
                [
                    Series("training rollouts", rollout_means(run, key), TRAIN),
                    Series("held-out", record_series(evals, key), HELDOUT, line=False),
                ],
                note="behaviour over training",
                fmt=format_percent if share else format_number,
                y_ceiling=1.0 if share else None,
            )
        )
    charts.append(
        line_chart(
            "Turns per resolved episode",
            [Series("training rollouts", rollout_means(run, "turns", resolved_only=True), TRAIN)],
            note="what a turn cost asks to shorten",
        )
    )
    return charts
