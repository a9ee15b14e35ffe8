"""Settling MKL's vector-math dispatch before threads race on it.

On x86 PyTorch computes a contiguous float tensor's `cos`, `sin`, `exp`, `log`, `sqrt`, `tanh`
and the like with MKL's vector math library (VML), one call per intra-op thread on its chunk.
oneMKL chooses each VML function's kernel on that function's first call. When the first call runs
on several threads at once, one of them can compute its whole chunk with a low-accuracy kernel
(PyTorch issue 188792; oneMKL 2024.2, the version PyTorch 2.13's wheels link, is affected).

Measured here with two threads: the first `cos` of a fresh process gave rotary tables off by up
to 1.5e-4 on the second thread's half in about one process in eight, and the same seed then
trained to different weights. `settle_vector_math()` calls each such function once on one
element of float32 and of float64, on the calling thread alone, so that every later call, on any
thread, finds its kernel already chosen. It costs well under a millisecond and runs once per
process; `Transformer` calls it, so every process that computes with a model has it done.
"""

from __future__ import annotations

import functools

import torch

# The unary ops ATen hands to VML (aten/src/ATen/cpu/vml.h), in both precisions VML serves.
VML_OPS = (
    "abs", "acos", "asin", "atan", "cos", "cosh", "erf", "erfc", "erfinv", "exp", "expm1",
    "log", "log10", "log1p", "log2", "sin", "sinh", "sqrt", "tan", "tanh", "trunc",
)  # fmt: skip


@functools.cache
def settle_vector_math() -> None:
    """Call every VML-backed unary op once, single-threaded, so its kernel is chosen before any
    multi-threaded call (see the module docstring). Idempotent; later calls do nothing."""
    for dtype in (torch.float32, torch.float64):
        one = torch.full((1,), 0.5, dtype=dtype, device="cpu")  # real even under a meta-device context
        for op in VML_OPS:
            getattr(torch, op)(one)
