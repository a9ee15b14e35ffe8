import pytest
import statbox

# ---- bin_edges / histogram --------------------------------------------------


def test_bin_edges_are_equally_spaced():
    assert statbox.bin_edges(0, 10, 5) == pytest.approx([0, 2, 4, 6, 8, 10])


def test_bin_edges_with_offset_start():
    assert statbox.bin_edges(-1, 2, 3) == pytest.approx([-1, 0, 1, 2])


def test_bin_edges_single_bin_spans_whole_range():
    assert statbox.bin_edges(0, 4, 1) == pytest.approx([0, 4])


def test_bin_edges_zero_bins_raises():
    with pytest.raises(ValueError, match="bins must be at least 1, got 0"):
        statbox.bin_edges(0, 1, 0)


def test_bin_edges_equal_bounds_raises():
    with pytest.raises(ValueError, match="high must exceed low"):
        statbox.bin_edges(3, 3, 2)


def test_histogram_puts_maximum_in_last_bin():
    counts, edges = statbox.histogram(range(11), 5, 0, 10)
    assert counts == [2, 2, 2, 2, 3]
    assert edges == pytest.approx([0, 2, 4, 6, 8, 10])


def test_histogram_value_on_inner_edge_goes_to_upper_bin():
    counts, _ = statbox.histogram([2.0], 5, 0, 10)
    assert counts == [0, 1, 0, 0, 0]


def test_histogram_includes_value_equal_to_low():
    counts, _ = statbox.histogram([0, 9.5], 2, 0, 10)
    assert counts == [1, 1]


def test_histogram_ignores_values_outside_range():
    counts, _ = statbox.histogram([-1, 0.5, 10.01, 11], 2, 0, 10)
    assert counts == [1, 0]


def test_histogram_infers_range_from_data():
    counts, edges = statbox.histogram([1, 2, 3, 4], 3)
    assert counts == [1, 1, 2]
    assert edges == pytest.approx([1, 2, 3, 4])


def test_histogram_of_constant_data_widens_range():
    counts, edges = statbox.histogram([5, 5], 2)
    assert counts == [2, 0]
    assert edges == pytest.approx([5, 5.5, 6])


def test_histogram_of_empty_data_is_all_zero():
    counts, edges = statbox.histogram([], 2)
    assert counts == [0, 0]
    assert edges == pytest.approx([0, 0.5, 1])


# ---- moving_average ---------------------------------------------------------


def test_moving_average_window_two():
    assert statbox.moving_average([1, 2, 3, 4, 5], 2) == pytest.approx([1.5, 2.5, 3.5, 4.5])


def test_moving_average_window_three_uneven_values():
    assert statbox.moving_average([1, 2, 6, 4, 8], 3) == pytest.approx([3, 4, 6])


def test_moving_average_window_equal_to_length_gives_single_mean():
    assert statbox.moving_average([2, 4, 9], 3) == pytest.approx([5.0])


def test_moving_average_window_one_returns_values():
    assert statbox.moving_average([3, 1, 4], 1) == pytest.approx([3, 1, 4])


def test_moving_average_window_zero_raises():
    with pytest.raises(ValueError, match="window must be at least 1, got 0"):
        statbox.moving_average([1, 2], 0)


def test_moving_average_window_longer_than_data_raises():
    with pytest.raises(ValueError, match="window 4 is longer than the data"):
        statbox.moving_average([1, 2, 3], 4)


# ---- exponential_smoothing --------------------------------------------------


def test_exponential_smoothing_weights_new_value_by_alpha():
    assert statbox.exponential_smoothing([0, 8, 8], 0.25) == pytest.approx([0, 2, 3.5])


def test_exponential_smoothing_half():
    assert statbox.exponential_smoothing([10, 20, 30], 0.5) == pytest.approx([10, 15, 22.5])


def test_exponential_smoothing_alpha_one_returns_input():
    assert statbox.exponential_smoothing([4, 1, 7], 1) == pytest.approx([4, 1, 7])


def test_exponential_smoothing_of_empty_is_empty():
    assert statbox.exponential_smoothing([], 0.3) == []


@pytest.mark.parametrize("alpha", [0, -0.5, 1.5])
def test_exponential_smoothing_bad_alpha_raises(alpha):
    with pytest.raises(ValueError, match="alpha must be in"):
        statbox.exponential_smoothing([1, 2], alpha)


# ---- zscores / min_max_normalize -------------------------------------------


def test_zscores_population():
    result = statbox.zscores([2, 4, 4, 4, 5, 5, 7, 9])
    assert result == pytest.approx([-1.5, -0.5, -0.5, -0.5, 0, 0, 1, 2])


def test_zscores_sample_uses_sample_stdev():
    result = statbox.zscores([1, 3], sample=True)
    s = 2**0.5
    assert result == pytest.approx([-1 / s, 1 / s])


def test_zscores_of_constant_data_raises():
    with pytest.raises(ValueError, match="constant data"):
        statbox.zscores([3, 3, 3])


def test_min_max_normalize_to_unit_interval():
    assert statbox.min_max_normalize([2, 4, 10]) == pytest.approx([0, 0.25, 1])


def test_min_max_normalize_to_custom_interval():
    assert statbox.min_max_normalize([4, 2, 10], -1, 1) == pytest.approx([-0.5, -1, 1])


def test_min_max_normalize_constant_data_raises():
    with pytest.raises(ValueError, match="cannot normalize constant data"):
        statbox.min_max_normalize([5, 5])


def test_min_max_normalize_empty_raises():
    with pytest.raises(ValueError, match="need at least 1 value"):
        statbox.min_max_normalize([])


def test_min_max_normalize_inverted_target_raises():
    with pytest.raises(ValueError, match="new_max must exceed new_min"):
        statbox.min_max_normalize([1, 2], 1, 1)


# ---- cumulative_sums / differences / ranks ---------------------------------


def test_cumulative_sums_running_totals():
    assert statbox.cumulative_sums([3, -1, 4, 2]) == [3, 2, 6, 8]


def test_cumulative_sums_of_empty_is_empty():
    assert statbox.cumulative_sums([]) == []


def test_differences_lag_one():
    assert statbox.differences([1, 4, 9, 16]) == [3, 5, 7]


def test_differences_lag_two():
    assert statbox.differences([1, 4, 9, 16], lag=2) == [8, 12]


def test_differences_lag_equal_to_length_is_empty():
    assert statbox.differences([1, 2, 3], lag=3) == []


def test_differences_lag_zero_raises():
    with pytest.raises(ValueError, match="lag must be at least 1, got 0"):
        statbox.differences([1, 2], lag=0)


def test_ranks_without_ties():
    assert statbox.ranks([10, 30, 20]) == [1, 3, 2]


def test_ranks_tie_of_two_shares_average_rank():
    assert statbox.ranks([10, 20, 20, 30]) == [1, 2.5, 2.5, 4]


def test_ranks_tie_of_three_interleaved():
    assert statbox.ranks([3, 1, 3, 2, 3]) == [4, 1, 4, 2, 4]


def test_ranks_of_empty_is_empty():
    assert statbox.ranks([]) == []
