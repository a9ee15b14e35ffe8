"""MX quantization as one Triton kernel: blocks along any dimension, one pass over the input.

`quantize_mx_triton(x, dim, ...)` returns what `formats.quantize_mx_dim` returns, bit for bit
(the same edge-case choices: see `formats`), with the tensor read once and the elements and
scales written once, whichever dimension the blocks run along. The kernel sees `x` as
`[P, L, M]` (L the blocked dimension, P and M the dimensions before and after it) and gives
each program a tile of one block along L by `COLUMNS` (p, m) pairs; for blocks along the last
dimension the pairs are rows (M = 1) and the tile is read 32 contiguous values per row, for
blocks along dim 0 of a matrix they are its columns and the tile is read along rows: both
orientations the MXFP8 GEMMs need (activations and weights along K forward, the weight-gradient
operands along the token dimension backward) are one pass each.

Elements are encoded from their float32 bits with integer arithmetic (round to nearest even,
saturation to ±max, subnormals, NaN keeping its sign as torch's float8 cast does) instead of the
hardware float8 conversion, so that the same kernel runs and is tested in Triton's interpreter
(`TRITON_INTERPRET=1`) on a CPU, whose float8 conversion neither saturates nor rounds subnormals
as the hardware does. On an H200 it moves 1.8–2.7 TB/s with float32 inputs, its integer pipeline
the busiest unit; the device's own float8 conversion in its place was no faster within the
noise of the measurement (docs/benchmarks.md).

`formats.quantize_mx` and `quantize_mx_dim` call this for CUDA tensors when Triton is installed
(`available()`); CPU tensors take the torch implementation.
"""

from __future__ import annotations

import functools
import math

import torch

from overture.mx.formats import Scaling, check_quantize_input, element_format

COLUMNS = 128  # (p, m) pairs per program; COLUMNS and NUM_WARPS: benchmarks/mx_triton_tiles.py
NUM_WARPS = 2


@functools.cache
def available() -> bool:
    """Whether Triton can be imported (it ships with CUDA builds of torch)."""
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


def _kernel():
    """The jitted kernel module, imported on first use so that importing this one never needs Triton."""
    from overture.mx import triton_kernels

    return triton_kernels


# Element encodings: mantissa bits and exponent bias of each FP8 type.
_ENCODINGS = {torch.float8_e4m3fn: (3, 7), torch.float8_e5m2: (2, 15)}


def supports(block_size: int, elem_dtype: torch.dtype) -> bool:
    """Whether the kernel takes these settings (a power-of-two block; E4M3 or E5M2 elements)."""
    return block_size > 0 and block_size & (block_size - 1) == 0 and elem_dtype in _ENCODINGS


def quantize_mx_triton(
    x: torch.Tensor,
    dim: int = -1,
    block_size: int = 32,
    elem_dtype: torch.dtype = torch.float8_e4m3fn,
    scaling: Scaling = "floor",
) -> tuple[torch.Tensor, torch.Tensor]:
    """(qdata, scale) with blocks along `dim`, as `formats.quantize_mx_dim` gives them."""
    dim = dim % x.ndim if x.ndim else 0
    check_quantize_input(x.movedim(dim, -1) if x.ndim else x, block_size, scaling)
    fmt = element_format(elem_dtype)
    if not supports(block_size, elem_dtype):
        raise ValueError(f"quantize_mx_triton: block_size {block_size} is not a power of two")
    mantissa, bias = _ENCODINGS[elem_dtype]
    x = x.contiguous()
    before, length, after = math.prod(x.shape[:dim]), x.shape[dim], math.prod(x.shape[dim + 1 :])
    qdata = torch.empty(x.shape, dtype=torch.uint8, device=x.device)
    scale_shape = (*x.shape[:dim], length // block_size, *x.shape[dim + 1 :])
    scale = torch.empty(scale_shape, dtype=torch.uint8, device=x.device)
    columns = before * after
    if x.numel():
        grid = (length // block_size, -(-columns // COLUMNS))
        _kernel().quantize_blocks[grid](
            x, qdata, scale, length, after, columns,
            BLOCK=block_size, COLUMNS=COLUMNS, EMAX=fmt.emax, MAX_VALUE=fmt.max_value,
            MANTISSA=mantissa, BIAS=bias, RCEIL=scaling == "rceil", num_warps=NUM_WARPS,
        )  # fmt: skip
    return qdata.view(elem_dtype), scale.view(torch.float8_e8m0fnu)
