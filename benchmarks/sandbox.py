"""Sandbox start latency, burst throughput and idle memory, next to bare bubblewrap in the same run.

Usage: python benchmarks/sandbox.py [--serial N] [--burst N] [--concurrency C] [--idle N]
Prints a human summary, then one JSON object on the last line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import tempfile
import time
from pathlib import Path

from overture.config import SandboxConfig
from overture.sandbox import SandboxPool
from overture.sandbox.pool import percentile

# The reference: bubblewrap alone, new namespaces and a read-only /usr, running /bin/true.
BARE_BWRAP = [
    "bwrap",
    "--unshare-all",
    "--die-with-parent",
    "--ro-bind",
    "/usr",
    "/usr",
    "--symlink",
    "usr/bin",
    "/bin",
    "--symlink",
    "usr/lib",
    "/lib",
    "--symlink",
    "usr/lib64",
    "/lib64",
    "--proc",
    "/proc",
    "--dev",
    "/dev",
    "/bin/true",
]


def make_repository(root: Path, files: int = 200) -> Path:
    """A repository-sized base: `files` small Python modules in a few packages."""
    for i in range(files):
        module = root / f"pkg{i % 10}" / f"mod{i}.py"
        module.parent.mkdir(parents=True, exist_ok=True)
        module.write_text(f"def f{i}(x):\n    return x + {i}\n" * 20)
    return root


def bare_bwrap(count: int) -> dict:
    times = []
    for _ in range(count):
        start = time.perf_counter()
        subprocess.run(BARE_BWRAP, check=True)
        times.append(time.perf_counter() - start)
    return {"p50_ms": 1000 * percentile(times, 50), "p99_ms": 1000 * percentile(times, 99)}


async def serial(base: Path, count: int, prewarm: int) -> dict:
    """Request a sandbox, run /bin/true in it (timed), then release it (timed apart)."""
    ready, released = [], []
    async with SandboxPool(SandboxConfig(prewarm=prewarm)) as pool:
        for _ in range(count):
            start = time.perf_counter()
            async with pool.sandbox(base) as box:
                result = await box.exec(["/bin/true"])
                ready.append(time.perf_counter() - start)
                assert result.exit_code == 0, result
                closing = time.perf_counter()
            released.append(time.perf_counter() - closing)
            await asyncio.sleep(0.002)  # a caller's own work between episodes; lets a spare warm up
    return {
        "prewarm": prewarm,
        "start_and_command_p50_ms": 1000 * percentile(ready, 50),
        "start_and_command_p99_ms": 1000 * percentile(ready, 99),
        "release_p50_ms": 1000 * percentile(released, 50),
    }


async def burst(base: Path, count: int, concurrency: int) -> dict:
    failures = 0

    async def one(pool: SandboxPool) -> None:
        nonlocal failures
        try:
            async with pool.sandbox(base) as box:
                result = await box.exec(["/bin/true"])
                failures += result.exit_code != 0
        except Exception:
            failures += 1

    async with SandboxPool(SandboxConfig(max_live=concurrency)) as pool:
        start = time.perf_counter()
        await asyncio.gather(*(one(pool) for _ in range(count)))
        seconds = time.perf_counter() - start
        stats = pool.stats()
    return {
        "sandboxes": count,
        "concurrency": concurrency,
        "seconds": seconds,
        "per_s": count / seconds,
        "failures": failures + stats["failed"],
        "queue_wait_p99_s": stats["queue_wait_p99_s"],
        "start_latency_p99_ms": 1000 * stats["start_latency_p99_s"],
    }


def proportional_kib(pid: int) -> int:
    """Proportional set size of one process (its share of pages it shares with others)."""
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1])
    return 0


def available_kib() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1])
    return 0


async def idle_memory(base: Path, count: int) -> dict:
    async with SandboxPool(SandboxConfig(max_live=count)) as pool:
        before = available_kib()
        ready = asyncio.Event()
        started = []

        async def hold():
            async with pool.sandbox(base) as box:
                started.append(box)
                if len(started) == count:
                    ready.set()
                await ready.wait()
                await asyncio.sleep(0.5)

        holders = asyncio.gather(*(hold() for _ in range(count)))
        await ready.wait()
        await asyncio.sleep(0.2)
        pss = sum(proportional_kib(box.workspace.holder_pid) for box in started)
        after = available_kib()
        await holders
    return {
        "sandboxes": count,
        "holder_pss_kib_each": pss / count,
        "memavailable_drop_kib_each": (before - after) / count,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serial", type=int, default=200)
    parser.add_argument("--burst", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--idle", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = make_repository(Path(tmp))
        result = {
            "benchmark": "sandbox",
            "machine": {"cpu": platform.machine(), "cores": os.cpu_count(), "kernel": platform.release()},
            "bare_bwrap_true": bare_bwrap(args.serial),
            "serial": await serial(base, args.serial, prewarm=0),
            "serial_prewarmed": await serial(base, args.serial, prewarm=1),
            "burst": await burst(base, args.burst, args.concurrency),
            "idle_memory": await idle_memory(base, args.idle),
        }
    bare, cold, warm = result["bare_bwrap_true"], result["serial"], result["serial_prewarmed"]
    print(f"bare bwrap /bin/true: p50 {bare['p50_ms']:.1f} ms, p99 {bare['p99_ms']:.1f} ms")
    for name, entry in (("cold", cold), ("pre-warmed", warm)):
        print(
            f"sandbox start + /bin/true ({name}): p50 {entry['start_and_command_p50_ms']:.1f} ms, "
            f"p99 {entry['start_and_command_p99_ms']:.1f} ms; release p50 {entry['release_p50_ms']:.1f} ms"
        )
    b = result["burst"]
    print(
        f"burst {b['sandboxes']} x {b['concurrency']} concurrent: {b['per_s']:.0f}/s, "
        f"{b['failures']} failures, queue wait p99 {b['queue_wait_p99_s']:.2f} s"
    )
    m = result["idle_memory"]
    print(
        f"idle sandbox: {m['holder_pss_kib_each']:.0f} KiB PSS of its holder, "
        f"{m['memavailable_drop_kib_each']:.0f} KiB of MemAvailable"
    )
    print(json.dumps(result))


if __name__ == "__main__":
    asyncio.run(main())
