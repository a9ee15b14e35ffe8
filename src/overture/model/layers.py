"""Building blocks of the decoder: RMSNorm, rotary position embeddings, the projection layer whose
GEMMs follow the model's precision, and the SwiGLU MLP."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from overture import mx


class RMSNorm(nn.Module):
    """Root-mean-square normalisation, computed in float32 whatever the input dtype."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


class RotaryEmbedding(nn.Module):
    """Rotary position embedding tables (the "default" RoPE of Qwen3: no scaling).

    `forward(positions)` takes absolute positions (B×T, so that an incremental decoder can pass
    each request's own offsets) and returns cos and sin of shape B×T×head_dim.
    """

    def __init__(self, head_dim: int, theta: float) -> None:
        super().__init__()
        inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        freqs = positions[..., None].float() * self.inv_freq
        angles = torch.cat([freqs, freqs], dim=-1)
        return angles.cos().to(dtype), angles.sin().to(dtype)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    first, second = x.chunk(2, dim=-1)
    return torch.cat([-second, first], dim=-1)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate `x` (B×heads×T×head_dim) by the tables of `RotaryEmbedding` (B×T×head_dim)."""
    cos, sin = cos[:, None], sin[:, None]
    return x * cos + _rotate_half(x) * sin


class PrecisionLinear(nn.Linear):
    """`nn.Linear` whose three GEMMs (forward, input and weight gradients) run in `precision`.

    The weight stays in the model's dtype (float32 masters); "mxfp8" quantizes it, the input and
    the gradients on the fly in the orientation each GEMM needs (`overture.mx.linear`), so training
    and serving see the same quantized weights. Set by `Transformer.set_precision`.
    """

    precision: mx.Precision = "fp32"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return mx.linear(x, self.weight, self.bias, self.precision)


class SwiGLU(nn.Module):
    """The gated MLP of dense layers and of the shared expert: down(silu(gate(x)) * up(x))."""

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.gate_proj = PrecisionLinear(dim, hidden, bias=False)
        self.up_proj = PrecisionLinear(dim, hidden, bias=False)
        self.down_proj = PrecisionLinear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))
