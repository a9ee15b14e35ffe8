"""Tests of overture.recipes.main_job.copying: repeated spans, scored on their second showing."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from overture.model import CausalLMOutput
from overture.recipes.main_job.copying import SPAN_TOKENS, repeated_span_accuracy, statement_tokens
from overture.text import Tokenizer

VOCAB = 512
POOL = list(range(1, VOCAB))  # token 0 is what a copier writes where it has nothing to copy


class Copier(nn.Module):
    """Writes the token `lag` places back (an induction head with a fixed span length)."""

    def __init__(self, lag: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(1))
        self.lag = lag

    def forward(self, ids: torch.Tensor) -> CausalLMOutput:
        # Position p predicts token p + 1, which `lag` places back is token p + 1 - lag.
        guess = torch.zeros_like(ids)
        guess[:, self.lag - 1 :] = ids[:, : ids.shape[1] - self.lag + 1]
        logits = nn.functional.one_hot(guess, VOCAB).float()
        return CausalLMOutput(logits=logits, aux_loss=torch.zeros(()), tokens_per_expert=torch.zeros(0, 0))


def test_a_model_that_copies_gets_the_second_showing_and_not_the_first() -> None:
    copying = repeated_span_accuracy(Copier(SPAN_TOKENS), POOL)
    assert copying["second_showing"] == 1.0
    assert copying["first_showing"] == 0.0  # nothing shown before it to copy
    assert (copying["spans"], copying["span_tokens"]) == (64, SPAN_TOKENS)


def test_copying_from_the_wrong_place_scores_as_not_copying() -> None:
    copying = repeated_span_accuracy(Copier(SPAN_TOKENS + 1), POOL)
    assert copying["second_showing"] < 0.05


def test_the_same_pool_and_seed_give_the_same_spans() -> None:
    model = Copier(SPAN_TOKENS - 3)
    first = repeated_span_accuracy(model, POOL, seed=3)
    assert repeated_span_accuracy(model, POOL, seed=3) == first


def test_an_empty_pool_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="token pool"):
        repeated_span_accuracy(Copier(SPAN_TOKENS), [])


def test_the_pool_is_the_statements_tokens() -> None:
    records = [
        {"messages": [
            {"role": "system", "content": "You fix bugs in code."},
            {"role": "user", "content": "test_total fails"},
            {"role": "assistant", "content": "grep total"},
        ]}
    ]  # fmt: skip
    tokenizer = Tokenizer.train(["You fix bugs in code. test_total fails grep total"] * 4, vocab_size=300)
    assert statement_tokens(tokenizer, records) == tokenizer.encode("test_total fails")
