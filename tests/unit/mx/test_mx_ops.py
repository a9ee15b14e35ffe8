"""Low-precision GEMM ops: gradients against a reference built from quantize/dequantize + float32
matmul, and the orientation in which each GEMM quantizes its operands."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import overture.mx.gemm as gemm
from overture.mx import DEFAULT_RECIPE, dequantize_mx, grouped_linear, linear, quantize_mx

M, K, N = 64, 128, 96  # distinct, so every operand's shape says which GEMM it belongs to


def mx(t: torch.Tensor, gradient: bool = False) -> torch.Tensor:
    """Reference: `t` in MX blocks along its last dim, zero-padded to whole blocks, back in float32."""
    size = t.shape[-1]
    padded = F.pad(t, [0, -size % 32])
    elem = DEFAULT_RECIPE.grad_elem_dtype if gradient else DEFAULT_RECIPE.elem_dtype
    qdata, scale = quantize_mx(padded.contiguous(), 32, elem, DEFAULT_RECIPE.scaling)
    return dequantize_mx(qdata, scale)[..., :size]


def reference_linear(x: torch.Tensor, w: torch.Tensor, dy: torch.Tensor):
    """Y, dX, dW of Y = X Wᵀ with each operand quantized along the dim its GEMM contracts."""
    y = mx(x) @ mx(w).t()  # X and W along K
    dx = mx(dy, gradient=True) @ mx(w.t()).t()  # dY and W along N
    dw = mx(dy.t(), gradient=True) @ mx(x.t()).t()  # dYᵀ and Xᵀ along M
    return y, dx, dw


def run_linear(x, w, dy, precision="mxfp8"):
    x, w = x.clone().requires_grad_(), w.clone().requires_grad_()
    y = linear(x, w, precision=precision)
    y.backward(dy)
    return y.detach(), x.grad, w.grad


def close(actual: torch.Tensor, expected: torch.Tensor) -> None:
    # Same quantized operands, float32 products: only the summation order may differ.
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("tokens", [M, 40])  # 40: the token blocks of dW need zero padding
def test_linear_forward_and_gradients_match_the_reference(tokens):
    x, w, dy = torch.randn(tokens, K), torch.randn(N, K), torch.randn(tokens, N)
    for actual, expected in zip(run_linear(x, w, dy), reference_linear(x, w, dy), strict=True):
        close(actual, expected)
    # And they are not the float32 results: the test would see a missing quantization.
    assert (run_linear(x, w, dy)[2] - run_linear(x, w, dy, "fp32")[2]).abs().max() > 1e-2


def test_linear_keeps_leading_dims_and_adds_the_bias_in_high_precision():
    x, w, b = torch.randn(2, 3, K), torch.randn(N, K), torch.randn(N)
    y = linear(x, w, b, "mxfp8")
    assert y.shape == (2, 3, N)
    close(y, (mx(x.reshape(6, K)) @ mx(w).t()).reshape(2, 3, N) + b)


def test_fp32_is_plain_linear_and_bf16_rounds_operands():
    x, w, dy = torch.randn(M, K), torch.randn(N, K), torch.randn(M, N)
    assert torch.equal(linear(x, w, precision="fp32"), F.linear(x, w))
    y, dx, dw = run_linear(x, w, dy, "bf16")
    b = lambda t: t.bfloat16().float()  # noqa: E731
    close(y, b(x) @ b(w).t())
    close(dx, b(dy) @ b(w))
    close(dw, b(dy).t() @ b(x))


def test_each_gemm_quantizes_along_the_dim_it_contracts(monkeypatch):
    """Record (operand shape, size of the quantized dim) for every quantization."""
    seen: list[tuple[tuple[int, ...], int]] = []
    original = gemm.quantize_mx_dim

    def spy(t, dim, *args):
        seen.append((tuple(t.shape), t.shape[dim]))
        return original(t, dim, *args)

    monkeypatch.setattr(gemm, "quantize_mx_dim", spy)
    x = torch.randn(M, K, requires_grad=True)
    w = torch.randn(N, K, requires_grad=True)
    y = linear(x, w, precision="mxfp8")
    assert seen == [((M, K), K), ((K, N), K)]  # forward: X and Wᵀ along K
    seen.clear()
    y.backward(torch.randn(M, N))
    assert seen == [
        ((M, N), N),  # dX = dY W: dY along N
        ((N, K), N),  # ... and W along N
        ((N, M), M),  # dW = dYᵀ X: dYᵀ along the tokens
        ((M, K), M),  # ... and X along the tokens
    ]


def reference_grouped(x, w, dy, counts):
    """Per-expert reference: each group's tokens quantized on their own for dW."""
    ys, dxs, dws = [], [], []
    for rows, we, g in zip(x.split(counts), w.unbind(0), dy.split(counts), strict=True):
        y, dx, dw = reference_linear(rows, we, g)
        ys.append(y), dxs.append(dx), dws.append(dw)
    return torch.cat(ys), torch.cat(dxs), torch.stack(dws)


def run_grouped(x, w, dy, counts, precision="mxfp8"):
    x, w = x.clone().requires_grad_(), w.clone().requires_grad_()
    y = grouped_linear(x, w, torch.tensor(counts), precision)
    y.backward(dy)
    return y.detach(), x.grad, w.grad


def test_grouped_forward_and_gradients_match_the_reference():
    counts = [5, 0, 37, 22]  # uneven groups and an empty one
    x, w, dy = torch.randn(sum(counts), K), torch.randn(4, N, K), torch.randn(sum(counts), N)
    actual = run_grouped(x, w, dy, counts)
    for a, e in zip(actual, reference_grouped(x, w, dy, counts), strict=True):
        close(a, e)
    assert torch.equal(actual[2][1], torch.zeros(N, K))


def test_weight_gradient_blocks_never_mix_two_experts_tokens():
    """Expert 0's 10 tokens are 1e4 times larger than expert 1's 7. If one 32-token block held
    both, expert 1's values would share expert 0's scale and vanish from its weight gradient."""
    counts = [10, 7]
    x = torch.cat([torch.randn(10, K) * 1e4, torch.randn(7, K) * 1e-3])
    dy = torch.cat([torch.randn(10, N) * 1e4, torch.randn(7, N) * 1e-3])
    w = torch.randn(2, N, K)
    _, _, dw = run_grouped(x, w, dy, counts)
    exact = dy[10:].t() @ x[10:]
    assert (dw[1] - exact).norm() / exact.norm() < 0.1


def test_grouped_checks_its_counts():
    with pytest.raises(ValueError, match="do not split 10 rows over 2 groups"):
        grouped_linear(torch.randn(10, K), torch.randn(2, N, K), [4, 5], "mxfp8")
    with pytest.raises(ValueError, match="precision 'fp8'"):
        linear(torch.randn(4, K), torch.randn(N, K), precision="fp8")
