"""The C sampling kernel against the torch sampling path: the same tokens and logprobs, greedy
rows, tokens of probability zero, batch independence, and the fallback without a compiler."""

from __future__ import annotations

import random

import pytest
import torch
from conftest import assert_engine_option_changes_nothing

from overture.engine import native_sampling
from overture.engine.sampling import BatchSampling, sample

needs_kernel = pytest.mark.skipif(
    native_sampling.library() is None, reason="no C compiler to build the kernel with"
)


def batch(rows: int, vocab: int, temperatures: list[float]) -> tuple[torch.Tensor, BatchSampling]:
    rng = random.Random(rows * vocab)
    logits = torch.randn(rows, vocab) * 3
    temps = [temperatures[i % len(temperatures)] for i in range(rows)]
    return logits, BatchSampling(temps, [0] * rows, [1.0] * rows, [rng.random() for _ in range(rows)])


@needs_kernel
@pytest.mark.parametrize("vocab", [1, 7, 97, 4096])
def test_the_kernel_samples_as_torch_does(vocab):
    logits, settings = batch(64, vocab, [0.0, 0.5, 1.0, 1.7])
    tokens, logprobs = sample(logits, settings)
    want_tokens, want_logprobs = sample(logits, settings, native=False)
    assert tokens == want_tokens
    assert logprobs == pytest.approx(want_logprobs, abs=1e-5)
    greedy = [i for i, t in enumerate(settings.temperatures) if t == 0]
    assert [tokens[i] for i in greedy] == logits[greedy].argmax(-1).tolist()
    if vocab > 7:
        assert len(set(tokens)) > 10  # sampled rows spread over the vocabulary


@needs_kernel
def test_tokens_of_probability_zero_are_never_drawn():
    # exp underflows to 0 for the -200s: whatever u, only tokens 1 and 3 can come out.
    logits = torch.tensor([[-200.0, 0.0, -200.0, 0.0, -200.0]] * 5)
    uniforms = [0.0, 0.25, 0.5, 0.75, 1.0]
    tokens, logprobs = native_sampling.sample_rows(logits, [1.0] * 5, uniforms)
    assert tokens == [1, 1, 3, 3, 3]
    assert logprobs == pytest.approx([-0.6931472] * 5, abs=1e-6)


@needs_kernel
def test_a_rows_token_does_not_depend_on_the_rest_of_the_batch():
    logits, settings = batch(16, 300, [0.0, 0.8, 1.0])
    tokens, logprobs = native_sampling.sample_rows(logits, settings.temperatures, settings.uniforms)
    for row in range(16):
        alone = native_sampling.sample_rows(
            logits[row : row + 1], settings.temperatures[row : row + 1], settings.uniforms[row : row + 1]
        )
        assert alone == ([tokens[row]], [logprobs[row]])


@needs_kernel
def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match=r"logits must be torch\.float32"):
        native_sampling.sample_rows(torch.zeros(2, 5, dtype=torch.float64), [1.0, 1.0], [0.1, 0.2])
    with pytest.raises(ValueError, match="1 temperatures / 2 uniforms for 2 rows"):
        native_sampling.sample_rows(torch.zeros(2, 5), [1.0], [0.1, 0.2])


@needs_kernel
def test_an_engine_sampling_in_c_generates_as_one_sampling_in_torch():
    assert_engine_option_changes_nothing("native_sampling")


def test_without_a_compiler_sampling_runs_in_torch(no_compiler):
    logits, settings = batch(4, 50, [0.0, 1.0])
    assert not native_sampling.supports(logits)
    with pytest.raises(RuntimeError, match="not built"):
        native_sampling.sample_rows(logits, settings.temperatures, settings.uniforms)
    tokens, _ = sample(logits, settings)
    assert tokens[0] == int(logits[0].argmax())
