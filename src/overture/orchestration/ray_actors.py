"""The RL run on Ray: trainer, engine and rollout workers as actors behind the orchestrator's handles.

`runtime.ray = true` (or `runtime.ray_address`) makes `overture train` run its RL phase here; the
orchestrator is the same object as in process (`overture.orchestration.orchestrator`), driving

- `RemoteTrainer` → `TrainerActor`s: the `Trainer` as `parallel.nproc` rank actors in one
  placement group (one rank: the unsharded trainer; more: sharded by `overture.distributed`, HSDP
  and expert parallelism as `[parallel]` lays them out), every call made on every rank and
  answered by rank 0. `export_weights` returns an object reference, so the
  weights go from the trainer's process through Ray's object store to the engine's
  (`overture.distributed.ray.engine`) without a stop in the orchestrator's.
- `RemoteEngine` → the engine actor, restarted by Ray if its process dies
  (`overture.distributed.ray.engine`). With `engine.backend = "vllm"` the actor hosts the vLLM
  engine (`VllmActorEngine`): it joins `engine.vllm_urls`, or starts and supervises a server
  itself, its log and weight directories under the run's `engine-actor/`; a restarted actor
  starts a new one, and a server never outlives the process that started it.
- `RemoteRollouts` → `RolloutWorker`s (`runtime.rollout_workers`): each owns a sandbox pool and
  runs whole groups (episodes, tools, grading) by `overture.orchestration.rollout_groups`' code, talking to
  the engine actor. The orchestrator's pause / release / cancel of a group reach its worker as
  numbered commands; the worker applies the newest one whatever the order they arrive in, and one
  that arrives before the group starts is applied when it does.

`ray_rl_runtime` starts all of it for a run and stops it after.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import tempfile
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from overture.agent import Trajectory
from overture.config import RunConfig
from overture.distributed.meshes import meshes_for_run
from overture.distributed.process_group import default_device_type, join_job
from overture.distributed.ray.cluster import ACTOR_OPTIONS, import_ray, ray_cluster
from overture.distributed.ray.engine import (
    ActorEngineAdapter,
    RemoteEngine,
    RemoteEnginePolicy,
    start_engine_actor,
)
from overture.distributed.ray.ranks import RayRank, ray_rank_actors
from overture.model import load_pretrained
from overture.orchestration.orchestrator import train_on_trajectories
from overture.orchestration.rollout_engine import open_rollout_engine
from overture.orchestration.rollout_groups import LocalRollouts, RolloutEnv
from overture.orchestration.vllm_engine import VllmEngine
from overture.rl.checkpoints import load_checkpoint, save_checkpoint
from overture.rl.trainer import Trainer, rl_trainer
from overture.runtime.devices import resolve_device
from overture.sandbox import SandboxPool
from overture.tasks.spec import Task
from overture.text import Tokenizer

# ----------------------------------------------------------------------------- the trainer


class TrainerActor(RayRank):
    """An RL `Trainer`, or one rank of a sharded one: built by `start` from `weights` (and
    restored from `checkpoint`, when given)."""

    def __init__(self) -> None:
        self.trainer: Trainer | None = None
        self.rank = 0

    def start(
        self,
        weights: str,
        config: RunConfig,
        checkpoint: str | None,
        rank: int = 0,
        master: tuple[str, int] | None = None,
        device_type: str = "cpu",
    ) -> dict[str, int]:
        """Build the trainer; with `parallel.nproc` > 1 first join the ranks' process group (every
        rank calls this at once, `master` being rank 0's address and port) and shard it."""
        import torch

        meshes = None
        if config.parallel.nproc > 1:
            if master is None:
                raise ValueError("a rank of a sharded trainer needs rank 0's address (master)")
            local_rank = 0 if device_type == "cuda" else rank  # Ray shows a rank its own GPU only
            join_job(config.parallel, rank, local_rank, *master, device_type)
            meshes = meshes_for_run(config.parallel)
        self.rank = rank
        device = resolve_device(config.runtime)
        model = load_pretrained(Path(weights), dtype=getattr(torch, config.training.dtype)).to(device)
        self.trainer = rl_trainer(model, config, meshes=meshes)
        if checkpoint is not None:
            load_checkpoint(self.trainer, checkpoint)
        return self.describe()

    def _started(self) -> Trainer:
        if self.trainer is None:
            raise RuntimeError("trainer actor used before start()")
        return self.trainer

    def describe(self) -> dict[str, int]:
        trainer = self._started()
        return {"version": trainer.policy_version, "step": trainer.step}

    def train(self, trajectories: list[Trajectory]) -> tuple[dict[str, float], dict[str, int]]:
        return train_on_trajectories(self._started(), trajectories), self.describe()

    def export_weights(self) -> dict[str, Any] | None:
        """The whole model on the CPU (rank 0; the other ranks take part in gathering it, return None)."""
        weights = self._started().export_weights()
        return {name: tensor.cpu() for name, tensor in weights.items()} if self.rank == 0 else None

    def save_checkpoint(self, root: str, extra: dict[str, Any], keep: int | None) -> str:
        return str(save_checkpoint(self._started(), root, {}, extra, keep))


@contextlib.asynccontextmanager
async def start_trainer(
    ray: Any, config: RunConfig, weights: str | Path, checkpoint: str | Path | None
) -> AsyncIterator[RemoteTrainer]:
    """The trainer as `parallel.nproc` rank actors (one when unsharded) in a placement group."""
    args = (str(weights), config, None if checkpoint is None else str(checkpoint))
    device_type = default_device_type()
    with ray_rank_actors(ray, config.parallel, TrainerActor, device_type) as actors:
        master = await actors[0].address.remote()
        descriptions = await asyncio.gather(
            *(actor.start.remote(*args, rank, master, device_type) for rank, actor in enumerate(actors))
        )
        yield RemoteTrainer(actors, descriptions[0])


class RemoteTrainer:
    """Trainer actors (one, or the ranks of a sharded trainer) as the orchestrator's `TrainerHandle`.
    Every call goes to every rank (they step, gather and save together); rank 0 answers."""

    def __init__(self, actors: list[Any], description: dict[str, int]) -> None:
        self.actors = actors
        self._version, self.step = description["version"], description["step"]

    @property
    def version(self) -> int:
        return self._version

    async def train(self, trajectories: list[Trajectory]) -> dict[str, float]:
        batch = import_ray().put(trajectories)  # one copy in the object store for every rank
        (metrics, description), *_ = await asyncio.gather(*(a.train.remote(batch) for a in self.actors))
        self._version, self.step = description["version"], description["step"]
        return metrics

    async def export_weights(self) -> Any:
        """An object reference to the weights (not the weights: they stay in the object store)."""
        refs = [actor.export_weights.remote() for actor in self.actors]
        await asyncio.gather(*refs[1:])  # the other ranks' part of the gather is done too
        return refs[0]

    def save_checkpoint(self, root: Path, extra: dict[str, Any], keep: int | None) -> Path:
        """A training checkpoint written by the actors (blocking: the run waits for it, as in process)."""
        ray = import_ray()
        paths = ray.get([actor.save_checkpoint.remote(str(root), extra, keep) for actor in self.actors])
        return Path(paths[0])


# ----------------------------------------------------------------------------- vLLM in the engine actor


class VllmActorEngine(ActorEngineAdapter):
    """The `VllmEngine` that `open_rollout_engine` opens (and the server it may start), as the engine
    actor's `ActorEngine`."""

    def __init__(self, engine: VllmEngine, opened: contextlib.ExitStack) -> None:
        super().__init__(engine)
        self._opened = opened

    def submit(
        self, prompt_ids: list[int], max_new_tokens: int, sampling: dict[str, Any], group: str | None
    ) -> Any:
        policy = self.engine.policy(**sampling)
        return (policy.for_group(group) if group is not None else policy).generate(prompt_ids, max_new_tokens)

    async def update_weights(self, weights: Any, version: int) -> None:
        await self.engine.update_weights(weights, version)

    def stats(self) -> dict[str, int]:
        return {}

    def close(self) -> None:
        self._opened.close()


def open_vllm_engine(
    config: RunConfig, checkpoint: str, tokenizer: Tokenizer, log_dir: str, version: int
) -> VllmActorEngine:
    """vLLM serving `checkpoint` as `version`, opened inside the engine actor's process."""
    import torch

    opened = contextlib.ExitStack()
    engine = opened.enter_context(
        open_rollout_engine(
            config, Path(checkpoint), tokenizer, version=version, device=torch.device("cpu"),
            dtype=torch.float32, log_dir=Path(log_dir),
        )
    )  # fmt: skip
    assert isinstance(engine, VllmEngine)
    return VllmActorEngine(engine, opened)


# ----------------------------------------------------------------------------- rollout workers


class RolloutWorker:
    """Runs rollout groups in its own process, on its own sandbox pool (an async Ray actor)."""

    def __init__(self, config: RunConfig, tokenizer: Tokenizer, engine_actor: Any) -> None:
        self.config, self.tokenizer = config, tokenizer
        # The engine actor's default sampling is `engine`'s: RL's temperature goes with each request.
        temperature = config.rl.sampling_temperature(config.engine)
        self.policy = RemoteEnginePolicy(engine_actor, temperature=temperature)
        self._pool: SandboxPool | None = None
        self._rollouts: LocalRollouts | None = None
        self._groups: dict[str, tuple[Any, asyncio.Future]] = {}
        self._commands: dict[str, tuple[int, str]] = {}  # group id → newest (number, command)

    async def start(self) -> None:
        self._pool = SandboxPool(self.config.sandbox)
        await self._pool.__aenter__()
        config = self.config
        env = RolloutEnv(
            self.policy, self._pool, self.tokenizer, config.agent, config.tasks, config.rl.group_size
        )
        self._rollouts = LocalRollouts(env)

    async def run_group(self, task: Task, group_id: str) -> list[Trajectory]:
        if self._rollouts is None:
            raise RuntimeError("rollout worker used before start()")
        group = self._rollouts.start(task, group_id)
        runner = asyncio.ensure_future(group.run())
        self._groups[group_id] = (group, runner)
        if group_id in self._commands:
            self._apply(group_id, self._commands[group_id][1])
        try:
            return await runner
        finally:
            self._groups.pop(group_id, None)
            self._commands.pop(group_id, None)

    def command(self, group_id: str, number: int, command: str) -> None:
        """`pause`, `release` or `cancel` a group; older commands than the newest seen are ignored."""
        newest = self._commands.get(group_id)
        if newest is not None and newest[0] >= number:
            return
        self._commands[group_id] = (number, command)
        if group_id in self._groups:
            self._apply(group_id, command)

    def _apply(self, group_id: str, command: str) -> None:
        group, runner = self._groups[group_id]
        if command == "pause":
            group.pause()
        elif command == "release":
            group.release()
        elif command == "cancel":
            group.release()
            runner.cancel()
        else:
            raise ValueError(f"unknown rollout group command {command!r}")

    async def take_stats(self) -> dict[str, float]:
        if self._rollouts is None:
            raise RuntimeError("rollout worker used before start()")
        return await self._rollouts.take_stats()

    async def close(self) -> None:
        runners = [runner for _, runner in self._groups.values()]
        for group, runner in self._groups.values():
            group.release()
            runner.cancel()
        await asyncio.gather(*runners, return_exceptions=True)
        if self._pool is not None:
            await self._pool.__aexit__(None, None, None)
            self._pool = None


class RemoteGroup:
    """A group started on a rollout worker, as the orchestrator's `GroupRun`."""

    def __init__(self, rollouts: RemoteRollouts, worker: int, task: Task, group_id: str) -> None:
        self.rollouts, self.worker, self.task, self.group_id = rollouts, worker, task, group_id
        self._numbers = itertools.count(1)

    async def run(self) -> list[Trajectory]:
        actor = self.rollouts.workers[self.worker]
        self.rollouts.load[self.worker] += 1
        try:
            return await actor.run_group.remote(self.task, self.group_id)
        except asyncio.CancelledError:
            self._send("cancel")  # the orchestrator stopped waiting: stop the episodes too
            raise
        finally:
            self.rollouts.load[self.worker] -= 1

    def pause(self) -> None:
        self._send("pause")

    def release(self) -> None:
        self._send("release")

    def _send(self, command: str) -> None:
        self.rollouts.workers[self.worker].command.remote(self.group_id, next(self._numbers), command)


class RemoteRollouts:
    """Rollout workers as the orchestrator's `Rollouts`: a new group goes to the least loaded one."""

    def __init__(self, workers: Sequence[Any]) -> None:
        self.workers = list(workers)
        self.load = [0] * len(self.workers)

    def start(self, task: Task, group_id: str) -> RemoteGroup:
        worker = min(range(len(self.workers)), key=self.load.__getitem__)
        return RemoteGroup(self, worker, task, group_id)

    async def take_stats(self) -> dict[str, float]:
        """Counts summed over workers; `idle_s` is the least idle worker's (no worker ran for at
        most that long)."""
        each = await asyncio.gather(*(worker.take_stats.remote() for worker in self.workers))
        total = {key: sum(counts[key] for counts in each) for key in each[0]}
        total["idle_s"] = min(counts["idle_s"] for counts in each)
        return total


# ----------------------------------------------------------------------------- the runtime


@dataclass
class RayRL:
    """The handles the orchestrator drives on Ray."""

    engine: RemoteEngine
    trainer: RemoteTrainer
    rollouts: RemoteRollouts


@contextlib.asynccontextmanager
async def ray_rl_runtime(
    config: RunConfig,
    weights: str | Path,
    tokenizer: Tokenizer,
    checkpoint: str | Path | None = None,
    log_dir: str | Path | None = None,
) -> AsyncIterator[RayRL]:
    """Trainer (from `weights`, restored from `checkpoint`), engine (the checkpoint `weights` and its
    tokenizer, serving the trainer's weights) and rollout workers as actors on the cluster
    `config.runtime` names; all stopped on exit. A vLLM engine keeps its server's log and weight
    directories in `log_dir / "engine-actor"` (a temporary folder when unset)."""
    with (
        ray_cluster(config.runtime) as ray,
        tempfile.TemporaryDirectory(prefix="overture-engine-") as scratch,
    ):
        workers: list[Any] = []
        engine: RemoteEngine | None = None
        opener = None
        if config.engine.backend == "vllm":
            actor_dir = Path(log_dir or scratch) / "engine-actor"
            opener = functools.partial(open_vllm_engine, config, str(weights), tokenizer, str(actor_dir))
        async with start_trainer(ray, config, weights, checkpoint) as trainer:
            try:
                engine = start_engine_actor(
                    weights, config.engine, config.runtime, config.training.dtype,
                    weights=await trainer.export_weights(), version=trainer.version, opener=opener,
                )  # fmt: skip
                workers = [
                    ray.remote(RolloutWorker).options(**ACTOR_OPTIONS).remote(config, tokenizer, engine.actor)
                    for _ in range(config.runtime.rollout_workers)
                ]
                await asyncio.gather(*(worker.start.remote() for worker in workers))
                yield RayRL(engine, trainer, RemoteRollouts(workers))
            finally:
                await asyncio.gather(*(worker.close.remote() for worker in workers), return_exceptions=True)
                for worker in workers:
                    ray.kill(worker, no_restart=True)
                if engine is not None:
                    await engine.close()
