"""Trainer throughput: RL training tokens/s of the tiny policy with and without packing, and peak memory.

Each layout runs in its own child process (so that its peak memory is its own) on the same
batch of sequences of mixed lengths: `packed` bin-packs them into rows of at most
`--budget` tokens with block-diagonal attention; `padded` pads each to the longest of its
micro-batch under the same budget. Training tokens/s counts real tokens only (padding is
work, not progress). Prints one JSON object on its last line.

    .venv/bin/python benchmarks/trainer.py [--config configs/tiny.toml] [--steps 5] [--budget 2048]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from overture.config import load_config
from overture.model import Transformer
from overture.rl.batching import build_micro_batches
from overture.rl.samples import TrainingSample
from overture.rl.trainer import Trainer

REPO = Path(__file__).resolve().parents[1]


def mixed_length_batch(
    count: int, shortest: int, longest: int, vocab: int, seed: int
) -> list[TrainingSample]:
    """Agent-like samples: a prompt (mask 0) then policy tokens with logprobs, lengths spread evenly."""
    rng = random.Random(seed)
    samples = []
    for _ in range(count):
        length = rng.randint(shortest, longest)
        prompt = length // 4
        ids = [rng.randrange(vocab) for _ in range(length)]
        logprobs = [0.0] * prompt + [-rng.uniform(0.1, 3.0) for _ in range(length - prompt)]
        mask = [0] * prompt + [1] * (length - prompt)
        samples.append(TrainingSample(ids, mask, logprobs, [0] * length, advantage=rng.uniform(-1, 1)))
    return samples


def measure(args: argparse.Namespace, packing: bool) -> dict:
    """Median step time of `rl_step` on the batch in this process, and the layout's padding."""
    overrides = [f"training.micro_batch_tokens={args.budget}", f"training.packing={str(packing).lower()}"]
    config = load_config(args.config, overrides)
    device = torch.device("cuda" if torch.cuda.is_available() and not args.cpu else "cpu")
    torch.manual_seed(0)
    model = Transformer(config.model).to(device)
    trainer = Trainer(model, config)
    samples = mixed_length_batch(args.sequences, args.shortest, args.longest, config.model.vocab_size, 0)
    layout = build_micro_batches(samples, [1.0] * len(samples), args.budget, packing)
    real = sum(b.num_tokens for b in layout)
    computed = sum(b.num_positions for b in layout)
    times = []
    for step in range(args.warmup + args.steps):
        if device.type == "cuda":
            torch.cuda.synchronize()
        started = time.perf_counter()
        trainer.rl_step(samples)
        if device.type == "cuda":
            torch.cuda.synchronize()
        if step >= args.warmup:
            times.append(time.perf_counter() - started)
    seconds = statistics.median(times)
    result = {
        "tokens_per_s": round(real / seconds),
        "positions_per_s": round(computed / seconds),
        "padding_fraction": round(1 - real / computed, 4),
        "micro_batches": len(layout),
        "step_seconds": round(seconds, 4),
        "device": str(device),
    }
    if device.type == "cuda":
        result["peak_memory_mib"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    else:
        result["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return result


def run_child(args: argparse.Namespace, packing: bool) -> dict:
    command = [sys.executable, __file__, "--child", "packed" if packing else "padded", *forwarded(args)]
    out = subprocess.run(command, capture_output=True, text=True, check=True, cwd=REPO)
    return json.loads(out.stdout.strip().splitlines()[-1])


def forwarded(args: argparse.Namespace) -> list[str]:
    flags = ["--config", str(args.config), "--steps", str(args.steps), "--warmup", str(args.warmup)]
    flags += ["--budget", str(args.budget), "--sequences", str(args.sequences)]
    flags += ["--shortest", str(args.shortest), "--longest", str(args.longest)]
    return flags + (["--cpu"] if args.cpu else [])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(REPO / "configs" / "tiny.toml"))
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--budget", type=int, default=2048, help="micro-batch token budget")
    parser.add_argument("--sequences", type=int, default=32, help="sequences per step")
    parser.add_argument("--shortest", type=int, default=32)
    parser.add_argument("--longest", type=int, default=512)
    parser.add_argument("--cpu", action="store_true", help="stay on CPU even when CUDA is present")
    parser.add_argument("--child", choices=["packed", "padded"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args, args.child == "packed")))
        return
    packed, padded = run_child(args, True), run_child(args, False)
    summary = {
        "benchmark": "trainer",
        "config": os.path.relpath(args.config, REPO),
        "sequences_per_step": args.sequences,
        "lengths": [args.shortest, args.longest],
        "budget": args.budget,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "machine": platform.machine(),
        "packed": packed,
        "padded": padded,
        "packing_speedup": round(packed["tokens_per_s"] / padded["tokens_per_s"], 2),
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
