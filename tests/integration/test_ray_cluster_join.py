"""`runtime.ray_address` joins a running Ray cluster (one `ray start --head` on this machine):
the run's actors are placed on it, and leaving the run leaves the cluster running."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

RAY = Path(sys.executable).with_name("ray")

CLIENT = """
import sys
from overture.config import RuntimeConfig
from overture.distributed.ray.cluster import ray_cluster
from overture.distributed.ray.engine import WeightsKeeper

with ray_cluster(RuntimeConfig(ray_address=sys.argv[1])) as ray:
    print(ray.get_runtime_context().gcs_address)
    keeper = ray.remote(WeightsKeeper).options(num_cpus=0).remote()
    ray.get(keeper.put.remote([], 7))
    print(ray.get(keeper.get.remote())[1])
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def head():
    """A Ray head node started outside the test process; stopped after the test."""
    port = free_port()
    # Ray 2.60 starts clusters with token authentication; a driver joining one must use it too.
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "token"}
    # Ray's socket paths must stay short: a temp dir of its own directly under /tmp.
    temp = tempfile.mkdtemp(prefix="ray-", dir="/tmp")
    start = [str(RAY), "start", "--head", f"--port={port}", "--num-cpus=1", "--include-dashboard=false",
             f"--temp-dir={temp}"]  # fmt: skip
    started = subprocess.run(start, capture_output=True, text=True, env=env, timeout=120)
    try:
        assert started.returncode == 0, started.stderr[-2000:]
        # The address the head advertises (this node's address, not necessarily 127.0.0.1).
        (address,) = re.findall(r"ray start --address='([^']+)'", started.stdout + started.stderr)
        yield address, env
    finally:
        subprocess.run([str(RAY), "stop", "--force"], capture_output=True, env=env, timeout=120)
        shutil.rmtree(temp, ignore_errors=True)


def run_client(address: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", CLIENT, address], capture_output=True, text=True, env=env, timeout=180
    )


def test_ray_address_joins_the_running_cluster_and_leaves_it_running(head):
    address, env = head
    first = run_client(address, env)
    assert first.returncode == 0, first.stderr[-2000:]
    assert first.stdout.split() == [address, "7"]  # on that cluster; an actor of the run answered
    second = run_client(address, env)  # the first run's exit did not stop the cluster
    assert second.returncode == 0 and second.stdout.split() == [address, "7"], second.stderr[-2000:]


def test_an_unreachable_address_is_a_clear_error():
    unused = f"127.0.0.1:{free_port()}"
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    result = run_client(unused, env)
    assert result.returncode != 0
    assert "runtime.ray_address" in result.stderr and unused in result.stderr
