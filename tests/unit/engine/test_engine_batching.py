"""Continuous batching, prefix sharing and the paged KV pool give the results of plain decoding."""

from __future__ import annotations

import pytest
import torch
from conftest import tiny_model_config

from overture.engine import Engine
from overture.model import Transformer


@pytest.fixture
def model() -> Transformer:
    return Transformer(tiny_model_config()).eval()


def greedy_reference(model: Transformer, prompt: list[int], new_tokens: int) -> list[int]:
    """Greedy decoding by full forward passes, no cache at all."""
    ids = list(prompt)
    with torch.no_grad():
        for _ in range(new_tokens):
            ids.append(int(model(torch.tensor([ids])).logits[0, -1].argmax()))
    return ids[len(prompt) :]


PROMPTS = [[5, 6, 7], list(range(10, 31)), [40] * 9, [1, 2, 3, 4, 5, 6, 7, 8], [77, 3], list(range(50, 67))]
BUDGETS = [12, 5, 17, 9, 1, 14]


def test_continuous_batching_matches_one_at_a_time_greedy(model):
    # A batch cap below the number of requests and different budgets make requests join and
    # leave the running batch at different steps; block size 4 makes them cross block edges.
    with Engine(model, max_batch_size=3, kv_block_size=4, kv_cache_tokens=256) as engine:
        handles = [
            engine.submit(p, max_new_tokens=n, temperature=0.0) for p, n in zip(PROMPTS, BUDGETS, strict=True)
        ]
        batched = [h.result().token_ids for h in handles]
        assert engine.stats()["kv_blocks_used"] == 0
    expected = [greedy_reference(model, p, n) for p, n in zip(PROMPTS, BUDGETS, strict=True)]
    assert batched == expected


def test_sampling_with_a_seed_does_not_depend_on_the_batch(model):
    sampling = dict(max_new_tokens=10, temperature=0.9, top_p=0.95)
    with Engine(model, kv_block_size=4) as engine:
        handles = [engine.submit(p, seed=100 + i, **sampling) for i, p in enumerate(PROMPTS)]
        together = [h.result() for h in handles]
        alone = [engine.submit(p, seed=100 + i, **sampling).result() for i, p in enumerate(PROMPTS)]
        other_seed = engine.submit(PROMPTS[0], seed=99, **sampling).result()
    assert [c.token_ids for c in together] == [c.token_ids for c in alone]
    for a, b in zip(together, alone, strict=True):
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-5)
    assert other_seed.token_ids != together[0].token_ids


def test_prefix_sharing_gives_the_result_of_no_sharing_with_fewer_blocks(model):
    prompt = list(range(3, 33))  # 30 tokens: 7 full blocks of 4 and a partial one
    results, peaks = {}, {}
    for sharing in (True, False):
        options = dict(prefix_sharing=sharing, prefix_caching=sharing)  # the cache would share too
        with Engine(model, kv_block_size=4, kv_cache_tokens=512, **options) as engine:
            handles = engine.submit_group(prompt, n=6, max_new_tokens=12, temperature=1.0, seed=3)
            results[sharing] = [h.result() for h in handles]
            peaks[sharing] = engine.stats()["kv_blocks_peak"]
    shared, unshared = results[True], results[False]
    assert [c.token_ids for c in shared] == [c.token_ids for c in unshared]
    for a, b in zip(shared, unshared, strict=True):
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-6)
    assert len({tuple(c.token_ids) for c in shared}) > 1  # the samples really differ
    # Unshared: 6 × (8 prompt blocks + growth); shared: 7 common blocks + 6 own.
    assert peaks[True] < peaks[False] - 30


def test_small_pool_preempts_and_still_gives_the_same_tokens(model):
    prompts = [list(range(3 + i, 10 + i)) for i in range(6)]
    with Engine(model, kv_block_size=4, kv_cache_tokens=512) as roomy:
        expected = [c.token_ids for c in roomy.generate(prompts, max_new_tokens=16, temperature=0)]
    # 40 tokens of pool: all 6 requests fit when admitted (7 tokens each) but not once they
    # grow to 23 tokens, so running requests are preempted and re-prefilled later.
    with Engine(model, kv_block_size=4, kv_cache_tokens=40) as tight:
        got = tight.generate(prompts, max_new_tokens=16, temperature=0)
        stats = tight.stats()
    assert stats["preemptions"] > 0
    assert stats["kv_blocks_peak"] <= 10
    assert stats["kv_blocks_used"] == 0
    assert [c.token_ids for c in got] == expected
    assert all(c.finish_reason == "length" for c in got)
