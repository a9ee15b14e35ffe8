"""Starting or joining the Ray cluster that a run's actors live on (DESIGN.md decision 7).

`runtime.ray = true` starts a local cluster for the run (and shuts it down after);
`runtime.ray_address` joins a running one (`"auto"` finds the local one, `"ray://host:10001"` a
remote one) and leaves it running. A cluster that is already up in this process is used as it is.

Actors of a run ask for no CPU of Ray's scheduler (`ACTOR_OPTIONS`): on one machine the engine,
the trainer and the rollout workers share the cores the way the in-process runtime's threads
do, each setting torch's intra-op threads from `runtime.threads` (`overture.model.devices`).
Placing actors on the nodes of a real cluster (GPUs, CPU quotas) is not this file's job.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from overture.config import RuntimeConfig

# Ray must not take over the terminal or import the dashboard's web stack in a training run.
_INIT_OPTIONS: dict[str, Any] = {"include_dashboard": False, "log_to_driver": True}

ACTOR_OPTIONS: dict[str, Any] = {"num_cpus": 0}


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
