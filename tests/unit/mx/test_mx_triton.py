"""The Triton MX quantization kernel: the same bits as the torch implementation, for both element
types, both scale rules, blocks along every dimension, and the spec's edge cases.

Without CUDA the kernel runs in Triton's interpreter (`TRITON_INTERPRET=1`, set below before the
kernel module is first imported), which executes the kernel's own code on the CPU: the integer
encoding, scale rules and tile addressing are what is tested. Tests marked `gpu` run the compiled
kernel on CUDA tensors, and check that `quantize_mx` and the MXFP8 ops dispatch to it.
"""

from __future__ import annotations

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

pytest.importorskip("triton", reason="Triton is a test dependency (make test installs it)")

from test_mx_formats import ELEMENTS, SCALINGS, bits, edge_blocks, wide_range

from overture.mx import quantize_mx, quantize_mx_dim
from overture.mx.triton_quantize import COLUMNS, quantize_mx_triton

NAN_CODES = (0x7F, 0xFF)

# FLOOR makes a NaN block's Inf elements NaN by multiplying them by 0, as the torch path does;
# the interpreter runs that multiply in numpy, which warns about it.
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered in multiply:RuntimeWarning")


def assert_same_quantization(x: torch.Tensor, dim: int, elem_dtype: torch.dtype, scaling: str) -> None:
    expected_q, expected_s = quantize_mx_dim(x.cpu(), dim, 32, elem_dtype, scaling)
    qdata, scale = quantize_mx_triton(x, dim, 32, elem_dtype, scaling)
    assert qdata.dtype == elem_dtype and scale.dtype == torch.float8_e8m0fnu
    assert qdata.shape == expected_q.shape and scale.shape == expected_s.shape
    assert torch.equal(bits(scale).cpu(), bits(expected_s)), "scale bytes differ"
    got, want = bits(qdata).cpu(), bits(expected_q)
    if x.is_cuda:
        # The sign of a NaN made on the device (Inf x 0) is the device's own; NaN stays NaN.
        nan = torch.isin(want, torch.tensor(NAN_CODES, dtype=torch.uint8))
        assert torch.equal(torch.isin(got, torch.tensor(NAN_CODES, dtype=torch.uint8)), nan)
        got, want = got[~nan], want[~nan]
    assert torch.equal(got, want), f"{(got != want).sum().item()} element bytes differ"


@pytest.mark.parametrize("elem_dtype", ELEMENTS)
@pytest.mark.parametrize("scaling", SCALINGS)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_random_tensors_in_both_orientations_match_the_torch_quantizer(elem_dtype, scaling, dim):
    x = wide_range(64, 96)
    x[5, 7] = float("nan")
    assert_same_quantization(x, dim, elem_dtype, scaling)


@pytest.mark.parametrize("elem_dtype", ELEMENTS)
@pytest.mark.parametrize("scaling", SCALINGS)
def test_the_edge_cases_match_the_torch_quantizer(elem_dtype, scaling):
    rows = edge_blocks()
    assert_same_quantization(rows, -1, elem_dtype, scaling)  # each row one block
    assert_same_quantization(rows.t().contiguous(), 0, elem_dtype, scaling)  # the same blocks as columns


@pytest.mark.parametrize("dim", [0, 1, 2])
def test_blocks_along_any_dimension_of_a_batched_tensor(dim):
    """Expert weights are E x N x K: blocks along N or K, the expert dimension batching."""
    x = wide_range(32, 64 * 32).reshape(32, 64, 32)
    assert_same_quantization(x, dim, torch.float8_e4m3fn, "floor")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_inputs_are_widened_exactly(dtype):
    assert_same_quantization(wide_range(64, 64).clamp(-6e4, 6e4).to(dtype), 1, torch.float8_e4m3fn, "rceil")


def test_rows_beyond_one_program_and_an_uneven_last_tile():
    # One full program of COLUMNS (p, m) pairs and one partly masked.
    assert_same_quantization(torch.randn(COLUMNS + 36, 64), -1, torch.float8_e5m2, "floor")


def test_bad_input_is_a_clear_error():
    with pytest.raises(ValueError, match="multiple of block_size 32"):
        quantize_mx_triton(torch.randn(4, 48), -1)
    with pytest.raises(ValueError, match="not a power of two"):
        quantize_mx_triton(torch.randn(4, 48), -1, block_size=24)
    with pytest.raises(ValueError, match="scaling must be"):
        quantize_mx_triton(torch.randn(4, 64), -1, scaling="round")


needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("elem_dtype", ELEMENTS)
@pytest.mark.parametrize("scaling", SCALINGS)
def test_on_cuda_the_compiled_kernel_matches_the_cpu_quantizer(elem_dtype, scaling):
    x = wide_range(256, 512).cuda()
    for dim in (0, 1):
        assert_same_quantization(x, dim, elem_dtype, scaling)
    assert_same_quantization(edge_blocks().cuda(), -1, elem_dtype, scaling)


@pytest.mark.gpu
@needs_cuda
def test_on_cuda_quantize_mx_and_the_ops_use_the_kernel():
    from overture.mx import linear

    x = torch.randn(64, 128, device="cuda")
    qdata, scale = quantize_mx(x)
    expected_q, expected_s = quantize_mx(x.cpu())
    assert torch.equal(bits(qdata).cpu(), bits(expected_q))
    assert torch.equal(bits(scale).cpu(), bits(expected_s))
    weight = torch.randn(96, 128, device="cuda", requires_grad=True)
    inputs = x.clone().requires_grad_(True)
    out = linear(inputs, weight, precision="mxfp8")
    out.sum().backward()
    cpu_inputs, cpu_weight = x.cpu().requires_grad_(True), weight.detach().cpu().requires_grad_(True)
    cpu_out = linear(cpu_inputs, cpu_weight, precision="mxfp8")
    cpu_out.sum().backward()
    torch.testing.assert_close(out.cpu(), cpu_out, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(weight.grad.cpu(), cpu_weight.grad, rtol=1e-5, atol=1e-5)
