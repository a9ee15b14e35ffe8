"""Local spawning: a training function in `parallel.nproc` fresh processes of this machine, joined
in one process group on a free port, each rank's result (or first exception) returned here."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.multiprocessing as mp

from overture.config.schema import ParallelConfig
from overture.distributed.log_relay import LineRelay, RemoteEcho
from overture.distributed.process_group import LaunchError, default_device_type, free_port, join_job
from overture.distributed.rank import rank_error, run_rank


def _spawned_main(
    local_rank: int,
    fn: Callable[..., Any],
    parallel: ParallelConfig,
    port: int,
    results: str,
    device_type: str,
    args: tuple[Any, ...],
    echo: RemoteEcho | None = None,
) -> None:
    join_job(parallel, local_rank, local_rank, "127.0.0.1", port, device_type)
    result = run_rank(fn, args, echo, Path(results) / f"error-{local_rank}.pt")
    torch.save(result, Path(results) / f"rank-{local_rank}.pt")


def spawn(
    fn: Callable[..., Any],
    parallel: ParallelConfig,
    *args: Any,
    device_type: str | None = None,
    echo: Callable[[str], None] | None = None,
) -> list[Any]:
    """Run `fn(*args)` in parallel.nproc fresh local processes joined in one process group.

    `fn` must be importable by name (a module-level function). Returns each rank's return value
    in rank order; an exception in any process is raised here (see the module docstring). With
    `echo`, every rank's `fn` gets an `echo=` keyword whose lines reach this `echo`.
    """
    device_type = device_type or default_device_type()
    if device_type == "cuda" and torch.cuda.device_count() < parallel.nproc:
        raise LaunchError(
            f"parallel.nproc is {parallel.nproc} but only {torch.cuda.device_count()} CUDA devices "
            "are visible"
        )
    relay = LineRelay(echo) if echo is not None else None
    try:
        with tempfile.TemporaryDirectory(prefix="overture-spawn-") as results:
            sender = relay.sender() if relay is not None else None
            try:
                mp.start_processes(
                    _spawned_main,
                    args=(fn, parallel, free_port(), results, device_type, args, sender),
                    nprocs=parallel.nproc,
                    join=True,
                    start_method="spawn",
                )
            except (mp.ProcessRaisedException, mp.ProcessExitedException) as failure:
                error = rank_error(Path(results), parallel.nproc)
                if error is None:
                    raise
                raise error from failure
            files = [Path(results) / f"rank-{rank}.pt" for rank in range(parallel.nproc)]
            return [torch.load(file, weights_only=False) for file in files]
    finally:
        if relay is not None:
            relay.close()
