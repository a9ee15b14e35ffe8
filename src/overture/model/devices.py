"""Choosing the torch device and thread count a run asks for, and the CPU's float mode.

Denormals. On a CPU, float results too small to be normal (below ~1.2e-38 in float32) are
computed in microcode, tens of times slower than normal ones. Training the tiny policy on the
main job's demonstrations makes many: the softmax of sharp attention over 4,000-token contexts
underflows into them. `resolve_device` therefore has the CPU flush them to zero
(`torch.set_flush_denormal`), which changes no value above that range: an SFT step on eight
demonstrations took 3.2 s with them and 2.8 s without, a step of a newly initialised model 4.7
and 2.8 s (docs/benchmarks.md, "Trainer"). The mode is per thread and a thread inherits it when
it is created, OpenMP's workers too, so it must be set before the process's first parallel op:
every job resolves its device first.
"""

from __future__ import annotations

import torch

from overture.config import RuntimeConfig


def resolve_device(runtime: RuntimeConfig) -> torch.device:
    """`auto` is CUDA when present, else CPU; asking for CUDA without it is an error. Sets
    `runtime.threads`, and on a CPU flushes denormals (see the module docstring)."""
    if runtime.threads:
        torch.set_num_threads(runtime.threads)
    if runtime.device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("runtime.device = 'cuda' but no CUDA device is available")
    if runtime.device == "auto":
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        device = torch.device(runtime.device)
    if device.type == "cpu":
        torch.set_flush_denormal(True)
    return device
