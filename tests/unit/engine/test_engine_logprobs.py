"""Logprobs the engine reports against the training forward, and the sampling rules behind them."""

from __future__ import annotations

import pytest
import torch
from conftest import tiny_model_config

from overture.engine import Engine
from overture.model import Transformer


@pytest.fixture
def model() -> Transformer:
    # Larger init so the distributions are far from uniform and a wrong logprob shows.
    config = tiny_model_config(initializer_range=0.2)
    return Transformer(config).eval()


def forward_logprobs(model: Transformer, prompt: list[int], tokens: list[int], temperature: float = 1.0):
    """Per-token log-softmax of a plain training forward over prompt + tokens (full vocabulary)."""
    with torch.no_grad():
        logits = model(torch.tensor([prompt + tokens])).logits[0].float() / temperature
    logp = torch.log_softmax(logits, dim=-1)[len(prompt) - 1 : -1]
    return logp, logp.gather(-1, torch.tensor(tokens)[:, None])[:, 0]


def test_logprobs_at_temperature_one_match_the_training_forward(model):
    prompts = [[5, 6, 7], list(range(10, 40)), [1, 2]]
    with Engine(model, kv_block_size=4) as engine:
        completions = engine.generate(prompts, max_new_tokens=24, temperature=1.0, seed=11)
    deltas, kls = [], []
    for prompt, c in zip(prompts, completions, strict=True):
        full, ref = forward_logprobs(model, prompt, c.token_ids)
        deltas.append((torch.tensor(c.logprobs) - ref).abs())
        # KL(engine || training) estimated on the sampled tokens.
        kls.append(torch.tensor(c.logprobs) - ref)
        assert torch.exp(full).sum(-1).sub(1).abs().max() < 1e-4
    delta = torch.cat(deltas)
    kl = torch.cat(kls).mean().abs()
    print(f"mean |Δ logprob| = {delta.mean():.2e}, max {delta.max():.2e}, KL estimate {kl:.2e}")
    assert delta.mean() <= 1e-5
    assert kl <= 1e-5


def test_logprobs_are_of_the_tempered_distribution(model):
    prompt = [9, 8, 7, 6]
    with Engine(model) as engine:
        (c,) = engine.generate([prompt], max_new_tokens=16, temperature=0.5, seed=1)
    _, tempered = forward_logprobs(model, prompt, c.token_ids, temperature=0.5)
    _, plain = forward_logprobs(model, prompt, c.token_ids)
    assert torch.tensor(c.logprobs) == pytest.approx(tempered, abs=1e-4)
    assert (torch.tensor(c.logprobs) - plain).abs().max() > 1e-2


def test_top_k_and_top_p_sample_inside_the_set_and_renormalise(model):
    prompt = [3, 4, 5]
    with Engine(model) as engine:
        (k2,) = engine.generate([prompt], max_new_tokens=20, temperature=1.0, top_k=2, seed=5)
        (p_small,) = engine.generate([prompt], max_new_tokens=20, temperature=1.0, top_p=1e-6, seed=5)
        (greedy,) = engine.generate([prompt], max_new_tokens=20, temperature=0.0)
    full, _ = forward_logprobs(model, prompt, k2.token_ids)
    top2 = full.topk(2, dim=-1)
    for step, token in enumerate(k2.token_ids):
        assert token in top2.indices[step].tolist()
        expected = full[step, token] - torch.logsumexp(top2.values[step], dim=0)
        assert k2.logprobs[step] == pytest.approx(float(expected), abs=1e-4)
    # A nucleus smaller than any token keeps only the most likely one: greedy, logprob 0.
    assert p_small.token_ids == greedy.token_ids
    assert p_small.logprobs == pytest.approx([0.0] * 20, abs=1e-6)
    # Greedy reports the untempered logprob of the chosen token.
    _, plain = forward_logprobs(model, prompt, greedy.token_ids)
    assert greedy.logprobs == pytest.approx(plain.tolist(), abs=1e-4)


def test_paged_forward_distributions_match_the_training_forward(model):
    """Whole next-token distributions of prefill + paged decode against one training forward."""
    from overture.engine.kv_cache import PagedKVCache
    from overture.engine.paged_forward import PagedForward

    config = model.config
    cache = PagedKVCache(
        config.num_hidden_layers, 16, 4, config.num_key_value_heads, config.head_dim, torch.float32, "cpu"
    )
    forward = PagedForward(model, cache)
    ids = torch.randint(0, config.vocab_size, (23,)).tolist()
    prompt_len = 6
    blocks = cache.pool.allocate(cache.blocks_for(len(ids)))
    steps = [forward.prefill([ids[:prompt_len]], [blocks])[0]]
    for position in range(prompt_len, len(ids)):
        steps.append(forward.decode([ids[position]], [position], [blocks])[0])
    engine_logp = torch.log_softmax(torch.stack(steps), dim=-1)
    with torch.no_grad():
        train_logp = torch.log_softmax(model(torch.tensor([ids])).logits[0, prompt_len - 1 :].float(), dim=-1)
    delta = (engine_logp - train_logp).abs()
    kl = (train_logp.exp() * (train_logp - engine_logp)).sum(-1)
    print(f"full distributions: mean |Δ| {delta.mean():.2e}, max {delta.max():.2e}, KL mean {kl.mean():.2e}")
    assert delta.mean() <= 1e-5
    assert kl.abs().max() <= 1e-6


def test_a_bfloat16_cache_moves_logprobs_only_by_its_rounding(model):
    prompts = [[5, 6, 7], list(range(10, 40)), [1, 2]]
    with Engine(model, kv_block_size=4, kv_cache_dtype="bfloat16") as engine:
        assert engine.cache.keys[0].dtype == engine.cache.values[0].dtype == torch.bfloat16
        completions = engine.generate(prompts, max_new_tokens=24, temperature=1.0, seed=11)
    delta = torch.cat(
        [
            (torch.tensor(c.logprobs) - forward_logprobs(model, prompt, c.token_ids)[1]).abs()
            for prompt, c in zip(prompts, completions, strict=True)
        ]
    )
    print(f"bfloat16 cache: mean |Δ logprob| = {delta.mean():.2e}, max {delta.max():.2e}")
    # Keys and values rounded to 8 significant bits: off the float32 forward, but not by much.
    assert 1e-5 < delta.mean() <= 1e-2


def test_a_cache_dtype_the_engine_does_not_serve_is_refused(model):
    with pytest.raises(ValueError, match="kv_cache_dtype"):
        Engine(model, kv_cache_dtype="float16")
