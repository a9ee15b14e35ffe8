"""Trainer throughput: RL training tokens/s of the tiny policy by micro-batch layout, and peak memory.

Each layout runs in its own child process (so that its peak memory is its own) on the same
batch: `padded` pads each sequence to the longest of its micro-batch under the `--budget`;
`packed` bin-packs sequences into rows with block-diagonal attention; `shared` packs too, and
computes the untrained beginnings that sequences have in common once (`overture.rl.prefix_sharing`).
Two batches: `mixed`, sequences of spread-out lengths with nothing in common (prompt a quarter of
each); `agent`, an RL batch as the agent makes it: every sequence starts with the same system
message of `--system-tokens`, groups of `--group-size` share a task statement, then each has
its own answer. With `--demonstrations`, a third batch, `sft`: the first `--sequences` oracle
demonstrations of a main job's run (its `demonstrations.jsonl`, with the `tokenizer.json` beside
it), timed with `lm_step`, the SFT phase's step, where the others time `rl_step`. Training
tokens/s counts the sequences' own positions (padding and positions computed once for several
sequences are neither counted twice nor skipped). Prints one JSON object on its last line.

    .venv/bin/python benchmarks/trainer.py [--config configs/tiny.toml] [--steps 5] [--budget TOKENS]
    .venv/bin/python benchmarks/trainer.py --demonstrations RUN/tiny/demonstrations.jsonl \
        --batches sft --sequences 8 --budget 16384
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
from overture.rl.prefix_sharing import position_cost
from overture.rl.samples import TrainingSample
from overture.rl.trainer import rl_trainer
from overture.runtime.devices import resolve_device
from overture.supervised.demonstrations import demonstration_samples, read_demonstrations
from overture.text import Tokenizer

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
        samples.append(policy_sample(ids, prompt, rng))
    return samples


def agent_batch(args: argparse.Namespace, vocab: int, seed: int) -> list[TrainingSample]:
    """`--sequences` samples: one system message, a task per group, an answer (and tool output) each."""
    rng = random.Random(seed)
    system = [rng.randrange(vocab) for _ in range(args.system_tokens)]
    samples = []
    while len(samples) < args.sequences:
        task = [rng.randrange(vocab) for _ in range(rng.randint(64, 256))]
        for _ in range(min(args.group_size, args.sequences - len(samples))):
            answer = [rng.randrange(vocab) for _ in range(rng.randint(args.shortest, args.longest))]
            samples.append(policy_sample(system + task + answer, len(system) + len(task), rng))
    return samples


def sft_batch(args: argparse.Namespace, vocab: int, seq_len: int) -> list[TrainingSample]:
    """The first `--sequences` demonstrations of `--demonstrations`, tokenized as the job's SFT does."""
    path = Path(args.demonstrations)
    tokenizer = Tokenizer.from_dir(path.parent)
    if tokenizer.vocab_size > vocab:
        raise SystemExit(f"{path.parent}: {tokenizer.vocab_size} tokens for a model of vocabulary {vocab}")
    records = read_demonstrations(path)[: args.sequences]
    return demonstration_samples(tokenizer, records, seq_len, str(path))


def policy_sample(ids: list[int], prompt: int, rng: random.Random) -> TrainingSample:
    length = len(ids)
    logprobs = [0.0] * prompt + [-rng.uniform(0.1, 3.0) for _ in range(length - prompt)]
    mask = [0] * prompt + [1] * (length - prompt)
    return TrainingSample(ids, mask, logprobs, [0] * length, advantage=rng.uniform(-1, 1))


LAYOUTS = {"padded": (False, False), "packed": (True, False), "shared": (True, True)}


def measure(args: argparse.Namespace, layout_name: str, batch: str) -> dict:
    """Median step time of `rl_step` on the batch in this process, and the layout's padding."""
    packing, share = LAYOUTS[layout_name]
    overrides = [
        f"training.micro_batch_tokens={args.budget}",
        f"training.packing={str(packing).lower()}",
        f"training.share_prefixes={str(share).lower()}",
    ]
    config = load_config(args.config, overrides)
    # As a job resolves it: on a CPU that also sets the float mode training runs in.
    device = resolve_device(config.runtime.model_copy(update={"device": "cpu" if args.cpu else "auto"}))
    torch.manual_seed(0)
    model = Transformer(config.model).to(device)
    trainer = rl_trainer(model, config)
    vocab = config.model.vocab_size
    if batch == "agent":
        samples = agent_batch(args, vocab, 0)
    elif batch == "sft":
        samples = sft_batch(args, vocab, config.training.seq_len)
    else:
        samples = mixed_length_batch(args.sequences, args.shortest, args.longest, vocab, 0)
    cost = position_cost(config.model) if share else None
    layout = build_micro_batches(samples, [1.0] * len(samples), args.budget, packing, cost)
    real = sum(len(s.token_ids) - 1 for s in samples)
    computed = sum(b.num_positions for b in layout)
    step_on = trainer.lm_step if batch == "sft" else trainer.rl_step
    times = []
    for step in range(args.warmup + args.steps):
        if device.type == "cuda":
            torch.cuda.synchronize()
        started = time.perf_counter()
        step_on(samples)
        if device.type == "cuda":
            torch.cuda.synchronize()
        if step >= args.warmup:
            times.append(time.perf_counter() - started)
    seconds = statistics.median(times)
    result = {
        "tokens_per_s": round(real / seconds),
        "positions_per_s": round(computed / seconds),
        "positions_computed_per_token": round(computed / real, 4),
        "micro_batches": len(layout),
        "step_seconds": round(seconds, 4),
        "device": str(device),
    }
    if device.type == "cuda":
        result["peak_memory_mib"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    else:
        result["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return result


def run_child(args: argparse.Namespace, layout: str, batch: str) -> dict:
    command = [sys.executable, __file__, "--child", layout, "--batch", batch, *forwarded(args)]
    out = subprocess.run(command, capture_output=True, text=True, check=True, cwd=REPO)
    return json.loads(out.stdout.strip().splitlines()[-1])


def forwarded(args: argparse.Namespace) -> list[str]:
    flags = ["--config", str(args.config), "--steps", str(args.steps), "--warmup", str(args.warmup)]
    flags += ["--budget", str(args.budget), "--sequences", str(args.sequences)]
    flags += ["--shortest", str(args.shortest), "--longest", str(args.longest)]
    flags += ["--system-tokens", str(args.system_tokens), "--group-size", str(args.group_size)]
    if args.demonstrations:
        flags += ["--demonstrations", args.demonstrations]
    return flags + (["--cpu"] if args.cpu else [])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(REPO / "configs" / "tiny.toml"))
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--budget", type=int, help="micro-batch token budget (default: the config's)")
    parser.add_argument("--sequences", type=int, default=32, help="sequences per step")
    parser.add_argument("--shortest", type=int, default=32)
    parser.add_argument("--longest", type=int, default=512)
    parser.add_argument("--system-tokens", type=int, default=1536, help="agent batch: system message")
    parser.add_argument("--group-size", type=int, default=4, help="agent batch: sequences per task")
    parser.add_argument("--demonstrations", help="a job's demonstrations.jsonl: the batch `sft`")
    parser.add_argument("--batches", default="mixed,agent", help="of mixed, agent, sft")
    parser.add_argument("--cpu", action="store_true", help="stay on CPU even when CUDA is present")
    parser.add_argument("--child", choices=list(LAYOUTS), help=argparse.SUPPRESS)
    parser.add_argument("--batch", choices=["mixed", "agent", "sft"], default="mixed", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if "sft" in args.batches.split(",") and not args.demonstrations:
        parser.error("the batch sft needs --demonstrations")
    if args.budget is None:
        args.budget = load_config(args.config).training.micro_batch_tokens
    if args.child:
        print(json.dumps(measure(args, args.child, args.batch)))
        return
    summary = {
        "benchmark": "trainer",
        "config": os.path.relpath(args.config, REPO),
        "sequences_per_step": args.sequences,
        "answer_lengths": [args.shortest, args.longest],
        "system_tokens": args.system_tokens,
        "group_size": args.group_size,
        "budget": args.budget,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "machine": platform.machine(),
    }
    for batch in args.batches.split(","):
        results = {layout: run_child(args, layout, batch) for layout in LAYOUTS}
        for layout, result in results.items():
            print(f"{batch:6s} {layout:7s} {result['tokens_per_s']:8,d} tokens/s, "
                  f"{result['positions_computed_per_token']:.2f} positions per token")  # fmt: skip
        rate = {layout: result["tokens_per_s"] for layout, result in results.items()}
        summary[batch] = {
            **results,
            "packing_speedup": round(rate["packed"] / rate["padded"], 2),
            "sharing_speedup": round(rate["shared"] / rate["packed"], 2),
        }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
