"""The MoE block: grouped experts equal the loop, the aux loss, bias balancing, shared expert;
the model's outputs (router outputs, logits at chosen positions)."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import tiny_model_config

from overture.model import GroupedExperts, Router, RouterOutput, Transformer, load_balancing_loss
from overture.model.moe import grouped_mm_supported


def route_for(config, tokens: int) -> RouterOutput:
    router = Router(config)
    torch.nn.init.normal_(router.weight)
    with torch.no_grad():
        return router(torch.randn(tokens, config.hidden_size))


@pytest.mark.skipif(not grouped_mm_supported(torch.zeros(1), 32, 16), reason="torch._grouped_mm unavailable")
def test_grouped_experts_equal_the_per_expert_loop_forward_and_backward():
    config = tiny_model_config()
    grouped = GroupedExperts(config.model_copy(update={"experts_impl": "grouped"}))
    loop = GroupedExperts(config.model_copy(update={"experts_impl": "loop"}))
    for weight in grouped.parameters():
        torch.nn.init.normal_(weight, std=0.2)
    loop.load_state_dict(grouped.state_dict())
    # 37 tokens: uneven groups, and with 8 experts some may be empty.
    x = torch.randn(37, config.hidden_size, requires_grad=True)
    route = route_for(config, 37)
    x_loop = x.detach().clone().requires_grad_()
    out_grouped, out_loop = grouped(x, route), loop(x_loop, route)
    torch.testing.assert_close(out_grouped, out_loop, rtol=1e-5, atol=1e-6)
    upstream = torch.randn_like(out_grouped)
    (out_grouped * upstream).sum().backward()
    (out_loop * upstream).sum().backward()
    torch.testing.assert_close(x.grad, x_loop.grad, rtol=1e-5, atol=1e-6)
    for a, b in zip(grouped.parameters(), loop.parameters(), strict=True):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-5, atol=1e-6)


def test_experts_match_a_dense_per_token_reference():
    config = tiny_model_config(experts_impl="loop")
    experts = GroupedExperts(config)
    for weight in experts.parameters():
        torch.nn.init.normal_(weight, std=0.2)
    x = torch.randn(5, config.hidden_size)
    route = route_for(config, 5)
    expected = torch.zeros_like(x)
    for t in range(5):
        for slot in range(config.num_experts_per_tok):
            e = route.indices[t, slot]
            h = torch.nn.functional.silu(experts.gate_proj[e] @ x[t]) * (experts.up_proj[e] @ x[t])
            expected[t] += route.weights[t, slot] * (experts.down_proj[e] @ h)
    torch.testing.assert_close(experts(x, route), expected, rtol=1e-5, atol=1e-6)


def route_from_probs(probs: list[list[float]], picks: list[list[int]]) -> RouterOutput:
    probs_t = torch.tensor(probs)
    indices = torch.tensor(picks)
    return RouterOutput(logits=probs_t.log(), indices=indices, weights=probs_t.gather(-1, indices))


def test_aux_loss_equals_hand_computed_example():
    # One layer, 3 experts, top-1, two tokens choosing experts 0 and 1:
    # f = [1/2, 1/2, 0], P = [(.5+.2)/2, (.3+.6)/2, (.2+.2)/2] = [.35, .45, .2]
    # loss = 3 * (.5*.35 + .5*.45 + 0) = 1.2
    layer_a = route_from_probs([[0.5, 0.3, 0.2], [0.2, 0.6, 0.2]], [[0], [1]])
    assert load_balancing_loss([layer_a], 3).item() == pytest.approx(1.2, abs=1e-6)
    # A second layer (uniform probabilities, both tokens to expert 2) pools with the first:
    # f = [1, 1, 2] / 4 rows, P = [.5+.2+2/3, .3+.6+2/3, .2+.2+2/3] / 4
    # loss = 3 * (.25*1.3667/4 + .25*1.5667/4 + .5*1.0667/4) = 0.95
    third = 1 / 3
    layer_b = route_from_probs([[third, third, third]] * 2, [[2], [2]])
    assert load_balancing_loss([layer_a, layer_b], 3).item() == pytest.approx(0.95, abs=1e-6)


def test_aux_loss_of_a_balanced_router_is_top_k():
    # Uniform probabilities and every expert chosen equally often: E * Σ (k/E)(1/E) = k.
    probs = [[0.25] * 4] * 4
    route = route_from_probs(probs, [[0, 1], [2, 3], [0, 2], [1, 3]])
    assert load_balancing_loss([route], 4).item() == pytest.approx(2.0, abs=1e-6)


def test_aux_loss_agrees_with_transformers():
    transformers = pytest.importorskip("transformers")
    from transformers.models.qwen3_moe.modeling_qwen3_moe import load_balancing_loss_func

    config = tiny_model_config(norm_topk_prob=False)
    model = Transformer(config)
    out = model(torch.randint(0, config.vocab_size, (2, 9)))
    expected = load_balancing_loss_func(
        tuple(r.logits for r in out.routes), config.num_experts, config.num_experts_per_tok
    )
    assert transformers is not None
    assert out.aux_loss.item() == pytest.approx(expected.item(), rel=1e-5)


def imbalance(counts: torch.Tensor) -> float:
    """Coefficient of variation of expert loads: 0 when uniform."""
    counts = counts.float()
    return (counts.std() / counts.mean()).item()


def test_bias_balancing_moves_an_unbalanced_load_toward_uniform():
    config = tiny_model_config(balance_bias=True, balance_bias_rate=0.02, num_experts=8)
    router = Router(config).train()
    with torch.no_grad():
        router.weight.normal_(std=0.1)
        router.weight[0] += 0.08  # most tokens prefer expert 0 ...
        router.weight[1] += 0.05  # ... then expert 1
    x = torch.randn(512, config.hidden_size).abs()
    before = router(x).tokens_per_expert(8)
    router.load.zero_()
    for _ in range(200):
        router(x)
        router.update_bias(config.balance_bias_rate)
    after = router(x)
    assert imbalance(after.tokens_per_expert(8)) < 0.5 * imbalance(before)
    # The bias steers selection only: gate weights are the unbiased (renormalised) probabilities.
    probs = torch.softmax(router.weight.detach() @ x.T, dim=0).T
    expected = probs.gather(-1, after.indices)
    torch.testing.assert_close(after.weights, expected / expected.sum(-1, keepdim=True))
    assert not router.expert_bias.requires_grad
    assert abs(router.expert_bias.sum().item()) < 1e-5


def test_model_forward_reports_router_outputs():
    config = tiny_model_config()
    model = Transformer(config)
    out = model(torch.randint(0, config.vocab_size, (2, 7)))
    moe_layers = [i for i in range(config.num_hidden_layers) if config.is_moe_layer(i)]
    assert out.logits.shape == (2, 7, config.vocab_size)
    assert out.tokens_per_expert.shape == (len(moe_layers), config.num_experts)
    assert (out.tokens_per_expert.sum(-1) == 2 * 7 * config.num_experts_per_tok).all()
    assert out.aux_loss.requires_grad and math.isfinite(out.aux_loss.item())


def test_logits_at_some_positions_are_those_rows_of_the_full_logits_with_their_gradients():
    model = Transformer(tiny_model_config())
    ids = torch.randint(0, 96, (2, 7))
    wanted = torch.zeros(2, 7, dtype=torch.bool)
    wanted[0, 2:5] = wanted[1, 6] = True
    full = model(ids).logits
    some = model(ids, logits_at=wanted).logits
    assert some.shape == (4, model.config.vocab_size)
    torch.testing.assert_close(some, full[wanted])
    weights = torch.randn_like(some)
    expected = torch.autograd.grad((full[wanted] * weights).sum(), model.embed_tokens.weight)[0]
    got = torch.autograd.grad((some * weights).sum(), model.embed_tokens.weight)[0]
    torch.testing.assert_close(got, expected)
    assert model(ids, logits_at=torch.zeros(2, 7, dtype=torch.bool)).logits.shape == (0, 96)


def test_dense_model_has_no_router_outputs():
    model = Transformer(tiny_model_config(num_experts=0))
    out = model(torch.randint(0, 96, (1, 4)))
    assert out.tokens_per_expert.shape == (0, 0) and out.aux_loss.item() == 0.0


def test_shared_expert_is_used_and_round_trips(tmp_path):
    from overture.model import load_pretrained, save_pretrained

    config = tiny_model_config(shared_expert_intermediate_size=24, balance_bias=True)
    model = Transformer(config).eval()
    with torch.no_grad():
        model.layers[0].mlp.gate.expert_bias.copy_(torch.linspace(-0.1, 0.1, 8))
    ids = torch.randint(0, 96, (1, 6))
    before = model(ids).logits
    save_pretrained(model, tmp_path)
    loaded = load_pretrained(tmp_path).eval()
    torch.testing.assert_close(loaded(ids).logits, before)
    torch.testing.assert_close(loaded.layers[0].mlp.gate.expert_bias, model.layers[0].mlp.gate.expert_bias)
    with torch.no_grad():
        model.layers[0].mlp.shared_expert.down_proj.weight.zero_()
    assert not torch.allclose(model(ids).logits, before)


def test_positions_shift_the_rotary_phase():
    model = Transformer(tiny_model_config()).eval()
    ids = torch.randint(0, 96, (1, 5))
    base = model(ids).logits
    shifted = model(ids, positions=torch.arange(3, 8)[None]).logits
    # RoPE is relative: a constant shift of every position leaves causal attention unchanged.
    torch.testing.assert_close(base, shifted, rtol=1e-4, atol=1e-5)
    stretched = model(ids, positions=torch.arange(0, 10, 2)[None]).logits
    assert not torch.allclose(base, stretched, atol=1e-4)


def test_padding_moves_neither_the_aux_loss_nor_the_expert_load():
    config = tiny_model_config(balance_bias=True)
    model = Transformer(config).train()
    ids = torch.randint(1, 96, (1, 9))
    alone = model(ids)
    loads_alone = [router.load.clone() for router in model.moe_routers()]
    for router in model.moe_routers():
        router.load.zero_()
    padded_ids = torch.cat([ids, torch.zeros(1, 7, dtype=torch.long)], dim=1)
    real = torch.arange(16)[None] < 9
    padded = model(padded_ids, token_mask=real)
    torch.testing.assert_close(padded.aux_loss, alone.aux_loss)
    assert torch.equal(padded.tokens_per_expert, alone.tokens_per_expert)
    for router, load in zip(model.moe_routers(), loads_alone, strict=True):
        assert torch.equal(router.load, load)
    # Unmasked, the padding rows would count: the statistics differ.
    assert not torch.equal(model(padded_ids).tokens_per_expert, alone.tokens_per_expert)
