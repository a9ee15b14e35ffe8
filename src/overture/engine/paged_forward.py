"""The model's forward pass with the paged KV cache between attention's `project` and `attend`.

Everything but the cache is the model's own modules: embeddings, norms, rotary tables, q/k/v
projection, attention, dense MLP or MoE block, LM head. Two entry points:

- `prefill`: whole token lists (right-padded into one batch), causal attention over the batch's
  own keys, which are also written into each sequence's blocks; returns the logits of each row's
  last real token. Because attention here is the model's plain causal attention, prefill
  computes exactly what a training forward computes.
- `decode`: one new token per sequence, through `PackedDecoder` (the same function in fewer ops,
  from packed weights); its keys/values are written, then the query attends to every cached key
  of its sequence (position ≤ the token's own), read in place by the C kernel
  (`native_attention`) or gathered for torch's attention under a boolean mask; its GEMMs run
  through a C kernel tiled for few rows (`native_gemm`) where it is built.
- `extend`: the same for the rest of a prompt whose beginning the prefix cache already holds.
"""

from __future__ import annotations

import torch

from overture.engine.kv_cache import SCRATCH_BLOCK, PagedKVCache, slot_indices
from overture.engine.packed_decode import PackedDecoder
from overture.model import Transformer


class PagedForward:
    """Runs `model` over token batches, reading and writing `cache`."""

    def __init__(
        self,
        model: Transformer,
        cache: PagedKVCache,
        native_attention: bool = True,
        native_gemm: bool = True,
        attention_threads: int = 1,
    ) -> None:
        self.model = model
        self.cache = cache
        self.device = model.embed_tokens.weight.device
        self.decoder = PackedDecoder(model, native_attention, native_gemm, attention_threads)

    def _tensor(self, data: list, dtype: torch.dtype = torch.long) -> torch.Tensor:
        return torch.tensor(data, dtype=dtype, device=self.device)

    def _logits(self, x: torch.Tensor) -> torch.Tensor:
        return self.model.lm_head(self.model.norm(x)).float()

    @torch.inference_mode()
    def prefill(self, tokens: list[list[int]], tables: list[list[int]]) -> torch.Tensor:
        """Fill the cache for each token list (positions 0..n-1); B×V logits of its last token."""
        ids, positions, slots = self._right_padded(tokens, [0] * len(tokens), tables)
        x = self.model.embed_tokens(ids)
        cos, sin = self.model.rotary(positions, x.dtype)
        for index, layer in enumerate(self.model.layers):
            attn = layer.self_attn
            q, k, v = attn.project(layer.input_layernorm(x), cos, sin)
            self.cache.write(index, slots, k.transpose(1, 2).flatten(0, 1), v.transpose(1, 2).flatten(0, 1))
            # Right padding: a real query's causal window holds only real keys.
            x = x + attn.attend(q, k, v)
            x, _ = layer.feed_forward(x)
        last = self._tensor([len(row) - 1 for row in tokens])
        return self._logits(x[torch.arange(len(tokens), device=self.device), last])

    def _right_padded(
        self, tokens: list[list[int]], starts: list[int], tables: list[list[int]]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """B×T ids and positions of rows `tokens[i]` from position `starts[i]`, right-padded, and
        their B·T flat cache slots; padding writes to the scratch block, which no sequence reads."""
        block = self.cache.block_size
        width = max(len(row) for row in tokens)
        ids, positions, slots = [], [], []
        for row, start, table in zip(tokens, starts, tables, strict=True):
            pad = width - len(row)
            ids.append(row + [0] * pad)
            positions.append(list(range(start, start + len(row))) + [0] * pad)
            slots += slot_indices([table], [range(start, start + len(row))], block)
            slots += [SCRATCH_BLOCK * block] * pad
        return self._tensor(ids), self._tensor(positions), self._tensor(slots)

    def _tables(self, tables: list[list[int]]) -> torch.Tensor:
        """Block tables as one B×n tensor, short ones padded with the scratch block."""
        width = max(len(t) for t in tables)
        return self._tensor([t + [SCRATCH_BLOCK] * (width - len(t)) for t in tables])

    @torch.inference_mode()
    def decode(self, tokens: list[int], positions: list[int], tables: list[list[int]]) -> torch.Tensor:
        """One step: token i at `positions[i]` of the sequence with block table `tables[i]`; B×V logits."""
        slots = self._tensor(slot_indices(tables, [[p] for p in positions], self.cache.block_size))
        return self.decoder.forward(
            self._tensor(tokens)[:, None],
            self._tensor(positions)[:, None],
            self.cache,
            self._tables(tables),
            slots,
        )

    @torch.inference_mode()
    def extend(self, tokens: list[list[int]], starts: list[int], tables: list[list[int]]) -> torch.Tensor:
        """Prefill after a cached prefix: `tokens[i]` from position `starts[i]` on (the cache
        holds the keys and values before it, in the blocks of `tables[i]`); B×V logits of each
        row's last token."""
        ids, positions, slots = self._right_padded(tokens, starts, tables)
        last = self._tensor([len(row) - 1 for row in tokens])
        return self.decoder.forward(ids, positions, self.cache, self._tables(tables), slots, last)
