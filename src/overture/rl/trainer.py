"""The trainer: turns batches of samples into optimizer steps of the policy.

One `Trainer` owns the model, AdamW (over float32 master weights when the model is in
bfloat16), the LR schedule, gradient clipping, the router's auxiliary loss and balancing
bias, and the policy version (+1 per optimizer step). It offers

- `rl_step(samples)`: one rollout batch → `rl.minibatches` optimizer steps of the decoupled
  PPO objective (`losses.py`), proximal logprobs recomputed before the first update when
  there is more than one;
- `lm_step(samples)` / `lm_loss(samples)`: next-token cross-entropy on the trained tokens
  (SFT), and its held-out value;
- `optimizer_step()`: for loops that compute their own loss (the LM warm-up);
- `export_weights()` / `save_weights(path)`: the policy for the engine, in process or on disk.

Every step's samples go through `batching.py` micro-batches whose losses sum to the loss of
the whole batch, so the micro-batch budget changes memory and speed, never the result.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from overture.config import RunConfig
from overture.model import Transformer, save_pretrained
from overture.rl.batching import PAD_SEQUENCE, MicroBatch, build_micro_batches
from overture.rl.logprobs import token_entropy, token_logprobs
from overture.rl.losses import (
    PolicyLossInputs,
    aggregation_weights,
    merge_stats,
    policy_loss,
    summarize_stats,
)
from overture.rl.optim import MasterWeights, build_optimizer, learning_rate, set_learning_rate
from overture.rl.samples import TrainingSample


class Trainer:
    """Optimizer state and the step/version counters of one policy being trained."""

    def __init__(self, model: Transformer, config: RunConfig, kl_reference: bool | None = None) -> None:
        """`kl_reference`: keep a frozen copy of the starting policy for the KL term; by default
        exactly when `rl.kl_coef` > 0 (jobs without the RL loss pass False to save the copy)."""
        self.model = model
        self.config = config
        self.device = model.embed_tokens.weight.device
        low_precision = model.embed_tokens.weight.dtype != torch.float32
        self.master = MasterWeights(model) if low_precision else None
        self.optimizer = build_optimizer(self.master.module if self.master else model, config.training)
        self.step = 0
        self.policy_version = 0
        # The KL anchor: the policy as it was when training started, frozen.
        wants_reference = config.rl.kl_coef > 0 if kl_reference is None else kl_reference
        self.reference = self._frozen_copy(model) if wants_reference else None

    @staticmethod
    def _frozen_copy(model: Transformer) -> Transformer:
        return copy.deepcopy(model).eval().requires_grad_(False)

    # ------------------------------------------------------------------ optimizer step

    def _optimized_parameters(self) -> list[torch.nn.Parameter]:
        return list((self.master.module if self.master else self.model).parameters())

    def optimizer_step(self) -> dict[str, float]:
        """Apply the accumulated gradients: LR for the next step, clip, AdamW, balancing bias."""
        self.step += 1
        lr = learning_rate(self.step, self.config.training)
        set_learning_rate(self.optimizer, lr)
        if self.master:
            self.master.gradients_to_master()
        grad_norm = torch.nn.utils.clip_grad_norm_(
            self._optimized_parameters(), self.config.training.grad_clip
        ).item()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.master:
            self.master.master_to_model()
        self.model.update_balance_bias()
        self.policy_version += 1
        return {"lr": lr, "grad_norm": grad_norm, "policy_version": self.policy_version}

    # ------------------------------------------------------------------ forward passes

    def _micro_batches(self, samples: Sequence[TrainingSample], weights: Sequence[float]) -> list[MicroBatch]:
        training = self.config.training
        batches = build_micro_batches(samples, weights, training.micro_batch_tokens, training.packing)
        return [batch.to(self.device) for batch in batches]

    def _forward(self, model: Transformer, batch: MicroBatch):
        return model(
            batch.input_ids,
            positions=batch.positions,
            attention_mask=batch.attention_mask,
            token_mask=batch.sequence_ids != PAD_SEQUENCE,
        )

    @torch.no_grad()
    def _logprobs_without_grad(self, model: Transformer, batch: MicroBatch) -> torch.Tensor:
        was_training = model.training
        model.eval()
        logprobs = token_logprobs(self._forward(model, batch).logits, batch.targets)
        model.train(was_training)
        return logprobs

    def _aux_term(self, out, batch: MicroBatch, step_tokens: int) -> torch.Tensor:
        """The router loss of this micro-batch, weighted by its share of the step's tokens."""
        return self.model.config.router_aux_loss_coef * out.aux_loss * (batch.num_tokens / step_tokens)

    # ------------------------------------------------------------------ supervised

    def lm_step(self, samples: Sequence[TrainingSample]) -> dict[str, float]:
        """One optimizer step of token-mean cross-entropy on the samples' trained tokens."""
        started = time.perf_counter()
        self.model.train()
        weights = aggregation_weights([s.trained_tokens for s in samples], "token_mean", 1)
        batches = self._micro_batches(samples, weights)
        step_tokens = sum(b.num_tokens for b in batches)
        loss_sum, aux_sum = 0.0, 0.0
        for batch in batches:
            out = self._forward(self.model, batch)
            logprobs = token_logprobs(out.logits, batch.targets)
            loss = -(batch.trained_values(batch.weights) * batch.trained_values(logprobs)).sum()
            (loss + self._aux_term(out, batch, step_tokens)).backward()
            loss_sum += loss.item()
            aux_sum += out.aux_loss.item() * batch.num_tokens / step_tokens
        metrics = {"loss": loss_sum, "aux_loss": aux_sum, **self.optimizer_step()}
        metrics["tokens_per_s"] = step_tokens / (time.perf_counter() - started)
        return metrics

    @torch.no_grad()
    def lm_loss(self, samples: Sequence[TrainingSample]) -> float:
        """Mean next-token cross-entropy over the samples' trained tokens (no update)."""
        weights = aggregation_weights([s.trained_tokens for s in samples], "token_mean", 1)
        total = 0.0
        for batch in self._micro_batches(samples, weights):
            logprobs = self._logprobs_without_grad(self.model, batch)
            total -= (batch.trained_values(batch.weights) * batch.trained_values(logprobs)).sum().item()
        return total

    # ------------------------------------------------------------------ reinforcement learning

    def rl_step(self, samples: Sequence[TrainingSample]) -> dict[str, float]:
        """One rollout batch: split into `rl.minibatches` parts, one optimizer step each; returns
        the metrics of the last step."""
        rl = self.config.rl
        if len(samples) < rl.minibatches:
            raise ValueError(
                f"{len(samples)} samples cannot make rl.minibatches={rl.minibatches} minibatches"
            )
        for sample in samples:
            if sample.behavior_logprobs is None:
                raise ValueError(f"sample {sample.name!r} has no behavior logprobs; RL needs them")
        parts = [list(samples[i :: rl.minibatches]) for i in range(rl.minibatches)]
        plans = [self._rl_plan(part) for part in parts]
        proximal = self._proximal_logprobs(plans)
        metrics: dict[str, float] = {}
        for index, batches in enumerate(plans):
            metrics = self._rl_update(batches, proximal[index])
        metrics["minibatches"] = rl.minibatches
        return metrics

    def _rl_plan(self, samples: Sequence[TrainingSample]) -> list[MicroBatch]:
        rl = self.config.rl
        weights = aggregation_weights(
            [s.trained_tokens for s in samples], rl.loss_agg, rl.constant_normalizer
        )
        return self._micro_batches(samples, weights)

    def _proximal_logprobs(self, plans: list[list[MicroBatch]]) -> list[list[torch.Tensor | None]]:
        """π_prox per micro-batch. With one optimizer step per batch the proximal policy *is* the
        current one before its update, so None (= current, detached) is exact and costs nothing.
        With several, the weights move between minibatches: recompute all of them up front, or
        take the behavior logprobs when `rl.recompute_proximal` is off."""
        rl = self.config.rl
        if rl.minibatches == 1:
            return [[None] * len(batches) for batches in plans]
        if not rl.recompute_proximal:
            return [[b.behavior_logprobs for b in batches] for batches in plans]
        return [[self._logprobs_without_grad(self.model, b) for b in batches] for batches in plans]

    def _rl_update(self, batches: list[MicroBatch], proximal: list[torch.Tensor | None]) -> dict[str, float]:
        started = time.perf_counter()
        self.model.train()
        rl = self.config.rl
        step_tokens = max(1, sum(b.num_tokens for b in batches))
        totals: dict[str, float] = {}
        entropy_sum, aux_sum, lag = 0.0, 0.0, []
        for batch, prox in zip(batches, proximal, strict=True):
            out = self._forward(self.model, batch)
            logprobs = token_logprobs(out.logits, batch.targets)
            reference = self._logprobs_without_grad(self.reference, batch) if self.reference else None
            inputs = PolicyLossInputs(
                logprobs=batch.trained_values(logprobs),
                behavior_logprobs=batch.trained_values(batch.behavior_logprobs),
                advantages=batch.trained_values(batch.advantages),
                weights=batch.trained_values(batch.weights),
                sequence_ids=batch.trained_values(batch.sequence_ids),
                proximal_logprobs=None if prox is None else batch.trained_values(prox),
                reference_logprobs=None if reference is None else batch.trained_values(reference),
            )
            loss, stats = policy_loss(inputs, rl)
            (loss + self._aux_term(out, batch, step_tokens)).backward()
            merge_stats(totals, stats)
            entropy_sum += batch.trained_values(token_entropy(out.logits)).sum().item()
            aux_sum += out.aux_loss.item() * batch.num_tokens / step_tokens
            lag.append(self.policy_version - batch.trained_values(batch.versions))
        metrics = summarize_stats(totals)
        trained = max(totals.get("tokens", 0.0), 1.0)
        lags = torch.cat(lag).float() if lag else torch.zeros(0)
        metrics.update(
            loss=totals.get("pg_loss", 0.0) + rl.kl_coef * totals.get("kl_loss", 0.0),
            entropy=entropy_sum / trained,
            aux_loss=aux_sum,
            version_lag_mean=lags.mean().item() if lags.numel() else 0.0,
            version_lag_max=lags.max().item() if lags.numel() else 0.0,
        )
        metrics.update(self.optimizer_step())
        metrics["tokens_per_s"] = step_tokens / (time.perf_counter() - started)
        return metrics

    # ------------------------------------------------------------------ weights for the engine

    def export_weights(self) -> dict[str, torch.Tensor]:
        """A detached copy of the policy's state dict, for an engine in the same process."""
        return {name: tensor.detach().clone() for name, tensor in self.model.state_dict().items()}

    def save_weights(self, path: str | Path) -> Path:
        """The policy as a Hugging Face checkpoint directory (`load_pretrained` reads it)."""
        save_pretrained(self.model, path)
        return Path(path)
