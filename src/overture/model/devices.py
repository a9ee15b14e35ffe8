"""Choosing the torch device and thread count a run asks for."""

from __future__ import annotations

import torch

from overture.config import RuntimeConfig


def resolve_device(runtime: RuntimeConfig) -> torch.device:
    """`auto` is CUDA when present, else CPU; asking for CUDA without it is an error."""
    if runtime.threads:
        torch.set_num_threads(runtime.threads)
    if runtime.device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("runtime.device = 'cuda' but no CUDA device is available")
    if runtime.device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(runtime.device)
