"""Asynchronous vs synchronous RL: wall time of the same optimizer steps in each orchestrator mode.

Every mode trains the same policy (a random Qwen3-MoE of the shape in `--config`, saved once
with the project tokenizer, or the checkpoint `--model`; served by a real `overture.engine.Engine`
and trained by the real `overture.rl.trainer.Trainer`), from the same initial weights and seed,
on the same tasks (synthesized at start from the bundled `ledger` repository into a temporary
folder, or `--tasks FILE`), for the same number of optimizer steps, with real sandboxes and
real grading (pytest runs of FAIL_TO_PASS and sampled PASS_TO_PASS tests):

- `sync`: staleness bound eta = 0, over-provisioning O = 1, the baseline (DESIGN.md decision 2);
- `async-eta1`, `async-eta2`, `async-eta4`: eta = 1, 2, 4, O = 1;
- `async+partial`: eta = 2, O = 2 (partial rollouts aborted at each step and resumed after it;
  `--partial-staleness` and `--partial-overprovision` set its eta and O).

Each mode runs in its own child process (its own engine, trainer, sandbox pool and memory).
Per mode it reports the wall time of the steps, the time no episode was running (generation
idle) and the time spent in optimizer steps (the trainer is idle for the rest), the staleness
histogram of the trained trajectories, the share of off-policy policy tokens, partial rollouts
aborted and resumed, groups dropped as too stale, rewards (last step and mean over steps),
tokens generated, the CPU time the machine spent busy meanwhile (`cpu_s`, every process: the
engine, the trainer, the sandboxed tool calls and test runs, other jobs) and the cores busy on
average (`cores_busy`: with every core busy in `sync`, overlap has nothing left to use), and the
speed-up of its wall time over `sync`. `--set runtime.ray=true` runs every mode on Ray (engine,
trainer and rollout worker as actors, each its own process), as the main job's RL phase does
with that setting; `--set engine.backend=vllm` generates on a vLLM server started per mode. A
human summary comes first, then one JSON object on the last line, with the load average before
and after (other jobs on the machine share its cores with the engine, the trainer and the test
runs).

A random policy writes no tool call: its episodes are one turn cut at `--max-new-tokens`, all of
about the same length, and resolve nothing (reward 0 in every mode). Pass `--model` with a trained
checkpoint (e.g. an SFT checkpoint and its tokenizer) for multi-turn episodes of spread-out
lengths, where cutting stragglers (partial rollouts) matters, and for rewards worth comparing.

    .venv/bin/python benchmarks/async_vs_sync.py [--steps 5] [--tasks FILE] [--model DIR] [--quick]
        [--set KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import torch

from overture.config import RunConfig, load_config
from overture.model import load_pretrained, save_pretrained
from overture.orchestration.orchestrator import (
    LocalTrainer,
    Orchestrator,
    StepReport,
    local_rollouts,
)
from overture.orchestration.ray_actors import ray_rl_runtime
from overture.orchestration.rollout_engine import open_checkpoint_engine
from overture.orchestration.rollout_groups import policy_versions
from overture.rl.setup import build_model, load_tokenizer
from overture.rl.trainer import rl_trainer
from overture.runtime.devices import resolve_device
from overture.sandbox import SandboxPool
from overture.tasks.spec import Task, read_tasks
from overture.tasks.task_sets import build_task_set, bundled_repo
from overture.text import Tokenizer

REPO = Path(__file__).resolve().parents[1]

# name -> (staleness bound eta, over-provisioning factor O)
MODES: dict[str, tuple[int, float]] = {
    "sync": (0, 1.0),
    "async-eta1": (1, 1.0),
    "async-eta2": (2, 1.0),
    "async-eta4": (4, 1.0),
    "async+partial": (2, 2.0),
}


def mode_knobs(args: argparse.Namespace, mode: str) -> tuple[int, float]:
    """The mode's (eta, O): `MODES`, with `--partial-staleness` and `--partial-overprovision` as
    async+partial's."""
    staleness, overprovision = MODES[mode]
    if mode == "async+partial":
        staleness, overprovision = args.partial_staleness, args.partial_overprovision
    return staleness, overprovision


def run_config(args: argparse.Namespace, staleness: int, overprovision: float) -> RunConfig:
    """The `--config` file with the benchmark's RL, agent and engine settings and the mode's knobs;
    the trainer takes its steps and LR schedule from `[rl]`, as the main job's RL phase does.

    A random policy writes no tool call, so its turns end at the token budget (truncated): they
    stay in the loss (`rl.mask_truncated = false`), or nothing would be trained. It resolves
    nothing either, so every advantage is 0: a small KL term (`rl.kl_coef`) gives its batches
    the policy signal without which the trainer takes no optimizer step, and the main job's
    filters of groups whose rewards are all equal are off (`rl.dynamic_sampling` would leave every
    group out, `rl.drop_zero_signal_groups` would drop every batch). `--set` overrides come
    after these (e.g. the main job's `rl.dynamic_sampling=true`); the mode's eta and O come last.
    """
    overrides = [
        f"seed={args.seed}",
        f"rl.group_size={args.group_size}",
        f"rl.batch_groups={args.batch_groups}",
        f"rl.steps={args.steps}",
        "rl.warmup_steps=0",
        "rl.mask_truncated=false",
        "rl.kl_coef=0.01",
        "rl.dynamic_sampling=false",
        "rl.drop_zero_signal_groups=false",
        f"agent.max_turns={args.max_turns}",
        f"agent.max_new_tokens={args.max_new_tokens}",
        "agent.search_backend=bm25",
        f"engine.max_batch_size={args.engine_batch}",
        "runtime.device=cpu",
        *args.set,
        f"rl.staleness={staleness}",
        f"rl.overprovision={overprovision}",
    ]
    return load_config(args.config, overrides)


# ---------------------------------------------------------------------- one mode (child process)


def run_mode(args: argparse.Namespace, mode: str) -> dict[str, Any]:
    """`args.steps` orchestrator steps in `mode` from the saved policy; the mode's figures. With
    `runtime.ray` set (`--set runtime.ray=true`) the engine, the trainer and the rollout worker are
    Ray actors, each in its own process, as in the main job's RL phase on Ray."""
    config = run_config(args, *mode_knobs(args, mode))
    torch.manual_seed(config.seed)
    resolve_device(config.runtime)  # threads and float mode as in the main job's process
    checkpoint = Path(args.model)
    tasks = [task for task in read_tasks(args.tasks) if task.split == "train"]
    tokenizer = Tokenizer.from_dir(checkpoint)
    cpu_before, began = machine_cpu_seconds(), time.monotonic()
    if config.runtime.uses_ray:
        reports, wall = asyncio.run(run_on_ray(args, config, tasks, tokenizer))
    else:
        reports, wall = run_in_process(args, config, tasks, tokenizer)
    figures = mode_figures(mode, config, reports, wall)
    # Over the runtime's start and stop as well as the steps': a little more than wall_s.
    cpu, run_wall = machine_cpu_seconds() - cpu_before, time.monotonic() - began
    figures["cpu_s"] = round(cpu, 1)
    figures["cores_busy"] = round(cpu / run_wall, 2)
    return figures


def run_in_process(
    args: argparse.Namespace, config: RunConfig, tasks: list[Task], tokenizer: Tokenizer
) -> tuple[list[StepReport], float]:
    """The steps in this process, on the engine `engine.backend` names (a vLLM server is started
    before the clock starts), as the main job's RL phase runs them."""
    checkpoint = Path(args.model)
    trainer = rl_trainer(load_pretrained(checkpoint), config)
    with open_checkpoint_engine(config, checkpoint, tokenizer) as engine:

        async def main() -> tuple[list[StepReport], float]:
            async with SandboxPool(config.sandbox) as pool:
                policy = engine.policy(temperature=config.rl.sampling_temperature(config.engine))
                rollouts = local_rollouts(config, engine, pool, tokenizer, policy)
                orchestrator = Orchestrator(
                    config.rl, config.seed, tasks, engine, LocalTrainer(trainer), rollouts
                )
                began = time.monotonic()
                reports = await orchestrator.run(args.steps)
                return reports, time.monotonic() - began

        return asyncio.run(main())


async def run_on_ray(
    args: argparse.Namespace, config: RunConfig, tasks: list[Task], tokenizer: Tokenizer
) -> tuple[list[StepReport], float]:
    async with ray_rl_runtime(config, args.model, tokenizer) as ray_rl:
        orchestrator = Orchestrator(
            config.rl, config.seed, tasks, ray_rl.engine, ray_rl.trainer, ray_rl.rollouts
        )
        began = time.monotonic()
        reports = await orchestrator.run(args.steps)
        return reports, time.monotonic() - began


def machine_cpu_seconds() -> float:
    """CPU time the whole machine has spent busy since boot, all cores (`/proc/stat`: user, nice,
    system, irq, softirq, steal); other jobs included, as the load average shows."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def mode_figures(mode: str, config: RunConfig, reports: list[StepReport], wall: float) -> dict[str, Any]:
    """What one mode did over its steps, JSON-ready."""
    histogram: Counter[int] = Counter()
    policy_tokens = off_policy_tokens = 0.0
    for report in reports:
        histogram.update(report.staleness)
        tokens = sum(len(policy_versions(t)) for t in report.trajectories)
        policy_tokens += tokens
        off_policy_tokens += report.off_policy_token_share * tokens
    training = sum(r.training_s for r in reports)
    generated = sum(r.tokens_generated for r in reports)

    def step_mean(field: str) -> float:
        return round(sum(getattr(r, field) for r in reports) / len(reports), 4)

    return {
        "mode": mode,
        "staleness_bound": config.rl.staleness,
        "overprovision": config.rl.overprovision,
        "steps": len(reports),
        "optimizer_steps": sum(1 for r in reports if not r.train_metrics.get("skipped")),
        "final_version": reports[-1].version,
        "wall_s": round(wall, 3),
        "step_wall_s": [round(r.wall_s, 3) for r in reports],
        "generation_idle_s": round(sum(r.generation_idle_s for r in reports), 3),
        "training_s": round(training, 3),
        "training_idle_s": round(wall - training, 3),
        "staleness": {str(lag): count for lag, count in sorted(histogram.items())},
        "off_policy_token_share": round(off_policy_tokens / policy_tokens, 4) if policy_tokens else 0.0,
        "multi_version_trajectories": sum(r.multi_version_trajectories for r in reports),
        "episodes_aborted": sum(r.episodes_aborted for r in reports),
        "episodes_resumed": sum(r.episodes_resumed for r in reports),
        "episodes_retried": sum(r.episodes_retried for r in reports),
        "episodes_failed": sum(r.episodes_failed for r in reports),
        "groups_dropped_stale": sum(r.groups_dropped_stale for r in reports),
        "reward_last": round(reports[-1].reward_mean, 4),
        "reward_mean": step_mean("reward_mean"),
        # Under rl.dynamic_sampling the batch holds groups with signal only; this is the reward
        # over every group sampled, the one to compare between modes.
        "sampled_reward_mean": step_mean("sampled_reward_mean"),
        "groups_left_out": sum(r.groups_left_out for r in reports),
        "groups_left_out_resolved": sum(r.groups_left_out_resolved for r in reports),
        "resolved_share_mean": step_mean("resolved_share"),
        "tokens_generated": generated,
        "tokens_trained": int(policy_tokens),
        "generated_tokens_per_s": round(generated / wall, 1),
        "turns_per_episode": round(
            sum(len(t.turns) for r in reports for t in r.trajectories)
            / sum(len(r.trajectories) for r in reports),
            2,
        ),
    }


# ---------------------------------------------------------------------- the parent


def prepare(args: argparse.Namespace) -> None:
    """Save a random policy with the tokenizer under `args.workdir` and synthesize tasks there,
    unless `--model` and `--tasks` name them."""
    config = run_config(args, 0, 1.0)
    if args.model is None:
        tokenizer = load_tokenizer(config)
        torch.manual_seed(config.seed)
        args.model = str(Path(args.workdir) / "policy")
        save_pretrained(build_model(config, tokenizer, torch.device("cpu")), args.model)
        tokenizer.save(args.model)
    if args.tasks is None:
        out = Path(args.workdir) / "tasks" / "tasks.jsonl"
        # Every task in the train split: the modes deal train tasks only.
        synth = config.tasks.model_copy(update={"heldout_function_fraction": 0.0})
        repos = [bundled_repo("ledger")]
        asyncio.run(build_task_set(repos, out, args.task_count, config.sandbox, synth, seed=args.seed))
        args.tasks = str(out)


def run_child(args: argparse.Namespace, mode: str) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child", mode, "--model", args.model, *forwarded(args)]
    out = subprocess.run(command, capture_output=True, text=True, cwd=REPO)
    if out.returncode != 0:
        raise RuntimeError(f"mode {mode} failed (exit {out.returncode}):\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def forwarded(args: argparse.Namespace) -> list[str]:
    flags = ["--config", str(args.config), "--tasks", str(args.tasks), "--steps", str(args.steps)]
    flags += ["--seed", str(args.seed), "--group-size", str(args.group_size)]
    flags += ["--batch-groups", str(args.batch_groups), "--max-turns", str(args.max_turns)]
    flags += ["--max-new-tokens", str(args.max_new_tokens), "--engine-batch", str(args.engine_batch)]
    flags += ["--partial-staleness", str(args.partial_staleness)]
    flags += ["--partial-overprovision", str(args.partial_overprovision)]
    for override in args.set:
        flags += ["--set", override]
    return flags


def summary_line(figures: dict[str, Any]) -> str:
    return (
        f"{figures['mode']:>14}  wall {figures['wall_s']:7.1f}s  x{figures['speedup_vs_sync']:.2f}  "
        f"gen idle {figures['generation_idle_s']:6.1f}s  train {figures['training_s']:6.1f}s  "
        f"staleness {figures['staleness']}  off-policy {figures['off_policy_token_share']:.0%}  "
        f"aborted/resumed {figures['episodes_aborted']}/{figures['episodes_resumed']}  "
        f"reward {figures['reward_last']:.3f} (mean {figures['reward_mean']:.3f}, "
        f"sampled {figures['sampled_reward_mean']:.3f})  "
        f"tokens {figures['tokens_generated']}  cores busy {figures['cores_busy']:.2f}"
    )


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(REPO / "configs" / "tiny.toml"), help="model shape, lr")
    parser.add_argument("--model", default=None, help="checkpoint with its tokenizer (default: a random one)")
    parser.add_argument("--tasks", default=None, help="JSONL task file (default: synthesize from ledger)")
    parser.add_argument("--task-count", type=int, default=32, help="tasks to synthesize")
    parser.add_argument("--steps", type=int, default=5, help="optimizer steps per mode")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--group-size", type=int, default=4, help="episodes per group (G)")
    parser.add_argument("--batch-groups", type=int, default=2, help="groups per step (B)")
    parser.add_argument("--max-turns", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=192, help="tokens per assistant turn")
    parser.add_argument("--engine-batch", type=int, default=8, help="sequences the engine decodes at once")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated subset of the modes")
    parser.add_argument(
        "--partial-staleness", type=int, default=MODES["async+partial"][0], help="async+partial's eta"
    )
    parser.add_argument(
        "--partial-overprovision", type=float, default=MODES["async+partial"][1], help="async+partial's O"
    )
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="config override (repeatable)"
    )
    parser.add_argument("--quick", action="store_true", help="2 steps, 16 tasks, sync and async+partial")
    parser.add_argument("--child", choices=list(MODES), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_mode(args, args.child)))
        return
    if args.quick:
        args.steps, args.task_count, args.modes = 2, 16, "sync,async+partial"
    modes = [mode.strip() for mode in args.modes.split(",")]
    unknown = [mode for mode in modes if mode not in MODES]
    if unknown or "sync" not in modes:
        parser.error(f"--modes must include sync and name only {', '.join(MODES)} (got {args.modes!r})")
    if args.partial_staleness < 1:
        parser.error(f"--partial-staleness must be at least 1 (got {args.partial_staleness})")
    if args.partial_overprovision <= 1:
        given = args.partial_overprovision
        parser.error(f"--partial-overprovision must exceed 1 (got {given:g}): with O = 1 nothing is aborted")
    task_source = args.tasks or f"{args.task_count} synthesized from bundled ledger"
    model_source = args.model or f"random, shape of {os.path.relpath(args.config, REPO)}"
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="overture-async-bench-") as workdir:
        args.workdir = workdir
        prepare(args)
        load_before = load_average()
        results = {}
        for mode in modes:
            results[mode] = run_child(args, mode)
            print(f"  {mode}: {results[mode]['wall_s']:.1f}s", file=sys.stderr, flush=True)
        load_after = load_average()
    for figures in results.values():
        figures["speedup_vs_sync"] = round(results["sync"]["wall_s"] / figures["wall_s"], 3)
        print(summary_line(figures))
        if figures["optimizer_steps"] < args.steps:
            print(
                f"  {figures['mode']}: {figures['optimizer_steps']} optimizer steps of {args.steps} "
                "(batches without policy signal are skipped): its wall time is not that of the steps asked"
            )
    summary = {
        "benchmark": "async_vs_sync",
        "config": os.path.relpath(args.config, REPO),
        "model": model_source,
        "tasks": task_source,
        "steps": args.steps,
        "group_size": args.group_size,
        "batch_groups": args.batch_groups,
        "max_turns": args.max_turns,
        "max_new_tokens": args.max_new_tokens,
        "engine_batch": args.engine_batch,
        "seed": args.seed,
        "overrides": args.set,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "cpus": os.cpu_count(),
        "machine": platform.machine(),
        "load_average_before": load_before,
        "load_average_after": load_after,
        "total_s": round(time.monotonic() - began, 1),
        "modes": results,
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
