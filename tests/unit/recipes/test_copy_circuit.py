"""The induction circuit the main job writes into its fresh weights (`main_job.copy_circuit`): it
copies before any training, it is a plain Qwen3-MoE checkpoint, and shapes that cannot hold it are
refused."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from overture.config import ConfigError, RunConfig, load_config
from overture.model import Transformer, load_pretrained, save_pretrained
from overture.recipes.main_job.copy_circuit import install_copy_circuit, previous_token_amplitudes
from overture.recipes.main_job.copying import repeated_span_accuracy
from overture.recipes.main_job.job_config import check_job_config
from overture.text.markers import SPECIAL_TOKENS

REPO = Path(__file__).resolve().parents[3]


def tiny(*overrides: str) -> RunConfig:
    return load_config(REPO / "configs" / "tiny.toml", list(overrides))


def fresh(config: RunConfig) -> Transformer:
    """Fresh weights as the main job draws them, with the circuit when the config asks for it."""
    torch.manual_seed(0)
    model = Transformer(config.model)
    if config.main_job.copy_circuit:
        install_copy_circuit(model)
    return model.eval()


ORDINARY_IDS = list(range(len(SPECIAL_TOKENS), 4096))


def test_fresh_weights_with_the_circuit_copy_repeated_spans_and_plain_ones_do_not():
    with_circuit = repeated_span_accuracy(fresh(tiny("main_job.copy_circuit=true")), ORDINARY_IDS)
    plain = repeated_span_accuracy(fresh(tiny("main_job.copy_circuit=false")), ORDINARY_IDS)
    assert with_circuit["second_showing"] > 0.9
    assert with_circuit["first_showing"] < 0.02  # random tokens: nothing to know on first sight
    assert plain["second_showing"] < 0.02


def test_the_copy_reaches_back_over_a_long_context():
    # A span shown, 1,500 unrelated tokens, the span again: the induction head finds it far back.
    model = fresh(tiny("main_job.copy_circuit=true"))
    generator = torch.Generator().manual_seed(1)
    ids = torch.tensor(ORDINARY_IDS)[torch.randint(len(ORDINARY_IDS), (8, 1500 + 48), generator=generator)]
    ids[:, -24:] = ids[:, :24]
    with torch.no_grad():
        predicted = model(ids).logits[:, -24:-1].argmax(-1)
    assert (predicted == ids[:, -23:]).float().mean().item() > 0.6


def test_the_previous_token_head_prefers_distance_one_over_every_other_distance():
    freqs, amplitudes, margin = previous_token_amplitudes(1e6, 32, pairs=8, horizon=4608)
    distances = torch.arange(4608, dtype=torch.float64)
    scores = (torch.tensor(amplitudes) * torch.cos(torch.outer(distances - 1, torch.tensor(freqs)))).sum(1)
    assert amplitudes.sum() == pytest.approx(1.0)
    assert margin > 0.1
    assert scores.argmax().item() == 1
    others = torch.cat([scores[:1], scores[2:]])
    assert scores[1] - others.max() >= margin - 1e-6


def test_the_circuit_is_an_ordinary_qwen3_moe_checkpoint(tmp_path):
    transformers = pytest.importorskip("transformers")
    model = fresh(tiny("main_job.copy_circuit=true"))
    save_pretrained(model, tmp_path)
    hf_model = transformers.AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    ids = torch.tensor([ORDINARY_IDS[:40] * 2])
    with torch.no_grad():
        difference = (hf_model(ids).logits - model(ids).logits).abs().max().item()
    assert difference < 1e-3
    reloaded = load_pretrained(tmp_path).eval()
    assert repeated_span_accuracy(reloaded, ORDINARY_IDS) == repeated_span_accuracy(model, ORDINARY_IDS)


@pytest.mark.parametrize(
    ("override", "named"),
    [
        ("model.num_hidden_layers=1", "num_hidden_layers"),
        ("model.num_key_value_heads=1", "num_key_value_heads x head_dim"),
    ],
)
def test_a_shape_that_cannot_hold_the_circuit_is_refused_before_the_job_starts(override, named):
    config = tiny("main_job.copy_circuit=true", override, "model.num_attention_heads=4")
    with pytest.raises(ConfigError, match=named):
        check_job_config(config)
    with pytest.raises(ValueError, match=r"main_job\.copy_circuit"):
        install_copy_circuit(Transformer(config.model))


def test_a_missing_scipy_is_named_before_the_job_starts(monkeypatch):
    found = importlib.util.find_spec

    def without_scipy(name, *rest):
        return None if name == "scipy" else found(name, *rest)

    monkeypatch.setattr(importlib.util, "find_spec", without_scipy)
    with pytest.raises(ConfigError, match=r"main_job\.copy_circuit needs scipy .*overture\[main-job\]"):
        check_job_config(tiny("main_job.copy_circuit=true"))
    check_job_config(tiny("main_job.copy_circuit=false"))
