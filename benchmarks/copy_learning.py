"""How soon a model of a config learns to copy: fresh weights trained on nothing but repeated spans.

Each row of a batch packs spans of 8-40 random tokens, each followed by its repeat, into 256
tokens; AdamW on the next-token loss (plus the router's aux loss). Tokens are drawn uniformly from
the ordinary ids above the special tokens, or from the first `--ids` of them. Every `--every`
steps, `overture.recipes.main_job.copying.repeated_span_accuracy` on spans of the same ids: the step where the
second showing leaves the first behind is where induction heads form. A config with
`main_job.copy_circuit = true` (the tiny one) starts with one built in; `--set main_job.copy_circuit=false`
measures the weights as plain initialisation leaves them.

Usage: python benchmarks/copy_learning.py [--config configs/tiny.toml] [--steps 600] [--ids N]
       [--lr 1e-3] [--every 50] [--set model.head_dim=64 ...]
Prints the curve, then one JSON object on the last line.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import time

import torch
import torch.nn.functional as F

from overture.config import load_config
from overture.model import Transformer
from overture.recipes.main_job.copy_circuit import install_copy_circuit
from overture.recipes.main_job.copying import repeated_span_accuracy
from overture.text.markers import SPECIAL_TOKENS

ROW_TOKENS = 256
ROWS = 16
SPAN_RANGE = (8, 40)


def repeated_rows(ids: range, rng: random.Random) -> torch.Tensor:
    """ROWS rows of ROW_TOKENS + 1 tokens: spans drawn from `ids`, each followed by its repeat."""
    rows = []
    for _ in range(ROWS):
        row: list[int] = []
        while len(row) <= ROW_TOKENS:
            span = [rng.choice(ids) for _ in range(rng.randint(*SPAN_RANGE))]
            row += span + span
        rows.append(row[: ROW_TOKENS + 1])
    return torch.tensor(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/tiny.toml")
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--ids", type=int, default=None, help="draw from this many ids only")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--every", type=int, default=50)
    parser.add_argument("--set", dest="overrides", action="append", default=[], help="config override")
    args = parser.parse_args()
    config = load_config(args.config, args.overrides)
    torch.manual_seed(config.seed)
    model = Transformer(config.model)
    if config.main_job.copy_circuit:
        install_copy_circuit(model)
    first = len(SPECIAL_TOKENS)
    ids = range(first, first + args.ids) if args.ids else range(first, config.model.vocab_size)
    rng = random.Random(config.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)
    curve, started = [], time.time()
    for step in range(1, args.steps + 1):
        batch = repeated_rows(ids, rng)
        out = model(batch[:, :-1])
        ce = F.cross_entropy(out.logits.flatten(0, 1), batch[:, 1:].flatten())
        loss = ce + config.model.router_aux_loss_coef * out.aux_loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        model.update_balance_bias()
        if step % args.every == 0 or step == args.steps:
            copying = repeated_span_accuracy(model.eval(), list(ids), spans=32, seed=step)
            model.train()
            point = {"step": step, "loss": round(ce.item(), 3), **copying}
            curve.append(point)
            print(f"step {step:5d}  loss {point['loss']:.3f}  first showing {copying['first_showing']:.3f}"
                  f"  second {copying['second_showing']:.3f}  {time.time() - started:.0f} s", flush=True)
    print(json.dumps({
        "config": args.config, "overrides": args.overrides, "ids": len(ids), "lr": args.lr,
        "rows": ROWS, "row_tokens": ROW_TOKENS, "curve": curve, "seconds": round(time.time() - started, 1),
        "machine": f"{platform.machine()}, {torch.get_num_threads()} threads",
    }))  # fmt: skip


if __name__ == "__main__":
    main()
