"""Shared helpers for the sandbox tests: a small base repository and a pool to run coroutines in."""

from __future__ import annotations

import asyncio
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
