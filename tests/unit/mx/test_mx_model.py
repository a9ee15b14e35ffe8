"""The model in MXFP8: which parts are quantized, training, save/load, and the engine serving the
same quantized weights."""

from __future__ import annotations

import pytest
import torch
from conftest import tiny_model_config
from torch import nn

from overture.engine import Engine
from overture.model import GroupedExperts, Transformer, load_pretrained, save_pretrained
from overture.model.layers import PrecisionLinear


def mxfp8_model(**overrides) -> Transformer:
    return Transformer(tiny_model_config(**{"precision": "mxfp8", "initializer_range": 0.2, **overrides}))


def logits(model: Transformer, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(ids).logits


def test_projections_follow_the_precision_and_the_rest_stays_high_precision():
    model = mxfp8_model()
    quantized = [m for m in model.modules() if isinstance(m, PrecisionLinear | GroupedExperts)]
    assert quantized and all(m.precision == "mxfp8" for m in quantized)
    # LM head, embeddings and router are not PrecisionLinear: they never see quantization.
    assert type(model.lm_head) is nn.Linear
    ids = torch.randint(0, 96, (2, 12))
    quantized_logits = logits(model, ids)
    model.set_precision("fp32")
    assert model.config.precision == "fp32" and all(m.precision == "fp32" for m in quantized)
    plain_logits = logits(model, ids)
    relative = (quantized_logits - plain_logits).norm() / plain_logits.norm()
    assert 1e-3 < relative < 0.25


def test_default_precision_is_fp32_and_unchanged():
    config = tiny_model_config()
    assert config.precision == "fp32"
    model = Transformer(config)
    ids = torch.randint(0, 96, (1, 8))
    expected = logits(model, ids)
    model.set_precision("fp32")
    assert torch.equal(logits(model, ids), expected)


def train(model: Transformer, steps: int, seed: int = 0) -> list[float]:
    torch.manual_seed(seed)
    data = torch.randint(0, 96, (4, 17))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    model.train()
    for _ in range(steps):
        out = model(data[:, :-1])
        loss = torch.nn.functional.cross_entropy(out.logits.flatten(0, 1), data[:, 1:].flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    return losses


def test_a_model_trained_in_mxfp8_learns_saves_and_loads(tmp_path):
    model = mxfp8_model(initializer_range=0.02)
    losses = train(model, steps=12)
    assert losses[-1] < losses[0] - 0.5
    assert all(p.dtype == torch.float32 for p in model.parameters())  # fp32 masters
    save_pretrained(model, tmp_path)
    loaded = load_pretrained(tmp_path)
    assert loaded.config.precision == "mxfp8"
    ids = torch.randint(0, 96, (2, 10))
    model.eval()
    assert torch.equal(logits(loaded, ids), logits(model, ids))


def test_every_parameter_gets_a_gradient_in_mxfp8():
    model = mxfp8_model()
    out = model(torch.randint(0, 96, (2, 40)))
    (out.logits.square().mean() + out.aux_loss).backward()
    for name, parameter in model.named_parameters():
        assert parameter.grad is not None and parameter.grad.abs().sum() > 0, name


def training_forward_logprobs(model: Transformer, prompt: list[int], tokens: list[int]) -> torch.Tensor:
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.tensor([prompt + tokens])).logits[0].float(), dim=-1)
    return logp[len(prompt) - 1 : -1].gather(-1, torch.tensor(tokens)[:, None])[:, 0]


def engine_mismatch(model: Transformer, **options) -> float:
    prompts = [[5, 6, 7], list(range(10, 40)), [1, 2]]
    with Engine(model, kv_block_size=4, **options) as engine:
        completions = engine.generate(prompts, max_new_tokens=16, temperature=1.0, seed=3)
    deltas = [
        (torch.tensor(c.logprobs) - training_forward_logprobs(model, p, c.token_ids)).abs()
        for p, c in zip(prompts, completions, strict=True)
    ]
    return torch.cat(deltas).mean().item()


def test_engine_serves_the_quantized_weights_of_the_training_forward(tmp_path):
    model = mxfp8_model()
    save_pretrained(model, tmp_path)
    served = load_pretrained(tmp_path).eval()  # precision comes from the checkpoint
    assert engine_mismatch(served) < 1e-5
    # Served in fp32 instead, the same weights disagree with the MXFP8 training forward.
    with Engine(load_pretrained(tmp_path), precision="fp32") as engine:
        assert engine.model.config.precision == "fp32"
    plain = load_pretrained(tmp_path)
    with Engine(plain, kv_block_size=4, precision="fp32") as engine:
        (c,) = engine.generate([[5, 6, 7]], max_new_tokens=16, temperature=1.0, seed=3)
    mxfp8_logprobs = training_forward_logprobs(model.eval(), [5, 6, 7], c.token_ids)
    assert (torch.tensor(c.logprobs) - mxfp8_logprobs).abs().mean() > 1e-3


@pytest.mark.parametrize("precision", ["bf16", "mxfp8"])
def test_engine_precision_option_overrides_the_model(precision):
    model = Transformer(tiny_model_config(initializer_range=0.2))
    assert engine_mismatch(model, precision=precision) < 1e-5
    assert model.config.precision == precision
