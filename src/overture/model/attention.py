"""Grouped-query self-attention with per-head q/k RMSNorm (Qwen3), through PyTorch's SDPA.

The forward is split into `project` (q, k, v in B×heads×T×head_dim, normalised and rotated)
and `attend` so that an incremental decoder can put its own KV cache between the two.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from overture.config import ModelConfig
from overture.model.layers import PrecisionLinear, RMSNorm, apply_rotary
from overture.model.segments import SegmentLayout


class Attention(nn.Module):
    """Causal grouped-query attention; key/value heads are shared by groups of query heads."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.num_kv_heads = config.num_key_value_heads
        self.head_dim = config.head_dim
        bias = config.attention_bias
        self.q_proj = PrecisionLinear(config.hidden_size, self.num_heads * self.head_dim, bias=bias)
        self.k_proj = PrecisionLinear(config.hidden_size, self.num_kv_heads * self.head_dim, bias=bias)
        self.v_proj = PrecisionLinear(config.hidden_size, self.num_kv_heads * self.head_dim, bias=bias)
        self.o_proj = PrecisionLinear(self.num_heads * self.head_dim, config.hidden_size, bias=bias)
        self.q_norm = RMSNorm(self.head_dim, config.rms_norm_eps)
        self.k_norm = RMSNorm(self.head_dim, config.rms_norm_eps)

    def project(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Queries, keys and values of `x` (B×T×D): B×heads×T×head_dim, q and k rotated."""
        batch, length, _ = x.shape
        q = self.q_proj(x).view(batch, length, self.num_heads, self.head_dim)
        k = self.k_proj(x).view(batch, length, self.num_kv_heads, self.head_dim)
        v = self.v_proj(x).view(batch, length, self.num_kv_heads, self.head_dim)
        q = apply_rotary(self.q_norm(q).transpose(1, 2), cos, sin)
        k = apply_rotary(self.k_norm(k).transpose(1, 2), cos, sin)
        return q, k, v.transpose(1, 2)

    def attend(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        mask: torch.Tensor | SegmentLayout | None = None,
    ) -> torch.Tensor:
        """Attention output projected back to B×T×D.

        Without `mask` the attention is causal over equal-length q and k. Packed training rows
        pass their `SegmentLayout`; an incremental decoder passes a boolean `mask` (B×1×Tq×Tk,
        True = may attend) for cached keys.
        """
        gqa = self.num_kv_heads != self.num_heads
        if isinstance(mask, SegmentLayout):
            out = mask.attend(q, k, v, enable_gqa=gqa)
        else:
            out = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, is_causal=mask is None, enable_gqa=gqa
            )
        batch, _, length, _ = out.shape
        return self.o_proj(out.transpose(1, 2).reshape(batch, length, self.num_heads * self.head_dim))

    def forward(
        self,
        x: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        mask: torch.Tensor | SegmentLayout | None = None,
    ) -> torch.Tensor:
        """`mask` (B×1×T×T, True = may attend, or a packed batch's `SegmentLayout`) replaces the
        causal default."""
        q, k, v = self.project(x, cos, sin)
        return self.attend(q, k, v, mask)
