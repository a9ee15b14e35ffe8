"""Turning a `Transformer` into its sharded form for one rank: expert parallelism, then FSDP2.

- Routed experts: each ep rank keeps its block of E / ep experts (`shard_experts`); every
  `GroupedExperts` then becomes its own FSDP unit on the expert mesh's (dp_replicate,
  expert_shard) dims, so its weights are sharded over expert_shard and replicated (HSDP) over
  dp_replicate.
- Every decoder layer is an FSDP unit on the dense mesh, and the root (embeddings, final norm,
  LM head) a last one.

Gradients are *summed* over ranks, never averaged: the training step divides each rank's loss by
the global token count (`overture.distributed.lm_step`), so the sum is the gradient of the
global-batch loss whatever the layout. (An expert sees the tokens of its whole ep group, so an
average would be off by a factor of ep.)
"""

from __future__ import annotations

from torch import nn
from torch.distributed.fsdp import FSDPModule, fully_shard

from overture.distributed.expert_parallel import expert_modules, shard_experts
from overture.distributed.meshes import Meshes, check_layout_fits_model
from overture.model.transformer import Transformer


def _sum_gradients(module: FSDPModule) -> None:
    # Sum-type reductions only (gloo has no AVG / PREMUL_SUM) and no division afterwards.
    module.set_force_sum_reduction_for_comms(True)
    module.set_gradient_divide_factor(1.0)


def parallelize(model: Transformer, meshes: Meshes) -> Transformer:
    """Shard `model` (identical on every rank, e.g. from one seed or `load_pretrained`) in place."""
    check_layout_fits_model(meshes.parallel, model.config)
    if meshes.ep_size > 1:
        shard_experts(model, meshes.ep_group)
    dense_mesh = meshes.dense_fsdp_mesh()
    expert_mesh = meshes.expert_fsdp_mesh()
    units: list[nn.Module] = []
    for experts in expert_modules(model):
        units.append(fully_shard(experts, mesh=expert_mesh))
    for layer in model.layers:
        units.append(fully_shard(layer, mesh=dense_mesh))
    # The root's parameters are needed again right at the start of backward (the LM head):
    # keeping them gathered after forward saves one all-gather per step.
    units.append(fully_shard(model, mesh=dense_mesh, reshard_after_forward=False))
    for unit in units:
        _sum_gradients(unit)
    return model
