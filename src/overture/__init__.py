"""overture: asynchronous reinforcement learning for agentic coding models."""

__version__ = "0.1.0"
