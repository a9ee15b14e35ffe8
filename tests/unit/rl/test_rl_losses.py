"""The decoupled PPO loss against a direct per-token implementation of each formula, finite
differences, and the exact tokens that clipping, truncation and masking touch."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from overture.config import RLConfig
from overture.rl.losses import PolicyLossInputs, aggregation_weights, policy_loss


def direct_loss_and_grad(
    current: list[float],
    proximal: list[float],
    behavior: list[float],
    advantages: list[float],
    weights: list[float],
    sequences: list[int],
    reference: list[float] | None,
    rl: RLConfig,
) -> tuple[float, list[float]]:
    """The formulas of losses.py written out token by token, with the gradient by hand."""
    log_w = [p - b for p, b in zip(proximal, behavior, strict=True)]
    if rl.is_level == "sequence":
        per_sequence = {s: sum(w for w, t in zip(log_w, sequences, strict=True) if t == s) for s in sequences}
        log_w = [per_sequence[s] for s in sequences]
    total, grads = 0.0, []
    for t, logp in enumerate(current):
        ratio = math.exp(logp - proximal[t])
        a = advantages[t]
        w = math.exp(log_w[t])
        if rl.is_correction == "tis":
            w = min(w, rl.is_bound)
        elif rl.is_correction == "mis":
            w = w if 1 / rl.is_bound <= w <= rl.is_bound else 0.0
        else:
            w = 1.0
        unclipped = ratio * a
        clipped = min(max(ratio, 1 - rl.clip_low), 1 + rl.clip_high) * a
        surrogate = -min(unclipped, clipped)
        # d/dlogp of -ratio·A is -ratio·A while the unclipped branch is the smaller one
        grad = -ratio * a if unclipped <= clipped else 0.0
        loss_t = w * surrogate
        grad_t = w * grad
        if rl.kl_coef > 0:
            q = reference[t] - logp
            loss_t += rl.kl_coef * (math.exp(q) - q - 1)
            grad_t += rl.kl_coef * (1 - math.exp(q))
        total += weights[t] * loss_t
        grads.append(weights[t] * grad_t)
    return total, grads


def random_case(count: int = 12, seed: int = 0) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)

    def noise(scale: float) -> torch.Tensor:
        return torch.randn(count, generator=generator, dtype=torch.float64) * scale

    behavior = -1.0 - noise(1.0).abs()
    proximal = behavior + noise(0.6)
    return {
        "current": proximal + noise(0.4),
        "proximal": proximal,
        "behavior": behavior,
        "advantages": noise(1.0),
        "weights": torch.rand(count, generator=generator, dtype=torch.float64),
        "sequences": torch.arange(count) // 4,
        "reference": proximal + noise(0.3),
    }


CONFIGS = [
    RLConfig(is_correction=c, is_level=level, kl_coef=kl, clip_low=0.2, clip_high=0.28, is_bound=1.5)
    for c, level, kl in itertools.product(("tis", "mis", "none"), ("token", "sequence"), (0.0, 0.1))
]


@pytest.mark.parametrize("rl", CONFIGS, ids=lambda r: f"{r.is_correction}-{r.is_level}-kl{r.kl_coef}")
def test_loss_and_gradient_match_the_direct_formulas(rl):
    case = random_case()
    current = case["current"].clone().requires_grad_(True)
    inputs = PolicyLossInputs(
        logprobs=current,
        behavior_logprobs=case["behavior"],
        advantages=case["advantages"],
        weights=case["weights"],
        sequence_ids=case["sequences"],
        proximal_logprobs=case["proximal"],
        reference_logprobs=case["reference"],
    )
    loss, _ = policy_loss(inputs, rl)
    loss.backward()
    expected, grads = direct_loss_and_grad(
        *(
            case[k].tolist()
            for k in ("current", "proximal", "behavior", "advantages", "weights", "sequences")
        ),
        case["reference"].tolist(),
        rl,
    )
    assert loss.item() == pytest.approx(expected, rel=1e-10, abs=1e-12)
    assert current.grad.tolist() == pytest.approx(grads, rel=1e-9, abs=1e-12)


def test_gradient_matches_finite_differences():
    rl = RLConfig(is_correction="tis", is_level="sequence", kl_coef=0.05, is_bound=2.0)
    case = random_case(count=6, seed=3)

    def loss_of(current: torch.Tensor) -> torch.Tensor:
        inputs = PolicyLossInputs(
            logprobs=current,
            behavior_logprobs=case["behavior"],
            advantages=case["advantages"],
            weights=case["weights"],
            sequence_ids=case["sequences"],
            proximal_logprobs=case["proximal"],
            reference_logprobs=case["reference"],
        )
        return policy_loss(inputs, rl)[0]

    # float64 and random ratios: no token sits on a clip boundary, where the loss has a kink.
    assert torch.autograd.gradcheck(loss_of, (case["current"].clone().requires_grad_(True),))


def test_clipping_hits_exactly_the_tokens_outside_the_asymmetric_band():
    rl = RLConfig(clip_low=0.2, clip_high=0.28, is_correction="none")
    ratios = torch.tensor([0.7, 0.7, 1.0, 1.3, 1.3, 1.25, 0.85], dtype=torch.float64)
    advantages = torch.tensor([-1.0, 1.0, 1.0, 1.0, -1.0, 1.0, -1.0], dtype=torch.float64)
    # clipped: ratio 0.7 < 0.8 with A < 0 (token 0), ratio 1.3 > 1.28 with A > 0 (token 3)
    current = ratios.log().requires_grad_(True)
    inputs = PolicyLossInputs(
        logprobs=current,
        behavior_logprobs=torch.zeros(7, dtype=torch.float64),
        advantages=advantages,
        weights=torch.ones(7, dtype=torch.float64),
        sequence_ids=torch.zeros(7, dtype=torch.long),
        proximal_logprobs=torch.zeros(7, dtype=torch.float64),
    )
    loss, stats = policy_loss(inputs, rl)
    loss.backward()
    zero_grad = (current.grad == 0).tolist()
    assert zero_grad == [True, False, False, True, False, False, False]
    assert (stats["clipped_low"], stats["clipped_high"]) == (1, 1)


@pytest.mark.parametrize("correction", ["tis", "mis"])
def test_truncation_and_masking_touch_exactly_the_tokens_beyond_the_bound(correction):
    rl = RLConfig(is_correction=correction, is_level="token", is_bound=2.0)
    weights = torch.tensor([0.3, 0.6, 1.0, 1.9, 2.5, 8.0], dtype=torch.float64)  # π_prox / π_behav
    current = torch.zeros(6, dtype=torch.float64, requires_grad=True)
    inputs = PolicyLossInputs(
        logprobs=current,
        behavior_logprobs=-weights.log(),
        advantages=torch.ones(6, dtype=torch.float64),
        weights=torch.ones(6, dtype=torch.float64),
        sequence_ids=torch.arange(6),
        proximal_logprobs=torch.zeros(6, dtype=torch.float64),
    )
    loss, stats = policy_loss(inputs, rl)
    loss.backward()
    # ratio is 1 everywhere, so the gradient of each token is -w'
    if correction == "tis":
        assert (-current.grad).tolist() == pytest.approx([0.3, 0.6, 1.0, 1.9, 2.0, 2.0])
        assert (stats["is_truncated"], stats["is_masked"]) == (2, 0)
    else:
        assert (-current.grad).tolist() == pytest.approx([0.0, 0.6, 1.0, 1.9, 0.0, 0.0])
        assert (stats["is_truncated"], stats["is_masked"]) == (0, 3)


def test_sequence_level_masking_drops_whole_sequences():
    rl = RLConfig(is_correction="mis", is_level="sequence", is_bound=2.0)
    # sequence 0: weights 1.5 · 1.5 = 2.25 > 2 (dropped); sequence 1: 1.5 · 0.9 (kept)
    token_weights = torch.tensor([1.5, 1.5, 1.5, 0.9], dtype=torch.float64)
    current = torch.zeros(4, dtype=torch.float64, requires_grad=True)
    inputs = PolicyLossInputs(
        logprobs=current,
        behavior_logprobs=-token_weights.log(),
        advantages=torch.ones(4, dtype=torch.float64),
        weights=torch.ones(4, dtype=torch.float64),
        sequence_ids=torch.tensor([0, 0, 1, 1]),
        proximal_logprobs=torch.zeros(4, dtype=torch.float64),
    )
    policy_loss(inputs, rl)[0].backward()
    assert (-current.grad).tolist() == pytest.approx([0.0, 0.0, 1.35, 1.35])


def test_on_policy_tokens_have_ratio_one_and_no_correction():
    logprobs = torch.tensor([-0.5, -2.0, -1.0], requires_grad=True)
    inputs = PolicyLossInputs(
        logprobs=logprobs,
        behavior_logprobs=logprobs.detach().clone(),
        advantages=torch.tensor([1.0, -1.0, 0.5]),
        weights=torch.full((3,), 1 / 3),
        sequence_ids=torch.zeros(3, dtype=torch.long),
    )
    loss, stats = policy_loss(inputs, RLConfig())
    assert stats["ratio_sum"] == 3.0 and stats["ratio_max"] == 1.0
    assert stats["is_weight_sum"] == 3.0 and stats["clipped_low"] == stats["clipped_high"] == 0
    assert loss.item() == pytest.approx(-(1.0 - 1.0 + 0.5) / 3)


def test_aggregation_weights():
    counts = [2, 0, 6]
    assert aggregation_weights(counts, "token_mean", 10) == [1 / 8] * 3
    assert aggregation_weights(counts, "seq_mean_token_mean", 10) == [1 / 4, 0.0, 1 / 12]
    assert aggregation_weights(counts, "constant", 10) == [1 / 20] * 3
    assert aggregation_weights([0, 0], "token_mean", 10) == [0.0, 0.0]


def test_mismatched_shapes_and_missing_reference_are_errors():
    with pytest.raises(ValueError, match=r"advantages has shape \(2,\), logprobs \(3,\)"):
        PolicyLossInputs(torch.zeros(3), torch.zeros(3), torch.zeros(2), torch.zeros(3), torch.zeros(3))
    inputs = PolicyLossInputs(
        torch.zeros(3), torch.zeros(3), torch.zeros(3), torch.zeros(3), torch.zeros(3).long()
    )
    with pytest.raises(ValueError, match="kl_coef > 0 needs reference logprobs"):
        policy_loss(inputs, RLConfig(kl_coef=0.1))


def test_a_clip_low_of_one_or_more_is_a_config_error():
    with pytest.raises(ValueError, match=r"clip_low \(1.0\) must be below 1"):
        RLConfig(clip_low=1.0)
