import pytest
from ledger import (
    Coupon,
    apply_discount,
    best_coupon,
    coupon_discount,
    effective_rate,
    marginal_rate,
    progressive_tax,
    validate_brackets,
)

# 10% up to $10,000, 20% up to $40,000, 30% above.
BRACKETS = [(1_000_000, 1000), (4_000_000, 2000), (None, 3000)]

# --- progressive_tax -------------------------------------------------------


def test_tax_on_zero_income_is_zero():
    assert progressive_tax(0, BRACKETS) == 0


def test_tax_on_negative_income_is_zero():
    assert progressive_tax(-500, BRACKETS) == 0


def test_tax_inside_first_bracket():
    assert progressive_tax(500_000, BRACKETS) == 50_000


def test_tax_exactly_at_first_bracket_edge():
    assert progressive_tax(1_000_000, BRACKETS) == 100_000


def test_tax_just_over_first_edge_taxes_excess_at_second_rate():
    assert progressive_tax(1_000_010, BRACKETS) == 100_002


def test_tax_exactly_at_second_bracket_edge():
    assert progressive_tax(4_000_000, BRACKETS) == 700_000


def test_tax_in_open_top_bracket():
    assert progressive_tax(5_000_000, BRACKETS) == 1_000_000


def test_tax_with_single_open_bracket():
    assert progressive_tax(10_000, [(None, 1500)]) == 1500


def test_tax_with_zero_rate_first_bracket():
    assert progressive_tax(2_000_000, [(1_000_000, 0), (None, 2500)]) == 250_000


def test_tax_rounds_once_not_per_bracket():
    # each slice is worth half a cent; rounding per slice would give 2
    assert progressive_tax(10, [(5, 1000), (None, 1000)]) == 1


def test_tax_rejects_invalid_brackets():
    with pytest.raises(ValueError, match="at least one bracket"):
        progressive_tax(100, [])


# --- validate_brackets -----------------------------------------------------


def test_validate_accepts_good_brackets():
    assert validate_brackets(BRACKETS) is None


def test_validate_accepts_full_rate():
    assert validate_brackets([(100, 0), (None, 10000)]) is None


def test_validate_rejects_open_bracket_before_last():
    with pytest.raises(ValueError, match="only the last bracket may be open-ended"):
        validate_brackets([(None, 1000), (None, 2000)])


def test_validate_rejects_closed_last_bracket():
    with pytest.raises(ValueError, match="last bracket must be open-ended"):
        validate_brackets([(100, 1000)])


@pytest.mark.parametrize(
    "brackets",
    [
        [(100, 1000), (100, 2000), (None, 3000)],
        [(200, 1000), (100, 2000), (None, 3000)],
        [(0, 1000), (None, 2000)],
    ],
)
def test_validate_rejects_non_increasing_limits(brackets):
    with pytest.raises(ValueError, match="strictly increasing"):
        validate_brackets(brackets)


@pytest.mark.parametrize("rate", [-1, 10001])
def test_validate_rejects_rate_out_of_range(rate):
    with pytest.raises(ValueError, match="between 0 and 10000"):
        validate_brackets([(100, 1000), (None, rate)])


# --- marginal_rate / effective_rate ----------------------------------------


@pytest.mark.parametrize(
    ("income", "rate"),
    [
        (0, 1000),
        (1_000_000, 1000),
        (1_000_001, 2000),
        (4_000_000, 2000),
        (4_000_001, 3000),
        (10**9, 3000),
    ],
)
def test_marginal_rate_edge_belongs_to_lower_bracket(income, rate):
    assert marginal_rate(income, BRACKETS) == rate


def test_effective_rate_zero_income_is_zero():
    assert effective_rate(0, BRACKETS) == 0


def test_effective_rate_within_first_bracket_equals_its_rate():
    assert effective_rate(1_000_000, BRACKETS) == 1000


def test_effective_rate_blends_brackets():
    assert effective_rate(2_000_000, BRACKETS) == 1500
    assert effective_rate(5_000_000, BRACKETS) == 2000


def test_effective_rate_rounds_to_nearest_basis_point():
    assert effective_rate(3_000_000, BRACKETS) == 1667


# --- apply_discount --------------------------------------------------------


def test_discount_percentage_off():
    assert apply_discount(10000, 1000) == 9000


def test_discount_rounds_reduction_to_nearest_cent():
    assert apply_discount(999, 1500) == 849


def test_discount_limited_by_cap():
    assert apply_discount(10000, 1000, cap=500) == 9500


def test_discount_cap_equal_to_discount_changes_nothing():
    assert apply_discount(10000, 1000, cap=1000) == 9000


def test_discount_cap_above_discount_is_ignored():
    assert apply_discount(10000, 1000, cap=5000) == 9000


def test_discount_zero_cap_means_no_discount():
    assert apply_discount(10000, 1000, cap=0) == 10000


def test_discount_zero_and_full_percent():
    assert apply_discount(10000, 0) == 10000
    assert apply_discount(10000, 10000) == 0


@pytest.mark.parametrize("percent", [-1, 10001])
def test_discount_percent_out_of_range_raises(percent):
    with pytest.raises(ValueError, match="between 0 and 10000 basis points"):
        apply_discount(10000, percent)


def test_discount_negative_cap_raises():
    with pytest.raises(ValueError, match="cap must not be negative"):
        apply_discount(10000, 1000, cap=-1)


# --- Coupon / coupon_discount / best_coupon --------------------------------


def test_coupon_rejects_unknown_kind():
    with pytest.raises(ValueError, match="kind must be 'percent' or 'fixed'"):
        Coupon("X", "bogus", 100)


def test_coupon_rejects_negative_value():
    with pytest.raises(ValueError, match="value must not be negative"):
        Coupon("X", "fixed", -1)


def test_coupon_rejects_percent_over_hundred():
    with pytest.raises(ValueError, match="cannot exceed 10000"):
        Coupon("X", "percent", 10001)


def test_coupon_allows_large_fixed_value():
    assert Coupon("X", "fixed", 20000).value == 20000


def test_percent_coupon_discount():
    assert coupon_discount(5000, Coupon("TEN", "percent", 1000)) == 500


def test_fixed_coupon_discount():
    assert coupon_discount(5000, Coupon("SEVEN", "fixed", 700)) == 700


def test_fixed_coupon_never_exceeds_subtotal():
    assert coupon_discount(500, Coupon("SEVEN", "fixed", 700)) == 500


def test_coupon_below_min_spend_gives_nothing():
    coupon = Coupon("BIG", "percent", 1000, min_spend=5000)
    assert coupon_discount(4999, coupon) == 0


def test_coupon_exactly_at_min_spend_applies():
    coupon = Coupon("BIG", "percent", 1000, min_spend=5000)
    assert coupon_discount(5000, coupon) == 500


def test_coupon_max_discount_caps_percent():
    assert coupon_discount(5000, Coupon("CAP", "percent", 1000, max_discount=300)) == 300


def test_coupon_max_discount_equal_to_discount():
    assert coupon_discount(5000, Coupon("CAP", "percent", 1000, max_discount=500)) == 500


def test_coupon_on_zero_or_negative_subtotal_gives_nothing():
    coupon = Coupon("SEVEN", "fixed", 700)
    assert coupon_discount(0, coupon) == 0
    assert coupon_discount(-100, coupon) == 0


COUPONS = [
    Coupon("TEN", "percent", 1000),
    Coupon("SIX", "fixed", 600),
    Coupon("TWENTY", "percent", 2000, min_spend=10000),
]


def test_best_coupon_picks_largest_discount():
    assert best_coupon(5000, COUPONS).code == "SIX"


def test_best_coupon_considers_min_spend():
    assert best_coupon(10000, COUPONS).code == "TWENTY"


def test_best_coupon_tie_keeps_first():
    coupons = [Coupon("X", "fixed", 500), Coupon("Y", "percent", 1000)]
    assert best_coupon(5000, coupons).code == "X"


def test_best_coupon_none_when_no_coupons():
    assert best_coupon(5000, []) is None


def test_best_coupon_none_when_nothing_qualifies():
    assert best_coupon(100, [Coupon("BIG", "fixed", 500, min_spend=1000)]) is None


def test_validate_accepts_one_cent_first_limit():
    assert validate_brackets([(1, 1000), (None, 2000)]) is None


def test_tax_just_below_half_cent_rounds_down():
    assert progressive_tax(1, [(None, 4999)]) == 0


def test_tax_counts_the_first_cent_of_income():
    assert progressive_tax(3, [(None, 5000)]) == 2


def test_effective_rate_of_one_cent_income():
    assert effective_rate(1, [(None, 10000)]) == 10000


def test_effective_rate_rounds_down_below_half_basis_point():
    assert effective_rate(1_040_000, BRACKETS) == 1038


def test_zero_value_coupon_is_allowed_and_gives_nothing():
    assert coupon_discount(5000, Coupon("ZERO", "fixed", 0)) == 0


def test_full_percent_coupon_is_allowed_and_covers_subtotal():
    assert coupon_discount(5000, Coupon("FREE", "percent", 10000)) == 5000


def test_coupon_on_one_cent_subtotal():
    assert coupon_discount(1, Coupon("SEVEN", "fixed", 700)) == 1


def test_best_coupon_accepts_one_cent_discount():
    assert best_coupon(1, [Coupon("SEVEN", "fixed", 700)]).code == "SEVEN"


def test_marginal_rate_rejects_invalid_brackets():
    with pytest.raises(ValueError, match="last bracket must be open-ended"):
        marginal_rate(100, [(100, 1000)])
