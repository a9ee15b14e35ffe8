"""Learning-rate schedule and optimizer groups shared by the trainers."""

from __future__ import annotations

import itertools

import pytest
from conftest import tiny_model_config

from overture.config import LMWarmupConfig, RLConfig, TrainingConfig
from overture.model import Transformer
from overture.rl.optim import build_optimizer, learning_rate


def test_warmup_then_cosine_to_the_floor():
    training = TrainingConfig(lr=1e-3, warmup_steps=10, steps=110, min_lr_ratio=0.1).optimizer
    assert learning_rate(1, training) == pytest.approx(1e-4)
    assert learning_rate(10, training) == pytest.approx(1e-3)
    assert learning_rate(60, training) == pytest.approx(1e-3 * (0.1 + 0.9 * 0.5))
    assert learning_rate(110, training) == pytest.approx(1e-4)
    lrs = [learning_rate(s, training) for s in range(10, 111)]
    assert all(a >= b for a, b in itertools.pairwise(lrs))


def test_weight_decay_only_on_matrices_and_tied_weights_once():
    model = Transformer(tiny_model_config(tie_word_embeddings=True))
    optimizer = build_optimizer(model, TrainingConfig(weight_decay=0.1).optimizer)
    decayed, plain = optimizer.param_groups
    assert all(p.ndim >= 2 for p in decayed["params"]) and all(p.ndim == 1 for p in plain["params"])
    counted = sum(p.numel() for group in optimizer.param_groups for p in group["params"])
    assert counted == model.num_parameters()


def test_each_phase_has_its_own_schedule_and_shares_the_rest_of_adamw():
    training = TrainingConfig(
        steps=300, lr=3e-3, warmup_steps=10, min_lr_ratio=0.1, grad_clip=0.5, betas=(0.8, 0.9)
    )
    rl = RLConfig(steps=12, lr=1e-4, min_lr_ratio=1.0).optimizer(training)
    assert (rl.steps, rl.lr, rl.warmup_steps, rl.min_lr_ratio) == (12, 1e-4, 0, 1.0)
    warmup = LMWarmupConfig(steps=700, warmup_steps=30).optimizer(training)
    assert (warmup.steps, warmup.lr, warmup.warmup_steps, warmup.min_lr_ratio) == (700, 3e-3, 30, 0.1)
    for phase in (rl, warmup, training.optimizer):
        assert (phase.grad_clip, phase.betas, phase.weight_decay) == (0.5, (0.8, 0.9), 0.1)
    assert RLConfig(steps=12).optimizer(training).lr == 3e-3  # unset: [training]'s
    assert training.steps == 300 and training.lr == 3e-3  # nothing rewritten
