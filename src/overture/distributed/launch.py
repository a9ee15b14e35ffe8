"""Starting training processes: torchrun's environment, the process group, local spawning and Ray.

A training function runs the same way under four launchers:

- one process: `run_parallel(fn, parallel)` with `parallel.nproc = 1` calls it directly;
- torchrun (or any launcher that sets RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, LOCAL_RANK):
  each process calls `run_parallel`, which joins the process group the environment describes;
- local spawning: `run_parallel` outside such an environment starts `nproc` processes on this
  machine (`spawn`), gives them a free port, and returns each rank's result;
- Ray (`runtime.ray` / `runtime.ray_address`): `ray_spawn` starts the ranks as actors in one
  placement group, rank 0's node address as MASTER_ADDR; each actor sets torchrun's variables
  and runs the same function.

Whatever the launcher, an exception raised by a rank is raised again here as itself (the first
failing rank's, its traceback attached as a note), so callers catch the errors they know, and
`echo=` brings the ranks' progress lines back to a callable of this process (`LineRelay`).
The backend is gloo on CPU and NCCL on CUDA unless `parallel.backend` names one.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import socket
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from overture.config import RuntimeConfig
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


# ----------------------------------------------------------------------------- progress lines


class RemoteEcho:
    """A picklable `echo` for a started rank: each line goes over TCP to a `LineRelay`."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self._socket: socket.socket | None = None

    def __getstate__(self) -> dict[str, Any]:
        # The connection is this process's own; a copy in another process opens its own.
        return {"host": self.host, "port": self.port, "_socket": None}

    def __call__(self, line: str) -> None:
        if self._socket is None:
            self._socket = socket.create_connection((self.host, self.port))
        self._socket.sendall((line.rstrip("\n") + "\n").encode())

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None


class LineRelay:
    """Receives the lines of `RemoteEcho`s and passes each to `echo` here, in the order each
    rank sent them (a thread per connection)."""

    def __init__(self, echo: Callable[[str], None], host: str = "127.0.0.1") -> None:
        self._echo = echo
        self._server = socket.create_server((host, 0))
        # accept() wakes up now and then to notice `close`.
        self._server.settimeout(0.2)
        self.host, self.port = host, self._server.getsockname()[1]
        self._closing = threading.Event()
        self._readers: list[threading.Thread] = []
        self._acceptor = threading.Thread(target=self._accept, daemon=True, name="line-relay")
        self._acceptor.start()

    def sender(self) -> RemoteEcho:
        return RemoteEcho(self.host, self.port)

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._server.accept()
            except TimeoutError:
                # Only once nothing waits to be accepted: a connection made just before `close`
                # still has its lines read.
                if self._closing.is_set():
                    return
                continue
            except OSError:
                return
            reader = threading.Thread(target=self._read, args=(connection,), daemon=True)
            reader.start()
            self._readers.append(reader)

    def _read(self, connection: socket.socket) -> None:
        connection.settimeout(None)
        with connection, connection.makefile("r", encoding="utf-8", errors="replace") as lines:
            for line in lines:
                self._echo(line.rstrip("\n"))

    def close(self, timeout: float = 5.0) -> None:
        """Stop accepting; wait (bounded) for the lines still on their way from finished ranks."""
        self._closing.set()
        self._acceptor.join(timeout)
        self._server.close()
        for reader in self._readers:
            reader.join(timeout)


def _call(fn: Callable[..., Any], args: tuple[Any, ...], echo: Callable[[str], None] | None) -> Any:
    """`fn(*args)`, with `echo=` when the caller asked for progress lines."""
    return fn(*args) if echo is None else fn(*args, echo=echo)


# ----------------------------------------------------------------------------- one rank


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


def _run_rank(
    fn: Callable[..., Any], args: tuple[Any, ...], echo: RemoteEcho | None, error_file: Path | None
) -> Any:
    """This rank's `fn`, leaving the group (and the relay) however it ends; with `error_file`, an
    exception is also kept there for the launcher to raise as itself."""
    try:
        result = _call(fn, args, echo)
        if dist.is_initialized():
            # No rank leaves while a peer may still be talking to it: gloo aborts a process whose
            # connection is closed mid-use ("terminate called without an active exception").
            dist.barrier()
            _leave_together()
        return result
    except BaseException as exc:
        if error_file is not None:
            _keep_exception(exc, error_file)
        raise
    finally:
        if echo is not None:
            echo.close()
        if dist.is_initialized():
            dist.destroy_process_group()


def _leave_together() -> None:
    """Wait, through the rendezvous store rather than gloo, until every rank has finished its last
    collective; the store's host (rank 0) leaves last, so no rank still talks to a closed peer.

    A gloo barrier is itself a collective: a rank can return from it while its last message to a
    peer is still in flight, and closing the group then aborts that peer.
    """
    store = dist.distributed_c10d._get_default_store()
    world = dist.get_world_size()
    store.add("overture/finished", 1)
    while int(store.add("overture/finished", 0)) < world:
        time.sleep(0.005)
    if dist.get_rank() != 0:
        store.add("overture/left", 1)
        return
    while int(store.add("overture/left", 0)) < world - 1:
        time.sleep(0.005)


def _keep_exception(exc: BaseException, file: Path) -> None:
    # An exception that does not pickle is reported by torch's own error instead.
    with contextlib.suppress(pickle.PicklingError, TypeError, AttributeError, OSError):
        file.write_bytes(pickle.dumps((exc, traceback.format_exc())))


def _rank_error(results: Path, nproc: int) -> BaseException | None:
    """The exception of the lowest rank that kept one, with its traceback as a note."""
    for rank in range(nproc):
        file = results / f"error-{rank}.pt"
        if file.is_file():
            try:
                exc, text = pickle.loads(file.read_bytes())
            except Exception:  # an unreadable error: torch's own report stands
                continue
            exc.add_note(f"raised on rank {rank} of {nproc}:\n{text}")
            return exc
    return None


# ----------------------------------------------------------------------------- local processes


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
    result = _run_rank(fn, args, echo, Path(results) / f"error-{local_rank}.pt")
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
                error = _rank_error(Path(results), parallel.nproc)
                if error is None:
                    raise
                raise error from failure
            files = [Path(results) / f"rank-{rank}.pt" for rank in range(parallel.nproc)]
            return [torch.load(file, weights_only=False) for file in files]
    finally:
        if relay is not None:
            relay.close()


# ----------------------------------------------------------------------------- Ray actors

# Ray's scheduler sees each CPU rank as this fraction of a core, so that a 2-core machine places
# 4 ranks; the ranks then share the cores as spawned processes do (threads per `join_job`).
RANK_CPUS = 0.01
PLACEMENT_TIMEOUT_S = 60.0


class RayRank:
    """One training rank as a Ray actor (the class is made remote by `ray_rank_actors`); subclasses
    that keep state between calls (a sharded trainer) `join_job` in a method of their own."""

    def address(self) -> tuple[str, int]:
        """This node's address and a port free on it: MASTER_ADDR and MASTER_PORT, from rank 0."""
        import ray

        return ray.util.get_node_ip_address(), free_port()

    def run(
        self,
        fn: Callable[..., Any],
        parallel: ParallelConfig,
        rank: int,
        master_addr: str,
        port: int,
        device_type: str,
        args: tuple[Any, ...],
        echo: RemoteEcho | None,
    ) -> Any:
        # Ray shows each actor only its own GPU, so that GPU is device 0 here.
        local_rank = 0 if device_type == "cuda" else rank
        join_job(parallel, rank, local_rank, master_addr, port, device_type)
        return _run_rank(fn, args, echo, None)


@contextlib.contextmanager
def ray_rank_actors(
    ray: Any, parallel: ParallelConfig, actor_class: type, device_type: str
) -> Iterator[list[Any]]:
    """parallel.nproc actors of `actor_class` (a subclass of `RayRank`), one per bundle of a PACK
    placement group (one GPU per rank on CUDA); killed, and the group removed, on exit."""
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    resources = {"num_gpus": 1, "num_cpus": 0} if device_type == "cuda" else {"num_cpus": RANK_CPUS}
    bundle = {"GPU": 1} if device_type == "cuda" else {"CPU": RANK_CPUS}
    group = placement_group([dict(bundle) for _ in range(parallel.nproc)], strategy="PACK")
    try:
        ray.get(group.ready(), timeout=PLACEMENT_TIMEOUT_S)
    except ray.exceptions.GetTimeoutError:
        remove_placement_group(group)
        raise LaunchError(
            f"Ray could not place parallel.nproc = {parallel.nproc} ranks of {bundle} within "
            f"{PLACEMENT_TIMEOUT_S:.0f} s; the cluster has {ray.available_resources()}"
        ) from None
    remote_class = ray.remote(actor_class)
    actors = [
        remote_class.options(
            **resources,
            scheduling_strategy=PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=i),
        ).remote()
        for i in range(parallel.nproc)
    ]
    try:
        yield actors
    finally:
        # Ranks still waiting in a collective for a failed peer would wait forever.
        for actor in actors:
            ray.kill(actor)
        remove_placement_group(group)


def ray_spawn(
    fn: Callable[..., Any],
    parallel: ParallelConfig,
    runtime: RuntimeConfig,
    *args: Any,
    device_type: str | None = None,
    echo: Callable[[str], None] | None = None,
) -> list[Any]:
    """Run `fn(*args)` as parallel.nproc Ray actors (`ray_rank_actors`) on the cluster `runtime`
    names; returns each rank's result."""
    from overture.distributed.ray_runtime import ray_cluster

    device_type = device_type or default_device_type()
    with ray_cluster(runtime) as ray, ray_rank_actors(ray, parallel, RayRank, device_type) as actors:
        relay = LineRelay(echo, ray.util.get_node_ip_address()) if echo is not None else None
        try:
            master_addr, port = ray.get(actors[0].address.remote())
            sender = relay.sender() if relay is not None else None
            runs = [
                actor.run.remote(fn, parallel, rank, master_addr, port, device_type, args, sender)
                for rank, actor in enumerate(actors)
            ]
            return _ray_results(ray, runs)
        finally:
            if relay is not None:
                relay.close()


def _ray_results(ray: Any, runs: list[Any]) -> list[Any]:
    """Every rank's result; the first rank to fail raises its own exception (as itself)."""
    pending = list(runs)
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        try:
            ray.get(done[0])
        except ray.exceptions.RayTaskError as failure:
            cause = getattr(failure, "cause", None)
            if isinstance(cause, BaseException):
                raise cause from None
            raise
        except ray.exceptions.RayActorError as failure:
            raise LaunchError(f"a training rank's Ray actor died: {failure}") from None
    return ray.get(runs)


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
        return [_call(fn, args, echo)]
    if parallel.nproc == 1:
        return [_call(fn, args, echo)]
    if runtime is not None and runtime.uses_ray:
        return ray_spawn(fn, parallel, runtime, *args, device_type=device_type, echo=echo)
    return spawn(fn, parallel, *args, device_type=device_type, echo=echo)


def launches_processes(parallel: ParallelConfig) -> bool:
    """Whether `run_parallel` would start processes (nproc > 1, and neither torchrun's variables
    nor a process group say this process is already one rank of the job)."""
    return parallel.nproc > 1 and not dist.is_initialized() and ProcessEnv.from_environ() is None
