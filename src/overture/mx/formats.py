"""MX block formats (OCP Microscaling v1.0): FP8 elements (E4M3, E5M2) sharing one E8M0 scale per block.

`quantize_mx(x)` cuts the last dimension into blocks of `block_size` values and returns the
elements (`elem_dtype`) and one scale per block (`torch.float8_e8m0fnu`, X = 2^(byte - 127));
value i of a block is X · P_i. `dequantize_mx` multiplies back. `quantize_mx_dim` /
`dequantize_mx_dim` do the same with blocks along any other dimension.

Scale choice (`scaling`):
- "floor" (the spec's algorithm): X = 2^(floor(log2 amax) - emax), emax = 8 (E4M3) or 15 (E5M2),
  read off the exponent bits of the float32 amax. The block maximum lands in [2^emax, 2^(emax+1)),
  so E4M3 maxima above 448·X saturate to ±448.
- "rceil" (cuBLAS, Transformer Engine, PTX `cvt.rp.ue8m0x2.f32`): X = 2^ceil(log2(amax / max)),
  with amax / max computed as a rounded float32 division (as torchao 0.18 does) and the ceiling
  taken exactly from its bits. Nothing saturates unless that division rounded down onto a power
  of two.

Edge cases, and the choice made for each:
- Rounding: elements round to nearest, ties to even (torch's float8 cast), after an explicit
  clamp to ±max: finite overflow saturates, it never becomes NaN or Inf. E5M2 output therefore
  never holds Inf.
- All-zero block: scale byte 0 (2^-127), elements zero (signed zeros keep their sign).
- Scale clamping: the exponent is clamped to E8M0's finite range [-127, 127]. FLOOR divides by the
  stored scale itself, 2^-127 included. (torchao 0.18 divides by 2^-126 there, float32's smallest
  normal, so for blocks with amax < 2^-118 its elements are twice what its stored scale says; we
  keep data and scale consistent instead. This is the one place FLOOR departs from torchao.)
  RCEIL at byte 0 multiplies by 1, not 2^127 (Transformer Engine's reciprocal, followed by
  torchao): such blocks (amax ≤ max·2^-127) come out as zeros.
- Subnormal inputs: no flushing; they are scaled like any value and round to the nearest element
  (often zero). A subnormal amax has FLOOR exponent -127.
- NaN anywhere in a block: scale byte 0xFF (NaN). FLOOR: NaN and Inf elements become NaN, finite
  ones ±0 (they are divided by an infinite scale). RCEIL: every element NaN. Dequantized, the
  whole block is NaN either way (NaN scale).
- Inf in a block (no NaN): FLOOR exponent is that of Inf (128 - emax); RCEIL scale byte 254. The
  Inf elements saturate to ±max and the finite ones scale to (nearly) zero, so after
  dequantization ±Inf comes back as ±max·X, which overflows float32 back to ±Inf, and the rest of
  the block is lost.
- Input dtypes float32, bfloat16 and float16 are widened to float32 first (exactly); amax and
  scales are always computed in float32. Scales are never computed by a `.to(float8_e8m0fnu)`
  cast, which rounds to nearest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

Scaling = Literal["floor", "rceil"]

E8M0_BIAS = 127
E8M0_NAN = 255
_F32_MANTISSA_BITS = 23
_F32_EXPONENT_MASK = 0xFF
_SUPPORTED_INPUTS = (torch.float32, torch.bfloat16, torch.float16)


@dataclass(frozen=True)
class ElementFormat:
    """An FP8 element type: its largest finite value and the exponent of its largest power of two."""

    dtype: torch.dtype
    max_value: float
    emax: int


ELEMENT_FORMATS = {
    torch.float8_e4m3fn: ElementFormat(torch.float8_e4m3fn, 448.0, 8),
    torch.float8_e5m2: ElementFormat(torch.float8_e5m2, 57344.0, 15),
}


def element_format(elem_dtype: torch.dtype) -> ElementFormat:
    if elem_dtype not in ELEMENT_FORMATS:
        names = ", ".join(str(d) for d in ELEMENT_FORMATS)
        raise ValueError(f"elem_dtype {elem_dtype} is not an MX element type (supported: {names})")
    return ELEMENT_FORMATS[elem_dtype]


def check_quantize_input(x: torch.Tensor, block_size: int, scaling: str) -> None:
    """A ValueError naming what is wrong with the input, block size or scale rule."""
    if x.dtype not in _SUPPORTED_INPUTS:
        raise ValueError(f"quantize_mx: input dtype {x.dtype} (expected float32, bfloat16 or float16)")
    if block_size <= 0:
        raise ValueError(f"quantize_mx: block_size must be positive, got {block_size}")
    if x.ndim == 0 or x.shape[-1] % block_size:
        raise ValueError(
            f"quantize_mx: the last dimension of shape {tuple(x.shape)} must be a multiple of "
            f"block_size {block_size}"
        )
    if scaling not in ("floor", "rceil"):
        raise ValueError(f"quantize_mx: scaling must be 'floor' or 'rceil', got {scaling!r}")


def _power_of_two(biased: torch.Tensor, negate: bool = False) -> torch.Tensor:
    """2^(byte - 127) (or 2^(127 - byte) with `negate`) as exact float32, for bytes 0..254.

    Built from bits rather than `exp2` so that no libm rounding can creep in; the one value
    outside float32's normal range, 2^-127, is subnormal and set explicitly.
    """
    exponent = (254 - biased) if negate else biased
    value = torch.bitwise_left_shift(exponent.to(torch.int32).clamp(min=1), _F32_MANTISSA_BITS)
    return torch.where(exponent == 0, torch.tensor(2.0**-127), value.view(torch.float32))


def _floor_scale_byte(amax: torch.Tensor, fmt: ElementFormat) -> torch.Tensor:
    """FLOOR: the exponent field of the float32 amax (-127 for zero and subnormals) minus emax."""
    field = torch.bitwise_right_shift(amax.view(torch.int32), _F32_MANTISSA_BITS) & _F32_EXPONENT_MASK
    unbiased = (field - E8M0_BIAS - fmt.emax).clamp(-E8M0_BIAS, E8M0_BIAS)
    return torch.where(torch.isnan(amax), E8M0_NAN, unbiased + E8M0_BIAS)


def _rceil_scale_byte(amax: torch.Tensor, fmt: ElementFormat) -> torch.Tensor:
    """RCEIL: ceil(log2(amax / max)), exact on the float32 quotient (frexp in float64 sees
    float32 subnormals as normal numbers); Inf → 254 and NaN → 255 as the PTX instruction does."""
    descale = (amax / fmt.max_value).double()
    mantissa, exponent = torch.frexp(descale)
    ceil_log2 = exponent - (mantissa == 0.5).to(exponent.dtype)
    ceil_log2 = torch.where(descale == 0, -E8M0_BIAS, ceil_log2).clamp(-E8M0_BIAS, E8M0_BIAS)
    byte = (ceil_log2 + E8M0_BIAS).to(torch.int32)
    byte = torch.where(torch.isinf(descale), E8M0_BIAS * 2, byte)
    return torch.where(torch.isnan(descale), E8M0_NAN, byte)


def _element_multiplier(byte: torch.Tensor, scaling: str) -> torch.Tensor:
    """What each element is multiplied by before rounding: 1 / X, with the NaN and minimum-scale
    choices of the module docstring (FLOOR NaN: 0, as dividing by an infinite scale; RCEIL NaN: NaN;
    RCEIL byte 0: 1)."""
    reciprocal = _power_of_two(byte.clamp(max=254), negate=True)
    if scaling == "floor":
        return torch.where(byte == E8M0_NAN, 0.0, reciprocal)
    reciprocal = torch.where(byte == 0, 1.0, reciprocal)
    return torch.where(byte == E8M0_NAN, float("nan"), reciprocal)


def quantize_mx(
    x: torch.Tensor,
    block_size: int = 32,
    elem_dtype: torch.dtype = torch.float8_e4m3fn,
    scaling: Scaling = "floor",
) -> tuple[torch.Tensor, torch.Tensor]:
    """(qdata, scale): `x` in blocks of `block_size` along its last dim, elements in `elem_dtype`
    (qdata has x's shape) and one `torch.float8_e8m0fnu` scale per block (shape[-1] // block_size).
    CUDA tensors go to the Triton kernel (`triton_quantize`) when it is installed: same bits."""
    check_quantize_input(x, block_size, scaling)
    fmt = element_format(elem_dtype)
    if _on_kernel(x, block_size, elem_dtype):
        from overture.mx.triton_quantize import quantize_mx_triton

        return quantize_mx_triton(x, -1, block_size, elem_dtype, scaling)
    blocks = x.float().reshape(*x.shape[:-1], x.shape[-1] // block_size, block_size)
    amax = blocks.abs().amax(-1, keepdim=True)
    byte = _floor_scale_byte(amax, fmt) if scaling == "floor" else _rceil_scale_byte(amax, fmt)
    scaled = blocks * _element_multiplier(byte, scaling)
    # An explicit clamp: older eager float8 casts did not saturate (clamp keeps NaN).
    elements = scaled.clamp(-fmt.max_value, fmt.max_value).to(elem_dtype)
    scale = byte.squeeze(-1).to(torch.uint8).view(torch.float8_e8m0fnu)
    return elements.reshape(x.shape), scale


def _on_kernel(x: torch.Tensor, block_size: int, elem_dtype: torch.dtype) -> bool:
    """Whether `x` is quantized by the Triton kernel: a CUDA tensor, Triton installed, settings it takes."""
    if not x.is_cuda:
        return False
    from overture.mx import triton_quantize

    return triton_quantize.available() and triton_quantize.supports(block_size, elem_dtype)


def dequantize_mx(
    qdata: torch.Tensor, scale: torch.Tensor, block_size: int = 32, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """Back to `dtype`: each element times its block's scale (a NaN scale makes its block NaN)."""
    if qdata.shape[:-1] != scale.shape[:-1] or qdata.shape[-1] != scale.shape[-1] * block_size:
        raise ValueError(
            f"dequantize_mx: qdata {tuple(qdata.shape)} and scale {tuple(scale.shape)} do not match "
            f"block_size {block_size}"
        )
    byte = scale.view(torch.uint8).to(torch.int32)
    factor = torch.where(byte == E8M0_NAN, float("nan"), _power_of_two(byte.clamp(max=254)))
    blocks = qdata.float().reshape(*scale.shape, block_size) * factor[..., None]
    return blocks.reshape(qdata.shape).to(dtype)


def quantize_mx_dim(
    x: torch.Tensor,
    dim: int,
    block_size: int = 32,
    elem_dtype: torch.dtype = torch.float8_e4m3fn,
    scaling: Scaling = "floor",
) -> tuple[torch.Tensor, torch.Tensor]:
    """`quantize_mx` with blocks along `dim`: qdata has x's shape, scale has x's shape with
    `dim` divided by `block_size` (both in x's layout). On the Triton kernel (CUDA), one pass over
    `x` whatever `dim` is; otherwise the torch implementation on a moved view."""
    if _on_kernel(x, block_size, elem_dtype):
        from overture.mx.triton_quantize import quantize_mx_triton

        return quantize_mx_triton(x, dim, block_size, elem_dtype, scaling)
    qdata, scale = quantize_mx(x.movedim(dim, -1), block_size, elem_dtype, scaling)
    return qdata.movedim(-1, dim), scale.movedim(-1, dim)


def dequantize_mx_dim(
    qdata: torch.Tensor,
    scale: torch.Tensor,
    dim: int,
    block_size: int = 32,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """Inverse of `quantize_mx_dim`."""
    return dequantize_mx(qdata.movedim(dim, -1), scale.movedim(dim, -1), block_size, dtype).movedim(-1, dim)
