"""Bad checkpoints: every failure names the file, the tensor and what was expected."""

from __future__ import annotations

import json

import pytest
from conftest import tiny_model_config
from safetensors.torch import load_file, save_file

from overture.model import CheckpointError, Transformer, load_pretrained, save_pretrained


@pytest.fixture
def checkpoint(tmp_path):
    path = tmp_path / "ckpt"
    save_pretrained(Transformer(tiny_model_config()), path)
    return path


def edit_config(path, **changes):
    config = json.loads((path / "config.json").read_text())
    config.update(changes)
    (path / "config.json").write_text(json.dumps(config))


def test_not_a_directory(tmp_path):
    with pytest.raises(CheckpointError, match="nowhere: not a directory"):
        load_pretrained(tmp_path / "nowhere")


def test_missing_config(checkpoint):
    (checkpoint / "config.json").unlink()
    with pytest.raises(CheckpointError, match=r"config\.json: missing"):
        load_pretrained(checkpoint)


def test_corrupt_config(checkpoint):
    (checkpoint / "config.json").write_text("{not json")
    with pytest.raises(CheckpointError, match=r"config\.json: not valid JSON"):
        load_pretrained(checkpoint)


def test_unsupported_architecture(checkpoint):
    edit_config(checkpoint, model_type="llama", architectures=["LlamaForCausalLM"])
    with pytest.raises(CheckpointError, match=r"config\.json: model_type 'llama' is not supported"):
        load_pretrained(checkpoint)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"hidden_act": "gelu"}, "hidden_act 'gelu'"),
        ({"use_sliding_window": True}, "use_sliding_window"),
        ({"rope_parameters": {"rope_type": "yarn", "rope_theta": 1e6, "factor": 4.0}}, "rope type 'yarn'"),
        ({"hidden_size": None}, "missing required key.*hidden_size"),
        ({"num_experts_per_tok": 99}, "num_experts_per_tok .99. exceeds num_experts"),
        ({"vocab_size": -5}, "invalid values: vocab_size"),
    ],
)
def test_config_values_this_model_cannot_follow(checkpoint, change, message):
    edit_config(checkpoint, **change)
    with pytest.raises(CheckpointError, match=message):
        load_pretrained(checkpoint)


def test_no_weights(checkpoint):
    (checkpoint / "model.safetensors").unlink()
    (checkpoint / "pytorch_model.bin").write_bytes(b"")
    with pytest.raises(CheckpointError, match=r"no model\.safetensors .*found pytorch_model\.bin"):
        load_pretrained(checkpoint)


def test_corrupt_weights(checkpoint):
    data = (checkpoint / "model.safetensors").read_bytes()
    (checkpoint / "model.safetensors").write_bytes(data[: len(data) // 3])
    with pytest.raises(CheckpointError, match=r"model\.safetensors: not a readable safetensors file"):
        load_pretrained(checkpoint)


def test_garbage_weights(checkpoint):
    (checkpoint / "model.safetensors").write_bytes(b"\x00" * 7)
    with pytest.raises(CheckpointError, match=r"model\.safetensors"):
        load_pretrained(checkpoint)


def test_missing_tensor(checkpoint):
    tensors = load_file(checkpoint / "model.safetensors")
    del tensors["model.layers.0.mlp.experts.3.up_proj.weight"]
    save_file(tensors, checkpoint / "model.safetensors")
    with pytest.raises(
        CheckpointError, match=r"model\.layers\.0\.mlp\.experts\.3\.up_proj\.weight: missing .*\[16, 32\]"
    ):
        load_pretrained(checkpoint)


def test_shape_mismatch(checkpoint):
    tensors = load_file(checkpoint / "model.safetensors")
    tensors["model.layers.2.self_attn.k_proj.weight"] = tensors["model.layers.2.self_attn.k_proj.weight"][:8]
    save_file(tensors, checkpoint / "model.safetensors")
    with pytest.raises(
        CheckpointError,
        match=r"model\.safetensors: tensor model\.layers\.2\.self_attn\.k_proj\.weight has shape \[8, 32\], "
        r"expected \[16, 32\]",
    ):
        load_pretrained(checkpoint)


def test_missing_shard(tmp_path):
    save_pretrained(Transformer(tiny_model_config()), tmp_path, max_shard_bytes=10_000)
    shards = sorted(
        set(json.loads((tmp_path / "model.safetensors.index.json").read_text())["weight_map"].values())
    )
    assert len(shards) > 2
    (tmp_path / shards[1]).unlink()
    with pytest.raises(CheckpointError, match=rf"{shards[1]}: missing, but .*index"):
        load_pretrained(tmp_path)


def test_corrupt_index(tmp_path):
    save_pretrained(Transformer(tiny_model_config()), tmp_path, max_shard_bytes=10_000)
    (tmp_path / "model.safetensors.index.json").write_text('{"metadata": {}}')
    with pytest.raises(CheckpointError, match=r"model\.safetensors\.index\.json: not a safetensors index"):
        load_pretrained(tmp_path)


def test_a_failed_load_leaves_the_checkpoint_untouched(checkpoint):
    before = {p.name: p.read_bytes() for p in checkpoint.iterdir()}
    edit_config(checkpoint, num_experts_per_tok=99)
    with pytest.raises(CheckpointError):
        load_pretrained(checkpoint)
    after = {p.name: p.read_bytes() for p in checkpoint.iterdir()}
    assert after["model.safetensors"] == before["model.safetensors"]
