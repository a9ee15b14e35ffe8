"""The Triton kernel of MX quantization and its device functions (`triton_quantize` explains it).

Imports Triton at module level, as Triton's interpreter resolves called `@triton.jit` functions
by module globals; `triton_quantize` imports this module only when it runs the kernel.
"""

import triton
import triton.language as tl


@triton.jit
def scale_bytes(amax, has_nan, EMAX: tl.constexpr, MAX_VALUE: tl.constexpr, RCEIL: tl.constexpr):
    """E8M0 byte of each block (formats._floor_scale_byte / _rceil_scale_byte)."""
    if RCEIL:
        # ceil(log2(amax / max)) on the correctly rounded float32 quotient, from its bits.
        quotient = tl.math.div_rn(amax, MAX_VALUE)
        bits = quotient.to(tl.int32, bitcast=True)
        field = (bits >> 23) & 0xFF
        normal = field - 127 + ((bits & 0x7FFFFF) != 0).to(tl.int32)
        # A subnormal quotient is above 2^-127 (ceil -126) or at most 2^-127 (ceil ≤ -127).
        subnormal = tl.where(bits > 0x00400000, -126, -127)
        exponent = tl.where(field == 0, subnormal, normal)
        byte = tl.minimum(tl.maximum(exponent, -127), 127) + 127
        byte = tl.where(field == 0xFF, 254, byte)  # an infinite quotient
    else:
        field = (amax.to(tl.int32, bitcast=True) >> 23) & 0xFF
        byte = tl.minimum(tl.maximum(field - 127 - EMAX, -127), 127) + 127
    return tl.where(has_nan, 255, byte)


@triton.jit
def element_multiplier(byte, RCEIL: tl.constexpr):
    """1 / X exactly, with formats._element_multiplier's NaN and minimum-scale choices."""
    exponent = 254 - tl.minimum(byte, 254)
    power = (tl.maximum(exponent, 1) << 23).to(tl.float32, bitcast=True)
    smallest = tl.full(byte.shape, 0x00400000, tl.int32).to(tl.float32, bitcast=True)  # 2^-127
    reciprocal = tl.where(exponent == 0, smallest, power)
    if RCEIL:
        nan = tl.full(byte.shape, 0x7FC00000, tl.int32).to(tl.float32, bitcast=True)
        reciprocal = tl.where(byte == 0, 1.0, reciprocal)
        reciprocal = tl.where(byte == 255, nan, reciprocal)
    else:
        reciprocal = tl.where(byte == 255, 0.0, reciprocal)
    return reciprocal


@triton.jit
def encode(value, MANTISSA: tl.constexpr, BIAS: tl.constexpr):
    """float32 (already within ±max, or NaN) → FP8 bits, rounding to nearest even."""
    bits = value.to(tl.int32, bitcast=True)
    sign = ((bits >> 31) & 1) << 7
    magnitude = bits & 0x7FFFFFFF
    dropped: tl.constexpr = 23 - MANTISSA
    rounded = magnitude + ((1 << (dropped - 1)) - 1) + ((magnitude >> dropped) & 1)
    field = (rounded >> 23) - (127 - BIAS)
    normal = (field << MANTISSA) | ((rounded >> dropped) & ((1 << MANTISSA) - 1))
    # Below the smallest normal 2^(1 - BIAS): a multiple of the smallest subnormal, rounded to
    # nearest even by the float32 addition of 2^23 (the product by a power of two is exact).
    absolute = magnitude.to(tl.float32, bitcast=True)
    subnormal = absolute < 2.0 ** (1 - BIAS)  # false for NaN
    below = tl.where(subnormal, absolute, 0.0)  # nothing else reaches the integer conversion
    steps = (below * (2.0 ** (BIAS - 1 + MANTISSA)) + 8388608.0) - 8388608.0
    code = tl.where(subnormal, steps.to(tl.int32), normal)
    code = tl.where(value != value, 0x7F, code)
    return (code | sign).to(tl.uint8)


@triton.jit
def quantize_blocks(
    x_ptr, q_ptr, s_ptr, L, M, columns,
    BLOCK: tl.constexpr, COLUMNS: tl.constexpr, EMAX: tl.constexpr, MAX_VALUE: tl.constexpr,
    MANTISSA: tl.constexpr, BIAS: tl.constexpr, RCEIL: tl.constexpr,
):  # fmt: skip
    block = tl.program_id(0)
    column = tl.program_id(1).to(tl.int64) * COLUMNS + tl.arange(0, COLUMNS)
    in_range = column < columns
    p, m = column // M, column % M
    rows = block * BLOCK + tl.arange(0, BLOCK)
    offsets = p[None, :] * L * M + rows[:, None].to(tl.int64) * M + m[None, :]
    x = tl.load(x_ptr + offsets, mask=in_range[None, :], other=0.0).to(tl.float32)
    is_nan = x != x
    has_nan = tl.max(is_nan.to(tl.int32), axis=0) > 0
    amax = tl.max(tl.where(is_nan, 0.0, tl.abs(x)), axis=0)
    byte = scale_bytes(amax, has_nan, EMAX, MAX_VALUE, RCEIL)
    scaled = x * element_multiplier(byte, RCEIL)[None, :]
    clamped = tl.minimum(tl.maximum(scaled, -MAX_VALUE), MAX_VALUE)
    scaled = tl.where(scaled != scaled, scaled, clamped)
    tl.store(q_ptr + offsets, encode(scaled, MANTISSA, BIAS), mask=in_range[None, :])
    scale_offsets = p * (L // BLOCK) * M + block * M + m
    tl.store(s_ptr + scale_offsets, byte.to(tl.uint8), mask=in_range)
