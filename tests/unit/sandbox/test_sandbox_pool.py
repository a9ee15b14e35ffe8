"""The sandbox pool: bounded, first come first served, pre-warmed, and leaving nothing behind."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from sandbox_helpers import host_processes_with, make_base, survivors, wait_until_running

from overture.config import SandboxConfig
from overture.sandbox import PoolClosed, PoolFull, SandboxPool, SandboxUnavailable
from overture.sandbox.isolation import owner_death_guard, require_tools
from overture.sandbox.pool import default_state_root


@pytest.fixture
def base(tmp_path):
    return make_base(tmp_path)


def run_jobs(base, max_live: int, jobs: int):
    """Start `jobs` sandbox users in order; return the order they got in, peak live, stats."""
    order, peak = [], []

    async def job(pool, i):
        async with pool.sandbox(base) as sb:
            order.append(i)
            peak.append(pool.live)
            await sb.exec("sleep 0.05")

    async def main():
        async with SandboxPool(SandboxConfig(max_live=max_live)) as pool:
            tasks = []
            for i in range(jobs):
                tasks.append(asyncio.create_task(job(pool, i)))
                await asyncio.sleep(0)  # enqueue in order
            await asyncio.gather(*tasks)
            return pool.stats()

    stats = asyncio.run(main())
    return order, max(peak), stats


def test_live_sandboxes_stay_within_the_bound(base):
    order, peak, stats = run_jobs(base, max_live=2, jobs=8)
    assert sorted(order) == list(range(8))
    assert peak == 2
    assert stats["started"] == 8 and stats["released"] == 8 and stats["live"] == 0
    assert stats["queue_wait_p99_s"] > 0.05


def test_admission_is_first_come_first_served(base):
    order, peak, _ = run_jobs(base, max_live=1, jobs=6)
    assert order == list(range(6)) and peak == 1


def test_a_full_queue_refuses_with_a_clear_error(base):
    async def main():
        async with SandboxPool(SandboxConfig(max_live=1, max_queue=1)) as pool:

            async def hold():
                async with pool.sandbox(base):
                    await asyncio.sleep(0.3)

            first = asyncio.create_task(hold())
            await asyncio.sleep(0.1)
            second = asyncio.create_task(hold())
            await asyncio.sleep(0.05)
            with pytest.raises(PoolFull, match="max_queue"):
                async with pool.sandbox(base):
                    pass
            await asyncio.gather(first, second)

    asyncio.run(main())


def test_closing_the_pool_fails_waiters_and_kills_everything(base):
    marker = f"pool-close-{time.time_ns()}"

    async def main():
        pool = SandboxPool(SandboxConfig(max_live=1))

        async def long_command():
            async with pool.sandbox(base) as sb:
                await sb.exec(["bash", "-c", f"exec -a {marker} sleep 60"], timeout=60)

        async def waiter():
            async with pool.sandbox(base):
                pass

        running = asyncio.create_task(long_command())
        assert await asyncio.to_thread(wait_until_running, marker), "the long command never started"
        waiting = asyncio.create_task(waiter())
        await asyncio.sleep(0.05)
        await pool.close()
        with pytest.raises(PoolClosed):
            await waiting
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
        return pool

    pool = asyncio.run(main())
    assert survivors([marker]) == []
    assert not pool._state.exists()


def test_dead_spare_is_replaced(base):
    async def main():
        async with SandboxPool(SandboxConfig(prewarm=1)) as pool:
            async with pool.sandbox(base):
                pass
            await asyncio.gather(*pool._warming)  # let the spare start
            (spare,) = [s for spares in pool._spares.values() for s in spares]
            holder = spare.workspace._holder
            os.kill(holder.pid, signal.SIGKILL)
            await holder.wait()
            async with pool.sandbox(base) as sb:
                result = await sb.exec("echo alive")
            return result.stdout, pool.stats()

    out, stats = asyncio.run(main())
    assert out == "alive\n"
    assert stats["replaced"] == 1


def start_owner(base: Path, tmp_path: Path, marker: str, seconds: int) -> subprocess.Popen:
    """A program that opens a pool, prints "running", then runs `sleep` under `marker` in a sandbox."""
    script = tmp_path / f"{marker}.py"
    script.write_text(
        textwrap.dedent(f"""
        import asyncio, sys
        from overture.sandbox import SandboxPool

        async def main():
            async with SandboxPool() as pool, pool.sandbox({str(base)!r}) as sb:
                print("running", flush=True)
                await sb.exec(["bash", "-c", "exec -a {marker} sleep {seconds}"], timeout={seconds})

        asyncio.run(main())
    """)
    )
    return subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE)


def test_nothing_outlives_a_killed_owner(base, tmp_path):
    marker = f"owner-killed-{time.time_ns()}"
    owner = start_owner(base, tmp_path, marker, 120)
    assert owner.stdout.readline() == b"running\n"
    assert wait_until_running(marker), "the sandboxed command never started"
    holder = f"overture-holder {base.resolve()}"
    assert host_processes_with(holder)
    owner.kill()
    owner.wait()
    assert survivors([marker, holder]) == []  # the namespace holder went with its owner too
    # What the killed pool left on disk (its state directory) is swept by the next pool.
    left = list(Path(default_state_root()).glob(f"overture-sandboxes-{owner.pid}-*"))
    assert left
    asyncio.run(SandboxPool().close())
    assert not any(p.exists() for p in left)


def test_nothing_outlives_an_owner_killed_while_its_command_starts(base, tmp_path):
    # Killed within the command's first milliseconds, before bwrap and its pid 1 have armed their
    # own parent-death signals (without the guard, about one start in three left `sleep` running).
    rng = random.Random(0)
    markers = []
    for i in range(10):
        markers.append(f"owner-killed-early-{i}-{time.time_ns()}")
        owner = start_owner(base, tmp_path, markers[-1], 30)
        assert owner.stdout.readline() == b"running\n"
        time.sleep(rng.uniform(0, 0.03))
        owner.kill()
        owner.wait()
    assert survivors(markers) == []
    asyncio.run(SandboxPool().close())  # sweeps what the killed pools left on disk


def test_the_owner_death_guard_runs_nothing_once_its_owner_is_gone(tmp_path):
    tools = require_tools()
    gone = subprocess.Popen(["true"])
    gone.wait()  # a pid that is no process's parent any more

    def runs_under(owner_pid: int) -> bool:
        ran = tmp_path / f"ran-{owner_pid}"
        guard = owner_death_guard(tools["setpriv"], tools["unshare"], owner_pid)
        # A user namespace of its own, so that creating the pid namespace needs no privilege.
        own_user_namespace = [tools["unshare"], "--user", "--map-root-user", "--"]
        subprocess.run([*own_user_namespace, *guard, "/bin/sh", "-c", f"echo > {ran}"], timeout=30)
        return ran.exists()

    assert runs_under(os.getpid())
    assert not runs_under(gone.pid)


def test_without_bubblewrap_the_pool_refuses_to_start(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH on which no bwrap can be found
    with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap"):
        SandboxPool()


def test_closing_the_pool_waits_for_sandboxes_still_closing_after_their_caller_was_cancelled(tmp_path):
    base = make_base(tmp_path)

    async def main():
        pool = SandboxPool(SandboxConfig())
        inside = asyncio.Event()

        async def hold():
            async with pool.sandbox(base):
                inside.set()
                await asyncio.sleep(3600)

        holders = [asyncio.create_task(hold()) for _ in range(4)]
        await inside.wait()
        await asyncio.sleep(0.2)
        for holder in holders:
            holder.cancel()  # their closes go on, shielded, after the cancellation
        await asyncio.sleep(0)
        await pool.close()  # must wait for them, not race them removing the same state
        await asyncio.gather(*holders, return_exceptions=True)
        return pool

    pool = asyncio.run(main())
    assert pool.live == 0 and pool.counters["released"] == 4
    assert not pool._state.exists()
