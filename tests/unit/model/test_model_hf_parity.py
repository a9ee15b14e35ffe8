"""Logits parity with Hugging Face transformers, in both directions (fp32, small random configs)."""

from __future__ import annotations

import pytest
import torch

from overture.model import load_pretrained, save_pretrained

transformers = pytest.importorskip("transformers")

TOLERANCE = 1e-4


def hf_moe(**overrides):
    fields = dict(
        vocab_size=96,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        moe_intermediate_size=16,
        num_experts=8,
        num_experts_per_tok=2,
        rope_theta=10000.0,
    )
    fields.update(overrides)
    return transformers.Qwen3MoeForCausalLM(transformers.Qwen3MoeConfig(**fields)).eval()


def hf_dense(**overrides):
    fields = dict(
        vocab_size=96,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
    )
    fields.update(overrides)
    return transformers.Qwen3ForCausalLM(transformers.Qwen3Config(**fields)).eval()


HF_MODELS = {
    "moe-renormalised-mixed": lambda: hf_moe(norm_topk_prob=True, mlp_only_layers=[1]),
    "moe-raw-topk-mixed": lambda: hf_moe(norm_topk_prob=False, mlp_only_layers=[0, 3]),
    "moe-sparse-step-2": lambda: hf_moe(norm_topk_prob=True, decoder_sparse_step=2),
    "moe-attention-bias-tied": lambda: hf_moe(attention_bias=True, tie_word_embeddings=True),
    "dense": lambda: hf_dense(),
    "dense-tied": lambda: hf_dense(tie_word_embeddings=True),
}


def max_logit_difference(hf_model, model, ids):
    with torch.no_grad():
        return (hf_model(ids).logits - model(ids).logits).abs().max().item()


@pytest.mark.parametrize("name", HF_MODELS)
def test_checkpoint_written_by_transformers_loads_with_same_logits(name, tmp_path):
    hf_model = HF_MODELS[name]()
    hf_model.save_pretrained(tmp_path)
    model = load_pretrained(tmp_path).eval()
    ids = torch.randint(0, 96, (2, 13))
    assert max_logit_difference(hf_model, model, ids) <= TOLERANCE
    expected_moe_layers = sum(
        type(layer.mlp).__name__.endswith("SparseMoeBlock") for layer in hf_model.model.layers
    )
    assert sum(layer.is_moe for layer in model.layers) == expected_moe_layers


@pytest.mark.parametrize("name", HF_MODELS)
@pytest.mark.parametrize("max_shard_bytes", [None, 8_000], ids=["single-file", "sharded"])
def test_checkpoint_written_here_loads_in_transformers_with_same_logits(name, max_shard_bytes, tmp_path):
    source = tmp_path / "source"
    HF_MODELS[name]().save_pretrained(source)
    model = load_pretrained(source).eval()
    # Train-like perturbation so the check does not pass on an untouched copy of the source.
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.01 * torch.randn_like(parameter))
    out = tmp_path / "out"
    save_pretrained(model, out, **({} if max_shard_bytes is None else {"max_shard_bytes": max_shard_bytes}))
    assert (out / "model.safetensors.index.json").exists() == (max_shard_bytes is not None)
    hf_model = transformers.AutoModelForCausalLM.from_pretrained(out).eval()
    ids = torch.randint(0, 96, (2, 13))
    assert max_logit_difference(hf_model, model, ids) <= TOLERANCE


def test_resave_replaces_shards_without_leaving_stale_files(tmp_path):
    hf_moe().save_pretrained(tmp_path / "source")
    model = load_pretrained(tmp_path / "source")
    save_pretrained(model, tmp_path / "out", max_shard_bytes=8_000)
    save_pretrained(model, tmp_path / "out")
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert names == ["config.json", "model.safetensors"]
    assert torch.equal(load_pretrained(tmp_path / "out").lm_head.weight, model.lm_head.weight)


def test_bfloat16_load(tmp_path):
    hf_moe().save_pretrained(tmp_path)
    model = load_pretrained(tmp_path, dtype=torch.bfloat16)
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
    logits = model(torch.randint(0, 96, (1, 5))).logits
    assert logits.dtype == torch.bfloat16 and torch.isfinite(logits.float()).all()
