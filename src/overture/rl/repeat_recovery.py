"""Repeat recovery: spurious repeats inserted into a demonstration, so the policy learns to leave a loop.

A policy whose weights copy well (an induction head, `overture.model.copy_circuit`) falls into
loops when it samples: after one token too many, `known known` makes the head predict `known`
again, and the turn runs to its token budget. Teacher-forced demonstrations never show such a
context, so nothing in SFT teaches what comes after it. `insert_repeats` makes the context: it
copies a short span of assistant tokens right after itself (one to `max_times` more times) and
gives the copies loss mask 0, so they are never trained as output; the token after them is still
the demonstration's next token, trained as before. Every trained target of the sample stays; the
sample only grows by the inserted tokens.

    tokens   ... keeps  known  known  known  a  ...      (the second and third `known` inserted)
    mask       1     1      0      0     1              (the `a` is learnt after the repeat)
"""

from __future__ import annotations

import random

from overture.rl.samples import TrainingSample

__all__ = ["insert_repeats"]


def insert_repeats(
    sample: TrainingSample,
    count: int,
    rng: random.Random,
    max_tokens: int,
    max_span: int = 4,
    max_times: int = 3,
) -> TrainingSample:
    """`sample` with up to `count` spans of its assistant tokens repeated in place, the repeats
    masked out of the loss; no insertion takes the sample past `max_tokens`.

    A span is 1..`max_span` consecutive trained tokens, the token after it trained too (the one
    learnt after the repeat), repeated 1..`max_times` times. Supervised samples only: a sample with
    behavior logprobs came from the policy and is not changed here."""
    if sample.behavior_logprobs is not None:
        raise ValueError(f"{sample.name}: repeats are inserted into supervised samples only")
    tokens, mask = list(sample.token_ids), list(sample.loss_mask)
    for _ in range(count):
        span = rng.randint(1, max_span)
        times = rng.randint(1, max_times)
        if len(tokens) + span * times > max_tokens:
            break
        # positions whose token and the `span` tokens before it are all trained
        run, sites = 0, []
        for index, trained in enumerate(mask):
            run = run + 1 if trained else 0
            if run > span:
                sites.append(index)
        if not sites:
            break
        at = rng.choice(sites)
        tokens[at:at] = tokens[at - span : at] * times
        mask[at:at] = [0] * (span * times)
    return TrainingSample(token_ids=tokens, loss_mask=mask, name=sample.name)
