"""Bad input is refused with a clear error for that request only; the engine keeps serving."""

from __future__ import annotations

import time

import pytest
import torch
from conftest import tiny_model_config

from overture.engine import Engine, RequestError, SamplingParams, WeightUpdateError
from overture.model import Transformer


@pytest.fixture
def model() -> Transformer:
    return Transformer(tiny_model_config(max_position_embeddings=64)).eval()


@pytest.fixture
def engine(model):
    with Engine(model, kv_block_size=4) as engine:
        yield engine


BAD_REQUESTS = [
    (dict(prompt=list(range(64))), "context of 64 tokens"),
    (dict(prompt=[]), "empty prompt"),
    (dict(prompt=[1, 96]), "outside the vocabulary"),
    (dict(prompt=[1, -1]), "outside the vocabulary"),
    (dict(temperature=-0.5), "temperature"),
    (dict(temperature=float("nan")), "temperature"),
    (dict(top_p=0.0), "top_p"),
    (dict(top_p=1.5), "top_p"),
    (dict(top_k=-1), "top_k"),
    (dict(max_new_tokens=0), "max_new_tokens"),
    (dict(stop_token_ids=[500]), "stop_token_ids"),
    (dict(stop_strings=["</tool_call>"]), "need a tokenizer"),
    (dict(seed="x"), "seed"),
    (dict(beam_width=4), "unknown sampling parameter"),
]


@pytest.mark.parametrize(("fields", "message"), BAD_REQUESTS)
def test_bad_request_is_refused_and_others_keep_running(engine, model, fields, message):
    expected = engine.generate([[1, 2, 3]], max_new_tokens=20, temperature=0.0)[0].token_ids
    running = engine.submit([1, 2, 3], max_new_tokens=20, temperature=0.0)
    fields = dict(fields)
    prompt = fields.pop("prompt", [4, 5, 6])
    with pytest.raises(RequestError, match=message):
        engine.submit(prompt, **fields)
    assert running.result(timeout=30).token_ids == expected


def test_generate_names_the_bad_prompt_and_starts_none(engine):
    with pytest.raises(RequestError, match=r"prompt 1: .*context"):
        engine.generate([[1, 2], list(range(70))], max_new_tokens=3)
    assert engine.stats()["running"] == 0 and engine.stats()["waiting"] == 0


def test_completion_stops_at_the_context_length(model):
    with Engine(model, kv_block_size=4) as engine:
        (c,) = engine.generate([list(range(60))], max_new_tokens=50, temperature=0.0)
    assert len(c.token_ids) == 4 and c.finish_reason == "length"


def test_resume_of_a_finished_or_spent_request_is_refused(engine):
    (done,) = engine.generate([[1, 2]], max_new_tokens=3)
    with pytest.raises(RequestError, match="finished \\('length'\\); only aborted"):
        engine.resume(done)
    handle = engine.submit([1, 2, 3], max_new_tokens=100_000)
    partial = handle.abort()
    with pytest.raises(RequestError, match="no budget left"):
        engine.resume(partial, max_new_tokens=0)


def test_stop_token_ends_the_completion(engine):
    (free,) = engine.generate([[1, 2, 3]], max_new_tokens=12, temperature=0.0)
    stop = free.token_ids[5]
    first = free.token_ids.index(stop)
    (stopped,) = engine.generate([[1, 2, 3]], max_new_tokens=12, temperature=0.0, stop_token_ids=[stop])
    assert stopped.token_ids == free.token_ids[: first + 1]
    assert stopped.finish_reason == "stop"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda s: s.update({"lm_head.weight": torch.zeros(3, 3)}), "shape"),
        (lambda s: s.pop("norm.weight"), "missing tensors"),
        (lambda s: s.update({"layers.9.mlp.weight": torch.zeros(1)}), "unknown tensors"),
        (lambda s: s.update({"norm.weight": torch.zeros(32, dtype=torch.long)}), "dtype"),
        (lambda s: s.update({"norm.weight": [0.0] * 32}), "expected a tensor"),
    ],
)
def test_mismatched_update_is_refused_and_serving_goes_on(engine, model, change, message):
    before = {k: v.clone() for k, v in model.state_dict().items()}
    running = engine.submit([1, 2, 3], max_new_tokens=30, temperature=0.0)
    state = {k: v + 1.0 for k, v in model.state_dict().items()}
    change(state)
    with pytest.raises(WeightUpdateError, match=message):
        engine.update_weights(state, version=5)
    assert engine.version == 0
    assert set(running.result(timeout=30).versions) == {0}
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, before[name]), name


def test_partial_update_when_not_strict(engine, model):
    engine.update_weights({"norm.weight": torch.full((32,), 2.0)}, version=3, strict=False)
    assert engine.version == 3 and torch.all(model.norm.weight == 2.0)
    (c,) = engine.generate([[1, 2]], max_new_tokens=2)
    assert c.versions == [3, 3]


def test_unknown_engine_option_is_an_error(model):
    with pytest.raises(ValueError, match="kv_blok_size"):
        Engine(model, kv_blok_size=4)


def test_closed_engine_refuses_work(model):
    engine = Engine(model)
    handle = engine.submit([1, 2], max_new_tokens=1_000_000)
    time.sleep(0.01)
    engine.close()
    with pytest.raises(Exception, match="closed"):
        handle.result(timeout=10)
    with pytest.raises(Exception, match="closed"):
        engine.submit([1, 2])


def test_sampling_params_object_is_validated(engine):
    with pytest.raises(RequestError, match="top_p"):
        engine.submit([1], SamplingParams(top_p=2.0))
