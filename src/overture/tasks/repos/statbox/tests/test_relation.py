import pytest
import statbox

XS = [1, 2, 3, 4, 5]
YS = [2, 4, 5, 4, 5]  # slope 0.6, intercept 2.2, r^2 0.6, pearson sqrt(0.6)


# ---- covariance -------------------------------------------------------------


def test_population_covariance():
    assert statbox.covariance([1, 2, 3, 4], [2, 4, 6, 8]) == pytest.approx(2.5)


def test_sample_covariance_uses_n_minus_one():
    assert statbox.covariance([1, 2, 3, 4], [2, 4, 6, 8], sample=True) == pytest.approx(10 / 3)


def test_covariance_of_opposite_trends_is_negative():
    assert statbox.covariance([1, 2, 3], [3, 2, 1]) == pytest.approx(-2 / 3)


def test_population_covariance_of_one_pair_is_zero():
    assert statbox.covariance([4], [7]) == pytest.approx(0.0)


def test_sample_covariance_of_one_pair_raises():
    with pytest.raises(ValueError, match="need at least 2 pairs, got 1"):
        statbox.covariance([4], [7], sample=True)


def test_covariance_of_empty_raises():
    with pytest.raises(ValueError, match="need at least 1 pairs, got 0"):
        statbox.covariance([], [])


def test_covariance_length_mismatch_raises():
    with pytest.raises(ValueError, match="differ in length: 3 != 2"):
        statbox.covariance([1, 2, 3], [1, 2])


# ---- pearson / spearman -----------------------------------------------------


def test_pearson_perfect_positive():
    assert statbox.pearson([1, 2, 3], [10, 20, 30]) == pytest.approx(1.0)


def test_pearson_perfect_negative():
    assert statbox.pearson([1, 2, 3], [5, 3, 1]) == pytest.approx(-1.0)


def test_pearson_partial_correlation():
    assert statbox.pearson(XS, YS) == pytest.approx(0.6**0.5)


def test_pearson_constant_variable_raises():
    with pytest.raises(ValueError, match="undefined for a constant variable"):
        statbox.pearson([1, 2, 3], [4, 4, 4])


def test_pearson_constant_x_raises():
    with pytest.raises(ValueError, match="undefined for a constant variable"):
        statbox.pearson([2, 2, 2], [1, 2, 3])


def test_pearson_single_pair_raises():
    with pytest.raises(ValueError, match="need at least 2 pairs, got 1"):
        statbox.pearson([1], [2])


def test_spearman_of_monotone_nonlinear_is_one():
    assert statbox.spearman([1, 2, 3, 4], [1, 8, 27, 64]) == pytest.approx(1.0)


def test_spearman_reversed_order_is_minus_one():
    assert statbox.spearman([1, 2, 3, 4], [9, 7, 2, 1]) == pytest.approx(-1.0)


def test_spearman_with_tied_ranks():
    assert statbox.spearman([1, 2, 3, 4], [1, 2, 2, 3]) == pytest.approx(4.5 / 22.5**0.5)


# ---- linear_regression / predict / residuals -------------------------------


def test_linear_regression_exact_line():
    slope, intercept, r2 = statbox.linear_regression([0, 1, 2, 3], [1, 3, 5, 7])
    assert slope == pytest.approx(2.0)
    assert intercept == pytest.approx(1.0)
    assert r2 == pytest.approx(1.0)


def test_linear_regression_noisy_slope_and_intercept():
    slope, intercept, _ = statbox.linear_regression(XS, YS)
    assert slope == pytest.approx(0.6)
    assert intercept == pytest.approx(2.2)


def test_linear_regression_noisy_r_squared():
    _, _, r2 = statbox.linear_regression(XS, YS)
    assert r2 == pytest.approx(0.6)


def test_linear_regression_negative_slope():
    slope, intercept, _ = statbox.linear_regression([1, 2, 3], [7, 4, 1])
    assert slope == pytest.approx(-3.0)
    assert intercept == pytest.approx(10.0)


def test_linear_regression_constant_y_is_flat_exact_fit():
    slope, intercept, r2 = statbox.linear_regression([1, 2, 3], [4, 4, 4])
    assert (slope, intercept, r2) == pytest.approx((0.0, 4.0, 1.0))


def test_linear_regression_equal_x_raises():
    with pytest.raises(ValueError, match="all x values are equal"):
        statbox.linear_regression([2, 2, 2], [1, 2, 3])


def test_predict_extrapolates_fitted_line():
    assert statbox.predict(XS, YS, 10) == pytest.approx(8.2)


def test_residuals_of_noisy_fit():
    assert statbox.residuals(XS, YS) == pytest.approx([-0.8, 0.6, 1.0, -0.6, -0.2])


# ---- RunningStats -----------------------------------------------------------


def test_running_stats_mean_and_count():
    rs = statbox.RunningStats([2, 4, 4, 4, 5, 5, 7, 9])
    assert rs.count == 8
    assert rs.mean == pytest.approx(5.0)


def test_running_stats_population_variance():
    rs = statbox.RunningStats([2, 4, 4, 4, 5, 5, 7, 9])
    assert rs.variance() == pytest.approx(4.0)
    assert rs.stdev() == pytest.approx(2.0)


def test_running_stats_sample_variance():
    rs = statbox.RunningStats([2, 4, 4, 4, 5, 5, 7, 9])
    assert rs.variance(sample=True) == pytest.approx(32 / 7)
    assert rs.stdev(sample=True) == pytest.approx((32 / 7) ** 0.5)


def test_running_stats_tracks_min_and_max():
    rs = statbox.RunningStats()
    for x in [5, 3, 8, 1, 6]:
        rs.push(x)
    assert rs.minimum == 1
    assert rs.maximum == 8


def test_running_stats_single_value():
    rs = statbox.RunningStats([7])
    assert rs.mean == pytest.approx(7.0)
    assert rs.variance() == pytest.approx(0.0)
    assert (rs.minimum, rs.maximum) == (7, 7)


def test_running_stats_empty_mean_raises():
    with pytest.raises(ValueError, match="no observations yet"):
        _ = statbox.RunningStats().mean


def test_running_stats_empty_variance_raises():
    with pytest.raises(ValueError, match="need at least 1 observations, got 0"):
        statbox.RunningStats().variance()


def test_running_stats_sample_variance_of_one_raises():
    with pytest.raises(ValueError, match="need at least 2 observations, got 1"):
        statbox.RunningStats([3]).variance(sample=True)


def test_running_stats_merge_matches_single_stream():
    merged = statbox.RunningStats([1, 2, 3]).merge(statbox.RunningStats([10, 20]))
    assert merged.count == 5
    assert merged.mean == pytest.approx(7.2)
    assert merged.variance() == pytest.approx(statbox.variance([1, 2, 3, 10, 20]))
    assert (merged.minimum, merged.maximum) == (1, 20)


def test_running_stats_merge_with_empty_keeps_values():
    merged = statbox.RunningStats().merge(statbox.RunningStats([4, 8]))
    assert merged.count == 2
    assert merged.mean == pytest.approx(6.0)
    assert merged.variance() == pytest.approx(4.0)
    assert (merged.minimum, merged.maximum) == (4, 8)


def test_running_stats_merge_of_two_empty_is_empty():
    merged = statbox.RunningStats().merge(statbox.RunningStats())
    assert merged.count == 0
    assert merged.minimum is None
