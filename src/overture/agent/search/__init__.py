"""Semantic code search: chunking, BM25 and embedding ranking, the per-repository index."""

from overture.agent.search.chunks import Chunk, chunk_file
from overture.agent.search.index import BaseIndex, EpisodeSearch, Hit, base_index, resolve_backend

__all__ = ["BaseIndex", "Chunk", "EpisodeSearch", "Hit", "base_index", "chunk_file", "resolve_backend"]
