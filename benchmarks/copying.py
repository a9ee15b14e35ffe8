"""Copying, the skill every edit needs: how exactly a checkpoint writes the strings of its edits.

A `search_replace` applies only when its `old_string` is a stretch of the file, character for
character, and any edit is right only when its `new_string` is the line as it should be, mostly
copied from the listing it read. This scores both teacher-forced, on data the checkpoint was not
trained on: the demonstrations `overture sft` holds out (every k-th, its own split) and the edit
drills cut from them (`overture.recipes.main_job.drills`: one synthesized bug in a listing, the edit that
fixes it). For each edit call (`search_replace` or `edit_lines`) it takes the tokens of
`old_string` (when the call has one) and `new_string` after their first three (by then the line
is chosen; the rest is copying) and reports the argmax accuracy on them and the share of those
strings with every such token right. For the held-out
demonstrations' edit turns as a whole it adds the mean NLL and argmax accuracy.

Under both lies copying as such (`overture.recipes.main_job.copying`): random spans of the held-out
statements' tokens, each shown twice, scored on the second showing (`repeated_spans`).
Prints one JSON object on its last line.

    .venv/bin/python benchmarks/copying.py CHECKPOINT DEMONSTRATIONS.jsonl [--val-fraction 0.1]
"""

from __future__ import annotations

import argparse
import json
import platform
from pathlib import Path

import torch

from overture.model import load_pretrained
from overture.recipes.main_job.copying import repeated_span_accuracy, statement_tokens
from overture.recipes.main_job.drills import edit_drills
from overture.supervised.demonstrations import read_demonstrations, render_demonstration
from overture.supervised.sft import split_held_out
from overture.text import Tokenizer

CHOSEN = 3  # the first tokens of a copied string, where the line is chosen rather than copied
_DECODER = json.JSONDecoder()


class Tally:
    """Sums over the scored calls of one data set."""

    def __init__(self) -> None:
        self.calls = 0
        self.turn_tokens = self.turn_right = 0
        self.turn_nll = 0.0
        # right tokens, tokens, strings all right, strings
        self.copied = {"old_string": [0, 0, 0, 0], "new_string": [0, 0, 0, 0]}

    def report(self) -> dict[str, float | int]:
        out: dict[str, float | int] = {"edit_calls": self.calls}
        if self.turn_tokens:
            out["edit_turn_nll"] = round(self.turn_nll / self.turn_tokens, 3)
            out["edit_turn_token_accuracy"] = round(self.turn_right / self.turn_tokens, 3)
        for key, (right, tokens, whole, strings) in self.copied.items():
            out[f"{key}_copy_accuracy"] = round(right / tokens, 3) if tokens else 0.0
            out[f"{key}_copied_whole"] = round(whole / strings, 3) if strings else 0.0
        return out


def string_spans(text: str, key: str) -> list[tuple[int, int]]:
    """Character spans (inside the quotes) of every JSON string value of `key` in `text`."""
    spans, needle, start = [], f'"{key}": ', 0
    while (found := text.find(needle, start)) >= 0:
        begin = found + len(needle)
        try:
            _, end = _DECODER.raw_decode(text, begin)
        except json.JSONDecodeError:
            break
        spans.append((begin + 1, end - 1))
        start = end
    return spans


@torch.no_grad()
def score(model, tokenizer: Tokenizer, record: dict, tally: Tally, whole_turns: bool) -> None:
    conversation = render_demonstration(tokenizer, record)
    ids = torch.tensor([conversation.token_ids])
    logprobs = torch.log_softmax(model(ids).logits[0, :-1].float(), -1)
    predicted = logprobs.argmax(-1)
    for turn in conversation.turns:
        if turn.role != "assistant":
            continue
        body = [p for p in range(turn.body_start, turn.end) if conversation.loss_mask[p]]
        ends, text = [], ""
        for k in range(len(body)):  # character offset where each body token ends
            text = tokenizer.decode([conversation.token_ids[p] for p in body[: k + 1]])
            ends.append(len(text))
        spans = {key: string_spans(text, key) for key in tally.copied}
        if not spans["new_string"]:  # every edit call has one
            continue
        right = [bool(predicted[p - 1] == conversation.token_ids[p]) for p in body]
        tally.calls += len(spans["new_string"])
        if whole_turns:
            targets = torch.tensor([conversation.token_ids[p] for p in body])
            nll = -logprobs[[p - 1 for p in body]].gather(-1, targets[:, None])
            tally.turn_nll += nll.sum().item()
            tally.turn_tokens += len(body)
            tally.turn_right += sum(right)
        for key, found in spans.items():
            for begin, end in found:
                inside = [k for k in range(len(body)) if begin < ends[k] <= end][CHOSEN:]
                sums = tally.copied[key]
                sums[0] += sum(right[k] for k in inside)
                sums[1] += len(inside)
                sums[2] += all(right[k] for k in inside)
                sums[3] += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("demonstrations", type=Path, help="the JSONL file SFT trained on (sft.data)")
    parser.add_argument("--val-fraction", type=float, default=0.1, help="sft.val_fraction of that run")
    parser.add_argument("--drills-per-listing", type=int, default=3)
    args = parser.parse_args()
    model = load_pretrained(args.checkpoint).eval()
    tokenizer = Tokenizer.from_dir(args.checkpoint)
    _, held_out = split_held_out(read_demonstrations(args.demonstrations), args.val_fraction)
    demonstrations, drills = Tally(), Tally()
    for record in held_out:
        score(model, tokenizer, record, demonstrations, whole_turns=True)
        for drill in edit_drills(record, args.drills_per_listing):
            score(model, tokenizer, drill, drills, whole_turns=False)
    print(json.dumps({
        "checkpoint": str(args.checkpoint),
        "held_out_demonstrations": len(held_out),
        "demonstrations": demonstrations.report(),
        "drills": drills.report(),
        "repeated_spans": repeated_span_accuracy(model, statement_tokens(tokenizer, held_out)),
        "machine": f"{platform.machine()}, {torch.get_num_threads()} threads",
    }))  # fmt: skip


if __name__ == "__main__":
    main()
