"""Layer 3: rollout generation — continuous batching over a paged KV cache, shared-prefix groups,
abort/resume, live weight updates, and per-token logprobs and policy versions."""

from overture.engine.engine import Engine, RequestHandle
from overture.engine.params import (
    Completion,
    EngineError,
    RequestError,
    SamplingParams,
    WeightUpdateError,
)

__all__ = [
    "Completion",
    "Engine",
    "EngineError",
    "RequestError",
    "RequestHandle",
    "SamplingParams",
    "WeightUpdateError",
]
