"""One language-model training step that gives the same result under every layout.

Equality with one process on the global batch comes from three choices:

- each rank's next-token loss is a *sum* over its tokens divided by the global token count (an
  all-reduced number), and FSDP sums gradients (`parallelize`), so the gradients are those of
  the global mean whatever the batch split;
- the router's auxiliary loss is not averaged per rank (it is a product of two batch means,
  not a mean): the expert loads are all-reduced first and each rank contributes its share of
  E · Σ f_i · P_i, the shares summing to the global value;
- the gradient norm for clipping is summed over every rank's shards and divided by the number of
  HSDP replicas, which hold the same shards.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.tensor import DTensor

from overture.distributed.meshes import Meshes
from overture.model.moe import RouterOutput
from overture.model.transformer import Transformer


class BatchSplitError(ValueError):
    """A global batch that does not split evenly over the data-parallel ranks."""


@dataclass
class StepResult:
    """The global-batch values of one step (identical on every rank)."""

    loss: float
    lm_loss: float
    aux_loss: float
    grad_norm: float
    tokens: int


def local_batch(batch: torch.Tensor, meshes: Meshes | None) -> torch.Tensor:
    """This rank's contiguous slice of the global batch's rows (every rank is data-parallel)."""
    if meshes is None:
        return batch
    if batch.shape[0] % meshes.world_size:
        raise BatchSplitError(
            f"global batch of {batch.shape[0]} rows does not split over parallel.nproc = "
            f"{meshes.world_size} processes"
        )
    return batch.chunk(meshes.world_size)[meshes.rank]


def _all_reduce_sum(tensor: torch.Tensor, meshes: Meshes | None) -> torch.Tensor:
    if meshes is not None:
        dist.all_reduce(tensor, group=meshes.world_group)
    return tensor


_REDUCE_OPS = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}


def all_reduce_floats(
    values: Sequence[float], meshes: Meshes | None, op: Literal["sum", "max", "min"] = "sum"
) -> list[float]:
    """`values` combined over every rank (one collective for the whole list; float64, so sums of
    per-rank metrics keep their precision). In one plain process: `values` unchanged."""
    if meshes is None or not values:
        return list(values)
    # NCCL reduces CUDA tensors only; gloo takes CPU ones.
    device = "cuda" if meshes.dense.device_type == "cuda" else "cpu"
    tensor = torch.tensor(list(values), dtype=torch.float64, device=device)
    dist.all_reduce(tensor, op=_REDUCE_OPS[op], group=meshes.world_group)
    return tensor.cpu().tolist()


def load_balancing_share(
    routes: list[RouterOutput], num_experts: int, meshes: Meshes | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """(this rank's differentiable share, the global value) of Qwen3-MoE's aux loss over the
    global batch: f_i from all-reduced loads, P_i's sum kept local so its gradient stays here."""
    if not routes:
        return torch.zeros(()), torch.zeros(())
    counts = sum(r.tokens_per_expert(num_experts).float() for r in routes)
    rows = torch.tensor(float(sum(r.counted_logits().shape[0] for r in routes)), device=counts.device)
    stats = _all_reduce_sum(torch.cat([counts, rows.view(1)]), meshes)
    global_counts, global_rows = stats[:-1], stats[-1].clamp(min=1)
    prob_sum = sum(torch.softmax(r.counted_logits(), dim=-1, dtype=torch.float32).sum(0) for r in routes)
    share = num_experts * torch.sum((global_counts / global_rows) * (prob_sum / global_rows))
    return share, _all_reduce_sum(share.detach().clone(), meshes)


def global_grad_norm(model: torch.nn.Module, meshes: Meshes | None) -> torch.Tensor:
    """L2 norm of all gradients of the global model (shards of every rank, each counted once)."""
    squares = torch.zeros((), dtype=torch.float64)
    for parameter in model.parameters():
        if parameter.grad is None:
            continue
        grad = parameter.grad.to_local() if isinstance(parameter.grad, DTensor) else parameter.grad
        squares += grad.detach().double().pow(2).sum().cpu()
    if meshes is None:
        return squares.sqrt().float()
    squares = _all_reduce_sum(squares.to(_device_of(model)), meshes).cpu()
    # HSDP replicas hold identical shards: the world sum counts every element dp_replicate times.
    return (squares / meshes.parallel.dp_replicate).sqrt().float()


def _device_of(model: torch.nn.Module) -> torch.device:
    parameter = next(model.parameters())
    local = parameter.to_local() if isinstance(parameter, DTensor) else parameter
    return local.device


@torch.no_grad()
def clip_gradients(model: torch.nn.Module, max_norm: float, meshes: Meshes | None) -> float:
    """Scale every gradient so the global norm is at most `max_norm`; returns the norm before."""
    norm = global_grad_norm(model, meshes)
    scale = max_norm / (float(norm) + 1e-6)
    if scale < 1.0:
        for parameter in model.parameters():
            if parameter.grad is not None:
                parameter.grad.mul_(scale)
    return float(norm)


def lm_train_step(
    model: Transformer,
    optimizer: torch.optim.Optimizer,
    input_ids: torch.Tensor,
    meshes: Meshes | None,
    grad_clip: float = math.inf,
) -> StepResult:
    """Forward, backward and optimizer step on this rank's rows `input_ids` (B_local×T): mean
    next-token cross-entropy over the global batch plus router_aux_loss_coef × the global aux loss."""
    optimizer.zero_grad(set_to_none=True)
    out = model(input_ids)
    targets = input_ids[:, 1:].reshape(-1)
    token_losses = F.cross_entropy(
        out.logits[:, :-1].reshape(-1, out.logits.shape[-1]).float(), targets, reduction="sum"
    )
    tokens = int(_all_reduce_sum(torch.tensor(float(targets.numel()), device=targets.device), meshes))
    lm_share = token_losses / tokens
    aux_share, aux_value = load_balancing_share(out.routes, model.config.num_experts, meshes)
    coef = model.config.router_aux_loss_coef
    (lm_share + coef * aux_share.to(lm_share.device)).backward()
    lm_value = float(_all_reduce_sum(lm_share.detach().clone(), meshes))
    grad_norm = clip_gradients(model, grad_clip, meshes)
    optimizer.step()
    sum_router_loads(model, meshes)
    model.update_balance_bias()
    return StepResult(
        loss=lm_value + coef * float(aux_value),
        lm_loss=lm_value,
        aux_loss=float(aux_value),
        grad_norm=grad_norm,
        tokens=tokens,
    )


@torch.no_grad()
def sum_router_loads(model: Transformer, meshes: Meshes | None) -> None:
    """Each router's expert load counted over every rank's tokens (call before
    `update_balance_bias`): the bias follows the load of the global batch, so every rank moves
    it alike and the replicated biases never diverge."""
    if meshes is None:
        return
    for router in model.moe_routers():
        if router.balance_bias:
            _all_reduce_sum(router.load, meshes)
