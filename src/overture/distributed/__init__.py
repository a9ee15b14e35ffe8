"""Layer 4: training over many processes — device meshes (HSDP + EP), expert-parallel dispatch,
launching, sharded checkpoints and communication accounting.

    parallel = config.parallel                       # ParallelConfig: nproc, dp_replicate, dp_shard, ep
    run_parallel(train, parallel, ..., runtime=...)  # one process, torchrun, spawned locally, or Ray
    # inside `train`, on every rank:
    meshes = meshes_for_run(parallel)                # None in one plain process
    model = Transformer(config.model)
    if meshes is not None:
        model = parallelize(model, meshes)
    result = lm_train_step(model, optimizer, local_batch(batch, meshes), meshes)
    save_checkpoint(path, model, optimizer)          # loads into any layout, or `load_pretrained`
"""

from overture.distributed.checkpoint import (
    ShardedCheckpointError,
    gather_model_state,
    gather_optimizer_state,
    load_model,
    load_model_state,
    load_optimizer,
    load_optimizer_state,
    save_checkpoint,
    save_model,
    unsharded_model,
)
from overture.distributed.comm_counter import CollectiveCounter
from overture.distributed.expert_parallel import ExpertDispatch, all_to_all, shard_experts
from overture.distributed.launch import launches_processes, run_parallel
from overture.distributed.lm_step import (
    BatchSplitError,
    StepResult,
    all_reduce_floats,
    clip_gradients,
    global_grad_norm,
    lm_train_step,
    load_balancing_share,
    local_batch,
    sum_router_loads,
)
from overture.distributed.log_relay import LineRelay, RemoteEcho
from overture.distributed.meshes import (
    LayoutError,
    Meshes,
    build_meshes,
    check_layout_fits_model,
    meshes_for_run,
)
from overture.distributed.parallelize import parallelize
from overture.distributed.process_group import LaunchError, ProcessEnv, free_port
from overture.distributed.ray.ranks import ray_spawn
from overture.distributed.spawn import spawn

__all__ = [
    "BatchSplitError",
    "CollectiveCounter",
    "ExpertDispatch",
    "LaunchError",
    "LayoutError",
    "LineRelay",
    "Meshes",
    "ProcessEnv",
    "RemoteEcho",
    "ShardedCheckpointError",
    "StepResult",
    "all_reduce_floats",
    "all_to_all",
    "build_meshes",
    "check_layout_fits_model",
    "clip_gradients",
    "free_port",
    "gather_model_state",
    "gather_optimizer_state",
    "global_grad_norm",
    "launches_processes",
    "lm_train_step",
    "load_balancing_share",
    "load_model",
    "load_model_state",
    "load_optimizer",
    "load_optimizer_state",
    "local_batch",
    "meshes_for_run",
    "parallelize",
    "ray_spawn",
    "run_parallel",
    "save_checkpoint",
    "save_model",
    "shard_experts",
    "spawn",
    "sum_router_loads",
    "unsharded_model",
]
