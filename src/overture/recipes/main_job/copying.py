"""Copying as such: does the policy write again a span of tokens it has just been shown?

Every step of an episode copies something from its context: a function's name from the report
into a `grep`, a line number from the grep's output into a `read_file`, a line of the listing into
an `old_string`. `repeated_span_accuracy` measures that skill apart from all of them: random spans
of tokens (drawn one by one from a pool, so that no span is text the model may know), each shown
twice in a row, scored by the greedy choice on the second showing from its second token on. A
model with induction heads (attend to the token after the earlier occurrence of the current one,
and write it) gets most of the second showing right; one without gets no more than on the first.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from overture.model import Transformer
from overture.text import Tokenizer

SPAN_TOKENS = 24
SPANS = 64


@torch.no_grad()
def repeated_span_accuracy(
    model: Transformer,
    pool: Sequence[int],
    spans: int = SPANS,
    span_tokens: int = SPAN_TOKENS,
    seed: int = 0,
) -> dict[str, float | int]:
    """Greedy accuracy on the first and the second showing of `spans` spans of `span_tokens`
    tokens drawn from `pool` (the same pool and seed give the same spans)."""
    if not pool or span_tokens < 2:
        raise ValueError(f"repeated spans need a token pool and spans of 2 tokens or more (got "
                         f"{len(pool)} tokens, span_tokens={span_tokens})")  # fmt: skip
    generator = torch.Generator().manual_seed(seed)
    drawn = torch.randint(len(pool), (spans, span_tokens), generator=generator)
    shown = torch.tensor(pool)[drawn]
    ids = torch.cat([shown, shown], dim=1)
    device = next(model.parameters()).device
    right = (model(ids.to(device)).logits[:, :-1].argmax(-1).cpu() == ids[:, 1:]).float()
    return {
        "spans": spans,
        "span_tokens": span_tokens,
        "first_showing": round(right[:, : span_tokens - 1].mean().item(), 3),
        "second_showing": round(right[:, span_tokens:].mean().item(), 3),
    }


def statement_tokens(tokenizer: Tokenizer, records: Sequence[dict]) -> list[int]:
    """The tokens of the user messages (the task statements) of demonstration `records`: a pool
    with the frequencies of the text an agent copies from."""
    return [
        token
        for record in records
        for message in record["messages"]
        if message["role"] == "user"
        for token in tokenizer.encode(message.get("content", ""))
    ]
