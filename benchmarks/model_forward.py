"""Forward+backward throughput of the tiny policy, and grouped-GEMM experts against the per-expert loop.

Also a step of next-token training on every position at the main job's warm-up shape (8 windows
of 1,024 tokens): the loss through the B×T×V logits against the chunked one of `targets=`
(`overture.model.linear_cross_entropy`).

Usage: python benchmarks/model_forward.py [--config configs/tiny.toml] [--iters N]
Prints a human summary, then one JSON object on the last line.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from overture.config import load_config
from overture.model import MoEBlock, Transformer
from overture.model.linear_cross_entropy import CHUNK_ROWS
from overture.runtime.devices import resolve_device

ROOT = Path(__file__).resolve().parents[1]


def timed(fn, iters: int, warmup: int = 2) -> float:
    """Median seconds per call of `fn` over `iters` calls after `warmup` calls."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(iters):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return sorted(samples)[len(samples) // 2]


def model_throughput(config, batch: int, length: int, iters: int) -> dict:
    model = Transformer(config)
    ids = torch.randint(0, config.vocab_size, (batch, length))

    def step():
        out = model(ids)
        (out.logits.float().logsumexp(-1).mean() + out.aux_loss).backward()
        model.zero_grad(set_to_none=True)

    seconds = timed(step, iters)
    return {
        "batch": batch,
        "seq_len": length,
        "seconds_per_step": seconds,
        "tokens_per_s": batch * length / seconds,
        "parameters": model.num_parameters(),
        "active_parameters": model.num_parameters(active=True),
    }


def lm_loss_throughput(config, batch: int, length: int, iters: int) -> dict:
    """Forward+backward of mean next-token cross-entropy on every position, both ways, on the same
    windows; `loss_difference` is how far the two losses are apart."""
    model = Transformer(config)
    ids = torch.randint(0, config.vocab_size, (batch, length + 1))
    inputs, targets = ids[:, :-1], ids[:, 1:]

    def through_logits():
        out = model(inputs)
        loss = F.cross_entropy(out.logits.flatten(0, 1).float(), targets.flatten())
        (loss + out.aux_loss).backward()
        model.zero_grad(set_to_none=True)
        return loss.item()

    def chunked():
        out = model(inputs, targets=targets)
        loss = out.target_loss_sum / targets.numel()
        (loss + out.aux_loss).backward()
        model.zero_grad(set_to_none=True)
        return loss.item()

    result = {"batch": batch, "seq_len": length, "chunk_rows": CHUNK_ROWS}
    for name, step in (("logits", through_logits), ("chunked", chunked)):
        seconds = timed(step, iters)
        result[name] = {"seconds_per_step": seconds, "tokens_per_s": batch * length / seconds}
    result["chunked_speedup"] = result["logits"]["seconds_per_step"] / result["chunked"]["seconds_per_step"]
    result["loss_difference"] = abs(through_logits() - chunked())
    return result


def experts_throughput(config, tokens: int, iters: int) -> dict:
    results = {}
    x = torch.randn(tokens, config.hidden_size)
    reference = None
    for impl in ("grouped", "loop"):
        torch.manual_seed(0)
        block = MoEBlock(config.model_copy(update={"experts_impl": impl}))
        for p in block.parameters():
            torch.nn.init.normal_(p, std=0.05)
        if reference is None:
            reference = block.state_dict()
        block.load_state_dict(reference)

        def step(block=block):
            out, _ = block(x)
            out.square().mean().backward()
            block.zero_grad(set_to_none=True)

        seconds = timed(step, iters)
        results[impl] = {"seconds_per_step": seconds, "tokens_per_s": tokens / seconds}
    results["grouped_speedup"] = results["loop"]["seconds_per_step"] / results["grouped"]["seconds_per_step"]
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/tiny.toml", help="relative to the repository root")
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--expert-tokens", type=int, default=4096)
    parser.add_argument("--lm-batch", type=int, default=8, help="windows of the lm-loss step")
    parser.add_argument("--lm-seq-len", type=int, default=1024)
    args = parser.parse_args()
    torch.manual_seed(0)
    run_config = load_config(ROOT / args.config)
    resolve_device(run_config.runtime)  # threads and denormal flushing, as the jobs set them
    config = run_config.model
    model = model_throughput(config, args.batch, args.seq_len, args.iters)
    lm_loss = lm_loss_throughput(config, args.lm_batch, args.lm_seq_len, args.iters)
    experts = experts_throughput(config, args.expert_tokens, args.iters)
    # The tiny model's experts are small; a layer of a real MoE's proportions shows the kernel's effect.
    wide = config.model_copy(
        update={
            "hidden_size": 1024,
            "moe_intermediate_size": 512,
            "num_experts": 32,
            "num_experts_per_tok": 4,
        }
    )
    experts_wide = experts_throughput(wide, 2048, max(3, args.iters // 3))
    result = {
        "benchmark": "model_forward",
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "cores": os.cpu_count(),
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
        },
        "config": args.config,
        "tiny_model_forward_backward": model,
        "lm_loss_every_position": lm_loss,
        "experts_tiny": {"tokens": args.expert_tokens, **experts},
        "experts_d1024_e32_top4": {"tokens": 2048, **experts_wide},
    }
    print(
        f"tiny model fwd+bwd: {model['tokens_per_s']:,.0f} tokens/s "
        f"({model['parameters']:,} parameters, {model['active_parameters']:,} active)"
    )
    print(
        f"next-token loss on every position ({lm_loss['batch']} x {lm_loss['seq_len']}): through the "
        f"logits {lm_loss['logits']['seconds_per_step']:.3f} s/step, chunked "
        f"{lm_loss['chunked']['seconds_per_step']:.3f} s/step ({lm_loss['chunked_speedup']:.2f}x)"
    )
    for name in ("experts_tiny", "experts_d1024_e32_top4"):
        entry = result[name]
        print(
            f"{name}: grouped {entry['grouped']['tokens_per_s']:,.0f} tok/s, loop "
            f"{entry['loop']['tokens_per_s']:,.0f} tok/s (grouped {entry['grouped_speedup']:.2f}x)"
        )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
