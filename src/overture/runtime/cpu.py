"""Running the engine's steps well on a CPU: freed memory kept in the process (and handed back
after training steps), and decode threads.

Memory. PyTorch on CPU allocates every op's output with `malloc`. glibc serves a block above its mmap
threshold (128 KiB at start, raised adaptively) with a fresh `mmap` and returns it on `free`, and
trims the heap top once more than its trim threshold is free. A decode step allocates and frees
the same megabyte-sized tensors (gathered KV blocks, logits, expert rows) every step, so each step
faults and zeroes those pages again: at batch 32 on the engine benchmark's model the KV gather
alone took 3.5 ms a step this way and 0.55 ms with the thresholds raised. `keep_freed_memory()`
raises both thresholds once for the whole process (`mallopt`), as the allocators inference
servers preload (tcmalloc, jemalloc) behave by default. The cost: memory a process frees below
the trim threshold stays mapped to it. Elsewhere than glibc it does nothing.

Handing it back. glibc keeps freed memory in per-thread arenas; a process that trains and
generates in several threads (the in-process RL runtime) fragments them, and its resident set
grows with every step although its live tensors do not: the tiny main job's RL phase went from
1.9 to 4.2 GB over four steps with 352 MB of tensors alive throughout. `release_freed_memory()`
(`malloc_trim(0)`) returns the free pages of every arena; the trainer calls it after each RL step
on CPU, which kept that phase at 0.9 GB between steps (peak 3.2 GB instead of 5.4 GB).

Threads. The engine steps in its own thread, whose OpenMP team is not the main thread's. Once
both teams exist there are more OpenMP threads than cores on a small machine, libgomp stops
spinning between parallel regions, and every parallelised op of a decode step pays a wake-up of
its worker (measured: a 32×256 by 256×512 GEMM took 113 µs in the engine thread against 50 µs in
the main thread, both with 2 threads). Decode ops are small, so `intra_op_threads` lets the
engine run them on fewer threads (one by default) while prefill, whose GEMMs are large, keeps
the process's setting. PyTorch's thread count is per calling thread, so no other thread is
affected.
"""

from __future__ import annotations

import ctypes
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager

import torch

log = logging.getLogger(__name__)

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# Blocks below this come from the heap and are reused; 64 MiB is the largest glibc accepts.
MMAP_THRESHOLD = 64 << 20
# Free memory at the heap top is returned to the system only beyond this.
TRIM_THRESHOLD = 1 << 30

_applied: bool | None = None


def glibc_version() -> str | None:
    try:
        return os.confstr("CS_GNU_LIBC_VERSION")
    except (ValueError, OSError):
        return None


def keep_freed_memory() -> bool:
    """Raise glibc's mmap and trim thresholds for this process (once); whether they are raised."""
    global _applied
    if _applied is not None:
        return _applied
    _applied = False
    if glibc_version() is None:
        return False
    libc = ctypes.CDLL(None)
    ok = bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
    if not ok:
        log.warning("mallopt refused the engine's malloc thresholds; CPU decode may page-fault")
    _applied = ok
    return ok


def release_freed_memory() -> bool:
    """Hand the free memory of every glibc arena back to the system; whether it could (glibc only)."""
    if glibc_version() is None:
        return False
    ctypes.CDLL(None).malloc_trim(0)
    return True


@contextmanager
def intra_op_threads(threads: int) -> Iterator[None]:
    """Run the block with `threads` intra-op threads in this thread (0: leave the setting)."""
    if threads <= 0 or threads == torch.get_num_threads():
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
