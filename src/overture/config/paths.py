"""Where overture keeps files of its own between runs: the user's cache directory (XDG)."""

from __future__ import annotations

import os
from pathlib import Path


def user_cache_dir(*parts: str) -> Path:
    """`$XDG_CACHE_HOME/overture/...` (default `~/.cache/overture/...`)."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root, "overture", *parts)
