"""Shared helpers of the orchestrator tests: a tiny random Qwen3-MoE checkpoint served by a real
engine, a real trainer over the same weights, and a run of the orchestrator on real sandboxes."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Generator, Sequence
from pathlib import Path
from typing import Any

from conftest import tiny_model_config

from overture.agent import Generation, Policy, PolicyRequest
from overture.config import RunConfig
from overture.engine import Engine
from overture.model import Transformer, load_pretrained, save_pretrained
from overture.orchestration.orchestrator import (
    LocalEngine,
    LocalTrainer,
    Orchestrator,
    StepReport,
    local_rollouts,
)
from overture.rl.trainer import rl_trainer
from overture.sandbox import SandboxPool
from overture.tasks.spec import Task
from overture.text import Tokenizer

RUN_TIMEOUT_S = 120.0


def save_tiny_policy(directory: Path, tokenizer: Tokenizer) -> Path:
    """A random tiny Qwen3-MoE with the tokenizer's vocabulary, saved with the tokenizer."""
    save_pretrained(Transformer(tiny_model_config(vocab_size=tokenizer.vocab_size)), directory)
    tokenizer.save(directory)
    return directory


def run_config(**rl: Any) -> RunConfig:
    """G = 2, B = 2, short turns, two turns at most; `rl` overrides the RL section. A random
    model's turns end at the token budget (truncated): they stay in the loss, or nothing would
    be trained. It solves nothing, so its advantages are all 0: a small KL term gives its
    batches the policy signal without which the trainer takes no step."""
    return RunConfig.model_validate(
        {
            "model": tiny_model_config().model_dump(),
            "training": {"lr": 1e-3, "warmup_steps": 0},
            "rl": {"group_size": 2, "batch_groups": 2, "mask_truncated": False, "kl_coef": 0.01, **rl},
            "agent": {"max_turns": 2, "max_new_tokens": 12, "search_backend": "bm25"},
            "engine": {"max_batch_size": 8},
        }
    )


def run_orchestrator(
    checkpoint: Path,
    tasks: Sequence[Task],
    config: RunConfig,
    steps: int,
    wrap_policy: Any = None,
) -> tuple[list[StepReport], int]:
    """`steps` steps of the orchestrator; the reports and the engine's final version."""
    tokenizer = Tokenizer.from_dir(checkpoint)
    engine = Engine.from_pretrained(checkpoint, config=config.engine)
    trainer = rl_trainer(load_pretrained(checkpoint), config)
    handle = LocalEngine(engine)
    policy = handle.policy() if wrap_policy is None else wrap_policy(handle.policy())

    async def main() -> list[StepReport]:
        async with SandboxPool(config.sandbox) as pool:
            rollouts = local_rollouts(config, handle, pool, tokenizer, policy)
            orchestrator = Orchestrator(
                config.rl, config.seed, tasks, handle, LocalTrainer(trainer), rollouts
            )
            # A broken admission rule can stall the run: fail then, do not hang.
            return await asyncio.wait_for(orchestrator.run(steps), RUN_TIMEOUT_S)

    try:
        return asyncio.run(main()), engine.version
    finally:
        engine.close()


def our_sandbox_holders() -> list[int]:
    """Pids of the namespace holders of this process's started sandboxes: its children named so,
    their overlay mounted and their `ready` written (the holder blocks reading its stdin after
    it: killing one earlier would make the sandbox fail to start, not die mid-episode)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            if parent != os.getpid() or b"overture-holder" not in cmdline:
                continue
            ready = "pipe_read" in (entry / "wchan").read_text()
            if ready and " overlay " in (entry / "mountinfo").read_text():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


class SandboxKillingPolicy:
    """Wraps a policy; on its first `kills` generations, first kills every live sandbox holder of
    this process (the sandboxes die mid-episode, as when their node loses them). A generation
    returns once the killed holders are reaped, so the episode sees its sandbox dead."""

    def __init__(self, policy: Policy, kills: int) -> None:
        self.policy = policy
        self.kills_left = kills
        self.killed: list[int] = []

    def generate(self, prompt_ids: list[int], max_new_tokens: int) -> PolicyRequest:
        victims = []
        if self.kills_left > 0:
            self.kills_left -= 1
            victims = our_sandbox_holders()
            for pid in victims:
                os.kill(pid, signal.SIGKILL)
            self.killed.extend(victims)
        return AfterReaping(self.policy.generate(prompt_ids, max_new_tokens), victims)


class AfterReaping:
    """A policy request whose result comes once the given processes are reaped."""

    def __init__(self, request: PolicyRequest, pids: list[int]) -> None:
        self.request, self.pids = request, pids

    def abort(self) -> None:
        self.request.abort()

    async def _result(self) -> Generation:
        generation = await self.request
        while any(Path(f"/proc/{pid}").exists() for pid in self.pids):
            await asyncio.sleep(0.005)
        await asyncio.sleep(0.01)  # the loop runs the exit callbacks that mark the holders dead
        return generation

    def __await__(self) -> Generator[Any, None, Generation]:
        return self._result().__await__()
