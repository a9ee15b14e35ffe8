"""Translation between `ModelConfig` and a Hugging Face `config.json` (Qwen3 and Qwen3-MoE).

Only what this model implements is accepted: SiLU, un-scaled RoPE, full attention. Anything
else is an error naming the key, never a silently different model.
"""

from __future__ import annotations

from typing import Any

from overture.config import ModelConfig

MOE_ARCHITECTURE = "Qwen3MoeForCausalLM"
DENSE_ARCHITECTURE = "Qwen3ForCausalLM"
SUPPORTED_MODEL_TYPES = {"qwen3_moe": MOE_ARCHITECTURE, "qwen3": DENSE_ARCHITECTURE}

# config.json keys that map one to one onto ModelConfig fields.
_SHARED_KEYS = (
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "rms_norm_eps",
    "max_position_embeddings",
    "attention_bias",
    "tie_word_embeddings",
    "initializer_range",
)
_MOE_KEYS = (
    "num_experts_per_tok",
    "moe_intermediate_size",
    "norm_topk_prob",
    "decoder_sparse_step",
    "router_aux_loss_coef",
    # overture's extensions; transformers keeps them as plain attributes.
    "shared_expert_intermediate_size",
    "balance_bias",
    "balance_bias_rate",
)


class HFConfigError(ValueError):
    """A config.json this model cannot follow (unsupported or missing key); the message names the key."""


# overture's GEMM precision (overture.mx); absent from other checkpoints, which are then fp32.
PRECISION_KEY = "overture_precision"

_REQUIRED = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads")
_REQUIRED_MOE = ("num_experts_per_tok", "moe_intermediate_size")


def _rope_theta(hf: dict[str, Any]) -> float:
    rope = hf.get("rope_parameters") or {}
    scaling = hf.get("rope_scaling")
    rope_type = rope.get("rope_type", rope.get("type", "default"))
    if scaling:
        rope_type = scaling.get("rope_type", scaling.get("type", rope_type))
    if rope_type != "default":
        raise HFConfigError(f"rope type {rope_type!r} (only un-scaled 'default' RoPE is implemented)")
    theta = rope.get("rope_theta", hf.get("rope_theta"))
    if theta is None:
        raise HFConfigError("rope_theta: missing (neither rope_parameters.rope_theta nor rope_theta)")
    return float(theta)


def model_config_from_hf(hf: dict[str, Any]) -> ModelConfig:
    """Read a Hugging Face config dict; raises HFConfigError, or pydantic's ValidationError for bad values."""
    model_type = hf.get("model_type")
    if model_type not in SUPPORTED_MODEL_TYPES:
        supported = ", ".join(sorted(SUPPORTED_MODEL_TYPES))
        raise HFConfigError(f"model_type {model_type!r} is not supported (supported: {supported})")
    if hf.get("hidden_act", "silu") != "silu":
        raise HFConfigError(f"hidden_act {hf['hidden_act']!r} (only 'silu' is implemented)")
    if hf.get("use_sliding_window"):
        raise HFConfigError("use_sliding_window = true (only full attention is implemented)")
    required = _REQUIRED + (_REQUIRED_MOE if model_type == "qwen3_moe" else ())
    missing = [key for key in required if hf.get(key) is None]
    if model_type == "qwen3_moe" and hf.get("num_experts", hf.get("num_local_experts")) is None:
        missing.append("num_experts")
    if missing:
        raise HFConfigError(f"missing required key(s): {', '.join(missing)}")
    fields: dict[str, Any] = {key: hf[key] for key in _SHARED_KEYS if hf.get(key) is not None}
    # transformers' default: as many key/value heads as query heads.
    fields.setdefault("num_key_value_heads", hf["num_attention_heads"])
    fields["rope_theta"] = _rope_theta(hf)
    fields["head_dim"] = hf.get("head_dim") or hf["hidden_size"] // hf["num_attention_heads"]
    fields["precision"] = hf.get(PRECISION_KEY, "fp32")
    if model_type == "qwen3_moe":
        fields.update({key: hf[key] for key in _MOE_KEYS if hf.get(key) is not None})
        fields["num_experts"] = hf.get("num_experts", hf.get("num_local_experts"))
        fields["mlp_only_layers"] = hf.get("mlp_only_layers") or []
    else:
        fields["num_experts"] = 0
    return ModelConfig.model_validate(fields)


def model_config_to_hf(config: ModelConfig, dtype: str) -> dict[str, Any]:
    """A config.json that transformers reads as Qwen3MoeForCausalLM (or Qwen3ForCausalLM when dense)."""
    moe = config.num_experts > 0
    hf: dict[str, Any] = {
        "architectures": [MOE_ARCHITECTURE if moe else DENSE_ARCHITECTURE],
        "model_type": "qwen3_moe" if moe else "qwen3",
        **{key: getattr(config, key) for key in _SHARED_KEYS},
        "head_dim": config.head_dim,
        "hidden_act": "silu",
        # Both spellings: transformers 5 reads rope_parameters, 4.x reads rope_theta.
        "rope_theta": config.rope_theta,
        "rope_parameters": {"rope_type": "default", "rope_theta": config.rope_theta},
        "rope_scaling": None,
        "attention_dropout": 0.0,
        "use_sliding_window": False,
        "sliding_window": None,
        "max_window_layers": config.num_hidden_layers,
        "use_cache": True,
        "dtype": dtype,
        "torch_dtype": dtype,
        PRECISION_KEY: config.precision,
    }
    if moe:
        hf.update({key: getattr(config, key) for key in _MOE_KEYS})
        hf["num_experts"] = config.num_experts
        hf["mlp_only_layers"] = list(config.mlp_only_layers)
        hf["output_router_logits"] = False
    return hf
