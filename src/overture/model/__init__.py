"""Layer 2: the policy model (Qwen3 / Qwen3-MoE transformer) and its Hugging Face checkpoint IO."""

from overture.model.checkpoint import CheckpointError, load_pretrained, read_model_config, save_pretrained
from overture.model.moe import GroupedExperts, MoEBlock, Router, RouterOutput, load_balancing_loss
from overture.model.segments import RowSegments, SegmentLayout
from overture.model.transformer import CausalLMOutput, Transformer

__all__ = [
    "CausalLMOutput",
    "CheckpointError",
    "GroupedExperts",
    "MoEBlock",
    "Router",
    "RouterOutput",
    "RowSegments",
    "SegmentLayout",
    "Transformer",
    "load_balancing_loss",
    "load_pretrained",
    "read_model_config",
    "save_pretrained",
]
