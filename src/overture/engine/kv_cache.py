"""The paged KV cache: fixed-size blocks from one pool, shared between sequences by reference count.

Every layer's keys and values live in one tensor of `num_blocks × block_size × kv_heads × head_dim`.
A sequence owns a list of block ids (its block table); token at position p sits in block
`table[p // block_size]`, slot `p % block_size`. Memory is therefore bounded by the tokens in
flight, not by batch × longest context. Samples of one prompt point at the same full prompt
blocks (reference counted); the partly filled last block is copied for each, so a sequence
only ever writes into blocks it alone holds.

Block 0 is a scratch block that is never handed out: padding tokens write there and padded
block-table entries point there, where the attention mask hides them.

Prefix caching: full blocks stay indexed by the digest of the tokens up to their end after their
sequences release them, until their space is needed or the weights change (`BlockPool`).
"""

from __future__ import annotations

import hashlib
from array import array
from collections import OrderedDict

import torch

SCRATCH_BLOCK = 0


class OutOfBlocks(RuntimeError):
    """The pool has fewer free blocks than asked for."""


class BlockPool:
    """Free list and reference counts of the cache's blocks, and the prefix cache's index.

    A full block whose keys and values were computed under the current weights can be
    registered under the digest of the tokens up to its end (`block_digests`). When the last
    holder releases it, it stays *evictable* rather than free: a later request whose tokens
    start the same way takes it back (`match`) instead of computing it again. Evictable blocks
    count as free; `allocate` hands out truly free blocks first, then evicts the least recently
    released. `clear_cache` forgets every registration (new weights make the cached values stale).
    """

    def __init__(self, num_blocks: int) -> None:
        if num_blocks < 2:
            raise ValueError(f"a KV pool needs at least 2 blocks (one is scratch), got {num_blocks}")
        self.num_blocks = num_blocks
        self._refs = [0] * num_blocks
        # Popping from the end hands out low ids first, which keeps early runs easy to read.
        self._free = list(range(num_blocks - 1, SCRATCH_BLOCK, -1))
        self._by_digest: dict[bytes, int] = {}
        self._digest_of: dict[int, bytes] = {}
        self._evictable: OrderedDict[int, None] = OrderedDict()  # registered, held by no one; LRU first

    @property
    def num_free(self) -> int:
        """Blocks `allocate` can hand out (free or evictable)."""
        return len(self._free) + len(self._evictable)

    @property
    def num_cached(self) -> int:
        """Registered blocks (held or evictable)."""
        return len(self._digest_of)

    @property
    def capacity(self) -> int:
        """Blocks that can ever be handed out (all but the scratch block)."""
        return self.num_blocks - 1

    def allocate(self, count: int = 1) -> list[int]:
        if count > self.num_free:
            raise OutOfBlocks(f"asked for {count} KV blocks, {self.num_free} free")
        blocks = []
        for _ in range(count):
            if self._free:
                block = self._free.pop()
            else:
                block, _ = self._evictable.popitem(last=False)
                del self._by_digest[self._digest_of.pop(block)]
            self._refs[block] = 1
            blocks.append(block)
        return blocks

    def share(self, blocks: list[int]) -> None:
        """Another sequence now also holds `blocks` (evictable ones are taken back)."""
        for block in blocks:
            self._refs[block] += 1
            self._evictable.pop(block, None)

    def release(self, blocks: list[int]) -> None:
        for block in blocks:
            self._refs[block] -= 1
            if self._refs[block] == 0:
                if block in self._digest_of:
                    self._evictable[block] = None
                else:
                    self._free.append(block)
            elif self._refs[block] < 0:
                raise RuntimeError(f"KV block {block} released more often than held")

    def refcount(self, block: int) -> int:
        return self._refs[block]

    def register(self, digests: list[bytes], blocks: list[int]) -> None:
        """Index held full blocks by the digests of the tokens up to their ends (first wins)."""
        for digest, block in zip(digests, blocks, strict=False):
            if digest not in self._by_digest and block not in self._digest_of:
                self._by_digest[digest] = block
                self._digest_of[block] = digest

    def match(self, digests: list[bytes]) -> list[int]:
        """The registered blocks of the longest run of leading `digests` (not yet shared)."""
        found = []
        for digest in digests:
            block = self._by_digest.get(digest)
            if block is None:
                break
            found.append(block)
        return found

    def clear_cache(self) -> None:
        """Forget every registration; evictable blocks become free."""
        self._free.extend(self._evictable)
        self._evictable.clear()
        self._by_digest.clear()
        self._digest_of.clear()


def block_digests(
    tokens: list[int], block_size: int, count: int, known: list[bytes] | None = None
) -> list[bytes]:
    """Digests of the first `count` full blocks of `tokens`: block i's covers tokens up to its
    end (chained through block i - 1's), so equal digests mean equal prefixes. `known`: digests
    already computed for the leading blocks of these tokens, extended rather than redone."""
    digests = list(known or [])[:count]
    previous = digests[-1] if digests else b""
    for index in range(len(digests), count):
        chunk = tokens[index * block_size : (index + 1) * block_size]
        previous = hashlib.blake2b(previous + array("q", chunk).tobytes(), digest_size=16).digest()
        digests.append(previous)
    return digests


class PagedKVCache:
    """Per-layer key and value storage addressed by block tables."""

    def __init__(
        self,
        num_layers: int,
        num_blocks: int,
        block_size: int,
        kv_heads: int,
        head_dim: int,
        dtype: torch.dtype,
        device: torch.device,
    ) -> None:
        self.block_size = block_size
        shape = (num_blocks, block_size, kv_heads, head_dim)
        # Zeros, not empty: masked-out slots still enter the attention product, and NaN garbage
        # times a zero weight would still be NaN.
        self.keys = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(num_layers)]
        self.values = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(num_layers)]
        self.pool = BlockPool(num_blocks)

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.keys + self.values)

    def blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.block_size)

    def write(self, layer: int, slots: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """Store k, v (N×kv_heads×head_dim) at flat slot indices `slots` (N), in the cache's dtype."""
        keys, values = self.keys[layer], self.values[layer]
        keys.view(-1, *k.shape[1:])[slots] = k.to(keys.dtype)
        values.view(-1, *v.shape[1:])[slots] = v.to(values.dtype)

    def gather(self, layer: int, tables: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values of the sequences whose block tables are the rows of `tables` (B×n),
        in position order, as B×kv_heads×(n·block_size)×head_dim, in the cache's dtype."""
        return self._gather_one(self.keys[layer], tables), self._gather_one(self.values[layer], tables)

    @staticmethod
    def _gather_one(store: torch.Tensor, tables: torch.Tensor) -> torch.Tensor:
        # index_select over whole blocks viewed as rows copies each block in one piece; plain
        # advanced indexing with a 2-D index was several times slower on CPU.
        batch, width = tables.shape
        rows = store.view(store.shape[0], -1).index_select(0, tables.reshape(-1))
        return rows.view(batch, width * store.shape[1], *store.shape[2:]).transpose(1, 2)

    def copy_block(self, src: int, dst: int) -> None:
        for tensor in self.keys + self.values:
            tensor[dst].copy_(tensor[src])


def slot_indices(tables: list[list[int]], positions: list[list[int]], block_size: int) -> list[int]:
    """Flat cache slots of `positions[i]` for the sequence with block table `tables[i]`."""
    return [
        table[p // block_size] * block_size + p % block_size
        for table, row in zip(tables, positions, strict=True)
        for p in row
    ]
