"""A task's sandbox: its starting workspace, run by its repository's Python."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from overture.sandbox import Sandbox, SandboxPool
from overture.tasks.environment import python_for
from overture.tasks.snapshots import starting_base
from overture.tasks.spec import Task


@contextlib.asynccontextmanager
async def task_sandbox(pool: SandboxPool, task: Task) -> AsyncIterator[Sandbox]:
    """A sandbox of `pool` over `task`'s starting workspace (`starting_base`) whose commands run
    the environment the task names (built on first use), or the pool's Python."""
    base = await asyncio.to_thread(starting_base, task)
    python = await asyncio.to_thread(python_for, task) if task.environment else None
    async with pool.sandbox(base, python) as box:
        yield box
