"""Communication volume of one training step of the tiny model under each parallel layout.

For every layout the benchmark spawns its processes on this machine (gloo on CPU), trains the
model of `--config` ([model] only; default configs/smoke.toml) for `--steps` steps on random
tokens with `overture.distributed.lm_train_step`, and counts, during the last step, the bytes each
rank sends by all-to-all (expert parallelism) and by all-gather / reduce-scatter / all-reduce
(FSDP2, HSDP and the step's few global scalars) — measured by wrapping torch.distributed's
collective functions (`CollectiveCounter`), averaged over ranks. Next to it, the analytic count
(`overture.distributed.comm_model`): FSDP from the parameter shapes; all-to-all from the routing
the step actually had (slots sent to experts on other ranks, counted by a hook on each router)
and, for reference, what a perfectly balanced router would send. Prints one JSON object on its
last line.

    .venv/bin/python benchmarks/distributed.py [--config configs/smoke.toml] [--rows 8] [--seq-len 64]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import torch

from overture.config import ModelConfig, load_config
from overture.config.schema import ParallelConfig
from overture.distributed import (
    CollectiveCounter,
    build_meshes,
    lm_train_step,
    local_batch,
    parallelize,
    spawn,
)
from overture.distributed.comm_counter import count_remote_slots
from overture.distributed.comm_model import (
    all_to_all_bytes,
    fsdp_bytes,
    step_scalar_bytes,
    uniform_remote_slots,
)
from overture.model import Transformer

REPO = Path(__file__).resolve().parents[1]
LAYOUTS = {
    "fsdp_4": ParallelConfig(nproc=4),
    "hsdp_2x2": ParallelConfig(nproc=4, dp_replicate=2, dp_shard=2),
    "ep2_shard2": ParallelConfig(nproc=4, dp_shard=4, ep=2),
    "ep4": ParallelConfig(nproc=4, ep=4),
    "hsdp_2x2_ep2": ParallelConfig(nproc=4, dp_replicate=2, dp_shard=2, ep=2),
}


def worker(model_config: ModelConfig, parallel: ParallelConfig, batches: torch.Tensor) -> dict:
    meshes = build_meshes(parallel)
    torch.manual_seed(0)
    model = parallelize(Transformer(model_config), meshes)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    remote = count_remote_slots(model, meshes.ep_rank, model_config.num_experts // parallel.ep)
    counter = CollectiveCounter()
    for step, batch in enumerate(batches, 1):
        rows = local_batch(batch, meshes)
        if step < len(batches):
            lm_train_step(model, optimizer, rows, meshes, grad_clip=1.0)
            continue
        remote[0] = 0
        started = time.perf_counter()
        with counter.counting():
            result = lm_train_step(model, optimizer, rows, meshes, grad_clip=1.0)
        seconds = time.perf_counter() - started
    return {
        "sent": counter.totals(),
        "calls": counter.counts(),
        "remote_slots": remote[0],
        "loss": result.loss,
        "seconds": seconds,
    }


def summarize(model_config: ModelConfig, parallel: ParallelConfig, ranks: list[dict], tokens: int) -> dict:
    def mean(values: list[float]) -> float:
        return sum(values) / len(values)

    kinds = ("all_to_all", "all_gather", "reduce_scatter", "all_reduce")
    measured = {kind: round(mean([r["sent"].get(kind, 0) for r in ranks])) for kind in kinds}
    remote = mean([r["remote_slots"] for r in ranks])
    fsdp = fsdp_bytes(model_config, parallel)
    analytic = {
        "all_to_all": all_to_all_bytes(model_config, parallel, remote),
        "all_gather": fsdp["all_gather"],
        "reduce_scatter": fsdp["reduce_scatter"],
        "all_reduce": fsdp["all_reduce"] + step_scalar_bytes(model_config, parallel),
    }
    uniform = uniform_remote_slots(model_config, parallel, tokens // parallel.nproc)
    return {
        "parallel": {
            **parallel.model_dump(),
            "dp_shard": parallel.shard_size,
            "expert_shard": parallel.expert_shard,
        },
        "bytes_sent_per_rank_per_step": {
            "measured": measured,
            "analytic": analytic,
            "all_to_all_if_routing_were_uniform": all_to_all_bytes(model_config, parallel, uniform),
            "all_gather_plus_reduce_scatter": {
                "measured": measured["all_gather"] + measured["reduce_scatter"],
                "analytic": analytic["all_gather"] + analytic["reduce_scatter"],
            },
        },
        "calls_per_rank": {kind: round(mean([r["calls"].get(kind, 0) for r in ranks]), 2) for kind in kinds},
        "remote_routing_slots_per_rank": remote,
        "loss": ranks[0]["loss"],
        "step_seconds": round(max(r["seconds"] for r in ranks), 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(REPO / "configs" / "smoke.toml"))
    parser.add_argument("--rows", type=int, default=8, help="sequences in the global batch")
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--steps", type=int, default=2, help="steps per layout; the last one is counted")
    parser.add_argument(
        "--layouts", default=",".join(LAYOUTS), help="comma-separated, from: " + ", ".join(LAYOUTS)
    )
    args = parser.parse_args()
    model_config = load_config(args.config).model
    generator = torch.Generator().manual_seed(0)
    batches = torch.randint(
        0, model_config.vocab_size, (args.steps, args.rows, args.seq_len), generator=generator
    )
    tokens = args.rows * args.seq_len
    layouts = {}
    for name in args.layouts.split(","):
        parallel = LAYOUTS[name]
        ranks = spawn(worker, parallel, model_config, parallel, batches, device_type="cpu")
        layouts[name] = summarize(model_config, parallel, ranks, tokens)
        print(name, json.dumps(layouts[name]["bytes_sent_per_rank_per_step"]), flush=True)
    summary = {
        "benchmark": "distributed",
        "torch": torch.__version__,
        "backend": "gloo",
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "config": os.path.relpath(args.config, REPO),
        "model_parameters": Transformer(model_config).num_parameters(),
        "global_batch": {"rows": args.rows, "seq_len": args.seq_len, "tokens": tokens},
        "units": "bytes one rank sends per training step (forward + backward + optimizer), mean over ranks",
        "layouts": layouts,
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
