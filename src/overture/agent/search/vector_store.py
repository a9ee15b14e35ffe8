"""Chunk embeddings kept between builds, keyed by chunk content: on disk between processes, and
in memory across the base directories of one process.

Embedding a mid-sized repository takes minutes on a CPU, and every `overture agent` run is a
new process, so the vectors of each base directory are saved (one `.npz` per base, holding only
its current chunks) and reused: a later build embeds only chunks whose text is new. Within a
process, every task's base is a copy of its repository with a change or two, so the vectors
embedded for one base (`remember`) serve the next (`recall`): only the changed chunks are new.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from overture.config import user_cache_dir

log = logging.getLogger(__name__)
MODEL_TAG = "all-MiniLM-L6-v2"


SHARED_LIMIT = 100_000  # vectors kept in memory (all-MiniLM-L6-v2: 1.5 KB each), oldest dropped first
_SHARED: OrderedDict[str, np.ndarray] = OrderedDict()
_SHARED_LOCK = threading.Lock()


def recall(keys: Iterable[str]) -> dict[str, np.ndarray]:
    """The vectors this process has embedded for any of `keys` (by `text_key`)."""
    with _SHARED_LOCK:
        return {key: _SHARED[key] for key in keys if key in _SHARED}


def remember(vectors: dict[str, np.ndarray]) -> None:
    """Keep `vectors` for later builds of this process, the newest last."""
    with _SHARED_LOCK:
        for key, vector in vectors.items():
            _SHARED[key] = vector
            _SHARED.move_to_end(key)
        while len(_SHARED) > SHARED_LIMIT:
            _SHARED.popitem(last=False)


def default_cache_dir() -> Path:
    return user_cache_dir("embeddings")


def text_key(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


class VectorStore:
    """The saved embeddings of one base directory (`directory` None: nothing is kept)."""

    def __init__(self, directory: Path | None, base: Path) -> None:
        name = hashlib.blake2b(str(base).encode(), digest_size=12).hexdigest()
        self.file = directory / f"{MODEL_TAG}-{name}.npz" if directory is not None else None

    def load(self) -> dict[str, np.ndarray]:
        if self.file is None or not self.file.is_file():
            return {}
        try:
            with np.load(self.file) as data:
                return dict(zip(data["keys"].tolist(), data["vectors"], strict=True))
        except (OSError, ValueError, KeyError) as exc:  # a damaged cache is rebuilt, not fatal
            log.warning("codebase_search: ignoring unreadable embedding cache %s: %s", self.file, exc)
            return {}

    def save(self, vectors: dict[str, np.ndarray]) -> None:
        """Write atomically (temporary file, then rename), so readers never see half a file."""
        if self.file is None or not vectors:
            return
        self.file.parent.mkdir(parents=True, exist_ok=True)
        keys = np.array(list(vectors))
        matrix = np.stack(list(vectors.values()))
        handle, temporary = tempfile.mkstemp(dir=self.file.parent, suffix=".npz")
        try:
            with os.fdopen(handle, "wb") as out:
                np.savez(out, keys=keys, vectors=matrix)
            os.replace(temporary, self.file)
        except OSError as exc:
            Path(temporary).unlink(missing_ok=True)
            log.warning("codebase_search: cannot save the embedding cache %s: %s", self.file, exc)
