"""Each rollout backend side by side: its logprob gap to the trainer, decode speed, time to first
token, weight-update and abort latency.

One checkpoint (a Hugging Face directory with its tokenizer, e.g. the main job's SFT checkpoint)
is served by overture's engine and by a vLLM server (`engine.backend = "vllm"`, one run per
`--vllm-dtype`), each through `overture.orchestration.rollout_engine`, the path the main job
takes (a server's start is not timed). Prompts are random token ids, then the assistant turn's
opening; requests stop at the end-of-turn token, as in episodes.

- gap: `--prompts` prompts completed at once; each sampled token's logprob against the trainer's
  float32 forward on the same tokens at the same temperature, mean and max absolute difference
  per token. This is the gap the off-policy correction (`rl.is_correction`: TIS / MIS) absorbs.
- decode tok/s at B=1 (`--b1-requests` prompts one after another) and B=32 (32 at once):
  generated tokens over the wall time of the requests, prefill included.
- time to first token: one-token requests, one after another (each a new prompt, so no prefix
  cache helps), the median.
- weight update: the trainer's state dict served as a new version with nothing in flight (for
  vLLM: written as a checkpoint directory, reloaded, experts repacked, prefix cache reset), the
  median of three.
- abort: a request with no stop token and a budget larger than it can finish is aborted after
  a second; the time from `abort()` until its partial generation is back, the median of three.

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
import statistics
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
    fresh = iter(random_prompts(tokenizer, args.prompt_tokens, 1000, seed=1))  # never seen before
    with open_checkpoint_engine(config, checkpoint, tokenizer) as engine:
        policy = engine.policy()

        async def timed(requests) -> tuple[list, float]:
            began = time.perf_counter()
            done = await asyncio.gather(*(policy.generate(p, n) for p, n in requests))
            return done, time.perf_counter() - began

        async def run() -> dict:
            await timed([(next(fresh), 4)])  # a first request warms the server up
            generations, seconds = await timed([(p, args.tokens) for p in prompts])
            result = {"batch_tokens_per_s": sum(len(g.token_ids) for g in generations) / seconds}
            result.update(gap_to_trainer(model, prompts, generations, args.temperature))
            b1 = [await timed([(next(fresh), args.tokens)]) for _ in range(args.b1_requests)]
            result["decode_tokens_per_s_b1"] = sum(len(g[0].token_ids) for g, _ in b1) / sum(s for _, s in b1)
            b32, seconds = await timed([(next(fresh), args.tokens) for _ in range(32)])
            result["decode_tokens_per_s_b32"] = sum(len(g.token_ids) for g in b32) / seconds
            result["ttft_s"] = statistics.median([(await timed([(next(fresh), 1)]))[1] for _ in range(5)])
            weights = model.state_dict()
            updates = []
            for version in (1, 2, 3):
                began = time.perf_counter()
                await engine.update_weights(weights, version)
                updates.append(time.perf_counter() - began)
            result["weight_update_s"] = statistics.median(updates)
            endless = engine.policy(stop_token_ids=())  # no end of turn to stop at
            aborts = [await abort_latency(endless, next(fresh)) for _ in range(3)]
            result["abort_s"] = statistics.median(aborts)
            return result

        return asyncio.run(run())


async def abort_latency(policy, prompt: list[int]) -> float:
    """Seconds from `abort()` to the partial generation of a request that was running for a second."""
    request = policy.generate(prompt, 1_000_000)  # cut to the context: it cannot finish in a second
    running = asyncio.ensure_future(request)
    await asyncio.sleep(1.0)
    began = time.perf_counter()
    request.abort()
    generation = await running
    if generation.finish_reason != "abort":
        raise RuntimeError(f"the request ended by {generation.finish_reason!r} before it was aborted")
    return time.perf_counter() - began


def gap_to_trainer(model, prompts, generations, temperature: float) -> dict:
    gaps = [
        abs(got - want)
        for prompt, g in zip(prompts, generations, strict=True)
        for got, want in zip(
            g.logprobs, trainer_logprobs(model, prompt, g.token_ids, temperature), strict=True
        )
    ]
    return {"tokens": len(gaps), "mean_gap": sum(gaps) / len(gaps), "max_gap": max(gaps)}


def random_prompts(tokenizer: Tokenizer, length: int, count: int, seed: int) -> list[list[int]]:
    """`count` prompts of `length` random token ids, each then opening an assistant turn."""
    rng = random.Random(seed)
    opening = [tokenizer.im_start_id, *tokenizer.encode("assistant\n")]  # special tokens go by id
    return [[rng.randrange(tokenizer.vocab_size) for _ in range(length)] + opening for _ in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--prompt-tokens", type=int, default=200)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--b1-requests", type=int, default=4)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--vllm-dtype", default="float32,bfloat16")
    parser.add_argument("--no-vllm", action="store_true")
    args = parser.parse_args()
    tokenizer = Tokenizer.from_dir(args.checkpoint)
    model = load_pretrained(args.checkpoint).eval()
    prompts = random_prompts(tokenizer, args.prompt_tokens, args.prompts, seed=0)
    backends = {"overture (fp32 model, config's KV cache dtype)": ["engine.backend=overture"]}
    if not args.no_vllm:
        for dtype in args.vllm_dtype.split(","):
            backends[f"vllm ({dtype})"] = ["engine.backend=vllm", f"engine.vllm_dtype={dtype}"]
    results = {}
    for name, overrides in backends.items():
        results[name] = measure(overrides, args.checkpoint, tokenizer, prompts, args, model)
        r = results[name]
        print(
            f"{name}: gap mean {r['mean_gap']:.2e} max {r['max_gap']:.2e}; decode "
            f"{r['decode_tokens_per_s_b1']:,.0f} tok/s at B=1, {r['decode_tokens_per_s_b32']:,.0f} at B=32; "
            f"TTFT {r['ttft_s'] * 1e3:.0f} ms; update {r['weight_update_s']:.2f} s; "
            f"abort {r['abort_s']:.3f} s"
        )
    print(json.dumps({
        "benchmark": "engine_backends",
        "checkpoint": str(args.checkpoint),
        "prompts": args.prompts,
        "tokens": args.tokens,
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "temperature": args.temperature,
        "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count()},
        "results": results,
    }))  # fmt: skip


if __name__ == "__main__":
    main()
