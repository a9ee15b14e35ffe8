"""Paged attention read in place on CPU: `paged_attention.c`, built and loaded by `c_kernels`.

The decode step's torch path gathers each sequence's KV blocks into a contiguous copy and runs
`scaled_dot_product_attention` on it. At agent context lengths that copy is most of a step (batch
32 with 1,024-token prompts on the engine benchmark's model: 32 ms of gathers a step). The C
kernel reads keys and values where they lie, once each.

Threads. The kernel runs on its caller's thread, and a CPU decode step runs on one thread (the
engine's; see `cpu_tuning`), so any core that nothing else keeps busy idles through the step's
attention, most of the step at agent context lengths. `PagedAttention(..., threads=N)` splits the
batch into N runs of sequences holding about as many keys each; the caller's thread attends the
first, helper threads (kept for the process) the others, all in the kernel at once (ctypes lets
go of the GIL for the call). Rows are independent, so the result is the same bit for bit.

Where the kernel cannot be built `library()` returns None (`c_kernels` logs why) and callers use
the torch path. `paged_attention` serves float32 queries over a float32 or bfloat16 cache, on CPU
only.
"""

from __future__ import annotations

import ctypes
import functools
import itertools
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from overture.engine import c_kernels

SOURCE = Path(__file__).with_name("paged_attention.c")
# The cache dtypes the kernel reads, and its entry point for each.
_KERNELS = {torch.float32: "paged_attention_f32", torch.bfloat16: "paged_attention_bf16"}
_ERRORS = {-1: "a query position lies beyond its block table", -2: "out of memory for attention scores"}


@functools.cache
def library() -> ctypes.CDLL | None:
    """The built kernel library, building it on first use; None (logged once) if it cannot be."""
    return c_kernels.load(
        SOURCE,
        {name: [ctypes.c_void_p] * 6 + [ctypes.c_int64] * 7 + [ctypes.c_float] for name in _KERNELS.values()},
        "decode attention gathers the KV cache in torch",
    )


def available() -> bool:
    return library() is not None


def supports(*tensors: torch.Tensor) -> bool:
    """Whether these tensors are on the CPU and the kernel is built (dtypes are the caller's)."""
    return all(t.device.type == "cpu" for t in tensors) and available()


def serves(query_dtype: torch.dtype, cache: torch.Tensor, *others: torch.Tensor) -> bool:
    """Whether the kernel can attend queries of `query_dtype` over `cache` (a layer's keys): float32
    queries, a cache dtype it reads, everything on the CPU, the kernel built."""
    return query_dtype == torch.float32 and cache.dtype in _KERNELS and supports(cache, *others)


@functools.cache
def _helpers(count: int) -> ThreadPoolExecutor:
    """`count` threads that attend runs of rows beside the caller's, for the life of the process."""
    return ThreadPoolExecutor(max_workers=count, thread_name_prefix="overture-attention")


def row_runs(positions: torch.Tensor, threads: int) -> list[tuple[int, int]]:
    """The batch rows of B×T `positions` cut into at most `threads` runs [start, stop) of about
    equal keys to read (a query at position p reads p + 1), none empty: each cut falls where the
    keys read so far come nearest to their share."""
    read = list(itertools.accumulate((positions + 1).sum(dim=1).tolist()))  # by rows 0 … i
    cuts: list[int] = []
    for part in range(1, min(threads, len(read))):
        first = cuts[-1] + 1 if cuts else 1
        if first >= len(read):
            break
        share = read[-1] * part / threads
        cuts.append(min(range(first, len(read)), key=lambda cut: abs(read[cut - 1] - share)))
    bounds = [0, *cuts, len(read)]
    return list(itertools.pairwise(bounds))


class PagedAttention:
    """One step's attention over the cache, for every layer: the B×W block `tables` and the B×T
    query `positions` (query (b, t) attends key positions 0 … positions[b, t]) are checked once,
    against a pool of `num_blocks` blocks; each call then attends one layer's queries, on up to
    `threads` threads (the caller's and helpers), each taking a run of rows."""

    def __init__(
        self, tables: torch.Tensor, positions: torch.Tensor, num_blocks: int, threads: int = 1
    ) -> None:
        self.lib = c_kernels.built(library(), "paged attention")
        c_kernels.require("tables", tables, torch.int64)
        c_kernels.require("positions", positions, torch.int64)
        if positions.dim() != 2 or tables.dim() != 2 or tables.shape[0] != positions.shape[0]:
            raise ValueError(f"tables {tuple(tables.shape)} / positions {tuple(positions.shape)} do not fit")
        if tables.numel():
            low, high = (int(v) for v in torch.aminmax(tables))
            if low < 0 or high >= num_blocks:
                raise ValueError(f"block ids {low}…{high} outside the cache's {num_blocks} blocks")
        if threads < 1:
            raise ValueError(f"threads must be at least 1, got {threads}")
        self.tables, self.positions = tables.contiguous(), positions.contiguous()
        self.num_blocks = num_blocks
        # Two runs or more whenever there are two threads and two rows: row_runs cuts at least once.
        self.runs = row_runs(self.positions, threads) if threads > 1 and positions.shape[0] > 1 else None

    def __call__(
        self, q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, scale: float | None = None
    ) -> torch.Tensor:
        """B×T×Hq×D queries over the blocks (N×block×Hkv×D each) of `keys` and `values`; B×T×Hq×D."""
        batch, tokens, q_heads, head_dim = q.shape
        blocks, block_size, kv_heads, key_dim = keys.shape
        if key_dim != head_dim or values.shape != keys.shape or blocks != self.num_blocks:
            raise ValueError(
                f"queries {tuple(q.shape)} do not match cache {tuple(keys.shape)} / {tuple(values.shape)}"
            )
        if q_heads % kv_heads:
            raise ValueError(f"{q_heads} query heads are not a multiple of {kv_heads} key heads")
        if tuple(self.positions.shape) != (batch, tokens):
            raise ValueError(f"positions {tuple(self.positions.shape)} do not fit queries {batch}×{tokens}")
        c_kernels.require("q", q, torch.float32)
        kernel = _KERNELS.get(keys.dtype)
        if kernel is None:
            raise ValueError(f"the cache must be one of {tuple(_KERNELS)}, got {keys.dtype}")
        for name, tensor in (("keys", keys), ("values", values)):
            c_kernels.require(name, tensor, keys.dtype)  # on the CPU, both of one dtype
        if not (keys.is_contiguous() and values.is_contiguous()):
            raise ValueError("the cache tensors must be contiguous")
        q = q.contiguous()
        out = torch.empty_like(q)
        attend = getattr(self.lib, kernel)
        q_row = tokens * q_heads * head_dim * q.element_size()  # bytes of one batch row's queries
        table_row = self.tables.shape[1] * self.tables.element_size()
        position_row = tokens * self.positions.element_size()
        scale = head_dim**-0.5 if scale is None else scale

        def rows(start: int, stop: int) -> int:
            return attend(
                q.data_ptr() + start * q_row,
                keys.data_ptr(),
                values.data_ptr(),
                self.tables.data_ptr() + start * table_row,
                self.positions.data_ptr() + start * position_row,
                out.data_ptr() + start * q_row,
                stop - start,
                tokens,
                self.tables.shape[1],
                q_heads,
                kv_heads,
                head_dim,
                block_size,
                scale,
            )

        if self.runs is None:
            status = rows(0, batch)
        else:
            first, *others = self.runs
            helpers = _helpers(len(others))
            pending = [helpers.submit(rows, start, stop) for start, stop in others]
            statuses = [rows(*first)] + [future.result() for future in pending]
            status = next((code for code in statuses if code), 0)
        if status:
            raise ValueError(f"paged attention: {_ERRORS.get(status, f'error {status}')}")
        return out


def paged_attention(
    q: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    tables: torch.Tensor,
    positions: torch.Tensor,
    scale: float | None = None,
) -> torch.Tensor:
    """Attention of B×T×Hq×D queries over the cache blocks (N×block×Hkv×D each) listed by the
    B×W `tables`; query (b, t) attends key positions 0 … positions[b, t]. Returns B×T×Hq×D."""
    return PagedAttention(tables, positions, keys.shape[0])(q, keys, values, scale)
