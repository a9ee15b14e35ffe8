"""Approximate string matching: edit distances and closest-match suggestions."""

from collections.abc import Iterable


def levenshtein(a: str, b: str) -> int:
    """Return the Levenshtein distance: the fewest single-character insertions,
    deletions or substitutions that turn ``a`` into ``b``."""
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, start=1):
        current = [i]
        for j, char_b in enumerate(b, start=1):
            insert_cost = current[j - 1] + 1
            delete_cost = previous[j] + 1
            replace_cost = previous[j - 1] + (char_a != char_b)
            current.append(min(insert_cost, delete_cost, replace_cost))
        previous = current
    return previous[-1]


def hamming_distance(a: str, b: str) -> int:
    """Count the positions at which two equal-length strings differ."""
    if len(a) != len(b):
        raise ValueError(f"strings differ in length: {len(a)} != {len(b)}")
    count = 0
    for char_a, char_b in zip(a, b, strict=True):
        if char_a != char_b:
            count += 1
    return count


def similarity(a: str, b: str) -> float:
    """Return a similarity ratio in [0, 1]: 1 - distance / length of the longer string.

    Two empty strings are identical (1.0).
    """
    longest = max(len(a), len(b))
    if longest == 0:
        return 1.0
    return 1.0 - levenshtein(a, b) / longest


def closest_match(
    word: str, candidates: Iterable[str], max_distance: int | None = None, ignore_case: bool = False
) -> str | None:
    """Return the candidate nearest to ``word`` by Levenshtein distance.

    Ties go to the candidate that comes first. Candidates farther than ``max_distance``
    are ignored; ``None`` is returned when nothing qualifies. With ``ignore_case`` the
    comparison is case-insensitive, but the candidate is returned as given.
    """
    target = word.lower() if ignore_case else word
    best: str | None = None
    best_distance = -1
    for candidate in candidates:
        probe = candidate.lower() if ignore_case else candidate
        distance = levenshtein(target, probe)
        if max_distance is not None and distance > max_distance:
            continue
        if best is None or distance < best_distance:
            best = candidate
            best_distance = distance
    return best


def suggest(word: str, candidates: Iterable[str], limit: int = 3, max_distance: int = 2) -> list[str]:
    """Return up to ``limit`` "did you mean" suggestions for ``word``.

    Only candidates within ``max_distance`` edits are kept. They are ordered by
    distance, then alphabetically; duplicates appear once.
    """
    if limit < 0:
        raise ValueError("limit must be non-negative")
    scored = []
    seen = set()
    for candidate in candidates:
        if candidate in seen:
            continue
        seen.add(candidate)
        distance = levenshtein(word, candidate)
        if distance <= max_distance:
            scored.append((distance, candidate))
    scored.sort()
    return [candidate for _, candidate in scored[:limit]]


def common_prefix(strings: Iterable[str]) -> str:
    """Return the longest prefix shared by all ``strings`` ("" for no strings)."""
    items = list(strings)
    if not items:
        return ""
    shortest = min(items, key=len)
    end = 0
    while end < len(shortest):
        char = shortest[end]
        if any(item[end] != char for item in items):
            break
        end += 1
    return shortest[:end]
