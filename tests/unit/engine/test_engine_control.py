"""Abort, resume, live weight updates and the async API, while other requests run."""

from __future__ import annotations

import asyncio
import time

import pytest
import torch
from conftest import tiny_model_config

from overture.engine import Engine
from overture.model import Transformer

LONG = 100_000  # a budget no test waits for: such requests end by abort


@pytest.fixture
def model() -> Transformer:
    return Transformer(tiny_model_config(max_position_embeddings=1 << 20)).eval()


@pytest.fixture
def engine(model):
    with Engine(model, kv_block_size=8, kv_cache_tokens=1 << 16) as engine:
        yield engine


def wait_for_steps(engine: Engine, steps: int) -> None:
    start = engine.stats()["steps"]
    while engine.stats()["steps"] < start + steps:
        time.sleep(0.001)


def perturbed(model: Transformer, scale: float = 0.05) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(1)
    return {k: v + scale * torch.randn(v.shape, generator=gen) for k, v in model.state_dict().items()}


def assert_consistent(completion) -> None:
    n = len(completion.token_ids)
    assert len(completion.logprobs) == n and len(completion.versions) == n
    assert all(lp <= 0 for lp in completion.logprobs)


def test_abort_returns_within_one_step_with_consistent_partials(engine):
    prompts = [[3, 4, 5], [6, 7, 8, 9], [10, 11]]
    handles = [engine.submit(p, max_new_tokens=LONG, temperature=1.0, seed=i) for i, p in enumerate(prompts)]
    wait_for_steps(engine, 5)
    before = engine.stats()["steps"]
    partial = engine.abort("all")
    # At most the step in progress when abort was called finishes; nothing is left to step after.
    assert engine.stats()["steps"] - before <= 1
    assert [c.request_id for c in partial] == [h.request_id for h in handles]
    for handle, c in zip(handles, partial, strict=True):
        assert c.finish_reason == "abort" and len(c.token_ids) >= 5
        assert_consistent(c)
        assert handle.result() == c
    assert engine.stats()["kv_blocks_used"] == 0
    # The partial tokens are what an uninterrupted run with that seed produces.
    first = partial[0]
    rerun = engine.submit(first.prompt_ids, first.params.with_budget(len(first.token_ids))).result()
    assert rerun.token_ids == first.token_ids
    assert rerun.logprobs == pytest.approx(first.logprobs, abs=1e-5)
    assert engine.abort("all") == []


def test_abort_of_some_requests_leaves_the_others_running(engine):
    handles = [engine.submit([i + 1, i + 2], max_new_tokens=LONG) for i in range(3)]
    wait_for_steps(engine, 3)
    partial = engine.abort([handles[0].request_id, handles[2].request_id, 12345])
    assert sorted(c.request_id for c in partial) == [handles[0].request_id, handles[2].request_id]
    assert handles[0].done() and not handles[1].done()
    assert handles[1].abort().finish_reason == "abort"
    assert handles[1].abort() is None


def test_abort_of_a_waiting_request_returns_it_empty(model):
    with Engine(model, max_batch_size=1) as engine:
        running = engine.submit([1, 2, 3], max_new_tokens=LONG)
        waiting = engine.submit([4, 5, 6], max_new_tokens=LONG)
        wait_for_steps(engine, 2)
        (c,) = engine.abort([waiting.request_id])
        assert c.token_ids == [] and c.finish_reason == "abort"
        assert not running.done()


def test_update_in_flight_tags_tokens_with_both_versions(engine, model):
    handle = engine.submit([7, 8, 9], max_new_tokens=LONG, temperature=1.0, seed=2)
    wait_for_steps(engine, 3)
    engine.update_weights(perturbed(model), version=1)
    assert engine.version == 1
    wait_for_steps(engine, 3)
    (c,) = engine.abort([handle.request_id])
    assert_consistent(c)
    assert c.versions[0] == 0 and c.versions[-1] == 1
    assert c.versions == sorted(c.versions)


def test_resume_after_update_records_both_versions_and_a_reduced_budget(model):
    prompt = [5, 9, 2, 7]
    budget = 300  # far more steps than the test waits before aborting
    with Engine(model, kv_block_size=4) as engine:
        handle = engine.submit(prompt, max_new_tokens=budget, temperature=0.0)
        wait_for_steps(engine, 4)
        (partial,) = engine.abort([handle.request_id])
        assert 0 < len(partial.token_ids) < budget and set(partial.versions) == {0}
        new_state = perturbed(model, scale=0.3)
        engine.update_weights(new_state, version=1)
        resumed = engine.resume(partial).result()
    assert resumed.token_ids[: len(partial.token_ids)] == partial.token_ids
    assert len(resumed.token_ids) == budget and resumed.finish_reason == "length"
    k = len(partial.token_ids)
    assert resumed.versions == [0] * k + [1] * (budget - k)
    assert resumed.logprobs[:k] == partial.logprobs
    # The new part is what the new weights produce from prompt + partial tokens.
    fresh_model = Transformer(model.config).eval()
    fresh_model.load_state_dict(new_state)
    with Engine(fresh_model) as fresh:
        (expected,) = fresh.generate([prompt + partial.token_ids], max_new_tokens=budget - k, temperature=0.0)
    assert resumed.token_ids[k:] == expected.token_ids


def test_resume_with_an_explicit_budget(engine):
    handle = engine.submit([1, 2, 3], max_new_tokens=LONG)
    wait_for_steps(engine, 2)
    (partial,) = engine.abort([handle.request_id])
    resumed = engine.resume(partial, max_new_tokens=3).result()
    assert len(resumed.token_ids) == len(partial.token_ids) + 3


def test_async_submit_and_agenerate(engine):
    async def main():
        one = await engine.submit([1, 2, 3], max_new_tokens=5, temperature=0.0)
        many = await engine.agenerate([[1, 2, 3], [4, 5]], max_new_tokens=5, temperature=0.0)
        return one, many

    one, many = asyncio.run(main())
    assert one.token_ids == many[0].token_ids and len(many[1].token_ids) == 5


def test_a_completion_callback_can_abort_the_rest(engine):
    # Partial rollouts: when enough requests are done, the rest are aborted from the callback
    # that runs on the engine's own thread; this must not wait on itself.
    long = engine.submit([3, 4, 5], max_new_tokens=LONG, temperature=1.0, seed=0)
    short = engine.submit([6, 7], max_new_tokens=4, temperature=1.0, seed=1)
    returned = []
    short.future.add_done_callback(lambda _: returned.append(engine.abort("all")))
    assert short.result(timeout=60).finish_reason == "length"
    partial = long.result(timeout=60)
    assert partial.finish_reason == "abort"
    assert returned == [None]  # queued for the next step boundary, not waited on
    assert_consistent(partial)
