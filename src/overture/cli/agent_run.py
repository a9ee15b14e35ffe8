"""What `overture tools run` and `overture agent` do, apart from argument parsing.

Layer 6 glue: a checkpoint runs through the rollout engine `engine.backend` names, behind the
agent's `Policy` protocol (`overture.orchestration.rollout_engine`), a scripted policy stands in
for a model in tests and demos, an observer prints the episode as it runs, and `apply_diff`
writes the sandbox's diff back to the repository with `patch`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from overture.agent import Episode, ScriptedPolicy, ToolContext, ToolSet, Trajectory
from overture.config import RunConfig
from overture.sandbox import SandboxError, SandboxPool
from overture.sandbox.python_env import PythonEnvironment
from overture.text import Tokenizer, train_default_tokenizer

RESPONSE_PREVIEW_LINES = 15


def load_tokenizer(directory: Path | None) -> Tokenizer:
    return Tokenizer.from_dir(directory) if directory is not None else train_default_tokenizer()


def load_script(path: Path) -> list[str]:
    """A script: a JSON list of assistant turn texts."""
    try:
        script = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: cannot read the script (a JSON list of assistant turns): {exc}") from None
    if not isinstance(script, list) or not all(isinstance(turn, str) for turn in script):
        raise ValueError(f"{path}: a script must be a JSON list of strings (one per assistant turn)")
    return script


async def run_tool_calls(
    workspace: Path, text: str, config: RunConfig, tokenizer: Tokenizer, with_diff: bool
) -> dict[str, Any]:
    """Execute one assistant turn's text in a fresh sandbox over `workspace`, as an episode would."""
    tools = ToolSet.for_agent(config.agent)
    parsed = tools.parse(text)
    async with SandboxPool(config.sandbox) as pool, pool.sandbox(workspace) as box:
        context = ToolContext(box, config.agent)
        started = time.monotonic()
        records = await tools.execute(parsed, context, tokenizer, config.agent.tool_response_tokens)
        result: dict[str, Any] = {
            "calls": [record.to_dict() for record in records],
            "responses": [record.response for record in records],
            "invalid_calls": sum(record.invalid for record in records),
            "wall_s": round(time.monotonic() - started, 6),
        }
        if with_diff:
            result["diff"] = box.diff()
    return result


def printing_observer(echo: Callable[[str], None]) -> Callable[[str, dict[str, Any]], None]:
    """An episode observer that prints each assistant turn and its tool responses."""

    def observe(kind: str, data: dict[str, Any]) -> None:
        if kind == "assistant":
            echo(f"── turn {data['turn']} · assistant\n{data['text']}")
            return
        for call in data["calls"]:
            status = "ok" if not call["error"] else call["error"]
            lines = call["response"].splitlines()
            preview = "\n".join(lines[:RESPONSE_PREVIEW_LINES])
            hidden = len(lines) - RESPONSE_PREVIEW_LINES
            more = f"\n[... {hidden} more lines]" if hidden > 0 else ""
            head = f"── [{call['index']}] {call['name'] or '?'} · {status} · {call['duration_s']:.3f}s"
            echo(f"{head}\n{preview}{more}")

    return observe


async def run_agent(
    repo: Path,
    instruction: str,
    policy: Any,
    tokenizer: Tokenizer,
    config: RunConfig,
    echo: Callable[[str], None],
    python: PythonEnvironment | None = None,
) -> tuple[Trajectory, str]:
    """One episode over a copy-on-write sandbox of `repo` (its commands on `python`, when given, else
    overture's own); its trajectory and the final diff."""
    async with SandboxPool(config.sandbox) as pool, pool.sandbox(repo, python) as box:
        episode = Episode(
            policy, box, tokenizer, instruction, config=config.agent, task_id=repo.name,
            observer=printing_observer(echo),
        )  # fmt: skip
        trajectory = await episode.run()
        return trajectory, box.diff()


def apply_diff(repo: Path, diff: str) -> None:
    """Write the sandbox's diff into `repo` (`patch -p1`); a failure changes nothing and says why."""
    if not diff:
        return
    # `patch` skips these lines silently; applying the rest would lose those changes.
    unpatchable = [line for line in diff.splitlines() if line.startswith(("Binary files ", "Symlink "))]
    if unpatchable:
        raise SandboxError(
            f"{repo}: not applied: the diff has changes patch cannot write ({'; '.join(unpatchable[:3])})"
        )
    check = ["patch", "-p1", "--batch", "--forward", "--silent", "-d", str(repo)]
    dry = subprocess.run([*check, "--dry-run"], input=diff, text=True, capture_output=True)
    if dry.returncode != 0:
        raise SandboxError(f"{repo}: the diff does not apply: {(dry.stdout + dry.stderr).strip()}")
    subprocess.run(check, input=diff, text=True, capture_output=True, check=True)


@contextlib.contextmanager
def agent_policy(
    model: Path | None, script: Path | None, tokenizer_dir: Path | None, config: RunConfig
) -> Iterator[tuple[Any, Tokenizer]]:
    """The policy and tokenizer `overture agent` runs: a checkpoint through the engine
    `engine.backend` names (overture's, or a vLLM server started for the episode), or a script.

    A script without a tokenizer uses the tokenizer overture trains by default.
    """
    if script is not None:
        tokenizer = load_tokenizer(tokenizer_dir or model)
        yield ScriptedPolicy(tokenizer, load_script(script)), tokenizer
        return
    from overture.model import read_model_config
    from overture.orchestration.rollout_engine import open_checkpoint_engine

    assert model is not None
    read_model_config(model)  # first: a directory that is no checkpoint is named as such
    tokenizer = Tokenizer.from_dir(tokenizer_dir or model)
    with open_checkpoint_engine(config, model, tokenizer) as engine:
        yield engine.policy(), tokenizer


def run_episode_sync(
    repo: Path,
    instruction: str,
    policy: Any,
    tokenizer: Tokenizer,
    config: RunConfig,
    echo: Callable[[str], None],
    python: PythonEnvironment | None = None,
) -> tuple[Trajectory, str]:
    return asyncio.run(run_agent(repo, instruction, policy, tokenizer, config, echo, python))
