"""Live weight updates: check a new state dict against the served model, then copy it in place.

Checking happens in the caller's thread, before anything is queued, so a mismatched update is
refused with a `WeightUpdateError` and the engine never sees it. Copying happens in the step
thread between two decode steps, into the existing parameter storage, so the KV cache, the
compiled shapes and every reference to the parameters stay valid.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from overture.engine.params import WeightUpdateError


def check_update(
    model: nn.Module, state: Mapping[str, torch.Tensor], strict: bool = True
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(served tensor, new tensor) pairs for `state`, or `WeightUpdateError` naming every problem.

    With `strict` every tensor of the model's state dict must be present; otherwise a subset may
    be updated. Names, shapes and floating-point-ness must match; dtypes may differ (cast on copy).
    """
    served = model.state_dict(keep_vars=True)
    problems = []
    unknown = sorted(set(state) - set(served))
    if unknown:
        problems.append(f"unknown tensors {unknown[:5]}{' ...' if len(unknown) > 5 else ''}")
    missing = sorted(set(served) - set(state)) if strict else []
    if missing:
        problems.append(f"missing tensors {missing[:5]}{' ...' if len(missing) > 5 else ''}")
    pairs = []
    for name, new in state.items():
        if name not in served:
            continue
        old = served[name]
        if not isinstance(new, torch.Tensor):
            problems.append(f"{name}: expected a tensor, got {type(new).__name__}")
        elif tuple(new.shape) != tuple(old.shape):
            problems.append(f"{name}: shape {tuple(new.shape)}, the model has {tuple(old.shape)}")
        elif new.is_floating_point() != old.is_floating_point():
            problems.append(f"{name}: dtype {new.dtype}, the model has {old.dtype}")
        else:
            pairs.append((old, new))
    if problems:
        raise WeightUpdateError("weight update refused, weights unchanged: " + "; ".join(problems))
    return pairs


@torch.no_grad()
def apply_update(pairs: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
    for old, new in pairs:
        old.copy_(new)
