"""An engine served from a checkpoint directory: its tokenizer gives end-of-turn and stop strings."""

from __future__ import annotations

import pytest
import torch
from conftest import tiny_model_config

from overture.engine import Engine
from overture.model import Transformer, save_pretrained
from overture.text import Tokenizer

TEXTS = [
    "def add(a, b):\n    return a + b\n",
    "print('hello world')\n",
    "x = [i * i for i in range(10)]\n",
] * 20


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    torch.manual_seed(0)
    tokenizer = Tokenizer.train(TEXTS, vocab_size=300)
    model = Transformer(tiny_model_config(vocab_size=tokenizer.vocab_size, initializer_range=0.1))
    path = tmp_path_factory.mktemp("ckpt")
    save_pretrained(model, path)
    tokenizer.save(path)
    return path, model, tokenizer


def test_from_pretrained_serves_the_checkpoint_with_its_end_of_turn_stop(checkpoint):
    path, model, tokenizer = checkpoint
    prompt = tokenizer.encode("def add(a, b):")
    with Engine.from_pretrained(path, max_new_tokens=7) as engine:
        assert engine.sampling_params().stop_token_ids == (tokenizer.im_end_id,)
        (c,) = engine.generate([prompt], temperature=0.0)
    assert len(c.token_ids) == 7 or c.token_ids[-1] == tokenizer.im_end_id
    ids = list(prompt)
    with torch.no_grad():
        for _ in c.token_ids:
            ids.append(int(model.eval()(torch.tensor([ids])).logits[0, -1].argmax()))
    assert c.token_ids == ids[len(prompt) :]


def test_stop_string_ends_the_completion_at_the_token_that_completes_it(checkpoint):
    path, _, tokenizer = checkpoint
    prompt = tokenizer.encode("print(")
    with Engine.from_pretrained(path) as engine:
        (free,) = engine.generate([prompt], max_new_tokens=40, temperature=0.0, stop_token_ids=[])
        text = tokenizer.decode(free.token_ids)
        pairs = [text[i : i + 2] for i in range(len(text) // 3, len(text) - 1)]
        candidates = [pair for pair in pairs if pair.isascii()]
        assert candidates, f"no ASCII in {text!r}"
        stop = candidates[0]
        end = next(j for j in range(len(free.token_ids)) if stop in tokenizer.decode(free.token_ids[: j + 1]))
        (stopped,) = engine.generate(
            [prompt], max_new_tokens=40, temperature=0.0, stop_token_ids=[], stop_strings=[stop]
        )
    assert stopped.finish_reason == "stop"
    assert stopped.token_ids == free.token_ids[: end + 1]
