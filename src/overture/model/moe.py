"""The Mixture-of-Experts block: softmax top-k router, grouped experts, optional shared expert.

Routing follows Qwen3-MoE: p = softmax(W_g x) in float32, the top-k experts by p, and their
weights p_topk (renormalised to sum to one when `norm_topk_prob`). With `balance_bias`
(DeepSeek-V3's auxiliary-loss-free balancing) a per-expert bias is added to p for the *choice*
of experts only; the gate weights stay unbiased and the bias moves outside the gradient, from
the load the router saw since its last update (`Router.update_bias`).

Experts run as grouped GEMMs: the token-expert pairs are sorted by expert, and each projection
is one `torch._grouped_mm` over the groups where that kernel runs, or a loop of per-expert
matmuls otherwise. Both give the same result. Under a low precision ("bf16", "mxfp8") the
projections go through `overture.mx.grouped_linear`, which quantizes each GEMM's operands in the
orientation it contracts (the weight gradient's per expert, over that expert's tokens).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from overture import mx
from overture.config import ModelConfig
from overture.model.layers import SwiGLU


@dataclass
class RouterOutput:
    """What one MoE layer's router decided for N tokens."""

    logits: torch.Tensor  # N×E router logits
    indices: torch.Tensor  # N×k chosen experts
    weights: torch.Tensor  # N×k gate weights
    valid: torch.Tensor | None = None  # N booleans: real tokens (None = all); padding is not counted

    def counted_indices(self) -> torch.Tensor:
        return self.indices if self.valid is None else self.indices[self.valid]

    def counted_logits(self) -> torch.Tensor:
        return self.logits if self.valid is None else self.logits[self.valid]

    def tokens_per_expert(self, num_experts: int) -> torch.Tensor:
        return torch.bincount(self.counted_indices().reshape(-1), minlength=num_experts)


class Router(nn.Module):
    """Softmax top-k gate; the `weight` matrix is E×D as in Hugging Face checkpoints."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.num_experts = config.num_experts
        self.top_k = config.num_experts_per_tok
        self.norm_topk_prob = config.norm_topk_prob
        self.balance_bias = config.balance_bias
        self.weight = nn.Parameter(torch.empty(config.num_experts, config.hidden_size))
        # The bias and the load it is corrected from are state, not parameters: no gradient.
        self.register_buffer("expert_bias", torch.zeros(config.num_experts), persistent=config.balance_bias)
        self.register_buffer("load", torch.zeros(config.num_experts), persistent=False)

    def forward(self, x: torch.Tensor, valid: torch.Tensor | None = None) -> RouterOutput:
        """Route N tokens; `valid` (N booleans) marks real tokens, so padding moves no load."""
        logits = F.linear(x, self.weight)
        probs = torch.softmax(logits, dim=-1, dtype=torch.float32)
        if self.balance_bias:
            indices = torch.topk(probs + self.expert_bias, self.top_k, dim=-1).indices
            weights = probs.gather(-1, indices)
        else:
            weights, indices = torch.topk(probs, self.top_k, dim=-1)
        if self.norm_topk_prob:
            weights = weights / weights.sum(dim=-1, keepdim=True)
        route = RouterOutput(logits=logits, indices=indices, weights=weights.to(x.dtype), valid=valid)
        if self.balance_bias and self.training:
            with torch.no_grad():
                self.load += route.tokens_per_expert(self.num_experts).to(self.load)
        return route

    @torch.no_grad()
    def update_bias(self, rate: float) -> None:
        """Move the selection bias toward balance: b_i += rate * sign(mean load - load_i).

        The mean of the step is subtracted so the biases do not drift together. The load
        accumulated since the last call is then cleared.
        """
        if not self.balance_bias or self.load.sum() == 0:
            return
        step = rate * torch.sign(self.load.mean() - self.load)
        self.expert_bias += step - step.mean()
        self.load.zero_()


def grouped_mm_supported(x: torch.Tensor, *dims: int) -> bool:
    """Whether `torch._grouped_mm` runs here: present, on CPU or a CUDA device of sm_90 or newer,
    and with every row stride 16-byte aligned."""
    if not hasattr(torch, "_grouped_mm"):
        return False
    if x.device.type == "cuda" and torch.cuda.get_device_capability(x.device) < (9, 0):
        return False
    if x.device.type not in ("cpu", "cuda"):
        return False
    return all(d * x.element_size() % 16 == 0 for d in dims)


def expert_matmul(x: torch.Tensor, weight: torch.Tensor, counts: torch.Tensor, grouped: bool) -> torch.Tensor:
    """Rows of `x` (sorted by expert, `counts[e]` rows for expert e) times weight[e]ᵀ.

    `weight` is E×out×in, the orientation of `nn.Linear` and of Hugging Face checkpoints.
    """
    if grouped:
        offsets = torch.cumsum(counts, 0, dtype=torch.int32)
        return torch._grouped_mm(x, weight.transpose(-2, -1), offs=offsets)
    # unbind, not weight[e]: its backward stacks the per-expert gradients once instead of
    # scattering each into a zero tensor of the whole E×out×in size.
    pieces = torch.split(x, counts.tolist())
    return torch.cat([piece @ w.T for piece, w in zip(pieces, weight.unbind(0), strict=True)])


@dataclass
class ExpertPairs:
    """A batch's token-expert pairs sorted by expert, so each expert's rows are contiguous."""

    order: torch.Tensor  # pair indices (token·k + slot) in expert order
    token: torch.Tensor  # the token of each sorted pair
    counts: torch.Tensor  # E: pairs per expert

    @staticmethod
    def of(indices: torch.Tensor, num_experts: int) -> ExpertPairs:
        """From N×k chosen experts; a stable sort keeps each expert's tokens in token order."""
        flat = indices.reshape(-1)
        order = torch.argsort(flat, stable=True)
        return ExpertPairs(order, order // indices.shape[-1], torch.bincount(flat, minlength=num_experts))

    def combine(self, out: torch.Tensor, weights: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """N×D like `x`: each token the gate-`weights`-weighted (N×k) sum of its pairs' rows of `out`."""
        out = out * weights.reshape(-1)[self.order, None]
        return torch.zeros_like(x).index_add_(0, self.token, out)


class GroupedExperts(nn.Module):
    """E SwiGLU experts stored as stacked E×out×in weights."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        experts, dim, hidden = config.num_experts, config.hidden_size, config.moe_intermediate_size
        self.num_experts = experts
        self.impl = config.experts_impl
        self.precision: mx.Precision = config.precision
        self.gate_proj = nn.Parameter(torch.empty(experts, hidden, dim))
        self.up_proj = nn.Parameter(torch.empty(experts, hidden, dim))
        self.down_proj = nn.Parameter(torch.empty(experts, dim, hidden))
        # Expert parallelism (overture.distributed) swaps in a `dispatch(experts, rows, counts)`
        # that sends the rows to the ranks holding their experts and returns the outputs in order.
        self.dispatch: Callable[[GroupedExperts, torch.Tensor, torch.Tensor], torch.Tensor] | None = None

    def use_grouped(self, x: torch.Tensor) -> bool:
        if self.impl == "loop":
            return False
        supported = grouped_mm_supported(x, self.gate_proj.shape[-1], self.gate_proj.shape[-2])
        if self.impl == "grouped" and not supported:
            raise RuntimeError(
                "experts_impl = 'grouped' but torch._grouped_mm cannot run here "
                f"(device {x.device}, dtype {x.dtype}); use 'auto' or 'loop'"
            )
        return supported

    def _project(self, rows: torch.Tensor, weight: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        if self.precision == "fp32":
            return expert_matmul(rows, weight, counts, self.use_grouped(rows))
        return mx.grouped_linear(rows, weight, counts, self.precision)

    def compute(self, rows: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        """The SwiGLU of every row: rows sorted by expert, `counts[e]` of them for this module's expert e."""
        hidden = F.silu(self._project(rows, self.gate_proj, counts)) * self._project(
            rows, self.up_proj, counts
        )
        return self._project(hidden, self.down_proj, counts)

    def forward(self, x: torch.Tensor, route: RouterOutput) -> torch.Tensor:
        """x: N×D tokens; returns N×D, each token the gate-weighted sum of its experts' outputs."""
        pairs = ExpertPairs.of(route.indices, self.num_experts)
        rows = x[pairs.token]
        if self.dispatch is None:
            out = self.compute(rows, pairs.counts)
        else:
            out = self.dispatch(self, rows, pairs.counts)
        return pairs.combine(out, route.weights, x)


class MoEBlock(nn.Module):
    """Router + routed experts (+ an optional always-active shared expert)."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.gate = Router(config)
        self.experts = GroupedExperts(config)
        self.shared_expert = (
            SwiGLU(config.hidden_size, config.shared_expert_intermediate_size)
            if config.shared_expert_intermediate_size
            else None
        )

    def forward(
        self, x: torch.Tensor, valid: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, RouterOutput]:
        """x: B×T×D (or N×D); `valid`: booleans of the same leading shape, False for padding."""
        shape = x.shape
        flat = x.reshape(-1, shape[-1])
        route = self.gate(flat, None if valid is None else valid.reshape(-1))
        out = self.experts(flat, route)
        if self.shared_expert is not None:
            out = out + self.shared_expert(flat)
        return out.view(shape), route


def load_balancing_loss(routes: list[RouterOutput], num_experts: int) -> torch.Tensor:
    """Qwen3-MoE's auxiliary loss over all MoE layers: E · Σ_i f_i · P_i.

    f_i = routing slots sent to expert i / routed rows (summing to k over experts) and
    P_i = mean router probability of expert i, both pooled over every layer's tokens as the
    Hugging Face implementation does (padding rows, marked by `RouterOutput.valid`, excluded, as
    its attention mask does). A perfectly balanced router scores k.
    """
    if not routes:
        return torch.zeros(())
    counts = sum(r.tokens_per_expert(num_experts).float() for r in routes)
    prob_sum = sum(torch.softmax(r.counted_logits(), dim=-1, dtype=torch.float32).sum(0) for r in routes)
    rows = max(1, sum(r.counted_logits().shape[0] for r in routes))
    return num_experts * torch.sum((counts / rows) * (prob_sum / rows))
