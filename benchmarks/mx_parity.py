"""MXFP8 parity: the tiny policy's SFT loss curve in fp32 and in MXFP8 from the same seed, and how
closely the engine's logprobs follow the training forward in each precision.

Both runs are `overture sft` (the same code as the command) on the same config, seed, data and
steps, with early stopping off and only `model.precision` changed. The final-loss gap is taken on
the held-out loss after the last step: (MXFP8 - fp32) / fp32. The engine then serves each run's
final checkpoint (which records its precision) and samples completions of held-out prompts; the
mismatch is the mean |engine logprob - training-forward logprob| over the sampled tokens. Prints
one JSON object on its last line.

    .venv/bin/python benchmarks/mx_parity.py [--config configs/sft_tiny.toml] [--steps 100]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import torch

from overture.config import RunConfig, load_config
from overture.engine import Engine
from overture.model import Transformer, load_pretrained
from overture.rl.setup import load_tokenizer
from overture.supervised.sft import load_demonstration_samples, sft, split_held_out

REPO = Path(__file__).resolve().parents[1]


def run_config(args: argparse.Namespace, precision: str, output_dir: str) -> RunConfig:
    overrides = [
        f"model.precision={precision}",
        f"training.steps={args.steps}",
        "training.log_every=1",
        "training.checkpoint_every=0",
        f"sft.eval_every={args.steps}",
        f"sft.patience={args.steps + 1}",
        f"output_dir={output_dir}",
        f"name=parity-{precision}",
    ]
    return load_config(args.config, overrides)


def loss_curve(run_dir: Path) -> tuple[list[float], float]:
    """Per-step training losses and the final held-out loss from the run's metrics.jsonl."""
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    losses = [round(r["loss"], 5) for r in records if "loss" in r]
    held_out = [r["val_loss"] for r in records if "val_loss" in r and r.get("step", 0) > 0]
    return losses, held_out[-1]


def training_logprobs(model: Transformer, prompt: list[int], tokens: list[int]) -> torch.Tensor:
    with torch.no_grad():
        logits = model(torch.tensor([prompt + tokens])).logits[0].float()
    logp = torch.log_softmax(logits, dim=-1)[len(prompt) - 1 : -1]
    return logp.gather(-1, torch.tensor(tokens)[:, None])[:, 0]


def engine_mismatch(checkpoint: Path, prompts: list[list[int]], new_tokens: int) -> dict:
    """Mean and max |engine - training forward| logprob over tokens the engine sampled."""
    model = load_pretrained(checkpoint).eval()
    with Engine(model, max_new_tokens=new_tokens) as engine:
        completions = engine.generate(prompts, max_new_tokens=new_tokens, temperature=1.0, seed=0)
    deltas = torch.cat(
        [
            (torch.tensor(c.logprobs) - training_logprobs(model, p, c.token_ids)).abs()
            for p, c in zip(prompts, completions, strict=True)
            if c.token_ids
        ]
    )
    return {
        "served_precision": model.config.precision,
        "tokens": deltas.numel(),
        "mean_abs": float(f"{deltas.mean().item():.3g}"),
        "max_abs": float(f"{deltas.max().item():.3g}"),
    }


def held_out_prompts(config: RunConfig, count: int) -> list[list[int]]:
    """The start of held-out demonstrations, up to the first token the policy produced."""
    tokenizer = load_tokenizer(config)
    _, held_out = split_held_out(load_demonstration_samples(config, tokenizer), config.sft.val_fraction)
    return [s.token_ids[: s.loss_mask.index(1)] for s in held_out[:count]]


def run(args: argparse.Namespace, precision: str, output_dir: str) -> dict:
    config = run_config(args, precision, output_dir)
    started = time.perf_counter()
    summary = sft(config, echo=lambda _: None)
    seconds = time.perf_counter() - started
    losses, held_out = loss_curve(Path(summary["run_dir"]))
    prompts = held_out_prompts(config, args.prompts)
    return {
        "loss_curve": losses,
        "final_loss": losses[-1],
        "final_held_out_loss": round(held_out, 5),
        "seconds": round(seconds, 1),
        "engine_vs_trainer_logprob": engine_mismatch(Path(summary["final"]), prompts, args.new_tokens),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(REPO / "configs" / "sft_tiny.toml"))
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--prompts", type=int, default=8, help="held-out prompts the engine completes")
    parser.add_argument("--new-tokens", type=int, default=32)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as output_dir:
        fp32 = run(args, "fp32", output_dir)
        mxfp8 = run(args, "mxfp8", output_dir)
    gap = (mxfp8["final_held_out_loss"] - fp32["final_held_out_loss"]) / fp32["final_held_out_loss"]
    train_gap = (mxfp8["final_loss"] - fp32["final_loss"]) / fp32["final_loss"]
    summary = {
        "benchmark": "mx_parity",
        "config": os.path.relpath(args.config, REPO),
        "steps": args.steps,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "machine": platform.machine(),
        "fp32": fp32,
        "mxfp8": mxfp8,
        "final_held_out_loss_gap": round(gap, 5),
        "final_train_loss_gap": round(train_gap, 5),
        "target_gap": 0.02,
        # Signed: a negative gap is MXFP8 ending below fp32.
        "within_target": gap <= 0.02,
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
