"""Decode step time at an agent's context length, on the main job's model: the KV cache's dtype and
where its blocks lie.

The model is `configs/tiny.toml`'s (random weights). `batch` requests with `context`-token
prompts decode together; the figure is the wall time of one engine step once all of them are
running, averaged over `--steps` steps (read from `Engine.stats()["steps"]` while they run).

Blocks: *contiguous* is a fresh pool, where each prompt's prefill takes consecutive blocks.
*Interleaved* is a pool after a round of decoding: before the measured prompts, `batch` requests
decode together from short prompts for `context` tokens, as an RL step's episodes do, so each
one's blocks alternate with the others'; once they retire, the measured prompts are prefilled into
those freed blocks. Block after block of a sequence then lies somewhere else in memory, which is
what an engine serving multi-turn episodes reads.

Variants: cache float32 or bfloat16 (`engine.kv_cache_dtype`), attention read in place by the C
kernel (`engine.native_attention`) or gathered for torch's attention; the kernel on one thread or
shared by several (`engine.attention_threads`, `--attention-threads 1,2`).

Usage: python benchmarks/decode_attention.py [--batch 32] [--context 3000] [--steps 40]
    [--attention-threads 1,2] [--gather]
Prints a line per variant, then one JSON object on the last line.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import torch

from overture.config import load_config
from overture.engine import Engine
from overture.model import Transformer

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "tiny.toml"


def prompts_for(batch: int, length: int, vocab: int, seed: int) -> list[list[int]]:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(3, vocab, (batch, length), generator=gen).tolist()


def step_seconds(engine: Engine, prompts: list[list[int]], steps: int) -> float:
    """Mean wall time of an engine step while every prompt decodes (prefills done)."""
    handles = [
        engine.submit(prompt, max_new_tokens=steps + 8, temperature=1.0, seed=i)
        for i, prompt in enumerate(prompts)
    ]
    while True:
        stats = engine.stats()
        if stats["waiting"] == 0 and stats["running"] == len(prompts):
            break
        time.sleep(0.0005)
    # The step that admitted the last prompt may still be running: start at the next one.
    first = engine.stats()["steps"] + 1
    while engine.stats()["steps"] < first:
        time.sleep(0.0005)
    start = time.perf_counter()
    while engine.stats()["steps"] < first + steps:
        time.sleep(0.0005)
    elapsed = time.perf_counter() - start
    for handle in handles:
        handle.result()
    return elapsed / steps


def measure(
    model: Transformer, args, cache_dtype: str, native: bool, interleaved: bool, threads: int = 1
) -> float:
    vocab = model.config.vocab_size
    with Engine(
        model,
        max_batch_size=args.batch,
        kv_cache_tokens=args.batch * (args.context + args.steps + 64),
        prefix_caching=False,
        kv_cache_dtype=cache_dtype,
        native_attention=native,
        attention_threads=threads,
    ) as engine:
        if interleaved:
            engine.generate(prompts_for(args.batch, 16, vocab, seed=1), max_new_tokens=args.context, seed=1)
        return step_seconds(engine, prompts_for(args.batch, args.context, vocab, seed=2), args.steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--context", type=int, default=3000)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--gather", action="store_true", help="also time torch's gathered attention")
    parser.add_argument(
        "--attention-threads", default="1", help="comma-separated thread counts for the C kernel"
    )
    args = parser.parse_args()
    torch.manual_seed(0)
    model = Transformer(load_config(CONFIG).model).eval()
    thread_counts = [int(count) for count in args.attention_threads.split(",")]
    variants = [(dtype, True, threads) for dtype in ("float32", "bfloat16") for threads in thread_counts]
    if args.gather:
        variants += [(dtype, False, 1) for dtype in ("float32", "bfloat16")]
    rows = []
    for dtype, native, threads in variants:
        for interleaved in (False, True):
            seconds = measure(model, args, dtype, native, interleaved, threads)
            row = {
                "kv_cache_dtype": dtype,
                "attention": "in place" if native else "gathered",
                "attention_threads": threads,
                "blocks": "interleaved" if interleaved else "contiguous",
                "decode_step_ms": seconds * 1e3,
                "tokens_per_s": args.batch / seconds,
            }
            rows.append(row)
            print(
                f"{dtype:>8} {row['attention']:>8} x{threads} {row['blocks']:>11}: "
                f"{row['decode_step_ms']:6.1f} ms a step, {row['tokens_per_s']:,.0f} tok/s",
                flush=True,
            )
    result = {
        "benchmark": "decode_attention",
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "cores": os.cpu_count(),
            "torch": torch.__version__,
            "load_average_1min": os.getloadavg()[0],
        },
        "model": {"config": "configs/tiny.toml", "parameters": model.num_parameters()},
        "batch": args.batch,
        "context": args.context,
        "steps": args.steps,
        "variants": rows,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
