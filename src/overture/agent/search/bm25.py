"""Lexical ranking (Okapi BM25) over code chunks: the fallback when no embedding model is installed.

Terms are identifier parts: `parse_HTTPHeader` gives `parse`, `http`, `header`, so that a query
in words finds code written in snake_case or camelCase. A document's term counts are kept by its
text (`term_counts`): the indexes of two task bases of one repository share all but a file.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from types import MappingProxyType

K1 = 1.5
B = 0.75
_WORD = re.compile(r"[A-Za-z][a-z]*|[A-Z]+(?![a-z])|\d+")


def terms(text: str) -> list[str]:
    """Lower-case identifier parts of `text`."""
    return [word.lower() for word in _WORD.findall(text)]


@functools.lru_cache(maxsize=1 << 16)
def term_counts(text: str) -> Mapping[str, int]:
    """How often each term occurs in `text` (read-only: one mapping serves every index holding it)."""
    return MappingProxyType(Counter(terms(text)))


class BM25:
    """BM25 statistics of a collection; scores any document (also ones added later) against it."""

    def __init__(self, documents: Sequence[str]) -> None:
        self.counts = [term_counts(doc) for doc in documents]
        self.lengths = [sum(c.values()) for c in self.counts]
        self.size = max(1, len(documents))
        self.average_length = (sum(self.lengths) / len(self.lengths)) if self.lengths else 1.0
        frequency: Counter[str] = Counter()
        for count in self.counts:
            frequency.update(count.keys())
        self.document_frequency = frequency

    def idf(self, term: str) -> float:
        df = self.document_frequency.get(term, 0)
        return math.log(1 + (self.size - df + 0.5) / (df + 0.5))

    def score(self, query: str, document: Mapping[str, int], length: int) -> float:
        total = 0.0
        norm = K1 * (1 - B + B * length / max(self.average_length, 1.0))
        for term in set(terms(query)):
            tf = document.get(term, 0)
            if tf:
                total += self.idf(term) * tf * (K1 + 1) / (tf + norm)
        return total

    def scores(self, query: str) -> list[float]:
        """Scores of the indexed documents, in order."""
        return [self.score(query, c, n) for c, n in zip(self.counts, self.lengths, strict=True)]
