"""The analytic communication volume of one training step under a layout, to set next to what
`CollectiveCounter` measures.

Bytes are what one rank sends per step, with the costs `CollectiveCounter` uses (ring
all-gather / reduce-scatter: (n-1)/n of the full tensor; all-reduce: twice that; all-to-all:
the rows addressed to other ranks). The FSDP units mirror `parallelize`: one per routed-experts
module (expert mesh), one per decoder layer and the root (dense mesh); every unit all-gathers in
forward and again in backward except the root, which stays gathered, and reduce-scatters once
(then all-reduces its shard over dp_replicate under HSDP). FSDP2 pads dim 0 of every parameter to
a multiple of the shard count, and so does this count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from overture.config import ModelConfig
from overture.config.schema import ParallelConfig
from overture.model.moe import GroupedExperts
from overture.model.transformer import Transformer

COUNT_BYTES = 8  # the per-expert counts travel as int64


@dataclass
class _Unit:
    name: str
    parameters: list[torch.Tensor]
    shard: int
    replicate: int
    gathers_per_step: int


def _padded_numel(parameter: torch.Tensor, shard: int) -> int:
    rows = parameter.shape[0] if parameter.dim() else 1
    return math.ceil(rows / shard) * shard * (parameter.numel() // max(1, rows))


def _units(config: ModelConfig, parallel: ParallelConfig) -> list[_Unit]:
    with torch.device("meta"):
        model = Transformer(config)
    units, claimed = [], set()
    for name, module in model.named_modules():
        if isinstance(module, GroupedExperts):
            params = [p[: p.shape[0] // parallel.ep] for p in module.parameters()]
            units.append(_Unit(name, params, parallel.expert_shard, parallel.dp_replicate, 2))
            claimed.update(id(p) for p in module.parameters())
    for index, layer in enumerate(model.layers):
        params = [p for p in layer.parameters() if id(p) not in claimed]
        units.append(_Unit(f"layers.{index}", params, parallel.shard_size, parallel.dp_replicate, 2))
        claimed.update(id(p) for p in layer.parameters())
    # parameters() yields a tied embedding / LM head weight once, as FSDP holds it.
    root = [p for p in model.parameters() if id(p) not in claimed]
    units.append(_Unit("root", root, parallel.shard_size, parallel.dp_replicate, 1))
    return units


def fsdp_bytes(config: ModelConfig, parallel: ParallelConfig, element_bytes: int = 4) -> dict[str, int]:
    """Bytes one rank sends per step by FSDP's all-gathers, reduce-scatters and HSDP all-reduces."""
    totals = {"all_gather": 0.0, "reduce_scatter": 0.0, "all_reduce": 0.0}
    for unit in _units(config, parallel):
        full = sum(_padded_numel(p, unit.shard) for p in unit.parameters) * element_bytes
        if unit.shard > 1:
            ring = (unit.shard - 1) / unit.shard
            totals["all_gather"] += unit.gathers_per_step * round(full * ring)
            totals["reduce_scatter"] += round(full * ring)
        if unit.replicate > 1:
            totals["all_reduce"] += round(2 * (full // unit.shard) * (unit.replicate - 1) / unit.replicate)
    return {kind: int(value) for kind, value in totals.items()}


def step_scalar_bytes(config: ModelConfig, parallel: ParallelConfig) -> int:
    """All-reduces of `lm_train_step`'s global numbers: token count, loss, gradient norm (float64),
    and with experts the loads (E + 1 floats) and the aux loss."""
    if parallel.nproc == 1:
        return 0
    ring = 2 * (parallel.nproc - 1) / parallel.nproc
    payloads = [4, 4, 8]
    if config.num_experts:
        payloads += [4 * (config.num_experts + 1), 4]
    return sum(round(p * ring) for p in payloads)


def all_to_all_bytes(
    config: ModelConfig, parallel: ParallelConfig, remote_slots: float, element_bytes: int = 4
) -> int:
    """Bytes one rank sends per step by expert-parallel all-to-alls.

    `remote_slots`: routing slots (token × chosen expert) per step, over all MoE layers, that a
    rank sends to experts on other ep ranks (averaged over ranks: what a rank receives from others
    is then the same). Rows go out in forward dispatch and combine and come back in backward as
    gradients (four exchanges), and every MoE layer first exchanges its E / ep counts per peer.
    """
    if parallel.ep == 1:
        return 0
    moe_layers = sum(config.is_moe_layer(i) for i in range(config.num_hidden_layers))
    counts = moe_layers * (config.num_experts // parallel.ep) * (parallel.ep - 1) * COUNT_BYTES
    return round(4 * remote_slots * config.hidden_size * element_bytes) + counts


def uniform_remote_slots(config: ModelConfig, parallel: ParallelConfig, tokens_per_rank: int) -> float:
    """`remote_slots` if the router spread tokens evenly over experts."""
    moe_layers = sum(config.is_moe_layer(i) for i in range(config.num_hidden_layers))
    return moe_layers * tokens_per_rank * config.num_experts_per_tok * (parallel.ep - 1) / parallel.ep
