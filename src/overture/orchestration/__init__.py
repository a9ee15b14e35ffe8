"""Layer 6: RL orchestration — the one async loop (sync / async / async+partial by its knobs),
rollout groups, the engine-backed policy, and the Ray actors that run them across processes.

Importing this package is cheap: names are loaded from their modules on first use.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "EnginePolicy": "overture.orchestration.engine_policy",
    "Orchestrator": "overture.orchestration.orchestrator",
    "StepReport": "overture.orchestration.orchestrator",
    "LocalEngine": "overture.orchestration.orchestrator",
    "LocalTrainer": "overture.orchestration.orchestrator",
    "TaskQueue": "overture.orchestration.rollout_groups",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'overture.orchestration' has no attribute {name!r}")
    return getattr(import_module(module), name)
