"""The trainer: on-policy ratios, learning from advantages, micro-batch invariance, versions,
float32 master weights, KL reference, and weights exported for the engine."""

from __future__ import annotations

import copy

import pytest
import torch
from conftest import tiny_model_config

from overture.config import RunConfig
from overture.engine import Engine
from overture.model import Transformer, load_pretrained
from overture.rl import trainer as trainer_module
from overture.rl.batching import build_micro_batches
from overture.rl.logprobs import token_logprobs
from overture.rl.samples import TrainingSample
from overture.rl.trainer import Trainer, rl_trainer

PROMPT = [3, 14, 15, 9, 2]


def run_config(**sections) -> RunConfig:
    data = {"model": tiny_model_config().model_dump(), "training": {"lr": 1e-2, "warmup_steps": 0}}
    for section, values in sections.items():
        data.setdefault(section, {}).update(values)
    return RunConfig.model_validate(data)


def on_policy(model: Transformer, ids: list[int], advantage: float, version: int = 0) -> TrainingSample:
    """A sample whose behavior logprobs are the model's own (as an exact engine would report)."""
    mask = [0] * len(PROMPT) + [1] * (len(ids) - len(PROMPT))
    sample = TrainingSample(ids, mask, [0.0] * len(ids), [version] * len(ids), advantage)
    (batch,) = build_micro_batches([sample], [1.0], token_budget=10_000)
    with torch.no_grad():
        logprobs = token_logprobs(model(batch.input_ids).logits, batch.targets)[0]
    sample.behavior_logprobs = [0.0, *logprobs.tolist()]
    return sample


def sequence_logprob(model: Transformer, ids: list[int]) -> float:
    tensor = torch.tensor([ids])
    with torch.no_grad():
        logprobs = token_logprobs(model(tensor[:, :-1]).logits, tensor[:, 1:])[0]
    return logprobs[len(PROMPT) - 1 :].sum().item()


def test_on_policy_batch_has_ratio_one_and_bumps_the_version():
    config = run_config()
    model = Transformer(config.model)
    trainer = rl_trainer(model, config)
    samples = [on_policy(model, [*PROMPT, 7, 8, 9], 1.0), on_policy(model, [*PROMPT, 10, 11], -1.0)]
    metrics = trainer.rl_step(samples)
    assert metrics["ratio_mean"] == pytest.approx(1.0, abs=1e-6)
    assert metrics["is_weight_mean"] == pytest.approx(1.0, abs=1e-5)
    assert metrics["clip_frac_low"] == metrics["clip_frac_high"] == 0
    assert metrics["trained_tokens"] == 5 and metrics["version_lag_max"] == 0
    assert trainer.policy_version == 1 and trainer.step == 1
    assert metrics["grad_norm"] > 0 and metrics["entropy"] > 0


def test_a_batch_without_policy_signal_moves_nothing():
    config = run_config()
    model = Transformer(config.model)
    trainer = rl_trainer(model, config)
    before = copy.deepcopy(model.state_dict())
    samples = [on_policy(model, [*PROMPT, 7, 8, 9], 0.0), on_policy(model, [*PROMPT, 10, 11], 0.0)]
    masked = on_policy(model, [*PROMPT, 12, 13], 1.0)  # a signal that no trained token carries
    masked.loss_mask = [0] * len(masked.loss_mask)
    assert trainer.rl_step([*samples, masked]) == {"skipped": 1.0, "policy_version": 0}
    assert trainer.step == trainer.policy_version == 0 and not trainer.optimizer.state
    assert all(torch.equal(before[name], value) for name, value in model.state_dict().items())
    # A KL term is a signal of its own; so is one nonzero advantage.
    with_kl = rl_trainer(copy.deepcopy(model), run_config(rl={"kl_coef": 0.1})).rl_step(samples)
    assert "skipped" not in with_kl and with_kl["policy_version"] == 1
    samples[0].advantage = 0.5
    assert trainer.rl_step(samples)["policy_version"] == 1
    assert any(not torch.equal(before[name], value) for name, value in model.state_dict().items())


@pytest.mark.parametrize("temperature", [0.5, 1.5])
def test_samples_from_a_tempered_engine_are_scored_at_its_temperature(temperature):
    config = run_config(engine={"temperature": temperature})
    model = Transformer(config.model)
    with Engine(model, config=config.engine) as engine:
        completions = engine.generate([PROMPT, PROMPT[:3]], max_new_tokens=6, seed=0)
    samples = []
    for prompt, completion in zip([PROMPT, PROMPT[:3]], completions, strict=True):
        ids, new = [*prompt, *completion.token_ids], len(completion.token_ids)
        sample = TrainingSample(ids, [0] * len(prompt) + [1] * new, [0.0] * len(ids), [0] * len(ids), 1.0)
        sample.behavior_logprobs = [0.0] * len(prompt) + list(completion.logprobs)
        samples.append(sample)
    untempered = rl_trainer(copy.deepcopy(model), run_config()).rl_step(samples)
    metrics = rl_trainer(model, config).rl_step(samples)
    assert metrics["is_weight_mean"] == pytest.approx(1.0, abs=1e-5)
    assert metrics["ratio_mean"] == pytest.approx(1.0, abs=1e-6)
    assert abs(untempered["is_weight_mean"] - 1.0) > 1e-2  # the engine's logprobs are the tempered ones


def test_an_rl_step_on_cpu_hands_freed_memory_back(monkeypatch):
    calls = []
    monkeypatch.setattr(trainer_module, "release_freed_memory", lambda: calls.append(1) or True)
    config = run_config()
    model = Transformer(config.model)
    trainer = rl_trainer(model, config)
    trainer.rl_step([on_policy(model, [*PROMPT, 7, 8], 1.0), on_policy(model, [*PROMPT, 9], -1.0)])
    assert calls == [1]


def test_rl_steps_raise_the_preferred_completion():
    config = run_config()
    model = Transformer(config.model)
    trainer = rl_trainer(model, config)
    good, bad = [*PROMPT, 7, 8, 9], [*PROMPT, 10, 11, 12]
    gap_before = sequence_logprob(model, good) - sequence_logprob(model, bad)
    for _ in range(5):
        trainer.rl_step([on_policy(model, good, 1.0), on_policy(model, bad, -1.0)])
    gap_after = sequence_logprob(model, good) - sequence_logprob(model, bad)
    assert gap_after > gap_before + 1.0


def clipped_gradients(trainer: Trainer) -> list[list[torch.Tensor]]:
    """Record the gradients each optimizer step applies (after clipping)."""
    seen: list[list[torch.Tensor]] = []
    parameters = list(trainer.model.parameters())
    trainer.optimizer.register_step_pre_hook(lambda *_: seen.append([p.grad.clone() for p in parameters]))
    return seen


@pytest.mark.parametrize("packing, budget", [(True, 8), (False, 30), (False, 8)])
def test_micro_batch_layout_does_not_change_the_gradient(packing, budget):
    # The router loss is computed per micro-batch (its load statistics are not additive), so
    # it is switched off here; the policy loss itself must not depend on the layout.
    model_fields = {"router_aux_loss_coef": 0.0}
    reference_config = run_config(model=model_fields, training={"micro_batch_tokens": 10_000})
    other_config = run_config(model=model_fields, training={"micro_batch_tokens": budget, "packing": packing})
    base = Transformer(reference_config.model)
    samples = [on_policy(base, PROMPT + list(range(20, 20 + n)), 1.0 - n / 3) for n in (2, 6, 3, 5)]
    results = []
    for config in (reference_config, other_config):
        model = Transformer(config.model)
        model.load_state_dict(base.state_dict())
        trainer = rl_trainer(model, config)
        gradients = clipped_gradients(trainer)
        results.append((trainer.rl_step(samples), gradients[0]))
    (m1, g1), (m2, g2) = results
    assert m1["loss"] == pytest.approx(m2["loss"], rel=1e-5, abs=1e-7)
    for a, b in zip(g1, g2, strict=True):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-4)


def test_minibatches_make_several_optimizer_steps_against_recomputed_proximal():
    config = run_config(rl={"minibatches": 2})
    model = Transformer(config.model)
    trainer = rl_trainer(model, config)
    samples = [on_policy(model, [*PROMPT, 7 + i, 8, 9], 1.0 if i % 2 else -1.0) for i in range(4)]
    metrics = trainer.rl_step(samples)
    assert trainer.policy_version == 2 and metrics["minibatches"] == 2
    # Metrics are the second minibatch's: the weights moved after the first, so the ratio to
    # the proximal policy (recomputed before the first update) is no longer 1, while the
    # behavior weight stays 1 because the batch was sampled by exactly that proximal policy.
    assert abs(metrics["ratio_mean"] - 1.0) > 1e-3
    assert metrics["is_weight_mean"] == pytest.approx(1.0, abs=1e-5)
    assert metrics["version_lag_max"] == 1
    with pytest.raises(ValueError, match=r"cannot make rl\.minibatches=2"):
        trainer.rl_step(samples[:1])


def test_rl_needs_behavior_logprobs():
    config = run_config()
    trainer = rl_trainer(Transformer(config.model), config)
    with pytest.raises(ValueError, match="has no behavior logprobs"):
        trainer.rl_step([TrainingSample([*PROMPT, 1], [0] * 5 + [1], name="demo")])


def test_kl_to_the_frozen_reference_grows_as_the_policy_moves():
    config = run_config(rl={"kl_coef": 0.1})
    model = Transformer(config.model)
    trainer = rl_trainer(model, config)
    samples = [on_policy(model, [*PROMPT, 7, 8, 9], 1.0), on_policy(model, [*PROMPT, 10, 11], -1.0)]
    assert trainer.rl_step(samples)["kl"] == pytest.approx(0.0, abs=1e-6)
    later = trainer.rl_step(samples)
    assert later["kl"] > 1e-5 and later["kl_loss"] > 0
    assert not any(p.requires_grad for p in trainer.reference.parameters())


def test_bfloat16_policy_keeps_float32_master_weights():
    config = run_config(training={"dtype": "bfloat16", "lr": 1e-4})
    model = Transformer(config.model).to(torch.bfloat16)
    trainer = rl_trainer(model, config)
    assert trainer.master is not None
    before = [p.detach().float().clone() for p in trainer.master.module.parameters()]
    sample = TrainingSample([*PROMPT, 7, 8, 9], [0] * 5 + [1] * 3)
    trainer.lm_step([sample])
    masters = list(trainer.master.module.parameters())
    assert all(m.dtype == torch.float32 for m in masters)
    assert any(not torch.equal(m, b) for m, b in zip(masters, before, strict=True))
    for low, master in zip(model.parameters(), masters, strict=True):
        assert low.dtype == torch.bfloat16 and torch.equal(low, master.to(torch.bfloat16))


def test_exported_weights_reload_with_the_same_logits(tmp_path):
    config = run_config()
    model = Transformer(config.model)
    trainer = rl_trainer(model, config)
    trainer.lm_step([TrainingSample([*PROMPT, 7, 8], [0] * 5 + [1, 1])])
    ids = torch.tensor([PROMPT])
    engine_copy = Transformer(config.model)
    engine_copy.load_state_dict(trainer.export_weights())
    reloaded = load_pretrained(trainer.save_weights(tmp_path / "policy"))
    with torch.no_grad():
        expected = model(ids).logits
        torch.testing.assert_close(engine_copy(ids).logits, expected)
        torch.testing.assert_close(reloaded(ids).logits, expected, atol=1e-5, rtol=1e-5)


def test_supervised_loss_is_the_mean_nll_of_policy_tokens_only():
    config = run_config(training={"micro_batch_tokens": 12})
    model = Transformer(config.model)
    trainer = rl_trainer(model, config)
    samples = [
        TrainingSample([*PROMPT, 7, 8, 9], [0] * 5 + [1] * 3),
        TrainingSample([4, 5, 6, 7, 8, 9, 10], [0, 1, 1, 0, 0, 1, 0]),
    ]
    nll = []
    for sample in samples:
        ids = torch.tensor([sample.token_ids])
        with torch.no_grad():
            logprobs = token_logprobs(model(ids[:, :-1]).logits, ids[:, 1:])[0]
        nll += [-lp for lp, m in zip(logprobs.tolist(), sample.loss_mask[1:], strict=True) if m]
    expected = sum(nll) / len(nll)
    assert trainer.lm_loss(samples) == pytest.approx(expected, rel=1e-5)
    assert trainer.lm_step(samples)["loss"] == pytest.approx(expected, rel=1e-5)


def test_sample_losses_are_each_samples_own_supervised_loss():
    config = run_config(training={"micro_batch_tokens": 16})
    trainer = rl_trainer(Transformer(config.model), config)
    samples = [
        TrainingSample([*PROMPT, 7, 8, 9], [0] * 5 + [1] * 3),
        TrainingSample([4, 5, 6, 7, 8, 9, 10], [0, 1, 1, 0, 0, 1, 0]),
        TrainingSample([*PROMPT, 11, 12], [0] * 5 + [1] * 2),
    ]
    losses = trainer.sample_losses(samples)
    assert losses == pytest.approx([trainer.lm_loss([sample]) for sample in samples], rel=1e-5)
    assert len(set(losses)) == 3
    trained = [sample.trained_tokens for sample in samples]  # the batch loss weighs them by tokens
    pooled = sum(loss * n for loss, n in zip(losses, trained, strict=True)) / sum(trained)
    assert trainer.lm_loss(samples) == pytest.approx(pooled, rel=1e-5)
    assert trainer.step == 0  # scoring is not a step
