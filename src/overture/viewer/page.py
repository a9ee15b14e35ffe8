"""The viewer page: one self-contained HTML document for a run directory.

The document inlines its stylesheet and script (package data under `static/`) and needs no
network. Markup written here escapes every text it interpolates (`html.escape`); trajectories
travel to the script as JSON inside `<script type="application/json">`, with `<`, `>` and `&`
written as `\\u003c`, `\\u003e`, `\\u0026` so no text can close that element, and the script puts
untrusted text into the page only through `textContent`. A Content-Security-Policy allows the
page's own script and stylesheet alone (by hash) and no network access, so even markup that
slipped through could run nothing.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import time
from html import escape
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any

from overture.viewer.run_charts import run_charts
from overture.viewer.run_data import RunData, load_run
from overture.viewer.trajectory_view import trainer_version_of, trajectory_view

SCRIPT_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def static_text(name: str) -> str:
    """A file of the page's package data (`overture/viewer/static/`)."""
    return resources.files("overture.viewer").joinpath("static", name).read_text(encoding="utf-8")


def finite(value: Any) -> Any:
    """`value` with NaN and infinities (which JSON cannot hold) as their names, in strings."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {str(k): finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def json_for_script(value: Any) -> str:
    """JSON that is safe as the text of a `<script>` element (nothing in it can end the element)."""
    text = json.dumps(finite(value), ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    for char, replacement in SCRIPT_ESCAPES.items():
        text = text.replace(char, replacement)
    return text


def csp_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"


def content_security_policy(script: str, style: str) -> str:
    return (
        f"default-src 'none'; script-src {csp_hash(script)}; style-src {csp_hash(style)}; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    )


def page_data(run: RunData) -> dict[str, Any]:
    """Everything the script renders: the trajectories and the system prompts they share."""
    systems: list[str] = []
    trajectories = []
    for source in run.sources:
        trainer_version = trainer_version_of(source, run.metrics)
        for position, trajectory in enumerate(source.trajectories):
            trajectories.append(
                trajectory_view(trajectory, source, position, run.tokenizer, trainer_version, systems)
            )
    sources = [{"name": s.name, "label": s.label, "step": s.step} for s in run.sources]
    return {"run": run.name, "sources": sources, "systems": systems, "trajectories": trajectories}


def _last(records: list[dict[str, Any]], key: str, **match: Any) -> Any:
    found = [r[key] for r in records if key in r and all(r.get(k) == v for k, v in match.items())]
    return found[-1] if found else None


def _fact(label: str, value: Any) -> str:
    return f"<div class='fact'><span class='fact-label'>{escape(label)}</span>{escape(str(value))}</div>"


def _share(value: Any) -> str:
    return f"{value * 100:.0f}%" if isinstance(value, int | float) else "–"


def run_facts(run: RunData) -> str:
    """The header's summary of the run."""
    rl = run.rl_records
    steps_done = max((r["step"] for r in rl if isinstance(r.get("step"), int)), default=0)
    config = run.config
    facts = [_fact("RL steps", f"{steps_done} / {config.rl.steps}" if config else steps_done)]
    if config is not None:
        facts.append(_fact("staleness bound", config.rl.staleness))
        facts.append(_fact("over-provision", f"{config.rl.overprovision:g}"))
    facts.append(_fact("trajectories", sum(len(s.trajectories) for s in run.sources)))
    before = _last(run.metrics, "pass@1", phase="eval", when="before")
    after = _last(run.metrics, "pass@1", phase="eval", when="after")
    facts.append(_fact("held-out pass@1", f"{_share(before)} → {_share(after)}"))
    reward = _last(rl, "reward_mean")
    facts.append(_fact("last reward", f"{reward:.3f}" if isinstance(reward, int | float) else "–"))
    return "".join(facts)


def problems_note(run: RunData) -> str:
    if not run.problems:
        return ""
    items = "".join(f"<li>{escape(problem)}</li>" for problem in run.problems)
    summary = f"<summary>{len(run.problems)} note(s) on this run</summary>"
    return f"<details class='problems'>{summary}<ul>{items}</ul></details>"


def render_page(run_dir: str | Path, live: bool = False) -> str:
    """The HTML page of the run directory `run_dir`; `live` marks a page served while it runs."""
    run = load_run(run_dir)
    script, style = static_text("page.js"), static_text("page.css")
    generated = time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime())
    return Template(static_text("page.html")).substitute(
        csp=escape(content_security_policy(script, style)),
        title=escape(f"{run.name} · overture run"),
        style=style,
        script=script,
        run_name=escape(run.name),
        run_path=escape(str(run.path)),
        facts=run_facts(run),
        generated=escape(f"{'live · ' if live else ''}rendered {generated}"),
        problems=problems_note(run),
        charts="".join(run_charts(run)),
        data=json_for_script(page_data(run)),
    )


def write_page(run_dir: str | Path, out: str | Path) -> Path:
    """Write the run's page to `out`; returns the path."""
    page = render_page(run_dir)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page, encoding="utf-8")
    return out
