"""Checkpoints of a sharded run that load into any other layout, one process included.

A checkpoint directory holds

    model/         the whole model as a Hugging Face checkpoint (`save_pretrained`), so
                   `overture.model.load_pretrained` reads it with no distributed code at all
    optimizer.pt   the whole optimizer state, in the format of `optimizer.state_dict()` of the
                   unsharded model (state by parameter index), plus the parameter names

Saving gathers every shard (FSDP all-gathers, then experts over ep) and rank 0 writes; loading
reads the whole files on every rank and keeps each rank's part, so the saving and the loading
layout need not agree. Collective functions here must be called on every rank. The directory
must be on a filesystem every rank sees.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor, distribute_tensor

from overture.distributed.expert_parallel import EXPERT_WEIGHTS, ExpertDispatch
from overture.distributed.meshes import Meshes
from overture.distributed.parallelize import parallelize
from overture.model import load_pretrained, save_pretrained
from overture.model.moe import GroupedExperts
from overture.model.transformer import Transformer

MODEL_DIR = "model"
OPTIMIZER_FILE = "optimizer.pt"


class ShardedCheckpointError(ValueError):
    """A checkpoint that does not fit the model or optimizer it is loaded into."""


def _expert_parallel_names(model: torch.nn.Module) -> dict[str, ExpertDispatch]:
    """State-dict names of expert weights split over ep → their module's dispatch."""
    names = {}
    for module_name, module in model.named_modules():
        if isinstance(module, GroupedExperts) and isinstance(module.dispatch, ExpertDispatch):
            names.update({f"{module_name}.{weight}": module.dispatch for weight in EXPERT_WEIGHTS})
    return names


def _gather(value: torch.Tensor, dispatch: ExpertDispatch | None) -> torch.Tensor:
    """The unsharded value of a parameter (or of optimizer state shaped like one)."""
    full = value.full_tensor() if isinstance(value, DTensor) else value
    if dispatch is not None and full.dim() > 0:
        blocks = [torch.empty_like(full) for _ in range(dispatch.size)]
        dist.all_gather(blocks, full.contiguous(), group=dispatch.group)
        full = torch.cat(blocks)
    return full.detach().cpu()


def _shard(full: torch.Tensor, like: torch.Tensor, dispatch: ExpertDispatch | None) -> torch.Tensor:
    """This rank's part of `full`, placed as the parameter `like` is."""
    if dispatch is not None and full.dim() > 0:
        full = full.narrow(0, dispatch.first_expert, dispatch.local_experts)
    if isinstance(like, DTensor):
        local_device = like.to_local().device
        # Every rank holds the whole tensor, so each keeps its part without communicating.
        return distribute_tensor(full.to(local_device), like.device_mesh, like.placements, src_data_rank=None)
    return full.to(like.device)


def gather_model_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The one-process `state_dict()` of a sharded model, on CPU, on every rank (collective)."""
    expert_split = _expert_parallel_names(model)
    return {name: _gather(value, expert_split.get(name)) for name, value in model.state_dict().items()}


def load_model_state(model: torch.nn.Module, full: dict[str, torch.Tensor], source: str = "state") -> None:
    """Load a one-process `state_dict()` (e.g. `gather_model_state`'s) into a sharded or plain
    model; each rank keeps its part (collective-free: every rank holds `full`)."""
    ours = model.state_dict()
    if full.keys() != ours.keys():
        missing, unexpected = sorted(ours.keys() - full.keys()), sorted(full.keys() - ours.keys())
        raise ShardedCheckpointError(
            f"{source}: does not fit the model: missing {missing[:5]}, unexpected {unexpected[:5]}"
        )
    expert_split = _expert_parallel_names(model)
    for name, value in full.items():
        if tuple(value.shape) != tuple(ours[name].shape) and name not in expert_split:
            raise ShardedCheckpointError(
                f"{source}: {name} has shape {tuple(value.shape)}, the model {tuple(ours[name].shape)}"
            )
    local = {
        name: _shard(value.to(ours[name].dtype), ours[name], expert_split.get(name))
        for name, value in full.items()
    }
    model.load_state_dict(local)


def unsharded_model(model: Transformer) -> Transformer:
    """A plain one-process copy of a (possibly sharded) `Transformer` (collective)."""
    state = gather_model_state(model)
    with torch.device("meta"):
        plain = Transformer(model.config)
    plain.load_state_dict(state, assign=True)
    if plain.config.tie_word_embeddings:
        plain.lm_head.weight = plain.embed_tokens.weight
    plain.reset_buffers()
    return plain


def save_model(model: Transformer, path: str | Path) -> None:
    """Write the whole model as a Hugging Face checkpoint from rank 0 (collective)."""
    plain = unsharded_model(model)
    if not dist.is_initialized() or dist.get_rank() == 0:
        save_pretrained(plain, path)
    if dist.is_initialized():
        dist.barrier()


def gather_optimizer_state(optimizer: torch.optim.Optimizer, model: torch.nn.Module) -> dict[str, Any]:
    """The optimizer's state as the unsharded model's optimizer would hold it (collective).

    Indices follow the order of the optimizer's parameter groups, as `state_dict()` numbers them,
    so the result loads into a one-process optimizer built the same way.
    """
    names = {id(parameter): name for name, parameter in model.named_parameters()}
    expert_split = _expert_parallel_names(model)
    state: dict[int, dict[str, Any]] = {}
    groups, parameter_names = [], []
    for group in optimizer.param_groups:
        indices = []
        for parameter in group["params"]:
            index, name = len(parameter_names), names[id(parameter)]
            parameter_names.append(name)
            indices.append(index)
            values = optimizer.state.get(parameter, {})
            if values:
                state[index] = {
                    key: _gather(value, expert_split.get(name)) if torch.is_tensor(value) else value
                    for key, value in values.items()
                }
        groups.append({**{k: v for k, v in group.items() if k != "params"}, "params": indices})
    return {"state": state, "param_groups": groups, "parameter_names": parameter_names}


def load_optimizer_state(
    optimizer: torch.optim.Optimizer, model: torch.nn.Module, full: dict[str, Any], source: str = "optimizer"
) -> None:
    """Load a `gather_optimizer_state` result into this rank's (sharded or plain) optimizer."""
    names = {id(parameter): name for name, parameter in model.named_parameters()}
    ours = [names[id(p)] for group in optimizer.param_groups for p in group["params"]]
    theirs = full.get("parameter_names")
    if theirs is not None and theirs != ours:
        differ = next((i for i, (a, b) in enumerate(zip(ours, theirs, strict=False)) if a != b), None)
        where = "" if differ is None else f"; at index {differ}: saved {theirs[differ]}, here {ours[differ]}"
        raise ShardedCheckpointError(
            f"{source}: saved for {len(theirs)} parameters, this optimizer holds {len(ours)} "
            f"in another order or set{where}"
        )
    expert_split = _expert_parallel_names(model)
    parameters = [p for group in optimizer.param_groups for p in group["params"]]
    state = {
        index: {
            key: (
                _shard(value, parameters[index], expert_split.get(ours[index]))
                if torch.is_tensor(value) and value.dim() > 0
                else value
            )
            for key, value in values.items()
        }
        for index, values in full["state"].items()
    }
    optimizer.load_state_dict({"state": state, "param_groups": full["param_groups"]})


def save_checkpoint(
    path: str | Path, model: Transformer, optimizer: torch.optim.Optimizer | None = None
) -> Path:
    """`path/model/` (Hugging Face) and, with an optimizer, `path/optimizer.pt` (collective)."""
    path = Path(path)
    save_model(model, path / MODEL_DIR)
    if optimizer is not None:
        full = gather_optimizer_state(optimizer, model)
        if not dist.is_initialized() or dist.get_rank() == 0:
            torch.save(full, path / OPTIMIZER_FILE)
        if dist.is_initialized():
            dist.barrier()
    return path


def load_model(path: str | Path, meshes: Meshes | None, dtype: torch.dtype = torch.float32) -> Transformer:
    """The checkpoint's model, sharded for `meshes` (None = one plain process)."""
    model = load_pretrained(Path(path) / MODEL_DIR, dtype=dtype)
    if meshes is None:
        return model
    device = meshes.dense.device_type
    return parallelize(model.to(device), meshes)


def load_optimizer(path: str | Path, optimizer: torch.optim.Optimizer, model: torch.nn.Module) -> None:
    """Restore `path/optimizer.pt` into an optimizer built over `model` (collective-free)."""
    file = Path(path) / OPTIMIZER_FILE
    if not file.is_file():
        raise ShardedCheckpointError(f"{file}: missing (the checkpoint was saved without an optimizer)")
    load_optimizer_state(optimizer, model, torch.load(file, weights_only=False), source=str(file))
