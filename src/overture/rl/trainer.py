"""The trainer: turns batches of samples into optimizer steps of the policy.

One `Trainer` owns the model, AdamW (over float32 master weights when the model is in
bfloat16), the LR schedule, gradient clipping, the router's auxiliary loss and balancing
bias, and the policy version (+1 per optimizer step). It offers

- `rl_step(samples)`: one rollout batch → `rl.minibatches` optimizer steps of the decoupled
  PPO objective (`losses.py`), proximal logprobs recomputed before the first update when
  there is more than one; every logprob of it is the tempered one the rollouts were sampled
  with (`sampling_temperature`, see `logprobs.py`). A batch without policy signal (no trained
  token with a nonzero advantage, and no KL term) takes no step at all: its only gradient
  would be the router's auxiliary loss, which AdamW would scale up to lr-sized moves of
  every weight it reaches;
- `lm_step(samples)` / `lm_loss(samples)` / `sample_losses(samples)`: next-token
  cross-entropy on the trained tokens (SFT), its held-out value, and each sample's own;
- `optimizer_step()`: for loops that compute their own loss (the LM warm-up);
- `export_weights()` / `save_weights(path)`: the policy for the engine, in process or on disk.

Every step's samples go through `batching.py` micro-batches whose losses sum to the loss of
the whole batch, so the micro-batch budget changes memory and speed, never the result.

Over several processes (`meshes`, from `overture.distributed`), the model is sharded
(`parallelize`: FSDP2, experts over ep) and every rank receives the same global list of
samples. The aggregation weights come from that whole list, exactly as in one process; each
rank then lays out only its share (`batching.rank_shares`), so the sum of the ranks' losses is
the one-process loss and FSDP's summed gradients are its gradient. Gradient clipping uses the
global norm, the router loads behind the balancing bias and every reported metric are combined
over ranks (all ranks report the same numbers), and `export_weights` / `save_weights` gather
the whole model. Every method is then collective: all ranks call it with the same samples.
The router's auxiliary loss is the one thing that depends on the layout: it is computed per
micro-batch, and the ranks' micro-batches are not one process's.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from overture.config import ConfigError, OptimizerConfig, RLConfig, RunConfig, TrainingConfig
from overture.distributed import (
    LayoutError,
    Meshes,
    all_reduce_floats,
    check_layout_fits_model,
    clip_gradients,
    gather_model_state,
    parallelize,
    save_model,
    sum_router_loads,
)
from overture.model import Transformer, save_pretrained
from overture.rl.batching import (
    PAD_SEQUENCE,
    MicroBatch,
    build_micro_batches,
    padding_micro_batch,
    rank_shares,
    sample_positions,
)
from overture.rl.logprobs import token_entropy, token_logprobs
from overture.rl.losses import (
    PolicyLossInputs,
    aggregation_weights,
    merge_stats,
    policy_loss,
    summarize_stats,
)
from overture.rl.optim import MasterWeights, build_optimizer, learning_rate, set_learning_rate
from overture.rl.prefix_sharing import position_cost
from overture.rl.samples import TrainingSample, has_policy_signal
from overture.runtime.cpu import release_freed_memory


def check_sharded_training(config: RunConfig) -> None:
    """Errors naming the keys when `config` asks for a layout the trainer cannot shard (checked by
    the commands before they start any process)."""
    if config.parallel.nproc == 1:
        return
    if config.training.dtype != "float32":
        raise _float32_only(config.training.dtype, config.parallel.nproc)
    try:
        check_layout_fits_model(config.parallel, config.model)
    except LayoutError as exc:
        raise ConfigError(str(exc)) from None


def rl_trainer(model: Transformer, config: RunConfig, meshes: Meshes | None = None) -> Trainer:
    """The trainer of an RL phase: `[rl]`'s objective, steps and LR schedule (`RLConfig.optimizer`),
    scoring at the temperature its rollouts sample at (`RLConfig.sampling_temperature`)."""
    rl = config.rl
    temperature = rl.sampling_temperature(config.engine)
    return Trainer(model, config.training, rl.optimizer(config.training), rl, temperature, meshes)


def _float32_only(dtype: str, nproc: int) -> ConfigError:
    # `MasterWeights` pairs a float32 copy with the model's own parameters one to one; it knows
    # nothing of FSDP shards (FSDP2's mixed-precision policy would be the sharded way).
    return ConfigError(
        f"training.dtype = {dtype!r} with parallel.nproc = {nproc}: sharded training keeps float32 "
        "weights for now; set training.dtype = 'float32'"
    )


class Trainer:
    """Optimizer state and the step/version counters of one policy being trained."""

    def __init__(
        self,
        model: Transformer,
        training: TrainingConfig,
        optimizer: OptimizerConfig,
        rl: RLConfig | None = None,
        sampling_temperature: float = 1.0,
        meshes: Meshes | None = None,
    ) -> None:
        """`training`: how steps compute; `optimizer`: this phase's AdamW and LR schedule; `rl`: the
        RL objective, for `rl_step` (a trainer without it — SFT, the LM warm-up — keeps no KL
        reference); `sampling_temperature`: the temperature RL's samples were drawn at (0, greedy,
        scores at 1). `meshes`: train sharded over the processes of a `run_parallel` job; `model`
        is then the whole model, identical on every rank (same seed or checkpoint), sharded here."""
        self.model = model
        self.training, self.optimizer_config, self.rl = training, optimizer, rl
        self.meshes = meshes
        self.device = model.embed_tokens.weight.device
        low_precision = model.embed_tokens.weight.dtype != torch.float32
        if meshes is not None and low_precision:
            raise _float32_only(training.dtype, meshes.world_size)
        # The KL anchor: the policy as it was when training started, frozen. Over several ranks
        # each keeps a whole copy: it only runs forward, so it needs no sharding or collective.
        reference = self._frozen_copy(model) if rl is not None and rl.kl_coef > 0 else None
        if meshes is not None:
            parallelize(model, meshes)
        self.master = MasterWeights(model) if low_precision else None
        self.optimizer = build_optimizer(self.master.module if self.master else model, optimizer)
        self.step = 0
        self.policy_version = 0
        self.reference = reference
        # RL scores samples under the distribution the engine drew them from; greedy requests
        # report untempered logprobs (`SamplingParams`), so temperature 0 scores at 1.
        self.sampling_temperature = sampling_temperature or 1.0

    def settings(self) -> dict[str, Any]:
        """What this trainer trains under, as a checkpoint records it."""
        return {
            "training": self.training.model_dump(mode="json"),
            "optimizer": self.optimizer_config.model_dump(mode="json"),
            "rl": None if self.rl is None else self.rl.model_dump(mode="json"),
            "sampling_temperature": self.sampling_temperature,
        }

    def rl_settings(self) -> RLConfig:
        if self.rl is None:
            raise ValueError("rl_step on a trainer built without RL settings (Trainer(..., rl=...))")
        return self.rl

    @staticmethod
    def _frozen_copy(model: Transformer) -> Transformer:
        return copy.deepcopy(model).eval().requires_grad_(False)

    # ------------------------------------------------------------------ optimizer step

    def _optimized_parameters(self) -> list[torch.nn.Parameter]:
        return list((self.master.module if self.master else self.model).parameters())

    def optimizer_step(self) -> dict[str, float]:
        """Apply the accumulated gradients: LR for the next step, clip, AdamW, balancing bias."""
        self.step += 1
        lr = learning_rate(self.step, self.optimizer_config)
        set_learning_rate(self.optimizer, lr)
        if self.master:
            self.master.gradients_to_master()
        if self.meshes is None:
            grad_norm = torch.nn.utils.clip_grad_norm_(
                self._optimized_parameters(), self.optimizer_config.grad_clip
            ).item()
        else:
            grad_norm = clip_gradients(self.model, self.optimizer_config.grad_clip, self.meshes)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.master:
            self.master.master_to_model()
        sum_router_loads(self.model, self.meshes)
        self.model.update_balance_bias()
        self.policy_version += 1
        return {"lr": lr, "grad_norm": grad_norm, "policy_version": self.policy_version}

    # ------------------------------------------------------------------ forward passes

    def _micro_batches(self, samples: Sequence[TrainingSample], weights: Sequence[float]) -> list[MicroBatch]:
        """The micro-batches this process computes: all of them in one process; over several,
        this rank's share of the samples, padded to as many micro-batches as the busiest rank."""
        training = self.training
        if self.meshes is not None:
            share = rank_shares([sample_positions(s) for s in samples], self.meshes.world_size)
            mine = share[self.meshes.rank]
            samples, weights = [samples[i] for i in mine], [weights[i] for i in mine]
        share = position_cost(self.model.config) if training.share_prefixes else None
        batches = build_micro_batches(samples, weights, training.micro_batch_tokens, training.packing, share)
        if self.meshes is not None:
            (most,) = all_reduce_floats([len(batches)], self.meshes, op="max")
            batches += [padding_micro_batch() for _ in range(int(most) - len(batches))]
        return [batch.to(self.device) for batch in batches]

    def _global_tokens(self, batches: Sequence[MicroBatch]) -> int:
        """Real positions of the step's micro-batches over every rank."""
        local = sum(b.num_tokens for b in batches)
        if self.meshes is None:
            return local
        return int(all_reduce_floats([local], self.meshes)[0])

    def _forward(self, model: Transformer, batch: MicroBatch, temperature: float = 1.0):
        """(the model's output, the logprobs of the targets) on a micro-batch, at its trained
        positions only (flattened, in the order of `batch.trained_values`): most positions of an
        agent's sequence (prompt, tool output) take no loss, and the LM head and log-softmax over
        the vocabulary took about a tenth of an SFT step when computed everywhere."""
        out = model(
            batch.input_ids,
            positions=batch.positions,
            attention_mask=batch.attention,
            token_mask=batch.sequence_ids != PAD_SEQUENCE,
            logits_at=batch.trained,
        )
        return out, token_logprobs(out.logits, batch.trained_values(batch.targets), temperature)

    @torch.no_grad()
    def _logprobs_without_grad(
        self, model: Transformer, batch: MicroBatch, temperature: float = 1.0
    ) -> torch.Tensor:
        """The logprobs of the batch's trained positions (flattened, as `trained_values`)."""
        was_training = model.training
        model.eval()
        _, logprobs = self._forward(model, batch, temperature)
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
        step_tokens = self._global_tokens(batches)
        loss_sum, aux_sum = 0.0, 0.0
        for batch in batches:
            out, logprobs = self._forward(self.model, batch)
            loss = -(batch.trained_values(batch.weights) * logprobs).sum()
            (loss + self._aux_term(out, batch, step_tokens)).backward()
            loss_sum += loss.item()
            aux_sum += out.aux_loss.item() * batch.num_tokens / step_tokens
        loss_sum, aux_sum = all_reduce_floats([loss_sum, aux_sum], self.meshes)
        metrics = {"loss": loss_sum, "aux_loss": aux_sum, **self.optimizer_step()}
        metrics["tokens_per_s"] = sum(map(sample_positions, samples)) / (time.perf_counter() - started)
        return metrics

    @torch.no_grad()
    def lm_loss(self, samples: Sequence[TrainingSample]) -> float:
        """Mean next-token cross-entropy over the samples' trained tokens (no update)."""
        weights = aggregation_weights([s.trained_tokens for s in samples], "token_mean", 1)
        total = 0.0
        for batch in self._micro_batches(samples, weights):
            logprobs = self._logprobs_without_grad(self.model, batch)
            total -= (batch.trained_values(batch.weights) * logprobs).sum().item()
        return all_reduce_floats([total], self.meshes)[0]

    @torch.no_grad()
    def sample_losses(self, samples: Sequence[TrainingSample]) -> list[float]:
        """Each sample's mean next-token cross-entropy over its own trained tokens (no update),
        computed in the micro-batches a step would use (shared prompts once). One process only:
        it scores samples for the job that drives training, not a step of it."""
        if self.meshes is not None:
            raise ValueError("Trainer.sample_losses runs in one process, not over several")
        count = len(samples)
        sums, tokens = torch.zeros(count, dtype=torch.float64), torch.zeros(count, dtype=torch.float64)
        for batch in self._micro_batches(samples, [1.0] * count):
            logprobs = self._logprobs_without_grad(self.model, batch)
            owners = batch.trained_values(batch.sequence_ids).cpu()
            sums.index_add_(0, owners, -logprobs.double().cpu())
            tokens.index_add_(0, owners, torch.ones(owners.numel(), dtype=torch.float64))
        return (sums / tokens.clamp(min=1.0)).tolist()

    # ------------------------------------------------------------------ reinforcement learning

    def rl_step(self, samples: Sequence[TrainingSample]) -> dict[str, float]:
        """One rollout batch: split into `rl.minibatches` parts, one optimizer step each; returns
        the metrics of the last step, or `{"skipped": 1, ...}` when the batch has no policy
        signal (`has_policy_signal`) and nothing moved."""
        rl = self.rl_settings()
        if len(samples) < rl.minibatches:
            raise ValueError(
                f"{len(samples)} samples cannot make rl.minibatches={rl.minibatches} minibatches"
            )
        for sample in samples:
            if sample.behavior_logprobs is None:
                raise ValueError(f"sample {sample.name!r} has no behavior logprobs; RL needs them")
        if not has_policy_signal(samples, rl):
            return {"skipped": 1.0, "policy_version": self.policy_version}
        parts = [list(samples[i :: rl.minibatches]) for i in range(rl.minibatches)]
        plans = [self._rl_plan(part) for part in parts]
        proximal = self._proximal_logprobs(plans)
        metrics: dict[str, float] = {}
        for index, batches in enumerate(plans):
            metrics = self._rl_update(batches, proximal[index], sum(map(sample_positions, parts[index])))
        metrics["minibatches"] = rl.minibatches
        if self.device.type == "cpu":
            # An RL step's activations are freed in fragments across threads' malloc arenas; without
            # this the process grows by most of a step's peak every step (overture.runtime.cpu).
            release_freed_memory()
        return metrics

    def _rl_plan(self, samples: Sequence[TrainingSample]) -> list[MicroBatch]:
        rl = self.rl_settings()
        weights = aggregation_weights(
            [s.trained_tokens for s in samples], rl.loss_agg, rl.constant_normalizer
        )
        return self._micro_batches(samples, weights)

    def _proximal_logprobs(self, plans: list[list[MicroBatch]]) -> list[list[torch.Tensor | None]]:
        """π_prox per micro-batch. With one optimizer step per batch the proximal policy *is* the
        current one before its update, so None (= current, detached) is exact and costs nothing.
        With several, the weights move between minibatches: recompute all of them up front, or
        take the behavior logprobs when `rl.recompute_proximal` is off."""
        rl = self.rl_settings()
        if rl.minibatches == 1:
            return [[None] * len(batches) for batches in plans]
        if not rl.recompute_proximal:
            return [[b.behavior_logprobs for b in batches] for batches in plans]
        recompute = self._logprobs_without_grad
        return [[recompute(self.model, b, self.sampling_temperature) for b in batches] for batches in plans]

    def _rl_update(
        self, batches: list[MicroBatch], proximal: list[torch.Tensor | None], positions: int
    ) -> dict[str, float]:
        """One optimizer step on a minibatch's micro-batches (`positions`: its samples' own, for the
        throughput metric; shared prefixes are computed once but count for every sample)."""
        started = time.perf_counter()
        self.model.train()
        rl = self.rl_settings()
        step_tokens = max(1, self._global_tokens(batches))
        totals: dict[str, float] = {}
        entropy_sum, aux_sum, lag = 0.0, 0.0, []
        temperature = self.sampling_temperature
        for batch, prox in zip(batches, proximal, strict=True):
            out, logprobs = self._forward(self.model, batch, temperature)
            reference = (
                self._logprobs_without_grad(self.reference, batch, temperature) if self.reference else None
            )
            inputs = PolicyLossInputs(
                logprobs=logprobs,
                behavior_logprobs=batch.trained_values(batch.behavior_logprobs),
                advantages=batch.trained_values(batch.advantages),
                weights=batch.trained_values(batch.weights),
                sequence_ids=batch.trained_values(batch.sequence_ids),
                proximal_logprobs=prox,
                reference_logprobs=reference,
            )
            loss, stats = policy_loss(inputs, rl)
            (loss + self._aux_term(out, batch, step_tokens)).backward()
            if self.meshes is not None and not batch.num_tokens:
                continue  # padding: its statistics are those of no token
            merge_stats(totals, stats)
            entropy_sum += token_entropy(out.logits, temperature).sum().item()
            aux_sum += out.aux_loss.item() * batch.num_tokens / step_tokens
            lag.append(self.policy_version - batch.trained_values(batch.versions))
        lags = torch.cat(lag).float() if lag else torch.zeros(0)
        lag_mean = lags.mean().item() if lags.numel() else 0.0
        lag_max = lags.max().item() if lags.numel() else 0.0
        if self.meshes is not None:
            totals, entropy_sum, aux_sum, lag_mean, lag_max = self._combined_rl_stats(
                totals, entropy_sum, aux_sum, lags
            )
        metrics = summarize_stats(totals)
        trained = max(totals.get("tokens", 0.0), 1.0)
        metrics.update(
            loss=totals.get("pg_loss", 0.0) + rl.kl_coef * totals.get("kl_loss", 0.0),
            entropy=entropy_sum / trained,
            aux_loss=aux_sum,
            version_lag_mean=lag_mean,
            version_lag_max=lag_max,
        )
        metrics.update(self.optimizer_step())
        metrics["tokens_per_s"] = positions / (time.perf_counter() - started)
        return metrics

    def _combined_rl_stats(
        self, totals: dict[str, float], entropy_sum: float, aux_sum: float, lags: torch.Tensor
    ) -> tuple[dict[str, float], float, float, float, float]:
        """Every rank's step statistics merged as `merge_stats` merges micro-batches (sums
        summed, maxima by max, minima by min), in rank order, so every rank gets the same."""
        assert self.meshes is not None
        mine = {
            **totals,
            "_entropy_sum": entropy_sum,
            "_aux_sum": aux_sum,
            "_lag_sum": lags.sum().item(),
            "_lag_count": float(lags.numel()),
        }
        if lags.numel():
            mine["_lag_max"] = lags.max().item()
        parts: list[dict[str, float] | None] = [None] * self.meshes.world_size
        dist.all_gather_object(parts, mine, group=self.meshes.world_group)
        merged: dict[str, float] = {}
        for part in parts:
            merge_stats(merged, part or {})
        entropy, aux = merged.pop("_entropy_sum"), merged.pop("_aux_sum")
        lag_sum, lag_count = merged.pop("_lag_sum"), merged.pop("_lag_count")
        lag_max = merged.pop("_lag_max", 0.0)
        return merged, entropy, aux, lag_sum / lag_count if lag_count else 0.0, lag_max

    # ------------------------------------------------------------------ weights for the engine

    def export_weights(self) -> dict[str, torch.Tensor]:
        """A detached copy of the policy's state dict, for an engine in the same process (over
        several ranks: the whole model, gathered on every rank, on the CPU)."""
        if self.meshes is not None:
            return gather_model_state(self.model)
        return {name: tensor.detach().clone() for name, tensor in self.model.state_dict().items()}

    def save_weights(self, path: str | Path) -> Path:
        """The policy as a Hugging Face checkpoint directory (`load_pretrained` reads it); over
        several ranks the whole model, gathered, written by rank 0."""
        if self.meshes is not None:
            save_model(self.model, path)
        else:
            save_pretrained(self.model, path)
        return Path(path)
