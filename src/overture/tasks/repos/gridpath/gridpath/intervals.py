"""A small interval scheduler.

Intervals are half-open ``(start, end)`` pairs covering ``start <= t < end``. Two
intervals overlap when they share at least one point, so ``(1, 3)`` and ``(3, 5)`` do
not overlap, but they *touch* and are merged into ``(1, 5)`` by :func:`merge_intervals`.
"""

Interval = tuple[int, int]


def validate(intervals: list[Interval]) -> list[Interval]:
    """Return the intervals as tuples, raising ValueError if any has ``end < start``."""
    checked = []
    for index, (start, end) in enumerate(intervals):
        if end < start:
            raise ValueError(f"interval {index} has end {end} before start {start}")
        checked.append((start, end))
    return checked


def overlaps(a: Interval, b: Interval) -> bool:
    """True if half-open intervals ``a`` and ``b`` share at least one point."""
    a_start, a_end = a
    b_start, b_end = b
    return a_start < b_end and b_start < a_end


def merge_intervals(intervals: list[Interval]) -> list[Interval]:
    """Merge overlapping or touching intervals; return them sorted by start."""
    ordered = sorted(validate(intervals))
    merged: list[Interval] = []
    for start, end in ordered:
        if merged and start <= merged[-1][1]:
            last_start, last_end = merged[-1]
            merged[-1] = (last_start, max(last_end, end))
        else:
            merged.append((start, end))
    return merged


def total_length(intervals: list[Interval]) -> int:
    """Return the length of the union of the intervals (shared parts count once)."""
    total = 0
    for start, end in merge_intervals(intervals):
        total += end - start
    return total


def max_non_overlapping(intervals: list[Interval]) -> list[Interval]:
    """Return a largest set of pairwise non-overlapping intervals.

    Uses the earliest-finish greedy rule; ties on the end are broken by the later start
    (the shorter interval). The result is sorted by end.
    """
    ordered = sorted(validate(intervals), key=lambda iv: (iv[1], -iv[0]))
    chosen: list[Interval] = []
    last_end = None
    for start, end in ordered:
        if last_end is None or start >= last_end:
            chosen.append((start, end))
            last_end = end
    return chosen


def find_gaps(intervals: list[Interval], lo: int, hi: int) -> list[Interval]:
    """Return the parts of ``[lo, hi)`` not covered by any interval, in order."""
    if hi < lo:
        raise ValueError(f"window end {hi} is before window start {lo}")
    gaps = []
    cursor = lo
    for start, end in merge_intervals(intervals):
        if start >= hi:
            break
        if start > cursor:
            gaps.append((cursor, start))
        cursor = max(cursor, end)
    if cursor < hi:
        gaps.append((cursor, hi))
    return gaps


def max_overlap(intervals: list[Interval]) -> int:
    """Return the largest number of intervals that contain a common point.

    Empty intervals (``start == end``) contain no point and never count.
    """
    events = []
    for start, end in validate(intervals):
        if start < end:
            events.append((start, 1))
            events.append((end, -1))
    events.sort()
    current = 0
    best = 0
    for _, delta in events:
        current += delta
        if current > best:
            best = current
    return best
