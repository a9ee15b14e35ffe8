"""Training ranks as Ray actors: one per bundle of a placement group, rank 0's node address as
MASTER_ADDR; each actor sets torchrun's variables and runs the same function as a spawned rank."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from overture.config import RuntimeConfig
from overture.config.schema import ParallelConfig
from overture.distributed.log_relay import LineRelay, RemoteEcho
from overture.distributed.process_group import LaunchError, default_device_type, free_port, join_job
from overture.distributed.rank import run_rank

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
        return run_rank(fn, args, echo, None)


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
    from overture.distributed.ray.cluster import ray_cluster

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
