"""The KV block pool: allocation, sharing by reference count, release, exhaustion."""

from __future__ import annotations

import pytest
import torch

from overture.engine.kv_cache import SCRATCH_BLOCK, BlockPool, OutOfBlocks, PagedKVCache, slot_indices


def test_pool_hands_out_every_block_but_scratch_once():
    pool = BlockPool(5)
    blocks = pool.allocate(4)
    assert sorted(blocks) == [1, 2, 3, 4] and SCRATCH_BLOCK not in blocks
    with pytest.raises(OutOfBlocks):
        pool.allocate(1)
    pool.release(blocks)
    assert pool.num_free == 4


def test_shared_blocks_return_to_the_pool_after_the_last_holder():
    pool = BlockPool(4)
    blocks = pool.allocate(2)
    pool.share(blocks)
    pool.release(blocks)
    assert pool.num_free == 1 and pool.refcount(blocks[0]) == 1
    pool.release(blocks)
    assert pool.num_free == 3
    with pytest.raises(RuntimeError, match="released more often"):
        pool.release(blocks[:1])


def test_written_slots_come_back_in_position_order():
    cache = PagedKVCache(1, 6, 2, kv_heads=1, head_dim=3, dtype=torch.float32, device="cpu")
    table = [4, 2, 5]  # positions 0-1 in block 4, 2-3 in block 2, 4 in block 5
    slots = torch.tensor(slot_indices([table], [range(5)], 2))
    k = torch.arange(15.0).view(5, 1, 3)
    cache.write(0, slots, k, -k)
    keys, values = cache.gather(0, torch.tensor([table]))
    assert torch.equal(keys[0, 0, :5], k[:, 0]) and torch.equal(values[0, 0, :5], -k[:, 0])
    cache.copy_block(4, 1)  # block 1 now holds positions 0-1
    keys, values = cache.gather(0, torch.tensor([[1]]))
    assert torch.equal(keys[0, 0], k[:2, 0]) and torch.equal(values[0, 0], -k[:2, 0])
