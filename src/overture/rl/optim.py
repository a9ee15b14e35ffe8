"""Optimizer and learning-rate schedule shared by every trainer: AdamW, linear warmup, cosine decay,
and float32 master weights for low-precision models."""

from __future__ import annotations

import copy
import math

import torch
from torch import nn

from overture.config import OptimizerConfig


def build_optimizer(model: nn.Module, settings: OptimizerConfig) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices only (norm scales and biases are not decayed)."""
    decay, no_decay = [], []
    seen: set[int] = set()
    for parameter in model.parameters():
        if not parameter.requires_grad or id(parameter) in seen:
            continue
        seen.add(id(parameter))
        (decay if parameter.ndim >= 2 else no_decay).append(parameter)
    groups = [
        {"params": decay, "weight_decay": settings.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=settings.lr, betas=settings.betas)


def learning_rate(step: int, settings: OptimizerConfig) -> float:
    """LR for optimizer step `step` (1-based): linear warmup, then cosine down to min_lr_ratio·lr."""
    if settings.warmup_steps and step <= settings.warmup_steps:
        return settings.lr * step / settings.warmup_steps
    span = max(1, settings.steps - settings.warmup_steps)
    progress = min(1.0, (step - settings.warmup_steps) / span)
    floor = settings.min_lr_ratio
    return settings.lr * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress)))


def set_learning_rate(optimizer: torch.optim.Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr


class MasterWeights:
    """float32 master copies of a low-precision model's parameters.

    The optimizer steps the copies; gradients are moved onto them before the step and the
    updated values copied back (rounded) after it, so small updates accumulate in float32
    instead of vanishing in bfloat16.
    """

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.module = copy.deepcopy(model).float()
        self._pairs = list(zip(model.parameters(), self.module.parameters(), strict=True))

    def gradients_to_master(self) -> None:
        for low, master in self._pairs:
            master.grad = None if low.grad is None else low.grad.float()
            low.grad = None

    @torch.no_grad()
    def master_to_model(self) -> None:
        for low, master in self._pairs:
            low.copy_(master)
