import statistics

import pytest
import statbox

SPREAD_DATA = [2, 4, 4, 4, 5, 5, 7, 9]  # mean 5, population variance 4, sample variance 32/7


# ---- mean -------------------------------------------------------------------


def test_mean_of_small_integers():
    assert statbox.mean([1, 2, 3, 4, 10]) == pytest.approx(4.0)


def test_mean_of_single_value_is_that_value():
    assert statbox.mean([7]) == pytest.approx(7.0)


def test_mean_with_negative_values():
    assert statbox.mean([-3, -1, 10]) == pytest.approx(2.0)


def test_mean_accepts_generator():
    assert statbox.mean(x for x in (2, 4, 9)) == pytest.approx(5.0)


def test_mean_of_empty_raises():
    with pytest.raises(ValueError, match="need at least 1 values, got 0"):
        statbox.mean([])


# ---- median -----------------------------------------------------------------


def test_median_of_odd_length_is_middle_after_sorting():
    assert statbox.median([9, 1, 3, 7, 5]) == 5


def test_median_of_even_length_averages_middle_pair():
    assert statbox.median([10, 1, 3, 2]) == pytest.approx(2.5)


def test_median_of_single_value():
    assert statbox.median([42]) == 42


def test_median_of_two_values_is_their_average():
    assert statbox.median([2, 8]) == pytest.approx(5.0)


def test_median_matches_statistics_module():
    data = [3, 14, 1, 5, 9, 2, 6, 5, 3, 5]
    assert statbox.median(data) == pytest.approx(statistics.median(data))


def test_median_of_empty_raises():
    with pytest.raises(ValueError, match="need at least 1"):
        statbox.median([])


# ---- modes / mode -----------------------------------------------------------


def test_modes_returns_all_tied_values():
    assert statbox.modes([1, 2, 2, 3, 3]) == [2, 3]


def test_modes_keeps_first_appearance_order():
    assert statbox.modes([3, 1, 3, 1, 2]) == [3, 1]


def test_modes_with_single_winner():
    assert statbox.modes([4, 5, 5, 6]) == [5]


def test_modes_of_all_distinct_values_returns_all():
    assert statbox.modes([7, 8, 9]) == [7, 8, 9]


def test_mode_returns_unique_most_common():
    assert statbox.mode(["a", "b", "b", "c"]) == "b"


def test_mode_with_tie_raises():
    with pytest.raises(ValueError, match="no unique mode: 2 values tie"):
        statbox.mode([1, 1, 2, 2, 3])


def test_modes_of_empty_raises():
    with pytest.raises(ValueError, match="need at least 1"):
        statbox.modes([])


# ---- variance / stdev -------------------------------------------------------


def test_population_variance():
    assert statbox.variance(SPREAD_DATA) == pytest.approx(4.0)


def test_sample_variance_uses_n_minus_one():
    assert statbox.variance(SPREAD_DATA, sample=True) == pytest.approx(32 / 7)


def test_sample_variance_matches_statistics_module():
    data = [1.5, 2.5, 2.5, 2.75, 3.25, 4.75]
    assert statbox.variance(data, sample=True) == pytest.approx(statistics.variance(data))


def test_population_variance_of_single_value_is_zero():
    assert statbox.variance([3]) == pytest.approx(0.0)


def test_sample_variance_of_single_value_raises():
    with pytest.raises(ValueError, match="need at least 2 values, got 1"):
        statbox.variance([3], sample=True)


def test_population_variance_of_empty_raises():
    with pytest.raises(ValueError, match="need at least 1 values, got 0"):
        statbox.variance([])


def test_population_stdev():
    assert statbox.stdev(SPREAD_DATA) == pytest.approx(2.0)


def test_sample_stdev():
    assert statbox.stdev(SPREAD_DATA, sample=True) == pytest.approx((32 / 7) ** 0.5)


def test_stdev_of_two_values():
    assert statbox.stdev([1, 5]) == pytest.approx(2.0)


# ---- percentile / quartiles -------------------------------------------------


@pytest.mark.parametrize(
    ("p", "expected"),
    [(0, 10), (25, 20), (30, 22), (50, 30), (90, 46), (100, 50)],
)
def test_percentile_interpolates_linearly(p, expected):
    assert statbox.percentile([50, 20, 10, 40, 30], p) == pytest.approx(expected)


def test_percentile_between_unequal_gaps():
    assert statbox.percentile([1, 2, 3, 10], 90) == pytest.approx(7.9)


def test_percentile_of_single_value():
    assert statbox.percentile([5], 50) == 5


def test_percentile_of_100_returns_maximum():
    assert statbox.percentile([3, 1, 2], 100) == 3


@pytest.mark.parametrize("p", [-1, 100.5])
def test_percentile_out_of_range_raises(p):
    with pytest.raises(ValueError, match="percentile must be within"):
        statbox.percentile([1, 2, 3], p)


def test_quartiles_of_one_to_eight():
    q1, q2, q3 = statbox.quartiles([8, 7, 6, 5, 4, 3, 2, 1])
    assert (q1, q2, q3) == pytest.approx((2.75, 4.5, 6.25))


def test_interquartile_range():
    assert statbox.interquartile_range(range(1, 9)) == pytest.approx(3.5)


# ---- value_range / weighted_mean -------------------------------------------


def test_value_range_when_first_is_maximum():
    assert statbox.value_range([9, 1, 5]) == 8


def test_value_range_when_first_is_minimum():
    assert statbox.value_range([1, 9, 5]) == 8


def test_value_range_of_two_values():
    assert statbox.value_range([4, -3]) == 7


def test_value_range_of_single_value_is_zero():
    assert statbox.value_range([6]) == 0


def test_weighted_mean_ignores_zero_weight():
    assert statbox.weighted_mean([1, 2, 3], [3, 0, 1]) == pytest.approx(1.5)


def test_weighted_mean_with_equal_weights_is_mean():
    assert statbox.weighted_mean([2, 4, 9], [2, 2, 2]) == pytest.approx(5.0)


def test_weighted_mean_length_mismatch_raises():
    with pytest.raises(ValueError, match="differ in length: 2 != 3"):
        statbox.weighted_mean([1, 2], [1, 1, 1])


def test_weighted_mean_negative_weight_raises():
    with pytest.raises(ValueError, match="non-negative, got -1"):
        statbox.weighted_mean([1, 2], [3, -1])


def test_weighted_mean_zero_total_weight_raises():
    with pytest.raises(ValueError, match="weights sum to zero"):
        statbox.weighted_mean([1, 2], [0, 0])
