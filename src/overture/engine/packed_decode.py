"""The decode step in few, large ops: the served weights packed once per weight version.

A decode step is one token per sequence, so on small models its time is the number of ops, not
their arithmetic (a CPU op costs microseconds however small its tensors). This path computes the
same function as the model's modules with fewer ops, for one new token per sequence (decode) or
several (the rest of a prompt whose beginning the prefix cache holds):

- q, k and v come from one GEMM against the concatenated projection weights, and q and k are
  normalised and rotated together;
- the SwiGLU gate and up projections (dense MLP, shared expert, routed experts) are one GEMM;
- on CPU in fp32, every GEMM (q/k/v, output, SwiGLU, LM head) runs through a C kernel tiled
  for few rows (`native_gemm`), from transposed weights, and the routed experts of a layer are
  one call of it;
- otherwise the routed experts run as two grouped GEMMs over the token-expert pairs sorted by
  expert (the training forward's `expert_matmul`), or as one small GEMM per pair when the batch
  routes at most half as many pairs as there are experts (where that measured faster), reading
  only the chosen experts.

A decode step's attention reads the paged cache in place through `native_attention` (a C
kernel) where it is built, the model is float32 and the cache float32 or bfloat16 on CPU
(`engine.kv_cache_dtype`); otherwise, and for rows of several
tokens, each sequence's blocks are gathered into one tensor for `scaled_dot_product_attention`
under a position mask.

Weights are packed in the form the training forward's GEMMs see them: under "bf16" or "mxfp8"
each packed matrix holds the rounded values (`overture.mx.round_operand` along the contraction
dimension, as `overture.mx.linear` and `grouped_linear` round them), and activations are rounded
the same way before each GEMM; those GEMMs stay torch's. Norms, router, attention softmax and
LM head stay in the model's dtype, as in training. `PackedDecoder.pack()` must run after the
model's weights change; the engine calls it after every weight update. The concatenated, rounded
or transposed matrices are copies: serving needs up to twice the memory of the attention and
expert weights (and of the LM head under the C kernel).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from overture import mx
from overture.engine import native_attention, native_gemm
from overture.engine.kv_cache import PagedKVCache
from overture.model import Transformer
from overture.model.layers import SwiGLU, apply_rotary
from overture.model.moe import ExpertPairs, expert_matmul, grouped_mm_supported

# Shapes below are torch's (out × in); under the C kernel (`PackedDecoder.native_gemm`) every
# matrix is held transposed (in × out).


@dataclass
class _PackedMLP:
    """A SwiGLU (dense MLP or shared expert): gate and up stacked as one 2I×D matrix."""

    gate_up: torch.Tensor
    down: torch.Tensor


@dataclass
class _PackedExperts:
    """Routed experts: E×2I×D (gate over up) and E×D×I."""

    gate_up: torch.Tensor
    down: torch.Tensor


@dataclass
class _PackedLayer:
    qkv: torch.Tensor  # (Hq + 2·Hkv)·head_dim × D
    qkv_bias: torch.Tensor | None
    o: torch.Tensor
    o_bias: torch.Tensor | None
    qk_norm: torch.Tensor  # (Hq + Hkv)×head_dim: each q head's norm weight, then each k head's
    mlp: _PackedMLP | None
    experts: _PackedExperts | None
    shared: _PackedMLP | None


class PackedDecoder:
    """One decode step of `model` over a paged cache, from weights packed by `pack()`.

    `native_attention` / `native_gemm`: attend / multiply through the C kernels where they can
    serve the cache / weights (else torch); `self.native_gemm` says whether the packed weights are
    the kernel's. `attention_threads`: threads that share the C kernel's attention of a step."""

    def __init__(
        self,
        model: Transformer,
        native_attention: bool = True,
        native_gemm: bool = True,
        attention_threads: int = 1,
    ) -> None:
        self.model = model
        self.native_attention = native_attention
        self.attention_threads = attention_threads
        self.allow_native_gemm = native_gemm
        self.native_gemm = False
        self.lm_head: torch.Tensor | None = None  # the LM head's weight, under the C kernel only
        config = model.config
        self.num_heads = config.num_attention_heads
        self.num_kv_heads = config.num_key_value_heads
        self.head_dim = config.head_dim
        self.eps = config.rms_norm_eps
        self.layers: list[_PackedLayer] = []
        self.pack()

    @property
    def precision(self) -> mx.Precision:
        return self.model.config.precision

    # ------------------------------------------------------------------ packing

    def _served(self, weight: torch.Tensor) -> torch.Tensor:
        """`weight` (…×N×K) as this decoder's GEMMs read it: transposed for the C kernel, else
        rounded along K as the precision's GEMMs see it (float32 unless fp32)."""
        if self.native_gemm:
            return native_gemm.transposed(weight)
        if self.precision == "fp32":
            return weight.detach()
        return mx.round_operand(weight.detach(), -1, self.precision)

    def _mlp(self, mlp: SwiGLU) -> _PackedMLP:
        gate_up = torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight])
        return _PackedMLP(self._served(gate_up), self._served(mlp.down_proj.weight))

    @torch.no_grad()
    def pack(self) -> None:
        """(Re)build the packed weights from the model's current parameters."""
        model = self.model
        self.native_gemm = (
            self.allow_native_gemm
            and self.precision == "fp32"
            and native_gemm.supports(*(p for p in model.parameters() if p.is_floating_point()))
        )
        self.lm_head = native_gemm.transposed(model.lm_head.weight) if self.native_gemm else None
        layers = []
        for layer in self.model.layers:
            attn = layer.self_attn
            projections = (attn.q_proj, attn.k_proj, attn.v_proj)
            qkv_bias = None
            if attn.q_proj.bias is not None:
                qkv_bias = torch.cat([p.bias for p in projections]).detach()
            qk_norm = torch.cat(
                [
                    attn.q_norm.weight.expand(self.num_heads, -1),
                    attn.k_norm.weight.expand(self.num_kv_heads, -1),
                ]
            )
            mlp = experts = shared = None
            if layer.is_moe:
                grouped = layer.mlp.experts
                experts = _PackedExperts(
                    self._served(torch.cat([grouped.gate_proj, grouped.up_proj], dim=1)),
                    self._served(grouped.down_proj),
                )
                if layer.mlp.shared_expert is not None:
                    shared = self._mlp(layer.mlp.shared_expert)
            else:
                mlp = self._mlp(layer.mlp)
            layers.append(
                _PackedLayer(
                    qkv=self._served(torch.cat([p.weight for p in projections])),
                    qkv_bias=qkv_bias,
                    o=self._served(attn.o_proj.weight),
                    o_bias=None if attn.o_proj.bias is None else attn.o_proj.bias.detach(),
                    qk_norm=qk_norm.detach().contiguous(),
                    mlp=mlp,
                    experts=experts,
                    shared=shared,
                )
            )
        self.layers = layers

    # ------------------------------------------------------------------ the step

    def _gemm(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        """x @ weightᵀ (+ bias) with x rounded as the packed weight was."""
        if self.native_gemm:
            out = native_gemm.linear(x, weight)
            return out if bias is None else out + bias
        if self.precision == "fp32":
            return F.linear(x, weight, bias)
        out = F.linear(mx.round_operand(x, -1, self.precision), weight).to(x.dtype)
        return out if bias is None else out + bias

    def _swiglu(self, x: torch.Tensor, mlp: _PackedMLP) -> torch.Tensor:
        gate, up = self._gemm(x, mlp.gate_up).chunk(2, dim=-1)
        return self._gemm(F.silu(gate) * up, mlp.down)

    def _experts(self, x: torch.Tensor, indices: torch.Tensor, weights: torch.Tensor, packed) -> torch.Tensor:
        """x: N×D; each row the gate-weighted sum of its k chosen experts' SwiGLU outputs."""
        if self.native_gemm:
            return native_gemm.routed_experts(x, indices, weights, packed.gate_up, packed.down)
        tokens, top_k = indices.shape
        num_experts = packed.gate_up.shape[0]
        if 2 * tokens * top_k <= num_experts:  # where one GEMM per pair measured faster
            return self._experts_per_pair(x, indices, weights, packed)
        return self._experts_grouped(x, indices, weights, packed)

    def _experts_per_pair(self, x, indices, weights, packed) -> torch.Tensor:
        """A few token-expert pairs: one small GEMM each, reading only the chosen experts."""
        out = torch.zeros_like(x)
        chosen = indices.tolist()
        for token, experts in enumerate(chosen):
            row = x[token : token + 1]
            for slot, expert in enumerate(experts):
                gate, up = self._gemm(row, packed.gate_up[expert]).chunk(2, dim=-1)
                y = self._gemm(F.silu(gate) * up, packed.down[expert])
                out[token] += weights[token, slot] * y[0]
        return out

    def _experts_grouped(self, x, indices, weights, packed) -> torch.Tensor:
        """Many pairs: rows sorted by expert, two grouped GEMMs (`expert_matmul`), summed back."""
        pairs = ExpertPairs.of(indices, packed.gate_up.shape[0])
        rows = x[pairs.token]
        grouped = grouped_mm_supported(rows, *packed.gate_up.shape[1:], packed.down.shape[-1])
        if self.precision != "fp32":
            rows = mx.round_operand(rows, -1, self.precision)
        gate, up = expert_matmul(rows, packed.gate_up, pairs.counts, grouped).chunk(2, dim=-1)
        act = F.silu(gate) * up
        if self.precision != "fp32":
            act = mx.round_operand(act, -1, self.precision)
        out = expert_matmul(act, packed.down, pairs.counts, grouped).to(x.dtype)
        return pairs.combine(out, weights, x)

    @torch.inference_mode()
    def forward(
        self,
        tokens: torch.Tensor,
        positions: torch.Tensor,
        cache: PagedKVCache,
        tables: torch.Tensor,
        slots: torch.Tensor,
        last: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """B×V logits of row b's token `last[b]` (needed when T > 1), for rows of T new tokens
        (B×T `tokens` at `positions`) of the sequences whose block tables are the rows of `tables`.

        The new tokens' keys and values are written to the flat cache `slots` (B·T) first, then
        each token attends to every cached key of its sequence up to its own position. A decode
        step is T = 1; a prefill after a cached prefix is the prompt's rest. Rows shorter than T
        are right-padded with tokens written to the scratch block, whose outputs nothing reads.
        """
        model = self.model
        batch, length = tokens.shape
        rows = batch * length
        heads, kv_heads, head_dim = self.num_heads, self.num_kv_heads, self.head_dim
        # Rows of several tokens (a prompt's rest) keep torch's blocked attention on all threads:
        # the kernel reads a row's keys once per query token, on one thread.
        native = (
            self.native_attention
            and length == 1
            and native_attention.serves(model.embed_tokens.weight.dtype, cache.keys[0], tokens)
        )
        if native:  # tables and positions checked once for every layer
            attend = native_attention.PagedAttention(
                tables, positions, cache.keys[0].shape[0], self.attention_threads
            )
        else:
            key_positions = torch.arange(tables.shape[1] * cache.block_size, device=tokens.device)
            mask = (key_positions[None, None, :] <= positions[:, :, None])[:, None]
        x = model.embed_tokens(tokens).view(rows, -1)
        cos, sin = model.rotary(positions, x.dtype)
        for index, (layer, packed) in enumerate(zip(model.layers, self.layers, strict=True)):
            h = F.rms_norm(x, (x.shape[-1],), layer.input_layernorm.weight, self.eps)
            qkv = self._gemm(h, packed.qkv, packed.qkv_bias).view(batch, length, -1, head_dim).transpose(1, 2)
            qk = F.rms_norm(qkv[:, : heads + kv_heads], (head_dim,), None, self.eps) * packed.qk_norm[:, None]
            qk = apply_rotary(qk, cos, sin)
            q, k = qk[:, :heads], qk[:, heads:]
            v = qkv[:, heads + kv_heads :]
            cache.write(
                index,
                slots,
                k.transpose(1, 2).reshape(rows, kv_heads, head_dim),
                v.transpose(1, 2).reshape(rows, kv_heads, head_dim),
            )
            if native:
                attended = attend(q.transpose(1, 2), cache.keys[index], cache.values[index])
            else:
                keys, values = (t.to(q.dtype) for t in cache.gather(index, tables))
                attended = F.scaled_dot_product_attention(
                    q, keys, values, attn_mask=mask, enable_gqa=kv_heads != heads
                ).transpose(1, 2)
            attended = attended.reshape(rows, heads * head_dim)
            x = x + self._gemm(attended, packed.o, packed.o_bias)
            h = F.rms_norm(x, (x.shape[-1],), layer.post_attention_layernorm.weight, self.eps)
            if packed.mlp is not None:
                x = x + self._swiglu(h, packed.mlp)
                continue
            route = layer.mlp.gate(h)
            out = self._experts(h, route.indices, route.weights, packed.experts)
            if packed.shared is not None:
                out = out + self._swiglu(h, packed.shared)
            x = x + out
        if length > 1:
            if last is None:
                raise ValueError("rows of several tokens need `last`: which token's logits to return")
            x = x.view(batch, length, -1)[torch.arange(batch, device=x.device), last]
        x = F.rms_norm(x, (x.shape[-1],), model.norm.weight, self.eps)
        if self.lm_head is not None:
            return native_gemm.linear(x, self.lm_head)
        return model.lm_head(x).float()
