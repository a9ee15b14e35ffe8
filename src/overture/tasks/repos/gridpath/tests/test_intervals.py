import pytest
from gridpath import (
    find_gaps,
    max_non_overlapping,
    max_overlap,
    merge_intervals,
    overlaps,
    total_length,
    validate,
)


def test_validate_converts_to_tuples():
    assert validate([[1, 2], (3, 3)]) == [(1, 2), (3, 3)]


def test_validate_rejects_reversed_interval():
    with pytest.raises(ValueError, match="interval 1 has end 2 before start 5"):
        validate([(0, 1), (5, 2)])


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ((1, 5), (4, 8), True),
        ((4, 8), (1, 5), True),
        ((1, 3), (3, 5), False),
        ((3, 5), (1, 3), False),
        ((1, 10), (2, 3), True),
        ((1, 2), (5, 6), False),
    ],
)
def test_overlaps_half_open(a, b, expected):
    assert overlaps(a, b) is expected


def test_merge_intervals_merges_overlaps_and_sorts():
    assert merge_intervals([(8, 10), (1, 3), (2, 6), (15, 18)]) == [(1, 6), (8, 10), (15, 18)]


def test_merge_intervals_joins_touching_intervals():
    assert merge_intervals([(3, 5), (1, 3)]) == [(1, 5)]


def test_merge_intervals_keeps_gap_of_one():
    assert merge_intervals([(1, 3), (4, 5)]) == [(1, 3), (4, 5)]


def test_merge_intervals_contained_interval_keeps_outer_end():
    assert merge_intervals([(1, 10), (2, 3), (4, 5)]) == [(1, 10)]


def test_merge_intervals_extends_most_recent_interval():
    assert merge_intervals([(1, 2), (4, 6), (5, 8)]) == [(1, 2), (4, 8)]


def test_merge_intervals_empty_input():
    assert merge_intervals([]) == []


def test_merge_intervals_rejects_invalid_interval():
    with pytest.raises(ValueError, match="before start"):
        merge_intervals([(2, 1)])


def test_total_length_counts_shared_parts_once():
    assert total_length([(1, 4), (2, 6), (10, 12)]) == 7


def test_total_length_of_nothing_is_zero():
    assert total_length([]) == 0
    assert total_length([(5, 5)]) == 0


def test_max_non_overlapping_greedy_by_end():
    intervals = [(1, 4), (3, 5), (0, 6), (5, 7), (3, 9), (5, 9), (6, 10), (8, 11), (8, 12), (2, 14)]
    assert max_non_overlapping(intervals) == [(1, 4), (5, 7), (8, 11)]


def test_max_non_overlapping_allows_touching_intervals():
    assert max_non_overlapping([(3, 5), (1, 3), (5, 6)]) == [(1, 3), (3, 5), (5, 6)]


def test_max_non_overlapping_prefers_shorter_on_equal_end():
    assert max_non_overlapping([(0, 4), (2, 4), (4, 5)]) == [(2, 4), (4, 5)]


def test_max_non_overlapping_drops_long_interval():
    assert max_non_overlapping([(0, 10), (1, 2), (3, 4)]) == [(1, 2), (3, 4)]


def test_max_non_overlapping_empty():
    assert max_non_overlapping([]) == []


def test_find_gaps_between_and_around_intervals():
    assert find_gaps([(2, 4), (6, 7)], 0, 10) == [(0, 2), (4, 6), (7, 10)]


def test_find_gaps_fully_covered_window_has_none():
    assert find_gaps([(0, 5), (5, 10)], 0, 10) == []


def test_find_gaps_ignores_intervals_outside_window():
    assert find_gaps([(0, 2), (12, 20)], 3, 10) == [(3, 10)]


def test_find_gaps_interval_crossing_window_edges():
    assert find_gaps([(-5, 2), (8, 15)], 0, 10) == [(2, 8)]


def test_find_gaps_interval_ending_at_window_start():
    assert find_gaps([(0, 3), (5, 6)], 3, 8) == [(3, 5), (6, 8)]


def test_find_gaps_interval_starting_at_window_end_is_ignored():
    assert find_gaps([(8, 12)], 0, 8) == [(0, 8)]


def test_find_gaps_empty_window():
    assert find_gaps([(1, 2)], 4, 4) == []


def test_find_gaps_rejects_reversed_window():
    with pytest.raises(ValueError, match="window end 1 is before window start 5"):
        find_gaps([], 5, 1)


def test_max_overlap_counts_simultaneous_intervals():
    assert max_overlap([(1, 5), (2, 6), (4, 8), (7, 9)]) == 3


def test_max_overlap_touching_intervals_do_not_overlap():
    assert max_overlap([(1, 3), (3, 5), (5, 7)]) == 1


def test_max_overlap_ignores_empty_intervals():
    assert max_overlap([(2, 2), (2, 2)]) == 0
    assert max_overlap([(1, 4), (2, 2)]) == 1


def test_max_overlap_nested_intervals():
    assert max_overlap([(0, 10), (1, 9), (2, 8), (3, 4)]) == 4


def test_max_overlap_peak_after_earlier_interval_ends():
    assert max_overlap([(0, 1), (2, 4), (3, 5)]) == 2


def test_max_overlap_empty_input():
    assert max_overlap([]) == 0
