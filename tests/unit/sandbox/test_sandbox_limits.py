"""Bounded disk and memory per sandbox on any host: the writable layer's cap, cgroups v1 and v2,
and the rlimits-only fallback where no cgroup can be made."""

from __future__ import annotations

import asyncio
import logging
import os

import pytest
from sandbox_helpers import in_sandbox, make_base

from overture.config import SandboxConfig
from overture.sandbox import SandboxPool
from overture.sandbox import limits as limits_module
from overture.sandbox.limits import CgroupLimits

MIB = 1024 * 1024
CAP = 4 * MIB
MANY_FILES = """
import os
os.mkdir("many")
made, error = 0, "none"
try:
    for made in range(5000):
        open(f"many/{made}", "w").close()
    made = 5000
except OSError as exc:
    error = exc.strerror
print(made, error)
"""


@pytest.fixture
def base(tmp_path):
    return make_base(tmp_path)


def shm_used() -> int:
    info = os.statvfs("/dev/shm")
    return (info.f_blocks - info.f_bfree) * info.f_frsize


def test_writing_past_the_workspace_cap_fails_inside_with_enospc(base):
    async def body(sb):
        flood = await sb.exec("head -c 12M /dev/zero > big; echo exit=$?; stat -c %s big")
        after = await sb.exec("echo small > pkg/small.txt; echo exit=$?")  # the layer is full
        await sb.exec("rm big")
        again = await sb.exec("echo small > pkg/small.txt; echo exit=$?")  # and usable once freed
        return flood, after, again

    flood, after, again = in_sandbox(base, body, workspace_bytes=CAP)
    assert "No space left on device" in flood.stderr
    assert int(flood.stdout.split()[-1]) <= CAP
    assert "exit=0" not in after.stdout
    assert "exit=0" in again.stdout


def test_many_empty_files_hit_the_layer_inode_cap(base):
    result = in_sandbox(
        base,
        lambda sb: sb.exec(["python", "-c", MANY_FILES]),
        workspace_bytes=CAP,
        timeout_s=120,
    )
    made, error = result.stdout.split(maxsplit=1)
    assert int(made) < 5000, result  # 4 MiB of layer holds about a thousand inodes
    assert "No space left on device" in error


def test_host_shared_memory_stays_within_live_sandboxes_times_the_cap(base):
    async def main():
        before = shm_used()
        async with (
            SandboxPool(SandboxConfig(workspace_bytes=CAP, max_live=2)) as pool,
            pool.sandbox(base) as first,
            pool.sandbox(base) as second,
        ):
            floods = await asyncio.gather(
                *(box.exec("head -c 12M /dev/urandom > big") for box in (first, second))
            )
            during = shm_used()
        return before, during, floods

    before, during, floods = asyncio.run(main())
    assert all("No space left on device" in flood.stderr for flood in floods)
    assert during - before <= 2 * CAP, (before, during)


def test_without_any_cgroup_the_pool_warns_and_rlimits_still_bound_commands(
    base, tmp_path, monkeypatch, caplog
):
    monkeypatch.setattr(limits_module, "CGROUP_ROOT", tmp_path / "no-cgroups")
    monkeypatch.setattr(CgroupLimits, "warned", False)
    caplog.set_level(logging.WARNING, logger="overture.sandbox.limits")
    rlimits = "import resource as r; print(r.getrlimit(r.RLIMIT_NPROC)[0], r.getrlimit(r.RLIMIT_AS)[0])"
    result = in_sandbox(base, lambda sb: sb.exec(["python", "-c", rlimits]), max_processes=77, memory_mb=512)
    assert any("no cgroup can be made" in record.getMessage() for record in caplog.records)
    processes, memory = result.stdout.split()
    assert int(processes) in (77, 77 * SandboxConfig().max_live)  # shared by every sandbox when run as root
    assert int(memory) == 512 * MIB


def test_cgroup_v2_bounds_a_sandbox_processes_where_the_machine_allows(base):
    hierarchies = CgroupLimits().hierarchies
    if not any("memory.max" in files for _, files in hierarchies):
        pytest.skip("this machine gives no cgroup v2 subtree with pids and memory (cgroup v1 or none)")
    result = in_sandbox(
        base,
        lambda sb: sb.exec("for i in $(seq 60); do sleep 5 & done 2>/dev/null; jobs -p | wc -l", timeout=30),
        max_processes=20,
    )
    assert int(result.stdout.split()[-1]) < 20
