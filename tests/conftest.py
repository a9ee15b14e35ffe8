"""Shared fixtures: small random Qwen3 / Qwen3-MoE configurations and checkpoints."""

from __future__ import annotations

import pytest
import torch

from overture.config import ModelConfig


def tiny_model_config(**overrides) -> ModelConfig:
    """A model small enough to build in milliseconds, with MoE and dense layers mixed."""
    fields = dict(
        vocab_size=96,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        num_experts=8,
        num_experts_per_tok=2,
        moe_intermediate_size=16,
        mlp_only_layers=[1],
    )
    fields.update(overrides)
    return ModelConfig(**fields)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture(scope="session")
def numbers_task_set(tmp_path_factory):
    """(folder, tasks): eight tasks synthesized once from the small repository of `tasks_helpers`."""
    from tasks_helpers import synthesize

    root = tmp_path_factory.mktemp("numbers_tasks")
    return root, synthesize(root, 8)
