"""A decode step's GEMMs in C on CPU: `decode_gemm.c`, built and loaded by `c_kernels`.

A decode step multiplies a few rows (one per sequence) by every weight matrix. torch's CPU GEMMs
run such shapes well below the core's arithmetic rate, and the routed experts add a dozen
ops a layer around two grouped GEMMs (a loop over experts on CPU). The kernel's GEMMs are tiled
for few rows (see the C source), and `routed_experts` does a MoE layer's experts in one call.
Weights are served transposed (`transposed`, once per weight version).

Where the kernel cannot be built `library()` returns None (`c_kernels` logs why) and callers use
torch. It serves float32 tensors on CPU.
"""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path

import torch

from overture.engine import c_kernels

SOURCE = Path(__file__).with_name("decode_gemm.c")
FUNCTIONS = {
    "linear_f32": [ctypes.c_void_p] * 3 + [ctypes.c_int64] * 3,
    "routed_experts_f32": [ctypes.c_void_p] * 6 + [ctypes.c_int64] * 5,
}


@functools.cache
def library() -> ctypes.CDLL | None:
    """The built kernel library, building it on first use; None (logged once) if it cannot be."""
    return c_kernels.load(SOURCE, FUNCTIONS, "decode GEMMs run in torch")


def supports(*weights: torch.Tensor) -> bool:
    """Whether the kernel can serve GEMMs with these weights here (float32 on CPU, and built)."""
    return all(w.device.type == "cpu" and w.dtype == torch.float32 for w in weights) and library() is not None


def transposed(weight: torch.Tensor) -> torch.Tensor:
    """A weight (…×N×K, as `F.linear` and the stacked experts hold it) as the kernel reads it: …×K×N."""
    return weight.detach().transpose(-1, -2).contiguous()


def linear(x: torch.Tensor, weight_t: torch.Tensor) -> torch.Tensor:
    """x (N×K) times a `transposed` weight (K×M): N×M, what `F.linear(x, weight)` computes."""
    lib = c_kernels.built(library(), "decode GEMM")
    c_kernels.require("x", x, torch.float32)
    c_kernels.require("weight_t", weight_t, torch.float32)
    if x.dim() != 2 or weight_t.dim() != 2 or x.shape[1] != weight_t.shape[0]:
        raise ValueError(f"x {tuple(x.shape)} does not fit the transposed weight {tuple(weight_t.shape)}")
    if not weight_t.is_contiguous():
        raise ValueError("the weight must be contiguous (see transposed)")
    x = x.contiguous()
    out = torch.empty(x.shape[0], weight_t.shape[1], dtype=torch.float32)
    if lib.linear_f32(x.data_ptr(), weight_t.data_ptr(), out.data_ptr(), x.shape[0], *weight_t.shape):
        raise MemoryError("decode GEMM: out of memory for row pointers")
    return out


def routed_experts(
    x: torch.Tensor,
    indices: torch.Tensor,
    weights: torch.Tensor,
    gate_up_t: torch.Tensor,
    down_t: torch.Tensor,
) -> torch.Tensor:
    """N×D: each row of `x` (N×D) the sum of its chosen experts' SwiGLU outputs (`indices`, N×k),
    each times its gate weight (`weights`, N×k). The experts' weights are `transposed`: the E×2I×D
    stack of gate over up rows as E×D×2I, the E×D×I down projections as E×I×D."""
    lib = c_kernels.built(library(), "decode GEMM")
    tokens, dim = x.shape
    experts, hidden = down_t.shape[0], down_t.shape[1]
    if gate_up_t.shape != (experts, dim, 2 * hidden) or down_t.shape != (experts, hidden, dim):
        raise ValueError(
            f"expert weights {tuple(gate_up_t.shape)} / {tuple(down_t.shape)} do not fit rows of width {dim}"
        )
    if indices.dim() != 2 or indices.shape[0] != tokens or weights.shape != indices.shape:
        raise ValueError(
            f"indices {tuple(indices.shape)} / weights {tuple(weights.shape)} do not fit {tokens} rows"
        )
    for name, tensor, dtype in (
        ("x", x, torch.float32),
        ("indices", indices, torch.int64),
        ("weights", weights, torch.float32),
        ("gate_up_t", gate_up_t, torch.float32),
        ("down_t", down_t, torch.float32),
    ):
        c_kernels.require(name, tensor, dtype)
    if not (gate_up_t.is_contiguous() and down_t.is_contiguous()):
        raise ValueError("the expert weights must be contiguous (see transposed)")
    x, indices, weights = x.contiguous(), indices.contiguous(), weights.contiguous()
    out = torch.empty_like(x)
    status = lib.routed_experts_f32(
        x.data_ptr(),
        indices.data_ptr(),
        weights.data_ptr(),
        gate_up_t.data_ptr(),
        down_t.data_ptr(),
        out.data_ptr(),
        tokens,
        indices.shape[1],
        dim,
        hidden,
        experts,
    )
    if status == -1:
        raise ValueError(f"an expert index lies outside 0 … {experts - 1}")
    if status:
        raise MemoryError("routed experts: out of memory for scratch rows")
    return out
