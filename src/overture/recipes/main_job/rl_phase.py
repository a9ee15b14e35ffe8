"""The main job's RL phase: the orchestrator's steps (in process, or on Ray's actors), and each
step's records, trajectories and training checkpoints.

`MainJob` (`overture.recipes.main_job.job`) builds the trainer and the engine, evaluates before and after,
and hands this phase the run directory and the job's state to write into.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from overture.config import RunConfig
from overture.orchestration.orchestrator import (
    EngineHandle,
    LocalTrainer,
    Orchestrator,
    StepReport,
    local_rollouts,
)
from overture.orchestration.ray_actors import ray_rl_runtime
from overture.recipes.main_job.job_config import rl_mode
from overture.recipes.main_job.job_display import JobDisplay
from overture.recipes.main_job.job_state import JobState
from overture.rl.checkpoints import latest_checkpoint, load_checkpoint, save_checkpoint
from overture.rl.run_dir import RunDir
from overture.rl.trainer import Trainer
from overture.sandbox import SandboxPool
from overture.tasks import Task
from overture.tasks.spec import write_jsonl
from overture.text import Tokenizer

# The RL phase's step-report counts summed over its steps (and kept across --resume).
RL_COUNTS = (
    "episodes_aborted",
    "episodes_resumed",
    "groups_dropped_stale",
    "groups_left_out",
    "groups_left_out_resolved",
    "tokens_generated",
)


def rl_totals(restored: dict[str, Any]) -> dict[str, Any]:
    """The RL phase's running totals: zero, updated with those a checkpoint `restored`."""
    return {
        "batches": 0,
        "optimizer_steps": 0,
        "rewards": [],
        "max_staleness": 0,
        **dict.fromkeys(RL_COUNTS, 0),
        **restored,
    }


class RLPhase:
    """The RL phase of one run of the main job. `stop_after_rl_step` ends it after that step
    and its checkpoint, as a preempted job would (for resume tests)."""

    def __init__(
        self,
        config: RunConfig,
        run_dir: RunDir,
        state: JobState,
        display: JobDisplay,
        stop_after_rl_step: int | None = None,
    ) -> None:
        self.config, self.run_dir, self.state, self.display = config, run_dir, state, display
        self.stop_after = stop_after_rl_step

    # ------------------------------------------------------------------ the steps

    def run(
        self,
        trainer: Trainer,
        engine: EngineHandle,
        tasks: list[Task],
        tokenizer: Tokenizer,
        totals: dict[str, Any],
        task_queue: dict[str, Any] | None,
        weights: Path,
        restored: Path | None,
    ) -> dict[str, Any]:
        """The RL steps left after `totals` (`rl_totals`); `task_queue` is the restored
        checkpoint's queue state; `weights` and `restored` are where `trainer` came from (Ray
        actors rebuild it from them). Returns the totals after the last step run."""
        config = self.config
        done = totals["batches"]
        left = config.rl.steps - done
        if self.stop_after is not None:
            left = min(left, self.stop_after - done)
        if left <= 0:
            return totals
        self.display.phase(f"RL ({rl_mode(config)}, {config.rl.steps} steps)")
        began = time.time()
        with self.display.rl_steps(config.rl.steps, done) as show:

            def recorder(save: Callable[[dict[str, Any]], Any], optimizer_steps: Callable[[], int]):
                def on_step(report: StepReport) -> None:
                    number = done + report.step
                    self._record_step(number, report, totals, optimizer_steps(), save)
                    show(number, report)

                return on_step

            if config.runtime.uses_ray:
                run = self._orchestrate_on_ray(
                    weights, restored, tasks, task_queue, tokenizer, left, recorder
                )
                asyncio.run(run)
                # The trainer actor's newest checkpoint hands its weights back to this process.
                load_checkpoint(trainer, latest_checkpoint(self.run_dir.checkpoints))
                asyncio.run(engine.update_weights(trainer.export_weights(), trainer.policy_version))
            else:
                keep = config.training.keep_checkpoints
                on_step = recorder(
                    lambda extra: save_checkpoint(trainer, self.run_dir.checkpoints, {}, extra, keep),
                    lambda: trainer.step,
                )
                asyncio.run(self._orchestrate(trainer, engine, tasks, task_queue, tokenizer, left, on_step))
        self.state.add_seconds("rl", time.time() - began)
        return totals

    async def _orchestrate(
        self,
        trainer: Trainer,
        engine: EngineHandle,
        tasks: list[Task],
        task_queue: dict[str, Any] | None,
        tokenizer: Tokenizer,
        steps: int,
        on_step: Callable[[StepReport], None],
    ) -> None:
        config = self.config
        async with SandboxPool(config.sandbox) as pool:
            # The engine serves the evaluations too: RL's sampling temperature goes with each request.
            policy = engine.policy(temperature=config.rl.sampling_temperature(config.engine))
            rollouts = local_rollouts(config, engine, pool, tokenizer, policy)
            orchestrator = Orchestrator(
                config.rl, config.seed, tasks, engine, LocalTrainer(trainer), rollouts, task_queue
            )
            await orchestrator.run(steps, on_step)

    async def _orchestrate_on_ray(
        self,
        weights: Path,
        restored: Path | None,
        tasks: list[Task],
        task_queue: dict[str, Any] | None,
        tokenizer: Tokenizer,
        steps: int,
        recorder: Callable[..., Callable[[StepReport], None]],
    ) -> None:
        keep = self.config.training.keep_checkpoints
        async with ray_rl_runtime(self.config, weights, tokenizer, restored, self.run_dir.path) as ray_rl:
            remote = ray_rl.trainer
            on_step = recorder(
                lambda extra: remote.save_checkpoint(self.run_dir.checkpoints, extra, keep),
                lambda: remote.step,
            )
            config = self.config
            orchestrator = Orchestrator(
                config.rl, config.seed, tasks, ray_rl.engine, remote, ray_rl.rollouts, task_queue
            )
            await orchestrator.run(steps, on_step)

    def _record_step(
        self,
        number: int,
        report: StepReport,
        totals: dict[str, Any],
        optimizer_steps: int,
        save: Callable[[dict[str, Any]], Any],
    ) -> None:
        """Log one RL step, write its trajectories, fold it into the totals, checkpoint when due
        (`save` writes a training checkpoint holding the given extra state)."""
        record = report.to_dict()
        del record["step"]
        record.update({f"train_{k}": v for k, v in record.pop("train_metrics").items()})
        record.update({f"batch_{k}": v for k, v in record.pop("episode_means").items()})
        record["tokens_per_s"] = report.tokens_per_s
        self.run_dir.log(number, phase="rl", **record)
        name = f"rl-step-{number:06d}.jsonl"
        write_jsonl(self.run_dir.path / "trajectories" / name, [t.to_dict() for t in report.trajectories])
        totals["batches"] = number
        totals["optimizer_steps"] = optimizer_steps
        totals["rewards"].append(report.sampled_reward_mean)  # the batch's, unless groups were left out
        totals["max_staleness"] = max(totals["max_staleness"], max(report.staleness, default=0))
        for key in RL_COUNTS:
            totals[key] += getattr(report, key)
        every = self.config.training.checkpoint_every
        if (every and number % every == 0) or number == self.config.rl.steps or number == self.stop_after:
            save({"batches": number, "totals": totals, "task_queue": report.task_queue})
