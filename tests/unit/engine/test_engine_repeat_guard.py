"""The repeat guard: no back-to-back loop past `max_repeats`, and logprobs of the guarded distribution."""

from __future__ import annotations

import pytest
import torch
from conftest import tiny_model_config

from overture.engine import Engine, RequestError
from overture.engine.repeat_guard import banned_continuations
from overture.model import Transformer


def longest_run(tokens: list[int], span: int) -> int:
    """Most back-to-back copies of any span of `span` tokens in `tokens`."""
    best = 1
    for start in range(len(tokens)):
        copies = 1
        while tokens[start + copies * span : start + (copies + 1) * span] == tokens[start : start + span]:
            copies += 1
        best = max(best, copies)
    return best


@pytest.fixture
def model() -> Transformer:
    return Transformer(tiny_model_config(initializer_range=0.2)).eval()


def test_the_token_that_would_complete_one_copy_too_many_is_banned():
    assert banned_continuations([1, 2, 3, 3, 3], 3, 8) == {3}  # a fourth 3 would be one too many
    assert banned_continuations([1, 2, 3, 3], 3, 8) == set()
    assert banned_continuations([9, 5, 6, 5, 6, 5], 2, 8) == {6}  # a third "5 6"
    assert banned_continuations([5, 6, 5, 6], 2, 8) == set()  # "6 5" twice would need one more token
    assert banned_continuations([7, 7, 7, 7, 7, 7], 0, 8) == set()  # off
    # With max_repeats 1 no token follows itself; "1 2 3" twice only counts with spans of 3.
    assert banned_continuations([1, 2, 3, 1, 2, 3], 1, 2) == {3}
    assert banned_continuations([1, 2, 3, 1, 2, 3], 1, 3) == {1, 3}


def test_greedy_loops_of_a_random_model_are_cut_at_max_repeats(model):
    prompts = [[5, 6, 7], [11, 12], [40, 41, 42, 43]]
    with Engine(model) as engine:
        plain = engine.generate(prompts, max_new_tokens=64, temperature=0.0)
        guarded = engine.generate(prompts, max_new_tokens=64, temperature=0.0, max_repeats=2, repeat_span=4)
    loops = [max(longest_run(c.token_ids, span) for span in range(1, 5)) for c in plain]
    assert max(loops) > 2, "the unguarded model should loop for this test to mean anything"
    for c in guarded:
        assert max(longest_run(c.token_ids, span) for span in range(1, 5)) <= 2
        assert len(c.token_ids) == 64


def test_guarded_logprobs_are_of_the_renormalised_distribution(model):
    prompt = [3, 4, 5]
    with Engine(model) as engine:
        (c,) = engine.generate(
            [prompt], max_new_tokens=48, temperature=1.0, max_repeats=1, repeat_span=3, seed=2
        )
    with torch.no_grad():
        logits = model(torch.tensor([prompt + c.token_ids])).logits[0].float()[len(prompt) - 1 : -1]
    guarded_steps = 0
    for step, token in enumerate(c.token_ids):
        banned = sorted(banned_continuations(c.token_ids[:step], 1, 3))
        assert token not in banned
        row = logits[step].clone()
        row[banned] = float("-inf")
        guarded_steps += bool(banned)
        assert c.logprobs[step] == pytest.approx(torch.log_softmax(row, -1)[token].item(), abs=1e-4)
    assert guarded_steps > 0


def test_bad_guard_settings_are_refused(model):
    with Engine(model) as engine, pytest.raises(RequestError, match="max_repeats"):
        engine.generate([[1, 2]], max_new_tokens=4, max_repeats=-1)
