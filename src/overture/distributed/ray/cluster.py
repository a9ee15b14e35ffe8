"""Starting or joining the Ray cluster that a run's actors live on (DESIGN.md decision 7).

`runtime.ray = true` starts a local cluster for the run (and shuts it down after);
`runtime.ray_address` joins a running one (`"auto"` finds the local one, `"ray://host:10001"` a
remote one) and leaves it running. A cluster that is already up in this process is used as it is.

The engine and rollout-worker actors ask for no CPU of Ray's scheduler (`ACTOR_OPTIONS`), and
training ranks for a hundredth of one (`ranks.ray_rank_actors`): on one machine they share the
cores the way the in-process runtime's threads do, each setting torch's intra-op threads from
`runtime.threads` (`overture.runtime.devices`). Placing actors on the nodes of a real cluster
(GPUs, CPU quotas) is not this file's job.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator
from typing import Any

from overture.config import RuntimeConfig

# Ray must not take over the terminal or import the dashboard's web stack in a training run.
_INIT_OPTIONS: dict[str, Any] = {"include_dashboard": False, "log_to_driver": True}

ACTOR_OPTIONS: dict[str, Any] = {"num_cpus": 0}
CONNECT_TIMEOUT_S = 5.0


class RayUnavailableError(RuntimeError):
    """The config asks for Ray, but Ray is not installed or the cluster cannot be reached."""


def import_ray() -> Any:
    """The `ray` module, or a clear error saying how to install it."""
    try:
        import ray
    except ImportError:
        raise RayUnavailableError(
            "runtime.ray is set but Ray is not installed: pip install 'overture[ray]'"
        ) from None
    return ray


@contextlib.contextmanager
def ray_cluster(runtime: RuntimeConfig) -> Iterator[Any]:
    """The `ray` module, connected as `runtime` asks, for the duration of the block."""
    ray = import_ray()
    if ray.is_initialized():
        yield ray
        return
    options = dict(_INIT_OPTIONS)
    if runtime.ray_address:
        check_reachable(runtime.ray_address)
        options["address"] = runtime.ray_address
    else:
        # A local cluster of this machine's cores; workers run this interpreter and find this
        # package the way the driver does.
        options["num_cpus"] = os.cpu_count() or 1
    try:
        ray.init(**options)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        where = runtime.ray_address or "a local cluster"
        raise RayUnavailableError(f"runtime.ray_address: cannot start or join {where}: {exc}") from exc
    try:
        yield ray
    finally:
        ray.shutdown()


def check_reachable(address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """A clear error when nothing listens at a `host:port` (or `ray://host:port`) address; Ray
    itself would retry for minutes. `auto` and other forms are left to Ray."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit() or not host:
        return
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise RayUnavailableError(
            f"runtime.ray_address = {address!r}: no Ray cluster answers there ({exc.strerror or exc})"
        ) from None
