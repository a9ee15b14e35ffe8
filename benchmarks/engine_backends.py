"""How far the behaviour logprobs of each rollout backend sit from the trainer's, and how fast.

One checkpoint (a Hugging Face directory with its tokenizer, e.g. the main job's SFT checkpoint)
is served by overture's engine and by a vLLM server (`engine.backend = "vllm"`, one run per
`--vllm-dtype`), each through `overture.orchestration.rollout_engine`, the path the main job
takes. Every backend completes the same prompts (random token ids, then the assistant turn's
opening), and each sampled token's logprob is compared with the trainer's float32 forward on
the same tokens at the same temperature: mean and max absolute gap per token. This is the gap the
off-policy correction (`rl.tis_cap` / MIS) absorbs. Throughput is generated tokens over the wall
time of the batch, server start excluded.

Usage: python benchmarks/engine_backends.py --checkpoint DIR [--prompts 16] [--tokens 128]
    [--temperature 1.0] [--vllm-dtype float32,bfloat16] [--no-vllm]
Prints a line per backend, then one JSON object on the last line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import time
from pathlib import Path

import torch

from overture.config import load_config
from overture.model import load_pretrained
from overture.orchestration.rollout_engine import open_checkpoint_engine
from overture.text import Tokenizer

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "tiny.toml"


def trainer_logprobs(model, prompt: list[int], tokens: list[int], temperature: float) -> list[float]:
    with torch.no_grad():
        logits = model(torch.tensor([prompt + tokens])).logits[0, len(prompt) - 1 : -1].double()
    logprobs = torch.log_softmax(logits / temperature, dim=-1)
    return logprobs.gather(-1, torch.tensor(tokens)[:, None])[:, 0].tolist()


def measure(overrides: list[str], checkpoint: Path, tokenizer: Tokenizer, prompts, args, model) -> dict:
    sampling = [f"engine.temperature={args.temperature}", "engine.max_repeats=0"]  # no guard in vLLM
    config = load_config(CONFIG, [*overrides, *sampling])
    with open_checkpoint_engine(config, checkpoint, tokenizer) as engine:
        policy = engine.policy()

        async def generate():
            return await asyncio.gather(*(policy.generate(p, args.tokens) for p in prompts))

        began = time.perf_counter()
        generations = asyncio.run(generate())
        seconds = time.perf_counter() - began
    gaps = [
        abs(got - want)
        for prompt, g in zip(prompts, generations, strict=True)
        for got, want in zip(
            g.logprobs, trainer_logprobs(model, prompt, g.token_ids, args.temperature), strict=True
        )
    ]
    tokens = sum(len(g.token_ids) for g in generations)
    return {
        "tokens": tokens,
        "mean_gap": sum(gaps) / len(gaps),
        "max_gap": max(gaps),
        "tokens_per_s": tokens / seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--prompt-tokens", type=int, default=200)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--vllm-dtype", default="float32,bfloat16")
    parser.add_argument("--no-vllm", action="store_true")
    args = parser.parse_args()
    tokenizer = Tokenizer.from_dir(args.checkpoint)
    model = load_pretrained(args.checkpoint).eval()
    rng = random.Random(0)
    opening = [tokenizer.im_start_id, *tokenizer.encode("assistant\n")]  # special tokens go by id
    prompts = [
        [rng.randrange(tokenizer.vocab_size) for _ in range(args.prompt_tokens)] + list(opening)
        for _ in range(args.prompts)
    ]
    backends = {"overture (fp32 model, config's KV cache dtype)": ["engine.backend=overture"]}
    if not args.no_vllm:
        for dtype in args.vllm_dtype.split(","):
            backends[f"vllm ({dtype})"] = ["engine.backend=vllm", f"engine.vllm_dtype={dtype}"]
    results = {}
    for name, overrides in backends.items():
        results[name] = measure(overrides, args.checkpoint, tokenizer, prompts, args, model)
        r = results[name]
        print(f"{name}: gap mean {r['mean_gap']:.2e} max {r['max_gap']:.2e}, {r['tokens_per_s']:,.0f} tok/s")
    print(json.dumps({
        "benchmark": "engine_backends",
        "checkpoint": str(args.checkpoint),
        "prompts": args.prompts,
        "tokens": args.tokens,
        "temperature": args.temperature,
        "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count()},
        "results": results,
    }))  # fmt: skip


if __name__ == "__main__":
    main()
