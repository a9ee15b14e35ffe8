"""Device meshes for dense parameters and for experts (torchtitan's layout).

Ranks are laid out as rank = (replica × dp_shard) + (expert_shard_index × ep) + ep_index, so that
one mesh for dense parameters and one for experts cover the same processes:

    dense   (dp_replicate, dp_shard)               HSDP: shard within a group, replicate across
    experts (dp_replicate, expert_shard, ep)        ep splits the experts of a shard group;
                                                     FSDP shards each ep rank's experts over
                                                     expert_shard (= dp_shard / ep), HSDP again
                                                     over dp_replicate

Every rank is a data-parallel rank: it takes its own slice of the global batch. The ep ranks of
one group exchange tokens, which is why they are the innermost (closest) ranks.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

from overture.config import ModelConfig
from overture.config.schema import ParallelConfig

DENSE_DIMS = ("dp_replicate", "dp_shard")
EXPERT_DIMS = ("dp_replicate", "expert_shard", "ep")


class LayoutError(ValueError):
    """A parallel layout that does not fit the model or the running processes."""


def check_layout_fits_model(parallel: ParallelConfig, model: ModelConfig) -> None:
    """Errors naming the keys when the experts cannot be split as asked."""
    if parallel.ep > 1 and model.num_experts == 0:
        raise LayoutError(
            f"parallel.ep is {parallel.ep} but the model has no experts (model.num_experts = 0)"
        )
    if model.num_experts and model.num_experts % parallel.ep:
        raise LayoutError(
            f"parallel.ep ({parallel.ep}) must divide model.num_experts ({model.num_experts}): "
            "each ep rank holds the same number of experts"
        )


@dataclass
class Meshes:
    """The two meshes of one run and the groups the training code talks over."""

    parallel: ParallelConfig
    dense: DeviceMesh
    experts: DeviceMesh

    @property
    def world_size(self) -> int:
        return self.parallel.nproc

    @property
    def rank(self) -> int:
        return dist.get_rank()

    @property
    def ep_size(self) -> int:
        return self.parallel.ep

    @property
    def ep_rank(self) -> int:
        return self.experts.get_local_rank("ep")

    @property
    def ep_group(self) -> dist.ProcessGroup:
        return self.experts.get_group("ep")

    @property
    def world_group(self) -> dist.ProcessGroup:
        return dist.group.WORLD

    def dense_fsdp_mesh(self) -> DeviceMesh:
        """What `fully_shard` gets for dense parameters: 2-D (HSDP) with replicas, else 1-D."""
        return _data_parallel_mesh(self.dense, "dp_replicate", "dp_shard")

    def expert_fsdp_mesh(self) -> DeviceMesh:
        """What `fully_shard` gets for each ep rank's experts: (dp_replicate, expert_shard)."""
        return _data_parallel_mesh(self.experts, "dp_replicate", "expert_shard")


def _data_parallel_mesh(mesh: DeviceMesh, replicate: str, shard: str) -> DeviceMesh:
    # A replicate dim of size one would only add an all-reduce over one rank to every step.
    if mesh.size(mesh.mesh_dim_names.index(replicate)) == 1:
        return mesh[shard]
    return mesh[(replicate, shard)]


def build_meshes(parallel: ParallelConfig, device_type: str = "cpu") -> Meshes:
    """Both meshes over the running process group, which must hold parallel.nproc processes."""
    if not dist.is_initialized():
        raise LayoutError("build_meshes needs an initialized process group (see overture.distributed.launch)")
    if dist.get_world_size() != parallel.nproc:
        raise LayoutError(
            f"parallel.nproc is {parallel.nproc} but the process group has {dist.get_world_size()} processes"
        )
    dense = init_device_mesh(
        device_type, (parallel.dp_replicate, parallel.shard_size), mesh_dim_names=DENSE_DIMS
    )
    experts = init_device_mesh(
        device_type, (parallel.dp_replicate, parallel.expert_shard, parallel.ep), mesh_dim_names=EXPERT_DIMS
    )
    return Meshes(parallel=parallel, dense=dense, experts=experts)


def meshes_for_run(parallel: ParallelConfig, device_type: str = "cpu") -> Meshes | None:
    """What a training function launched by `run_parallel` asks for: None in one plain process
    (nproc = 1, no process group: train unsharded), else `build_meshes`."""
    if parallel.nproc == 1 and not dist.is_initialized():
        return None
    return build_meshes(parallel, device_type)
