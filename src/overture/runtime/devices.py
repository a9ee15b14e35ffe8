"""Choosing the torch device and thread count a run asks for, and the CPU's float mode.

Denormals. On a CPU, float results too small to be normal (below ~1.2e-38 in float32) are
computed in microcode, many times slower than normal ones. Sharp attention makes them inside
SDPA's softmax, where scores far below a row's maximum underflow: causal SDPA at 3,000 tokens,
forward and backward, took 433 ms on scores spread like those of vectors 6× a unit Gaussian's
and 48 ms on a unit Gaussian's. `resolve_device` therefore has the CPU flush them to zero
(`torch.set_flush_denormal`), which changes no value above that range: the spread case then
took 45 ms, an SFT step on eight of the main job's demonstrations 2.8 s instead of 3.2, one of
a newly initialised model 2.8 s instead of 4.7 (docs/benchmarks.md, "Trainer"). The mode is per
thread and a thread inherits it when it is created, OpenMP's workers too, so it must be set
before the process's first parallel op: every job resolves its device first.
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
