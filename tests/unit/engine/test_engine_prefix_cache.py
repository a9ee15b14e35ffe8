"""The prefix cache: a request that starts like an earlier one prefills only the rest, with the
result of computing it all; blocks are evicted when the pool needs them and forgotten at new
weights."""

from __future__ import annotations

import pytest
import torch
from conftest import tiny_model_config

from overture.engine import Engine
from overture.engine.kv_cache import BlockPool, OutOfBlocks, block_digests
from overture.model import Transformer

BLOCK = 4


@pytest.fixture
def model() -> Transformer:
    return Transformer(tiny_model_config(initializer_range=0.2)).eval()


def tokens(count: int, seed: int) -> list[int]:
    return torch.randint(3, 96, (count,), generator=torch.Generator().manual_seed(seed)).tolist()


def uncached(model: Transformer, prompts: list[list[int]], together: bool = False, **sampling):
    """The completions without a prefix cache: from one `generate` call, or one call each."""
    with Engine(model, kv_block_size=BLOCK, prefix_caching=False) as engine:
        if together:
            return engine.generate(prompts, **sampling)
        return [engine.generate([p], **sampling)[0] for p in prompts]


def assert_same(got, want) -> None:
    for a, b in zip(got, want, strict=True):
        assert a.token_ids == b.token_ids
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-5)


SAMPLING = dict(max_new_tokens=10, temperature=1.0, seed=7)


def test_a_prompt_that_starts_like_an_earlier_one_prefills_only_the_rest(model):
    shared = tokens(20, 1)  # 5 full blocks
    prompts = [shared + tokens(5, 2), shared + tokens(6, 3)]
    with Engine(model, kv_block_size=BLOCK) as engine:
        first = engine.generate([prompts[0]], **SAMPLING)[0]
        before = engine.stats()
        second = engine.generate([prompts[1]], **SAMPLING)[0]
        after = engine.stats()
    assert before["prefix_cache_hit_tokens"] == 0
    assert after["prefix_cache_hit_tokens"] == 20
    assert after["prefill_tokens"] - before["prefill_tokens"] == len(prompts[1]) - 20
    assert_same([first, second], uncached(model, prompts, **SAMPLING))


def test_the_next_turn_of_a_conversation_reuses_the_previous_turns_blocks(model):
    prompt = tokens(13, 4)
    with Engine(model, kv_block_size=BLOCK) as engine:
        turn = engine.generate([prompt], **SAMPLING)[0]
        # The tokens whose keys and values were computed: the prompt and all but the last sampled.
        computed = len(prompt) + len(turn.token_ids) - 1
        following = prompt + turn.token_ids + tokens(7, 5)
        hits = engine.stats()["prefix_cache_hit_tokens"]
        nxt = engine.generate([following], **SAMPLING)[0]
        assert engine.stats()["prefix_cache_hit_tokens"] - hits == computed // BLOCK * BLOCK
    assert_same([nxt], uncached(model, [following], **SAMPLING))


def test_requests_admitted_together_compute_a_common_beginning_once(model):
    shared = tokens(16, 6)
    prompts = [shared + tokens(3 + i, 10 + i) for i in range(3)]
    with Engine(model, kv_block_size=BLOCK) as engine:
        got = engine.generate(prompts, **SAMPLING)
        stats = engine.stats()
    # The first computes the 4 shared blocks; the others wait one step and find them.
    assert stats["prefix_cache_hit_tokens"] == 2 * 16
    assert stats["prefill_tokens"] == sum(len(p) for p in prompts) - 2 * 16
    assert_same(got, uncached(model, prompts, together=True, **SAMPLING))


def test_new_weights_empty_the_cache(model):
    shared = tokens(20, 7)
    prompts = [shared + tokens(4, 8), shared + tokens(5, 9)]
    new = Transformer(tiny_model_config(initializer_range=0.2)).eval()
    with Engine(model, kv_block_size=BLOCK) as engine:
        engine.generate([prompts[0]], **SAMPLING)
        assert engine.stats()["kv_blocks_cached"] > 0
        engine.update_weights(new.state_dict(), version=1)
        assert engine.stats()["kv_blocks_cached"] == 0
        got = engine.generate([prompts[1]], **SAMPLING)[0]
        assert engine.stats()["prefix_cache_hit_tokens"] == 0
    assert_same([got], uncached(new, [prompts[1]], **SAMPLING))


def test_cached_blocks_are_evicted_when_the_pool_needs_them(model):
    prompts = [tokens(18, 20 + i) for i in range(8)] + [tokens(18, 20)]  # the last repeats the first
    with Engine(model, kv_block_size=BLOCK, kv_cache_tokens=64) as engine:  # 16 blocks
        got = [engine.generate([p], **SAMPLING)[0] for p in prompts]
        stats = engine.stats()
    assert stats["kv_blocks_cached"] <= stats["kv_blocks_total"]
    assert stats["prefix_cache_hit_tokens"] == 0  # the first prompt's blocks were long evicted
    assert_same(got, uncached(model, prompts, **SAMPLING))


def test_block_pool_keeps_released_registered_blocks_until_it_needs_them():
    pool = BlockPool(5)  # 4 usable
    first = tokens(8, 30)
    digests = block_digests(first, BLOCK, 2)
    blocks = pool.allocate(2)
    pool.register(digests, blocks)
    pool.release(blocks)
    assert pool.num_free == 4 and pool.num_cached == 2
    assert pool.match(digests) == blocks
    assert pool.match(block_digests(first[:4] + tokens(4, 31), BLOCK, 2)) == blocks[:1]
    pool.share(pool.match(digests[:1]))  # taken back: no longer evictable
    assert pool.num_free == 3
    assert sorted(pool.allocate(3)) == sorted({1, 2, 3, 4} - {blocks[0]})  # free first, then evicted
    assert pool.match(digests) == blocks[:1]  # the second block was evicted
    with pytest.raises(OutOfBlocks):
        pool.allocate(1)
    pool.clear_cache()
    assert pool.num_cached == 0 and pool.match(digests) == []
