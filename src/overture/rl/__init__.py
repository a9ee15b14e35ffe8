"""Layer 5: the RL algorithm — advantages, the objective, micro-batching and prefix sharing, the
trainer — and what a training run is made of: checkpoints, the run directory, the tokenizer and
model a run starts from.

Importing this package is cheap: names are loaded from their modules on first use, so that
`import overture.rl` does not pull in torch until something needs it.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "compute_advantages": "overture.rl.advantages",
    "zero_signal_groups": "overture.rl.advantages",
    "PolicyLossInputs": "overture.rl.losses",
    "policy_loss": "overture.rl.losses",
    "Trajectory": "overture.rl.samples",
    "TrainingSample": "overture.rl.samples",
    "samples_from_trajectories": "overture.rl.samples",
    "has_policy_signal": "overture.rl.samples",
    "Trainer": "overture.rl.trainer",
    "save_checkpoint": "overture.rl.checkpoints",
    "load_checkpoint": "overture.rl.checkpoints",
    "latest_checkpoint": "overture.rl.checkpoints",
    "TrainingCheckpointError": "overture.rl.checkpoints",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'overture.rl' has no attribute {name!r}")
    return getattr(import_module(module), name)
