"""Shared helpers of the viewer tests: a run directory laid out as `overture train` writes it, whose
trajectories are real episodes (ScriptedPolicy in real sandboxes, graded by the real grader), one
of them hostile (HTML and script in every text), plus headless Chromium for the browser tests.

The run holds: `eval-before` (an episode whose policy fails), RL step 1 (a resolved episode with
parallel calls and one that gives up), RL step 2 (a partial rollout aborted under version 0 and
resumed under version 1, and the hostile episode), metrics records as the main job logs them, the
resolved config, and the tokenizer saved where SFT saves it.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from agent_helpers import call_text, make_repo, tokenizer

from overture.agent import Episode, ScriptedPolicy, Trajectory
from overture.config import RunConfig, save_config
from overture.evaluation.held_out import summarize
from overture.orchestration.orchestrator import StepReport
from overture.sandbox import SandboxPool
from overture.tasks import Task, run_task_episode
from overture.tasks.episodes import grade_episode
from overture.tasks.spec import write_jsonl

HOSTILE_SCRIPT = "<script>document.body.dataset.pwned = 'script'</script>"
HOSTILE_IMG = "<img src=x onerror=\"document.body.dataset.pwned = 'img'\">"
# Each text below holds both payloads; if any reached the page as markup, it would set data-pwned.
HOSTILE_STATEMENT = f"Fix mean(). {HOSTILE_SCRIPT} and {HOSTILE_IMG} </script><!-- in the statement"
HOSTILE_PROSE = f"Model text {HOSTILE_SCRIPT} {HOSTILE_IMG} </pre></details>"
HOSTILE_FILE = f"<html><body>{HOSTILE_SCRIPT}{HOSTILE_IMG}</body></html>\n"
HOSTILE_TASK_ID = "calc-<b>bold</b>"
HOSTILE_PAYLOADS = (HOSTILE_SCRIPT, HOSTILE_IMG)

EXPLORE = call_text(
    ("grep", {"pattern": "def mean", "output_mode": "files_with_matches"}),
    ("read_file", {"path": "calc/core.py", "offset": 9, "limit": 3}),
    prose="Let me look at mean() and where it is defined.",
)
FIX = call_text(
    (
        "search_replace",
        {"file_path": "calc/core.py", "old_string": "(len(values) + 1)", "new_string": "len(values)"},
    ),
    prose="The divisor is off by one.",
)
TEST = call_text(("run_terminal_cmd", {"command": "python -m pytest -q tests 2>&1 | tail -1"}))
FINISH = call_text(("finish", {"summary": "fixed mean"}))
HOSTILE_TURNS = [
    call_text(
        ("write_file", {"file_path": "notes/evil.html", "contents": HOSTILE_FILE}),
        ("run_terminal_cmd", {"command": f"echo '{HOSTILE_IMG}'"}),
        prose=HOSTILE_PROSE,
    ),
    call_text(
        ("read_file", {"path": "notes/evil.html"}),
        (
            "search_replace",
            {
                "file_path": "calc/core.py",
                "old_string": '"""Arithmetic helpers."""',
                "new_string": f'"""Arithmetic helpers. {HOSTILE_SCRIPT}"""',
            },
        ),
    ),
    call_text(("finish", {"summary": HOSTILE_SCRIPT})),
]


class FailingPolicy:
    """A policy whose engine is gone: the episode fails on its first generation."""

    def generate(self, prompt_ids: list[int], max_new_tokens: int) -> Any:
        raise RuntimeError("engine gone")


def _config(root: Path) -> RunConfig:
    config = RunConfig(name="viewer", output_dir=str(root))
    config.agent.search_backend = "bm25"
    config.rl.steps = 2
    config.rl.staleness = 1
    return config


def _task(repo: Path, instance_id: str, statement: str) -> Task:
    return Task(
        instance_id=instance_id,
        repo="calc",
        problem_statement=statement,
        FAIL_TO_PASS=["tests/test_calc.py::test_mean"],
        base=str(repo),
    )


async def _resumed_episode(task: Task, config: RunConfig, pool: SandboxPool) -> Trajectory:
    """A partial rollout: aborted in turn 2 under version 0, resumed under version 1, graded."""
    script = [EXPLORE, FIX, TEST, FINISH]
    old = ScriptedPolicy(tokenizer(), script, version=0, stall_after={1: 5})
    async with pool.sandbox(Path(task.base)) as box:
        episode = Episode(
            old,
            box,
            tokenizer(),
            task.problem_statement,
            config.agent,
            task_id=task.instance_id,
            group_id="g2",
        )
        running = asyncio.ensure_future(episode.run())
        while len(episode.turns) < 2 or not episode.generating:  # turn 1 in flight, not turn 0
            await asyncio.sleep(0.01)
        episode.abort()
        partial = Trajectory.from_dict((await running).to_dict())
        new = ScriptedPolicy(tokenizer(), script, version=1)
        resumed = await Episode.resume(partial, new, box, tokenizer(), config=config.agent).run()
        graded = await grade_episode(task, box, resumed, config.tasks)
    return graded


async def _episodes(repo: Path, config: RunConfig) -> dict[str, list[Trajectory]]:
    task = _task(repo, "calc-mean", "mean() of [2, 4, 6] gives 3.0, not 4. Fix it.")
    hostile = _task(repo, HOSTILE_TASK_ID, HOSTILE_STATEMENT)
    tok = tokenizer()
    async with SandboxPool(config.sandbox) as pool:

        async def play(on: Task, policy: Any, group: str) -> Trajectory:
            return await run_task_episode(on, policy, pool, tok, config.agent, config.tasks, group_id=group)

        failed = await play(task, FailingPolicy(), "eval-0")
        solved = await play(task, ScriptedPolicy(tok, [EXPLORE, FIX, TEST, FINISH], version=0), "g1")
        gave_up = await play(task, ScriptedPolicy(tok, ["I cannot tell what is wrong."], version=0), "g1")
        resumed = await _resumed_episode(task, config, pool)
        evil = await play(hostile, ScriptedPolicy(tok, HOSTILE_TURNS, version=1), "g3")
    # A grade that records the workspace diff carries it under reward_info["diff"].
    evil.reward_info["diff"] = f"--- a/calc/core.py\n+++ b/calc/core.py\n@@ -1 +1 @@\n+{HOSTILE_IMG}\n"
    return {"eval-before": [failed], "rl-step-000001": [solved, gave_up], "rl-step-000002": [resumed, evil]}


def _step_record(step: int, version: int, trajectories: list[Trajectory], staleness: dict[int, int]) -> dict:
    """An RL step's metrics record, flattened as the main job logs it."""
    report = StepReport(
        step=step,
        version=version,
        reward_mean=sum(t.reward for t in trajectories) / len(trajectories),
        resolved_share=sum(bool(t.metrics.get("resolved")) for t in trajectories) / len(trajectories),
        staleness=staleness,
        off_policy_token_share=0.25 if step == 2 else 0.0,
        groups_dropped_stale=0,
        episodes_aborted=1 if step == 1 else 0,
        episodes_resumed=1 if step == 2 else 0,
        episodes_retried=0,
        episodes_failed=0,
        multi_version_trajectories=1 if step == 2 else 0,
        generation_idle_s=0.1,
        training_s=0.5,
        tokens_generated=sum(sum(t.loss_mask) for t in trajectories),
        wall_s=2.0,
        train_metrics={"loss": 0.1, "policy_version": version},
    )
    record = report.to_dict()
    del record["step"]
    record.update({f"train_{k}": v for k, v in record.pop("train_metrics").items()})
    return {"step": step, "time": 10.0 * step, "phase": "rl", **record}


def _eval_record(when: str, step: int, tasks: list[Task], trajectories: list[Trajectory]) -> dict:
    result = summarize(tasks, trajectories, 1, [1]).to_dict()
    flat = {**result["pass_at"], **result["metrics"], "statuses": result["statuses"]}
    return {"step": step, "time": 1.0, "phase": "eval", "when": when, "version": step, **flat}


def build_run_dir(root: Path) -> Path:
    """A run directory under `root` (see the module docstring); returns its path."""
    config = _config(root)
    repo = make_repo(root)
    episodes = asyncio.run(_episodes(repo, config))
    run = root / config.name
    (run / "trajectories").mkdir(parents=True)
    save_config(config, run / "config.toml")
    tokenizer().save(run / "sft" / "checkpoints" / "best")
    for name, trajectories in episodes.items():
        write_jsonl(run / "trajectories" / f"{name}.jsonl", [t.to_dict() for t in trajectories])
    task = _task(repo, "calc-mean", "")
    records = [
        {"step": 0, "time": 0.5, "phase": "sft", "steps": 4, "best_val_loss": 7.5, "demonstrations": 8},
        _eval_record("before", 0, [task], episodes["eval-before"]),
        _step_record(1, 1, episodes["rl-step-000001"], {0: 2}),
        _step_record(2, 2, episodes["rl-step-000002"], {0: 1, 1: 1}),
    ]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return run


_built: dict[Path, Path] = {}


def session_run_dir(tmp_path_factory) -> Path:
    """`build_run_dir` once per test session (the viewer's test files share it)."""
    key = tmp_path_factory.getbasetemp()
    if key not in _built:
        _built[key] = build_run_dir(tmp_path_factory.mktemp("viewer-run"))
    return _built[key]


def all_trajectories(run_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """The trajectory records of every file of the run, by file stem, as stored."""
    return {
        file.stem: [json.loads(line) for line in file.read_text().splitlines() if line.strip()]
        for file in sorted((run_dir / "trajectories").glob("*.jsonl"))
    }


# ----------------------------------------------------------------------------- headless Chromium


def chromium() -> str | None:
    """The Chromium binary (Debian's `chromium`), or None when it is not installed."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


def artifacts_dir() -> Path:
    """Where browser tests keep screenshots: $OVERTURE_TEST_ARTIFACTS, else .cache/test-artifacts/."""
    folder = Path(os.environ.get("OVERTURE_TEST_ARTIFACTS", ".cache/test-artifacts"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def chromium_run(url: str, *arguments: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """Run headless Chromium on `url` with extra flags (e.g. --dump-dom, --screenshot=PATH)."""
    binary = chromium()
    assert binary is not None
    command = [
        binary, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
        "--no-first-run", "--disable-extensions", "--window-size=1400,1000", *arguments, url,
    ]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=True)


def dump_dom(url: str) -> str:
    """The page's DOM after its script ran, serialized."""
    return chromium_run(url, "--dump-dom").stdout
