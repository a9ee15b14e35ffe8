"""Sampling a batch's next tokens in one C call on CPU: `sampling.c`, built and loaded by `c_kernels`.

Serves `overture.engine.sampling.sample` for float32 logits on CPU when no row truncates its
distribution (top-k or top-p): the same rule, with the scaling, log-softmax and inverse-CDF walk
of a row done in three passes instead of a dozen torch ops (a cumulative sum over the vocabulary
among them). Where the kernel cannot be built `library()` returns None (`c_kernels` logs why)
and `sample` uses torch.
"""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path

import torch

from overture.engine import c_kernels

SOURCE = Path(__file__).with_name("sampling.c")


@functools.cache
def library() -> ctypes.CDLL | None:
    """The built kernel library, building it on first use; None (logged once) if it cannot be."""
    return c_kernels.load(
        SOURCE,
        {"sample_rows_f32": [ctypes.c_void_p] * 3 + [ctypes.c_int64] * 2 + [ctypes.c_void_p] * 3},
        "sampling runs as torch ops",
    )


def supports(logits: torch.Tensor) -> bool:
    """Whether the kernel can sample from these B×V logits here."""
    return logits.device.type == "cpu" and logits.dtype == torch.float32 and library() is not None


def sample_rows(
    logits: torch.Tensor, temperatures: list[float], uniforms: list[float]
) -> tuple[list[int], list[float]]:
    """Tokens and logprobs of B×V float32 `logits`: row b at `temperatures[b]` (0 = greedy, its
    logprob at temperature 1) with the uniform number `uniforms[b]` in [0, 1)."""
    lib = c_kernels.built(library(), "sampling")
    c_kernels.require("logits", logits, torch.float32)
    rows, vocab = logits.shape
    if len(temperatures) != rows or len(uniforms) != rows:
        raise ValueError(f"{len(temperatures)} temperatures / {len(uniforms)} uniforms for {rows} rows")
    logits = logits.contiguous()
    temps = torch.tensor(temperatures, dtype=torch.float32)
    draws = torch.tensor(uniforms, dtype=torch.float32)
    tokens = torch.empty(rows, dtype=torch.int64)
    logprobs = torch.empty(rows, dtype=torch.float32)
    scratch = torch.empty(vocab, dtype=torch.float32)
    lib.sample_rows_f32(
        logits.data_ptr(),
        temps.data_ptr(),
        draws.data_ptr(),
        rows,
        vocab,
        tokens.data_ptr(),
        logprobs.data_ptr(),
        scratch.data_ptr(),
    )
    return tokens.tolist(), logprobs.tolist()
