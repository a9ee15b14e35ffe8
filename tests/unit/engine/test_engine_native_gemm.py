"""The C decode GEMMs against torch: dense projections and the model's own MoE experts, batch
invariance, errors, and an engine serving through them against one on torch's GEMMs."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import assert_engine_option_changes_nothing, tiny_model_config

from overture.engine import Engine, native_gemm
from overture.engine.packed_decode import PackedDecoder
from overture.model import Transformer
from overture.model.moe import GroupedExperts, RouterOutput

needs_kernel = pytest.mark.skipif(
    native_gemm.library() is None, reason="no C compiler to build the kernel with"
)


def experts_and_routes(tokens: int, dim: int = 64, hidden: int = 32, experts: int = 8, top_k: int = 2):
    config = tiny_model_config(hidden_size=dim, moe_intermediate_size=hidden, num_experts=experts)
    module = GroupedExperts(config)
    for weight in (module.gate_proj, module.up_proj, module.down_proj):
        torch.nn.init.normal_(weight, std=0.2)
    router = torch.nn.Linear(dim, experts, bias=False)
    x = torch.randn(tokens, dim)
    with torch.no_grad():
        weights, indices = torch.topk(torch.softmax(router(x), dim=-1), top_k, dim=-1)
    gate_up = torch.cat([module.gate_proj, module.up_proj], dim=1)
    packed = native_gemm.transposed(gate_up), native_gemm.transposed(module.down_proj)
    return module, x, indices, weights / weights.sum(-1, keepdim=True), packed


@needs_kernel
@pytest.mark.parametrize(("rows", "depth", "width"), [(1, 64, 512), (7, 32, 80), (32, 256, 4096), (5, 24, 9)])
def test_linear_computes_torchs_linear(rows, depth, width):
    # Widths of whole 64-column tiles, 16-column tiles and single columns; 4-row groups and the rest.
    x, weight = torch.randn(rows, depth), torch.randn(width, depth)
    got = native_gemm.linear(x, native_gemm.transposed(weight))
    assert got.shape == (rows, width)
    assert (got - F.linear(x, weight)).abs().max().item() < 1e-4


@needs_kernel
@pytest.mark.parametrize(
    ("tokens", "dim", "hidden"), [(1, 64, 32), (3, 64, 32), (8, 64, 32), (33, 64, 32), (9, 40, 24)]
)
def test_the_kernel_computes_the_models_experts(tokens, dim, hidden):
    module, x, indices, weights, packed = experts_and_routes(tokens, dim, hidden)
    with torch.no_grad():
        want = module(x, RouterOutput(logits=torch.empty(0), indices=indices, weights=weights))
    got = native_gemm.routed_experts(x, indices, weights, *packed)
    assert got.shape == want.shape
    assert (got - want).abs().max().item() < 1e-5
    assert want.abs().mean().item() > 1e-2  # the comparison is not between zeros


@needs_kernel
def test_a_rows_result_does_not_depend_on_the_rest_of_the_batch():
    # 4-row and 1-row tiles, one expert shared by many tokens or by one: bitwise the same rows.
    _, x, indices, weights, packed = experts_and_routes(23, dim=80, hidden=40)
    batched = native_gemm.routed_experts(x, indices, weights, *packed)
    weight_t = native_gemm.transposed(torch.randn(200, 80))
    projected = native_gemm.linear(x, weight_t)
    for row in range(x.shape[0]):
        one = slice(row, row + 1)
        alone = native_gemm.routed_experts(x[one], indices[one], weights[one], *packed)
        assert torch.equal(alone[0], batched[row])
        assert torch.equal(native_gemm.linear(x[one], weight_t)[0], projected[row])


@needs_kernel
def test_bad_arguments_are_refused_with_what_is_wrong():
    _, x, indices, weights, packed = experts_and_routes(4)
    with pytest.raises(ValueError, match="outside 0 … 7"):
        native_gemm.routed_experts(x, torch.full_like(indices, 8), weights, *packed)
    with pytest.raises(ValueError, match="outside 0 … 7"):
        native_gemm.routed_experts(x, torch.full_like(indices, -1), weights, *packed)
    with pytest.raises(ValueError, match="do not fit rows of width 48"):
        native_gemm.routed_experts(x[:, :48], indices, weights, *packed)
    with pytest.raises(ValueError, match="do not fit 3 rows"):
        native_gemm.routed_experts(x[:3], indices, weights, *packed)
    with pytest.raises(ValueError, match=r"weights must be torch\.float32"):
        native_gemm.routed_experts(x, indices, weights.double(), *packed)
    gate_up, down = packed
    with pytest.raises(ValueError, match="contiguous"):
        native_gemm.routed_experts(
            x, indices, weights, gate_up, down.transpose(1, 2).contiguous().transpose(1, 2)
        )
    weight_t = native_gemm.transposed(torch.randn(16, 64))
    with pytest.raises(ValueError, match=r"x \(4, 32\) does not fit the transposed weight \(64, 16\)"):
        native_gemm.linear(x[:, :32], weight_t)
    with pytest.raises(ValueError, match="contiguous"):
        native_gemm.linear(x, torch.randn(16, 64).t())
    with pytest.raises(ValueError, match=r"x must be torch\.float32"):
        native_gemm.linear(x.double(), weight_t)
    assert not native_gemm.supports(torch.zeros(4, 4, dtype=torch.bfloat16))


@needs_kernel
def test_an_engine_on_the_kernel_samples_as_one_on_torchs_gemms():
    model = Transformer(tiny_model_config(initializer_range=0.2)).eval()
    assert PackedDecoder(model).native_gemm
    assert not PackedDecoder(model, native_gemm=False).native_gemm
    model.set_precision("bf16")  # rounded operands: torch's GEMMs
    assert not PackedDecoder(model).native_gemm
    assert_engine_option_changes_nothing("native_gemm")


def test_without_a_compiler_the_engine_runs_torchs_gemms(no_compiler):
    assert native_gemm.library() is None
    _, x, indices, weights, packed = experts_and_routes(2)
    with pytest.raises(RuntimeError, match="not built"):
        native_gemm.routed_experts(x, indices, weights, *packed)
    model = Transformer(tiny_model_config(initializer_range=0.2)).eval()
    with Engine(model) as engine:
        assert not engine._scheduler.forward.decoder.native_gemm
        (out,) = engine.generate([[1, 2, 3]], max_new_tokens=4, temperature=0.0)
    assert len(out.token_ids) == 4
