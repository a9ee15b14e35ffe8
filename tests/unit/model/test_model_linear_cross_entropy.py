"""The chunked LM-head cross-entropy equals the one through full logits, values and gradients."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import tiny_model_config

from overture.model import Transformer
from overture.model.linear_cross_entropy import linear_cross_entropy


def _inputs(rows: int, width: int, vocab: int, dtype=torch.float64, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    hidden = torch.randn(rows, width, generator=generator, dtype=dtype).requires_grad_()
    weight = torch.randn(vocab, width, generator=generator, dtype=dtype).requires_grad_()
    targets = torch.randint(0, vocab, (rows,), generator=generator)
    return hidden, weight, targets


@pytest.mark.parametrize("chunk_rows", [1, 3, 7, 64])
def test_sum_and_gradients_equal_cross_entropy_of_the_full_logits(chunk_rows):
    hidden, weight, targets = _inputs(rows=10, width=6, vocab=13)
    expected = F.cross_entropy(hidden @ weight.t(), targets, reduction="sum")
    expected_grads = torch.autograd.grad(expected, (hidden, weight))
    got = linear_cross_entropy(hidden, weight, targets, chunk_rows=chunk_rows)
    got_grads = torch.autograd.grad(got * 0.5, (hidden, weight))
    torch.testing.assert_close(got, expected)
    for mine, reference in zip(got_grads, expected_grads, strict=True):
        torch.testing.assert_close(mine, reference * 0.5)


def test_gradients_pass_a_finite_difference_check():
    hidden, weight, targets = _inputs(rows=5, width=3, vocab=7, seed=1)
    assert torch.autograd.gradcheck(
        lambda h, w: linear_cross_entropy(h, w, targets, chunk_rows=2), (hidden, weight)
    )


def test_without_gradients_only_the_sum_is_computed():
    hidden, weight, targets = _inputs(rows=9, width=4, vocab=11, dtype=torch.float32)
    with torch.no_grad():
        value = linear_cross_entropy(hidden, weight, targets, chunk_rows=4)
    assert not value.requires_grad
    torch.testing.assert_close(value, F.cross_entropy(hidden @ weight.t(), targets, reduction="sum").detach())


def test_a_bfloat16_head_sums_in_float32():
    hidden, weight, targets = _inputs(rows=8, width=4, vocab=9, dtype=torch.bfloat16)
    value = linear_cross_entropy(hidden, weight, targets)
    assert value.dtype == torch.float32
    value.backward()
    assert hidden.grad.dtype == weight.grad.dtype == torch.bfloat16
    reference = F.cross_entropy(hidden.float() @ weight.float().t(), targets, reduction="sum")
    torch.testing.assert_close(value, reference.detach())


def test_the_model_returns_the_loss_of_its_targets_with_the_gradients_of_its_logits():
    """Every parameter's gradient (the tied embedding's included) matches the full-logits loss."""
    torch.manual_seed(0)
    # float64 throughout; the grouped expert kernel takes float32 at least, the loop any dtype
    config = tiny_model_config(vocab_size=64, tie_word_embeddings=True, experts_impl="loop")
    model = Transformer(config).double()
    ids = torch.randint(0, 64, (2, 9))
    inputs, targets = ids[:, :-1], ids[:, 1:]
    out = model(inputs)
    assert out.target_loss_sum is None
    F.cross_entropy(out.logits.flatten(0, 1), targets.flatten(), reduction="sum").backward()
    expected = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    fused = model(inputs, targets=targets)
    assert fused.logits is None
    reference = F.cross_entropy(out.logits.flatten(0, 1), targets.flatten(), reduction="sum")
    torch.testing.assert_close(fused.target_loss_sum, reference.detach())
    fused.target_loss_sum.backward()
    got = {name: p.grad for name, p in model.named_parameters() if p.grad is not None}
    assert got.keys() == expected.keys()
    for name in expected:
        torch.testing.assert_close(got[name], expected[name], msg=name)


def test_bad_inputs_are_named():
    hidden, weight, targets = _inputs(rows=4, width=3, vocab=5)
    with pytest.raises(ValueError, match="token ids in \\[0, 5\\), got"):
        linear_cross_entropy(hidden, weight, targets + 5)
    with pytest.raises(ValueError, match="do not match hidden"):
        linear_cross_entropy(hidden, weight, targets[:3])
    with pytest.raises(ValueError, match="are not N×H and V×H"):
        linear_cross_entropy(hidden, weight[:, :2], targets)
    with pytest.raises(ValueError, match="chunk_rows must be >= 1"):
        linear_cross_entropy(hidden, weight, targets, chunk_rows=0)
    model = Transformer(tiny_model_config(vocab_size=32))
    ids = torch.randint(0, 32, (1, 5))
    with pytest.raises(ValueError, match="logits_at or targets, not both"):
        model(ids, targets=ids, logits_at=torch.ones(1, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match="targets and input_ids differ in shape"):
        model(ids, targets=ids[:, 1:])
