"""MX formats: bit-exactness against torchao's reference quantizer (pinned 0.18.0), and the edge cases."""

from __future__ import annotations

import warnings

import pytest
import torch

from overture.mx import dequantize_mx, dequantize_mx_dim, quantize_mx, quantize_mx_dim

E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2
ELEMENTS = [E4M3, E5M2]
SCALINGS = ["floor", "rceil"]


def bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.uint8)


def torchao_to_mx(
    x: torch.Tensor, elem_dtype: torch.dtype, scaling: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """(qdata, scale) from torchao's `to_mx`, in our return order."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mx_tensor = pytest.importorskip("torchao.prototype.mx_formats.mx_tensor")
        from torchao.prototype.mx_formats.config import ScaleCalculationMode
    mode = ScaleCalculationMode.FLOOR if scaling == "floor" else ScaleCalculationMode.RCEIL
    scale, qdata = mx_tensor.to_mx(x.contiguous(), elem_dtype, 32, scaling_mode=mode)
    return qdata, scale


def assert_matches_torchao(x: torch.Tensor, elem_dtype: torch.dtype, scaling: str) -> None:
    expected_q, expected_s = torchao_to_mx(x, elem_dtype, scaling)
    qdata, scale = quantize_mx(x, 32, elem_dtype, scaling)
    assert scale.dtype == torch.float8_e8m0fnu and qdata.dtype == elem_dtype
    assert torch.equal(bits(scale), bits(expected_s)), "scale bytes differ from torchao"
    assert torch.equal(bits(qdata), bits(expected_q)), "element bytes differ from torchao"


def wide_range(rows: int = 64, cols: int = 256, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Normal values with per-row magnitudes from 1e-30 to 1e30: every scale regime at once."""
    return (torch.randn(rows, cols) * torch.logspace(-30, 30, rows)[:, None]).to(dtype)


def edge_blocks() -> torch.Tensor:
    """One 32-wide block per row, each an edge case of the spec."""
    rows = torch.randn(11, 32)
    rows[0] = 0.0  # all-zero block
    rows[1] = -0.0  # negative zeros keep their sign
    rows[2, 3] = float("nan")  # NaN block
    rows[3, 5] = float("inf")  # Inf block
    rows[4, 1] = -float("inf")
    rows[5, 7] = 3.0e38  # near float32's max
    rows[6, 0] = 500.0  # FLOOR saturates this maximum (500 > 448 · 2^0)
    rows[7] = torch.tensor([1e-40, -2e-41] * 16) + rows[7] * 1e-3  # subnormals beside normal values
    rows[8] = torch.linspace(-1, 1, 32) * 2.0**-100  # tiny but normal
    rows[9] = torch.tensor([0.5, -1.5, 2.5, 3.5] * 8) * 2.0**-9  # E4M3 subnormal ties: nearest even
    rows[10, 2] = float("nan")
    rows[10, 3] = float("inf")
    return rows


@pytest.mark.parametrize("elem_dtype", ELEMENTS)
@pytest.mark.parametrize("scaling", SCALINGS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_random_tensors_match_torchao_bit_for_bit(elem_dtype, scaling, dtype):
    assert_matches_torchao(wide_range(dtype=dtype), elem_dtype, scaling)
    assert_matches_torchao(torch.randn(3, 5, 64).to(dtype), elem_dtype, scaling)


@pytest.mark.parametrize("elem_dtype", ELEMENTS)
@pytest.mark.parametrize("scaling", SCALINGS)
def test_edge_cases_match_torchao_bit_for_bit(elem_dtype, scaling):
    assert_matches_torchao(edge_blocks(), elem_dtype, scaling)


@pytest.mark.parametrize("elem_dtype", ELEMENTS)
def test_floor_minimum_scale_keeps_data_and_scale_consistent(elem_dtype):
    """The documented departure: for amax < 2^-118 torchao 0.18 divides by 2^-126 while storing
    2^-127; we divide by the stored 2^-127, so the block dequantizes to itself."""
    x = torch.linspace(0.1, 1.0, 32)[None] * 2.0**-125
    qdata, scale = quantize_mx(x, 32, elem_dtype, "floor")
    assert bits(scale).item() == 0
    relative = (dequantize_mx(qdata, scale) - x).abs().max() / x.abs().max()
    assert relative < 2 ** -(2 if elem_dtype == E5M2 else 3)
    torchao_q, torchao_s = torchao_to_mx(x, elem_dtype, "floor")
    assert bits(torchao_s).item() == 0
    halved = dequantize_mx(torchao_q, torchao_s).abs().max() / x.abs().max()
    assert halved == pytest.approx(0.5, rel=0.1)


@pytest.mark.parametrize("elem_dtype", ELEMENTS)
def test_rceil_minimum_scale_matches_torchao(elem_dtype):
    """Blocks whose RCEIL scale clamps to 2^-127 are scaled by 1 (Transformer Engine's reciprocal)
    and so come out as zeros, as in torchao; FLOOR departs from torchao there (test above)."""
    x = torch.randn(4, 32) * torch.tensor([1e-36, 1e-38, 1e-42, 1e-33])[:, None]
    assert_matches_torchao(x, elem_dtype, "rceil")
    qdata, scale = quantize_mx(x, 32, elem_dtype, "rceil")
    assert (bits(scale)[:3] == 0).all() and (qdata.float()[:3] == 0).all()


def test_rceil_takes_the_exact_ceiling_of_the_quotient():
    """amax / 448 one float32 ulp above 2^-10 needs scale 2^-9 (a log2 in float32 rounds to -10)."""
    amax = torch.nextafter(torch.tensor(448.0 * 2.0**-10), torch.tensor(1.0))
    x = torch.zeros(1, 32)
    x[0, 0] = amax
    qdata, scale = quantize_mx(x, 32, E4M3, "rceil")
    assert bits(scale).item() == 127 - 9
    assert qdata.float().abs().max() < 448  # no saturation
    assert dequantize_mx(qdata, scale)[0, 0] == pytest.approx(amax.item(), rel=2**-4)


@pytest.mark.parametrize("elem_dtype", ELEMENTS)
def test_spec_rules_for_zero_nan_inf_and_saturation(elem_dtype):
    x = edge_blocks()
    top = 448.0 if elem_dtype == E4M3 else 57344.0
    for scaling in SCALINGS:
        qdata, scale = quantize_mx(x, 32, elem_dtype, scaling)
        back = dequantize_mx(qdata, scale)
        assert bits(scale)[0] == 0 and torch.equal(back[0], torch.zeros(32))
        assert torch.signbit(back[1]).all()
        assert bits(scale)[2] == 255 and back[2].isnan().all()
        assert back[3, 5] == float("inf") and back[4, 1] == -float("inf")
        assert not qdata.float()[:10].isinf().any(), "finite overflow must saturate, never become Inf"
        assert bits(scale)[10] == 255
    qdata, scale = quantize_mx(x, 32, elem_dtype, "floor")
    if elem_dtype == E4M3:
        assert bits(scale)[6] == 127 and qdata.float()[6, 0] == top  # 500 saturates to 448
    qdata, scale = quantize_mx(x, 32, elem_dtype, "rceil")
    assert qdata.float()[6].abs().max() <= top and dequantize_mx(qdata, scale)[6, 0] >= 448


@pytest.mark.parametrize("elem_dtype", ELEMENTS)
@pytest.mark.parametrize("scaling", SCALINGS)
def test_round_trip_error_is_within_half_an_element_ulp(elem_dtype, scaling):
    x = torch.randn(256, 64)
    qdata, scale = quantize_mx(x, 32, elem_dtype, scaling)
    back = dequantize_mx(qdata, scale)
    mantissa_bits, top = (3, 448.0) if elem_dtype == E4M3 else (2, 57344.0)
    block_scale = scale.float().repeat_interleave(32, dim=-1)
    # Normal elements: relative error ≤ 2^-(m+1); the smallest are bounded by the subnormal step.
    bound = torch.maximum(x.abs() * 2.0 ** -(mantissa_bits + 1), block_scale * 2.0**-10)
    fits = x.abs() <= top * block_scale
    assert ((back - x).abs() <= bound)[fits].all()
    # Beyond max · X (FLOOR only) values saturate to exactly ±max · X.
    assert torch.equal(back[~fits], torch.sign(x[~fits]) * top * block_scale[~fits])
    assert fits.all() == (scaling == "rceil")


def test_dequantize_matches_torchao():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mx_tensor = pytest.importorskip("torchao.prototype.mx_formats.mx_tensor")
    qdata, scale = quantize_mx(wide_range(), 32, E4M3, "rceil")
    expected = mx_tensor.to_dtype(qdata, scale, E4M3, 32, torch.float32)
    assert torch.equal(dequantize_mx(qdata, scale), expected)


def test_blocks_along_another_dim_equal_blocks_of_the_transpose():
    x = torch.randn(64, 96)
    qdata, scale = quantize_mx_dim(x, 0, scaling="rceil")
    expected_q, expected_s = quantize_mx(x.t().contiguous(), scaling="rceil")
    assert scale.shape == (2, 96)
    assert torch.equal(bits(qdata), bits(expected_q.t())) and torch.equal(bits(scale), bits(expected_s.t()))
    assert torch.equal(dequantize_mx_dim(qdata, scale, 0), dequantize_mx(expected_q, expected_s).t())


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: quantize_mx(torch.randn(4, 30)), "multiple of block_size 32"),
        (lambda: quantize_mx(torch.randn(4, 32).double()), "input dtype torch.float64"),
        (lambda: quantize_mx(torch.randn(4, 32), scaling="even"), "scaling must be"),
        (lambda: quantize_mx(torch.randn(4, 32), elem_dtype=torch.int8), "not an MX element type"),
        (lambda: dequantize_mx(*quantize_mx(torch.randn(4, 64)), block_size=16), "do not match"),
    ],
)
def test_bad_input_is_a_clear_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()
