"""Running a training function under whichever launcher started this process, or starting its ranks.

A training function runs the same way under four launchers:

- one process: `run_parallel(fn, parallel)` with `parallel.nproc = 1` calls it directly;
- torchrun (or any launcher that sets RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, LOCAL_RANK):
  each process calls `run_parallel`, which joins the process group the environment describes;
- local spawning: `run_parallel` outside such an environment starts `nproc` processes on this
  machine (`overture.distributed.spawn`), gives them a free port, and returns each rank's result;
- Ray (`runtime.ray` / `runtime.ray_address`): `overture.distributed.ray.ranks.ray_spawn` starts
  the ranks as actors in one placement group.

Whatever the launcher, an exception raised by a rank is raised again here as itself (the first
failing rank's, its traceback attached as a note), so callers catch the errors they know, and
`echo=` brings the ranks' progress lines back to a callable of this process (`log_relay`). What
each rank runs is `rank.run_rank`; how it joins the group, `process_group`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch.distributed as dist

from overture.config import RuntimeConfig
from overture.config.schema import ParallelConfig
from overture.distributed.process_group import ProcessEnv, default_device_type, init_process_group
from overture.distributed.rank import call_with_echo
from overture.distributed.spawn import spawn


def run_parallel(
    fn: Callable[..., Any],
    parallel: ParallelConfig,
    *args: Any,
    device_type: str | None = None,
    runtime: RuntimeConfig | None = None,
    echo: Callable[[str], None] | None = None,
) -> list[Any]:
    """Run a training function under whatever launched this process; what `overture sft`,
    `pretrain` and `train` call.

    - nproc = 1 and no launcher environment: calls `fn(*args)` here, no process group.
    - under torchrun (its variables set): joins the group and runs this rank's `fn`; returns [result].
    - `runtime.uses_ray`: nproc Ray actors (`ray_spawn`); returns every rank's result.
    - otherwise: spawns nproc local processes (`spawn`) and returns every rank's result.

    With `echo`, `fn` is called with `echo=`: here the given one, in started processes one that
    sends its lines back to it.
    """
    device_type = device_type or default_device_type()
    env = ProcessEnv.from_environ()
    if env is not None:
        init_process_group(parallel, env, device_type)
        return [call_with_echo(fn, args, echo)]
    if parallel.nproc == 1:
        return [call_with_echo(fn, args, echo)]
    if runtime is not None and runtime.uses_ray:
        from overture.distributed.ray.ranks import ray_spawn

        return ray_spawn(fn, parallel, runtime, *args, device_type=device_type, echo=echo)
    return spawn(fn, parallel, *args, device_type=device_type, echo=echo)


def launches_processes(parallel: ParallelConfig) -> bool:
    """Whether `run_parallel` would start processes (nproc > 1, and neither torchrun's variables
    nor a process group say this process is already one rank of the job)."""
    return parallel.nproc > 1 and not dist.is_initialized() and ProcessEnv.from_environ() is None
