"""Shared helpers for the sandbox tests: a small base repository and a pool to run coroutines in."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from overture.config import SandboxConfig
from overture.sandbox import SandboxPool


def make_base(root: Path) -> Path:
    base = root / "repo"
    (base / "pkg").mkdir(parents=True)
    (base / "README.md").write_text("# demo\n")
    (base / "pkg" / "__init__.py").write_text("")
    (base / "pkg" / "core.py").write_text("def add(a, b):\n    return a + b\n")
    (base / "pkg" / "data").mkdir()
    (base / "pkg" / "data" / "table.csv").write_text("a,b\n1,2\n")
    return base


def in_sandbox(base: Path, body, **config) -> object:
    """Run `await body(sandbox)` in a fresh pool and sandbox over `base`; return its result."""

    async def main():
        async with SandboxPool(SandboxConfig(**config)) as pool, pool.sandbox(base) as box:
            return await body(box)

    return asyncio.run(main())


def host_processes_with(marker: str) -> list[int]:
    """Host pids whose command line contains `marker` (a starting command's whole chain does)."""
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                    found.append(int(pid))
            except OSError:
                pass
    return found


def processes_named(marker: str) -> list[int]:
    """Host pids whose argv[0] is `marker`: the sandboxed command itself (`exec -a MARKER ...`),
    not the launcher processes in front of it whose arguments merely mention it."""
    found = []
    for pid in host_processes_with(marker):
        try:
            if Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0", 1)[0] == marker.encode():
                found.append(pid)
        except OSError:
            pass
    return found


def wait_until_running(marker: str, timeout_s: float = 30) -> list[int]:
    """Pids of the command named `marker` once it runs (empty if it did not within the timeout)."""
    deadline = time.monotonic() + timeout_s
    while not (pids := processes_named(marker)) and time.monotonic() < deadline:
        time.sleep(0.02)
    return pids


def survivors(markers: list[str], timeout_s: float = 30, quiet_s: float = 0.3) -> list[str]:
    """The markers still on some host command line once none has been seen for `quiet_s`, or at the
    timeout. One empty scan is not enough: a process in the middle of an exec shows an empty
    command line for a moment, and a killed chain takes a while to unwind on a loaded machine."""
    deadline = time.monotonic() + timeout_s
    quiet_since = time.monotonic()
    while time.monotonic() < deadline:
        if [m for m in markers if host_processes_with(m)]:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= quiet_s:
            return []
        time.sleep(0.02)
    return [m for m in markers if host_processes_with(m)]
