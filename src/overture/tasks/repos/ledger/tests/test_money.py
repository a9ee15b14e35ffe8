import pytest
from ledger import (
    format_amount,
    group_thousands,
    parse_amount,
    percent_of,
    round_div,
    split_by_weights,
    split_evenly,
)

# --- round_div -------------------------------------------------------------


def test_round_div_rounds_half_up_for_positive():
    assert round_div(7, 2) == 4


def test_round_div_rounds_half_away_from_zero_for_negative():
    assert round_div(-7, 2) == -4


def test_round_div_rounds_below_half_down():
    assert round_div(4, 3) == 1
    assert round_div(249, 100) == 2


def test_round_div_rounds_above_half_up():
    assert round_div(5, 3) == 2
    assert round_div(251, 100) == 3


def test_round_div_exact_half_of_hundred_goes_up():
    assert round_div(250, 100) == 3


def test_round_div_handles_negative_denominator():
    assert round_div(7, -2) == -4
    assert round_div(-9, -4) == 2


def test_round_div_of_zero_is_zero():
    assert round_div(0, 5) == 0


def test_round_div_exact_division_is_unchanged():
    assert round_div(300, 100) == 3
    assert round_div(-300, 100) == -3


def test_round_div_by_zero_raises():
    with pytest.raises(ZeroDivisionError, match="denominator must not be zero"):
        round_div(5, 0)


# --- percent_of ------------------------------------------------------------


def test_percent_of_whole_dollar_amount():
    assert percent_of(10000, 825) == 825


def test_percent_of_rounds_to_nearest_cent():
    assert percent_of(1999, 825) == 165


def test_percent_of_negative_amount_rounds_symmetrically():
    assert percent_of(-1999, 825) == -165


def test_percent_of_half_cent_rounds_up_and_just_below_rounds_down():
    assert percent_of(200, 25) == 1
    assert percent_of(199, 25) == 0


# --- parse_amount ----------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "cents"),
    [
        ("1,234.50", 123450),
        ("0.05", 5),
        ("12", 1200),
        ("12.5", 1250),
        (".75", 75),
        ("999", 99900),
        ("1,234,567.89", 123456789),
        ("  42.10  ", 4210),
        ("+7.00", 700),
        ("0", 0),
    ],
)
def test_parse_amount_plain_values(text, cents):
    assert parse_amount(text) == cents


def test_parse_amount_leading_minus_is_negative():
    assert parse_amount("-3.05") == -305


def test_parse_amount_parentheses_mean_negative():
    assert parse_amount("(12.00)") == -1200


def test_parse_amount_skips_currency_symbol():
    assert parse_amount("$1,000") == 100000
    assert parse_amount("€0.99") == 99


def test_parse_amount_sign_before_currency_symbol():
    assert parse_amount("-$1,234.56") == -123456


def test_parse_amount_empty_text_raises():
    with pytest.raises(ValueError, match="empty amount"):
        parse_amount("   ")


def test_parse_amount_three_decimal_places_raises():
    with pytest.raises(ValueError, match="too many decimal places"):
        parse_amount("1.234")


@pytest.mark.parametrize("text", ["12,34.00", "1234,567", ",123", "1,2345"])
def test_parse_amount_bad_thousands_grouping_raises(text):
    with pytest.raises(ValueError, match="misplaced thousands separator"):
        parse_amount(text)


@pytest.mark.parametrize("text", ["abc", "1.2x", "(-5.00)", ".", "$", "1.-5", "--5"])
def test_parse_amount_garbage_raises_invalid(text):
    with pytest.raises(ValueError, match="invalid amount"):
        parse_amount(text)


# --- group_thousands / format_amount --------------------------------------


@pytest.mark.parametrize(
    ("digits", "grouped"),
    [
        ("", ""),
        ("1", "1"),
        ("123", "123"),
        ("1234", "1,234"),
        ("123456", "123,456"),
        ("1234567", "1,234,567"),
    ],
)
def test_group_thousands_inserts_commas_from_the_right(digits, grouped):
    assert group_thousands(digits) == grouped


def test_format_amount_zero():
    assert format_amount(0) == "0.00"


def test_format_amount_pads_cents_to_two_digits():
    assert format_amount(5) == "0.05"
    assert format_amount(1207) == "12.07"


def test_format_amount_groups_thousands():
    assert format_amount(123450) == "1,234.50"
    assert format_amount(99999999) == "999,999.99"


def test_format_amount_negative_puts_sign_before_symbol():
    assert format_amount(-123450, "$") == "-$1,234.50"


def test_format_amount_single_negative_cent():
    assert format_amount(-1) == "-0.01"


def test_format_amount_without_grouping():
    assert format_amount(100000, grouping=False) == "1000.00"


@pytest.mark.parametrize("cents", [0, 1, -1, 99, 100, 123456789, -5000000])
def test_format_then_parse_round_trips(cents):
    assert parse_amount(format_amount(cents, "$")) == cents


# --- split_evenly ----------------------------------------------------------


def test_split_gives_remainder_cents_to_first_parts():
    assert split_evenly(100, 3) == [34, 33, 33]
    assert split_evenly(10, 4) == [3, 3, 2, 2]


def test_split_exact_division_gives_equal_parts():
    assert split_evenly(90, 3) == [30, 30, 30]


def test_split_fewer_cents_than_parts():
    assert split_evenly(2, 5) == [1, 1, 0, 0, 0]


def test_split_negative_total_negates_shares():
    assert split_evenly(-100, 3) == [-34, -33, -33]


def test_split_zero_total():
    assert split_evenly(0, 3) == [0, 0, 0]


def test_split_single_part_is_whole_total():
    assert split_evenly(5, 1) == [5]


def test_split_shares_always_sum_to_total():
    for total in (1, 7, 101, 9999):
        for parts in (1, 2, 3, 7):
            assert sum(split_evenly(total, parts)) == total


def test_split_zero_parts_raises():
    with pytest.raises(ValueError, match="parts must be at least 1"):
        split_evenly(100, 0)


# --- split_by_weights ------------------------------------------------------


def test_split_by_weights_exact_proportions():
    assert split_by_weights(1000, [1, 2, 2]) == [200, 400, 400]


def test_split_by_weights_leftover_goes_to_largest_fraction():
    assert split_by_weights(100, [1, 2]) == [33, 67]
    assert split_by_weights(7, [2, 3]) == [3, 4]


def test_split_by_weights_ties_go_to_earlier_shares():
    assert split_by_weights(5, [1, 1, 1, 1]) == [2, 1, 1, 1]
    assert split_by_weights(100, [1, 1, 1]) == [34, 33, 33]


def test_split_by_weights_zero_weight_gets_nothing():
    assert split_by_weights(10, [3, 0, 7]) == [3, 0, 7]


def test_split_by_weights_negative_total():
    assert split_by_weights(-100, [1, 2]) == [-33, -67]


def test_split_by_weights_sums_to_total():
    assert sum(split_by_weights(1001, [5, 3, 11, 2])) == 1001


def test_split_by_weights_empty_raises():
    with pytest.raises(ValueError, match="weights must not be empty"):
        split_by_weights(100, [])


def test_split_by_weights_negative_weight_raises():
    with pytest.raises(ValueError, match="weights must not be negative"):
        split_by_weights(100, [1, -1])


def test_split_by_weights_all_zero_raises():
    with pytest.raises(ValueError, match="weights must not all be zero"):
        split_by_weights(100, [0, 0])


def test_parse_amount_parentheses_keep_all_cent_digits():
    assert parse_amount("(12.05)") == -1205
