"""Joining a training job's process group: torchrun's environment, the backend, the group itself.

Every launcher (`overture.distributed.launch`) ends in the same place: each rank has torchrun's
variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, LOCAL_RANK) and joins the group they
describe (`join_job`, `init_process_group`). The backend is gloo on CPU and NCCL on CUDA unless
`parallel.backend` names one.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

import torch
import torch.distributed as dist

from overture.config.schema import ParallelConfig

ENV_KEYS = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


class LaunchError(RuntimeError):
    """The environment or the configuration cannot start the requested processes."""


@dataclass(frozen=True)
class ProcessEnv:
    """This process's place in the job, as torchrun describes it."""

    rank: int
    world_size: int
    local_rank: int
    master_addr: str
    master_port: int

    @classmethod
    def from_environ(cls, environ: dict[str, str] | None = None) -> ProcessEnv | None:
        """The torchrun variables of `environ` (default os.environ); None when none are set."""
        environ = dict(os.environ) if environ is None else environ
        present = [key for key in ENV_KEYS if key in environ]
        if not present:
            return None
        missing = [key for key in ENV_KEYS if key not in environ]
        if missing:
            raise LaunchError(
                f"torch.distributed environment incomplete: {', '.join(present)} set but "
                f"{', '.join(missing)} missing"
            )
        try:
            return cls(
                rank=int(environ["RANK"]),
                world_size=int(environ["WORLD_SIZE"]),
                local_rank=int(environ.get("LOCAL_RANK", environ["RANK"])),
                master_addr=environ["MASTER_ADDR"],
                master_port=int(environ["MASTER_PORT"]),
            )
        except ValueError as exc:
            raise LaunchError(f"torch.distributed environment: not an integer: {exc}") from None


def free_port() -> int:
    """A TCP port nobody listens on right now (for MASTER_PORT of locally spawned jobs)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def resolve_backend(parallel: ParallelConfig, device_type: str) -> str:
    """parallel.backend with 'auto' resolved: NCCL for CUDA tensors, gloo otherwise."""
    if parallel.backend != "auto":
        if parallel.backend == "nccl" and device_type != "cuda":
            raise LaunchError("parallel.backend = 'nccl' needs CUDA devices; use 'gloo' or 'auto' on CPU")
        return parallel.backend
    return "nccl" if device_type == "cuda" else "gloo"


def default_device_type() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def init_process_group(parallel: ParallelConfig, env: ProcessEnv, device_type: str) -> None:
    """Join the job's process group (idempotent) after checking it has parallel.nproc processes."""
    if env.world_size != parallel.nproc:
        raise LaunchError(
            f"parallel.nproc is {parallel.nproc} but the launcher started {env.world_size} processes "
            "(WORLD_SIZE); make them agree"
        )
    if dist.is_initialized():
        return
    if device_type == "cuda":
        torch.cuda.set_device(env.local_rank)
    dist.init_process_group(
        backend=resolve_backend(parallel, device_type),
        init_method=f"tcp://{env.master_addr}:{env.master_port}",
        rank=env.rank,
        world_size=env.world_size,
    )


def join_job(
    parallel: ParallelConfig, rank: int, local_rank: int, master_addr: str, port: int, device_type: str
) -> None:
    """Become rank `rank` of a job started by this module: torchrun's variables, then the group."""
    # The variables torchrun would set, so that code below (and libraries) see one convention.
    os.environ.update(
        RANK=str(rank),
        LOCAL_RANK=str(local_rank),
        WORLD_SIZE=str(parallel.nproc),
        LOCAL_WORLD_SIZE=str(parallel.nproc),
        MASTER_ADDR=master_addr,
        MASTER_PORT=str(port),
    )
    if "OMP_NUM_THREADS" not in os.environ:
        # nproc processes share this machine's cores; more threads than cores only thrash.
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // parallel.nproc))
    env = ProcessEnv.from_environ()
    assert env is not None
    init_process_group(parallel, env, device_type)
