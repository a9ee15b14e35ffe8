"""Layer 1: isolated command execution over copy-on-write workspaces, and the pool that runs them.

Knows nothing of tools, tasks or models: it runs commands and touches files in a sandbox.
"""

from overture.sandbox.errors import (
    PathEscape,
    PoolClosed,
    PoolFull,
    SandboxDead,
    SandboxError,
    SandboxUnavailable,
)
from overture.sandbox.files import WORKSPACE_MOUNT, ConfinedFiles, Entry
from overture.sandbox.pool import SandboxPool
from overture.sandbox.sandbox import ExecResult, Sandbox

__all__ = [
    "WORKSPACE_MOUNT",
    "ConfinedFiles",
    "Entry",
    "ExecResult",
    "PathEscape",
    "PoolClosed",
    "PoolFull",
    "Sandbox",
    "SandboxDead",
    "SandboxError",
    "SandboxPool",
    "SandboxUnavailable",
]
