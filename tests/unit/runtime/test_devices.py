"""Resolving a run's device: CUDA only where present, and on a CPU denormals flushed to zero."""

from __future__ import annotations

import threading

import pytest
import torch

from overture.config import RuntimeConfig
from overture.runtime.devices import resolve_device

DENORMAL = 1e-40  # below float32's smallest normal, ~1.18e-38


def product_with_denormal() -> float:
    return (torch.tensor([DENORMAL], dtype=torch.float32) * 1.0).item()


def test_a_cpu_run_flushes_denormals_in_its_thread_and_in_threads_started_after():
    if not torch.set_flush_denormal(False):
        pytest.skip("this CPU has no flush-to-zero mode")
    assert product_with_denormal() != 0.0
    assert resolve_device(RuntimeConfig(device="cpu")) == torch.device("cpu")
    assert product_with_denormal() == 0.0
    seen: list[float] = []
    worker = threading.Thread(target=lambda: seen.append(product_with_denormal()))
    worker.start()
    worker.join()
    assert seen == [0.0]


def test_cuda_without_a_device_is_an_error():
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    with pytest.raises(RuntimeError, match="no CUDA device"):
        resolve_device(RuntimeConfig(device="cuda"))
    assert resolve_device(RuntimeConfig(device="auto")) == torch.device("cpu")
