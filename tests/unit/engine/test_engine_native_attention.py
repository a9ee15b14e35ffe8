"""The C paged-attention kernel against the torch path (gather + masked SDPA), its errors, its
build, and an engine serving through it against one that gathers."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
from conftest import assert_engine_option_changes_nothing, tiny_model_config

from overture.engine import Engine, c_kernels, native_attention
from overture.engine.kv_cache import PagedKVCache
from overture.model import Transformer

needs_kernel = pytest.mark.skipif(
    not native_attention.available(), reason="no C compiler to build the kernel with"
)


def random_cache(
    blocks: int, block_size: int, kv_heads: int, head_dim: int, seed: int = 0, dtype=torch.float32
) -> PagedKVCache:
    cache = PagedKVCache(1, blocks, block_size, kv_heads, head_dim, dtype, torch.device("cpu"))
    gen = torch.Generator().manual_seed(seed)
    cache.keys[0].copy_(torch.randn(cache.keys[0].shape, generator=gen))
    cache.values[0].copy_(torch.randn(cache.values[0].shape, generator=gen))
    return cache


def torch_attention(q, cache: PagedKVCache, tables, positions) -> torch.Tensor:
    """B×T×Hq×D queries over the gathered blocks (widened to the queries' float32), each
    attending positions 0 … its own."""
    keys, values = (t.to(q.dtype) for t in cache.gather(0, tables))
    key_positions = torch.arange(keys.shape[2])
    mask = (key_positions[None, None, :] <= positions[:, :, None])[:, None]
    out = F.scaled_dot_product_attention(
        q.transpose(1, 2), keys, values, attn_mask=mask, enable_gqa=q.shape[2] != keys.shape[1]
    )
    return out.transpose(1, 2)


@needs_kernel
@pytest.mark.parametrize(
    ("q_heads", "kv_heads", "head_dim"),
    # GQA at each head size compiled as a constant; one query head per key head; a generic head size
    [(4, 2, 32), (4, 2, 64), (4, 4, 128), (6, 2, 16)],
)
@pytest.mark.parametrize("tokens", [1, 3])  # a decode step; the rest of a prompt after a cached prefix
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])  # the cache's
def test_the_kernel_matches_gather_and_sdpa(q_heads, kv_heads, head_dim, tokens, dtype):
    block_size, width, batch = 4, 6, 5
    cache = random_cache(40, block_size, kv_heads, head_dim, dtype=dtype)
    # Scattered, distinct blocks per sequence, as a pool hands them out after some churn.
    tables = (torch.randperm(39)[: batch * width] + 1).view(batch, width)
    ends = torch.tensor([0, 5, 11, 17, 23])  # from a single key to the table's last slot
    positions = torch.stack([ends - tokens + 1 + t for t in range(tokens)], dim=1).clamp_min(0)
    q = torch.randn(batch, tokens, q_heads, head_dim, generator=torch.Generator().manual_seed(1))
    got = native_attention.paged_attention(q, cache.keys[0], cache.values[0], tables, positions)
    want = torch_attention(q, cache, tables, positions)
    assert got.shape == want.shape
    assert (got - want).abs().max() <= 1e-5


@needs_kernel
def test_a_row_does_not_depend_on_the_rest_of_the_batch():
    cache = random_cache(30, 4, 2, 64)
    tables = (torch.randperm(29)[:24] + 1).view(4, 6)
    positions = torch.tensor([[20], [3], [9], [17]])
    q = torch.randn(4, 1, 4, 64)
    batched = native_attention.paged_attention(q, cache.keys[0], cache.values[0], tables, positions)
    for row in range(4):
        alone = native_attention.paged_attention(
            q[row : row + 1], cache.keys[0], cache.values[0], tables[row : row + 1], positions[row : row + 1]
        )
        assert torch.equal(alone[0], batched[row])


@needs_kernel
@pytest.mark.parametrize("threads", [2, 3, 8])
@pytest.mark.parametrize("tokens", [1, 3])
def test_threads_sharing_the_rows_give_the_same_result_bit_for_bit(threads, tokens):
    cache = random_cache(60, 4, 2, 32, dtype=torch.bfloat16)
    batch, width = 7, 8
    tables = (torch.randperm(59)[: batch * width] + 1).view(batch, width)
    ends = torch.tensor([31, 2, 17, 30, 9, 25, 12])
    positions = torch.stack([ends - tokens + 1 + t for t in range(tokens)], dim=1)
    q = torch.randn(batch, tokens, 4, 32)
    alone = native_attention.PagedAttention(tables, positions, 60)
    shared = native_attention.PagedAttention(tables, positions, 60, threads=threads)
    assert shared.runs is not None and 1 < len(shared.runs) <= threads
    want = alone(q, cache.keys[0], cache.values[0])
    for _ in range(3):  # the helpers are reused from call to call
        assert torch.equal(shared(q, cache.keys[0], cache.values[0]), want)


def test_row_runs_cover_the_batch_with_about_equal_keys():
    positions = torch.tensor([[99], [0], [0], [99], [49], [49]])
    assert native_attention.row_runs(positions, 2) == [(0, 3), (3, 6)]
    assert native_attention.row_runs(positions, 3) == [(0, 2), (2, 4), (4, 6)]
    assert native_attention.row_runs(positions, 1) == [(0, 6)]
    # Never an empty run, even when one row holds most of the keys or threads outnumber rows.
    assert native_attention.row_runs(torch.tensor([[1000], [0]]), 4) == [(0, 1), (1, 2)]
    assert native_attention.row_runs(torch.tensor([[0], [0], [1000]]), 2) == [(0, 2), (2, 3)]


@needs_kernel
def test_bad_inputs_name_what_is_wrong():
    cache = random_cache(10, 4, 2, 64)
    tables = torch.tensor([[1, 2]])
    q = torch.randn(1, 1, 4, 64)
    with pytest.raises(ValueError, match="beyond its block table"):
        native_attention.paged_attention(q, cache.keys[0], cache.values[0], tables, torch.tensor([[8]]))
    with pytest.raises(ValueError, match="beyond its block table"):
        native_attention.paged_attention(q, cache.keys[0], cache.values[0], tables, torch.tensor([[-1]]))
    with pytest.raises(ValueError, match=r"q must be torch\.float32"):
        native_attention.paged_attention(
            q.double(), cache.keys[0], cache.values[0], tables, torch.tensor([[3]])
        )
    with pytest.raises(ValueError, match="outside the cache's 10 blocks"):
        native_attention.paged_attention(
            q, cache.keys[0], cache.values[0], torch.tensor([[1, 10]]), torch.tensor([[3]])
        )
    half = random_cache(10, 4, 2, 64, dtype=torch.float16)
    with pytest.raises(ValueError, match=r"cache must be one of .*got torch\.float16"):
        native_attention.paged_attention(q, half.keys[0], half.values[0], tables, torch.tensor([[3]]))
    with pytest.raises(ValueError, match=r"values must be torch\.float32"):
        native_attention.paged_attention(
            q, cache.keys[0], cache.values[0].bfloat16(), tables, torch.tensor([[3]])
        )
    with pytest.raises(ValueError, match="not a multiple"):
        native_attention.paged_attention(
            torch.randn(1, 1, 3, 64), cache.keys[0], cache.values[0], tables, torch.tensor([[3]])
        )


@needs_kernel
def test_loading_the_kernel_keeps_subnormals():
    # -ffast-math at link time would set flush-to-zero for the whole process on load. In a fresh
    # process: a job run in this one may have set it on purpose (overture.runtime.devices).
    code = (
        "import torch; from overture.engine import native_attention; "
        "assert native_attention.library() is not None; "
        "print((torch.tensor([1e-39], dtype=torch.float32) * 2).item() > 0)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"


def test_without_a_compiler_the_library_is_absent_and_the_engine_gathers(no_compiler):
    assert native_attention.library() is None
    with pytest.raises(RuntimeError, match="not built"):
        native_attention.paged_attention(
            torch.randn(1, 1, 2, 8),
            torch.zeros(2, 4, 2, 8),
            torch.zeros(2, 4, 2, 8),
            torch.tensor([[1]]),
            torch.tensor([[0]]),
        )
    model = Transformer(tiny_model_config(initializer_range=0.2)).eval()
    with Engine(model) as engine:
        (out,) = engine.generate([[1, 2, 3]], max_new_tokens=4, temperature=0.0)
    assert len(out.token_ids) == 4


@needs_kernel
def test_a_corrupt_cached_library_falls_back_to_torch(monkeypatch, tmp_path):
    monkeypatch.setenv("OVERTURE_KERNEL_CACHE", str(tmp_path))
    native_attention.library.cache_clear()
    try:
        assert native_attention.library() is not None  # built into the empty cache
    finally:
        native_attention.library.cache_clear()
    (built,) = tmp_path.glob("paged_attention-*.so")
    built.unlink()  # a new file: this process's loaded copy stays mapped
    built.write_bytes(b"not a shared library")
    # dlopen hands a process the library it already loaded from a path, so ask a fresh one.
    probe = "from overture.engine import native_attention as n; print(n.library() is None)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["True"]
    assert "paged attention kernel unavailable" in done.stderr


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_a_failed_build_is_reported_with_the_compiler_output(monkeypatch, tmp_path):
    broken = tmp_path / "broken.c"
    broken.write_text("this is not C\n")
    with pytest.raises(RuntimeError, match=r"failed: .*error"):
        c_kernels.build(shutil.which("cc"), broken, tmp_path / "out" / "lib.so")
    assert not (tmp_path / "out" / "lib.so").exists()


@needs_kernel
@pytest.mark.parametrize("cache_dtype", ["auto", "bfloat16"])
def test_an_engine_reading_the_cache_in_place_samples_as_one_that_gathers(cache_dtype):
    assert_engine_option_changes_nothing("native_attention", kv_cache_dtype=cache_dtype)


@needs_kernel
def test_an_engine_sharing_attention_between_threads_samples_as_one_that_does_not():
    model = Transformer(tiny_model_config(initializer_range=0.2)).eval()
    prompts = [[1, 2, 3], [4, 5, 6, 7, 8, 9, 10, 11, 12], [13], [14, 15, 16, 17]]
    runs = {}
    for threads in (1, 2):
        with Engine(model, kv_block_size=4, attention_threads=threads) as engine:
            runs[threads] = engine.generate(prompts, max_new_tokens=20, temperature=1.0, seed=7)
    for got, want in zip(runs[2], runs[1], strict=True):
        assert got.token_ids == want.token_ids
        assert got.logprobs == want.logprobs
