"""The policy: a decoder-only transformer of the Qwen3 / Qwen3-MoE family.

Each layer is pre-norm attention then pre-norm MLP; the MLP is a MoE block on the layers
`ModelConfig.is_moe_layer` names and a dense SwiGLU elsewhere. Module names mirror the
Hugging Face checkpoint layout (`embed_tokens`, `layers.L.self_attn.q_proj`, `layers.L.mlp.gate`,
...) so that checkpoint IO is a renaming of keys, not a translation of shapes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from overture import mx
from overture.config import ModelConfig
from overture.model.attention import Attention
from overture.model.layers import PrecisionLinear, RMSNorm, RotaryEmbedding, SwiGLU
from overture.model.linear_cross_entropy import linear_cross_entropy
from overture.model.moe import GroupedExperts, MoEBlock, Router, RouterOutput, load_balancing_loss
from overture.model.segments import SegmentLayout
from overture.runtime.vector_math import settle_vector_math


@dataclass
class CausalLMOutput:
    """Logits (B×T×V, or N×V for the N positions asked for), or with targets given the sum of
    their cross-entropy instead, and what the routers did: the aux loss and tokens per expert
    (L_moe×E)."""

    logits: torch.Tensor | None
    aux_loss: torch.Tensor
    tokens_per_expert: torch.Tensor
    routes: list[RouterOutput] = field(default_factory=list)
    target_loss_sum: torch.Tensor | None = None


class DecoderLayer(nn.Module):
    def __init__(self, config: ModelConfig, index: int) -> None:
        super().__init__()
        self.self_attn = Attention(config)
        self.is_moe = config.is_moe_layer(index)
        self.mlp = MoEBlock(config) if self.is_moe else SwiGLU(config.hidden_size, config.intermediate_size)
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)

    def forward(
        self,
        x: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        mask: torch.Tensor | SegmentLayout | None = None,
        valid: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, RouterOutput | None]:
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        return self.feed_forward(x, valid)

    def feed_forward(
        self, x: torch.Tensor, valid: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, RouterOutput | None]:
        """The layer's second half, x + MLP(norm(x)); also used by the engine's cached forward.
        `valid` marks real tokens for the router's load statistics (padding is not counted)."""
        hidden = self.post_attention_layernorm(x)
        if self.is_moe:
            out, route = self.mlp(hidden, valid)
            return x + out, route
        return x + self.mlp(hidden), None


class Transformer(nn.Module):
    """Embeddings, decoder layers, final norm and LM head; `forward(input_ids)` → CausalLMOutput."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        settle_vector_math()  # before any op of this process runs on several threads
        # Its own copy: the model changes it (e.g. `set_precision`), and a run's config may be shared.
        self.config = config.model_copy(deep=True)
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(config, i) for i in range(config.num_hidden_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        if config.tie_word_embeddings:
            self.lm_head.weight = self.embed_tokens.weight
        self.rotary = RotaryEmbedding(config.head_dim, config.rope_theta)
        self.reset_parameters()
        self.set_precision(config.precision)

    def set_precision(self, precision: mx.Precision) -> None:
        """GEMM precision of every attention, MLP and expert projection ("fp32", "bf16", "mxfp8").

        Embeddings, norms, router, attention softmax and LM head are not affected (they stay in
        the model's dtype); the weights themselves are unchanged, only how the GEMMs see them.
        Recorded in the model's own `config.precision` (a copy made at construction, so no run
        config is changed), so `save_pretrained` writes it into the checkpoint.
        """
        self.config.precision = precision
        for module in self.modules():
            if isinstance(module, PrecisionLinear | GroupedExperts):
                module.precision = precision

    def reset_buffers(self) -> None:
        """Recreate the buffers that are not saved (rotary tables, router load counters), on the
        parameters' device; needed after a model built on the meta device receives its weights."""
        device = self.embed_tokens.weight.device
        self.rotary = RotaryEmbedding(self.config.head_dim, self.config.rope_theta).to(device)
        for router in self.moe_routers():
            router.load = torch.zeros(router.num_experts, device=device)
            if router.expert_bias.is_meta:
                router.expert_bias = torch.zeros(router.num_experts, device=device)

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """Normal(0, initializer_range) for every matrix, ones for norms, zeros for biases."""
        std = self.config.initializer_range
        for module in self.modules():
            if isinstance(module, nn.Linear | nn.Embedding):
                module.weight.normal_(0.0, std)
                if getattr(module, "bias", None) is not None:
                    module.bias.zero_()
            elif isinstance(module, GroupedExperts):
                for weight in (module.gate_proj, module.up_proj, module.down_proj):
                    weight.normal_(0.0, std)
            elif isinstance(module, Router):
                module.weight.normal_(0.0, std)
            elif isinstance(module, RMSNorm):
                module.weight.fill_(1.0)

    def moe_routers(self) -> list[Router]:
        return [layer.mlp.gate for layer in self.layers if layer.is_moe]

    def forward(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor | None = None,
        attention_mask: torch.Tensor | SegmentLayout | None = None,
        token_mask: torch.Tensor | None = None,
        logits_at: torch.Tensor | None = None,
        targets: torch.Tensor | None = None,
    ) -> CausalLMOutput:
        """input_ids: B×T token ids; positions: B×T absolute positions (default 0..T-1);
        attention_mask: instead of plain causal attention, B×1×T×T booleans (True = may attend)
        or, for rows of packed sequences, their `SegmentLayout`; token_mask: B×T booleans,
        False for padding, which then moves neither the aux loss nor the experts' load;
        logits_at: B×T booleans, the positions whose logits are wanted, returned as N×V in
        row-major order (a trainer's loss positions: the final norm and the LM head, forward and
        backward, then cost nothing elsewhere); targets: B×T token ids, the token each position
        predicts (already shifted): instead of logits, the output holds the sum over positions
        of their cross-entropy, computed without the B×T×V logits (`linear_cross_entropy`)."""
        if targets is not None and logits_at is not None:
            raise ValueError("pass logits_at or targets, not both")
        if targets is not None and targets.shape != input_ids.shape:
            shapes = f"{tuple(targets.shape)} and {tuple(input_ids.shape)}"
            raise ValueError(f"targets and input_ids differ in shape: {shapes}")
        if positions is None:
            positions = torch.arange(input_ids.shape[1], device=input_ids.device).expand_as(input_ids)
        x = self.embed_tokens(input_ids)
        cos, sin = self.rotary(positions, x.dtype)
        routes = []
        for layer in self.layers:
            x, route = layer(x, cos, sin, attention_mask, token_mask)
            if route is not None:
                routes.append(route)
        if logits_at is not None:
            x = x[logits_at]
        if targets is None:
            logits, target_loss_sum = self.lm_head(self.norm(x)), None
        else:
            hidden = self.norm(x).flatten(0, 1)
            logits = None
            target_loss_sum = linear_cross_entropy(hidden, self.lm_head.weight, targets.flatten())
        num_experts = self.config.num_experts
        tokens_per_expert = (
            torch.stack([r.tokens_per_expert(num_experts) for r in routes])
            if routes
            else torch.zeros(0, num_experts, dtype=torch.long)
        )
        aux_loss = load_balancing_loss(routes, num_experts).to(x.device)
        return CausalLMOutput(
            logits=logits,
            aux_loss=aux_loss,
            tokens_per_expert=tokens_per_expert,
            routes=routes,
            target_loss_sum=target_loss_sum,
        )

    def update_balance_bias(self) -> None:
        """After an optimizer step: move each router's selection bias toward a uniform load."""
        for router in self.moe_routers():
            router.update_bias(self.config.balance_bias_rate)

    def num_parameters(self, active: bool = False) -> int:
        """Parameter count; with `active`, only what one token uses (k of E routed experts)."""
        total = sum(p.numel() for p in self.parameters())
        if not active:
            return total
        config = self.config
        for layer in self.layers:
            if layer.is_moe:
                experts = layer.mlp.experts
                per_expert = sum(
                    w[0].numel() for w in (experts.gate_proj, experts.up_proj, experts.down_proj)
                )
                total -= per_expert * (config.num_experts - config.num_experts_per_tok)
        return total
