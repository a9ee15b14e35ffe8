"""Paged attention read in place on CPU: `paged_attention.c`, built once per machine and loaded.

The decode step's torch path gathers each sequence's KV blocks into a contiguous copy and runs
`scaled_dot_product_attention` on it. At agent context lengths that copy is most of a step (batch
32 with 1,024-token prompts on the engine benchmark's model: 32 ms of gathers a step). The C
kernel reads keys and values where they lie, once each.

Building: the source is compiled with the system C compiler (`cc`, or `$CC`) the first time a
process asks for it, into `$OVERTURE_KERNEL_CACHE` (default `~/.cache/overture/kernels`), under a
name derived from the source, the flags, the compiler and the CPU, so another machine or an edited
source builds its own copy. The build writes to a temporary name and renames it into place, so
processes that start together never load a half-written library. Flags: `-O3 -march=native`
and `-ffast-math` at compile time only (vectorised `expf` from glibc's libmvec, reassociated
sums); the link step leaves it out, so loading the library does not switch the process's
floating-point unit to flush subnormals to zero.

Without a compiler, or where the build fails, `library()` returns None and says why once in
the log; callers use the torch path. `paged_attention` serves float32 tensors on CPU only.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import logging
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path

import torch

from overture.config import user_cache_dir

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("paged_attention.c")
COMPILE_FLAGS = ("-O3", "-march=native", "-ffast-math", "-fPIC", "-std=c11")
LINK_FLAGS = ("-shared", "-lm")
_ERRORS = {-1: "a query position lies beyond its block table", -2: "out of memory for attention scores"}


def cache_dir() -> Path:
    configured = os.environ.get("OVERTURE_KERNEL_CACHE")
    return Path(configured) if configured else user_cache_dir("kernels")


def _cpu_identity() -> str:
    """The CPU's model and feature flags (what `-march=native` compiles for)."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.processor() or platform.machine()
    wanted = [line for line in lines if line.startswith(("model name", "flags"))]
    return "\n".join(dict.fromkeys(wanted))


def _compiler() -> str | None:
    return shutil.which(os.environ.get("CC", "cc"))


def _build(compiler: str, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        obj = Path(scratch) / "paged_attention.o"
        lib = Path(scratch) / target.name
        for command in (
            [compiler, "-c", *COMPILE_FLAGS, str(SOURCE), "-o", str(obj)],
            [compiler, str(obj), "-o", str(lib), *LINK_FLAGS],
        ):
            done = subprocess.run(command, capture_output=True, text=True, timeout=120)
            if done.returncode != 0:
                raise RuntimeError(f"{' '.join(command)} failed: {done.stderr.strip()[-2000:]}")
        os.replace(lib, target)


@functools.cache
def library() -> ctypes.CDLL | None:
    """The built kernel library, building it on first use; None (logged once) if it cannot be."""
    compiler = _compiler()
    if compiler is None:
        log.warning("no C compiler (cc or $CC): decode attention gathers the KV cache in torch")
        return None
    try:
        version = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=60).stdout
        key = hashlib.sha256(
            "\0".join([SOURCE.read_text(), *COMPILE_FLAGS, *LINK_FLAGS, version, _cpu_identity()]).encode()
        ).hexdigest()[:20]
        target = cache_dir() / f"paged_attention-{key}.so"
        if not target.exists():
            _build(compiler, target)
        lib = ctypes.CDLL(str(target))
        function = lib.paged_attention_f32
    except (OSError, RuntimeError, AttributeError, subprocess.SubprocessError) as error:
        log.warning("paged attention kernel unavailable, using torch: %s", error)
        return None
    function.restype = ctypes.c_int
    function.argtypes = [ctypes.c_void_p] * 6 + [ctypes.c_int64] * 7 + [ctypes.c_float]
    return lib


def available() -> bool:
    return library() is not None


def supports(*tensors: torch.Tensor) -> bool:
    """Whether these tensors are on the CPU and the kernel is built (dtypes are the caller's)."""
    return all(t.device.type == "cpu" for t in tensors) and available()


def _check(name: str, tensor: torch.Tensor, dtype: torch.dtype) -> None:
    if tensor.dtype != dtype or tensor.device.type != "cpu":
        raise ValueError(f"{name} must be {dtype} on CPU, got {tensor.dtype} on {tensor.device}")


class PagedAttention:
    """One step's attention over the cache, for every layer: the B×W block `tables` and the B×T
    query `positions` (query (b, t) attends key positions 0 … positions[b, t]) are checked once,
    against a pool of `num_blocks` blocks; each call then attends one layer's queries."""

    def __init__(self, tables: torch.Tensor, positions: torch.Tensor, num_blocks: int) -> None:
        self.lib = library()
        if self.lib is None:
            raise RuntimeError("the paged attention kernel is not built (see the log for why)")
        _check("tables", tables, torch.int64)
        _check("positions", positions, torch.int64)
        if positions.dim() != 2 or tables.dim() != 2 or tables.shape[0] != positions.shape[0]:
            raise ValueError(f"tables {tuple(tables.shape)} / positions {tuple(positions.shape)} do not fit")
        if tables.numel():
            low, high = (int(v) for v in torch.aminmax(tables))
            if low < 0 or high >= num_blocks:
                raise ValueError(f"block ids {low}…{high} outside the cache's {num_blocks} blocks")
        self.tables, self.positions = tables.contiguous(), positions.contiguous()
        self.num_blocks = num_blocks

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
        _check("q", q, torch.float32)
        _check("keys", keys, torch.float32)
        _check("values", values, torch.float32)
        if not (keys.is_contiguous() and values.is_contiguous()):
            raise ValueError("the cache tensors must be contiguous")
        q = q.contiguous()
        out = torch.empty_like(q)
        status = self.lib.paged_attention_f32(
            q.data_ptr(),
            keys.data_ptr(),
            values.data_ptr(),
            self.tables.data_ptr(),
            self.positions.data_ptr(),
            out.data_ptr(),
            batch,
            tokens,
            self.tables.shape[1],
            q_heads,
            kv_heads,
            head_dim,
            block_size,
            head_dim**-0.5 if scale is None else scale,
        )
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
