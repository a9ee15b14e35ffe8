"""Choices that look random but are fixed by a key: the same on every machine and every run.

Task splits (`synthesis.assign_splits`) and the oracle's way of working on a task
(`oracle`, `tasks.oracle_parallel_share`) draw from a key made of the seed and what is chosen
for, so a task set or a set of demonstrations is reproduced exactly.
"""

from __future__ import annotations

import hashlib


def fixed_draw(key: str) -> float:
    """A number in [0, 1] fixed by `key` (the first 32 bits of its SHA-256)."""
    return int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
