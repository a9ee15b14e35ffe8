import pytest
from ledger import (
    Installment,
    amortization_schedule,
    monthly_interest,
    monthly_payment,
    remaining_balance,
    total_interest,
)

# --- monthly_interest ------------------------------------------------------


def test_monthly_interest_is_twelfth_of_annual_rate():
    assert monthly_interest(100000, 1200) == 1000


def test_monthly_interest_rounds_down_below_half_cent():
    assert monthly_interest(1099, 600) == 5


def test_monthly_interest_rounds_half_cent_up():
    assert monthly_interest(1100, 600) == 6


def test_monthly_interest_zero_rate_is_zero():
    assert monthly_interest(100000, 0) == 0


# --- monthly_payment -------------------------------------------------------


def test_payment_zero_rate_is_principal_over_months_rounded_up():
    assert monthly_payment(1000, 0, 3) == 334
    assert monthly_payment(1201, 0, 12) == 101


def test_payment_zero_rate_exact_division():
    assert monthly_payment(1200, 0, 12) == 100


def test_payment_with_interest_rounds_up_to_cent():
    # $1,000 at 12% a year over 12 months is $88.8488... a month
    assert monthly_payment(100000, 1200, 12) == 8885


def test_payment_single_month_repays_principal_plus_interest():
    assert monthly_payment(100000, 1200, 1) == 101000


def test_payment_rejects_non_positive_principal():
    with pytest.raises(ValueError, match="principal must be positive"):
        monthly_payment(0, 1200, 12)


def test_payment_rejects_negative_rate():
    with pytest.raises(ValueError, match="annual rate must not be negative"):
        monthly_payment(100000, -1, 12)


def test_payment_rejects_zero_months():
    with pytest.raises(ValueError, match="months must be at least 1"):
        monthly_payment(100000, 1200, 0)


# --- amortization_schedule -------------------------------------------------


SCHEDULE = amortization_schedule(100000, 1200, 12)


def test_schedule_has_one_row_per_month():
    assert [row.number for row in SCHEDULE] == list(range(1, 13))


def test_schedule_first_row_splits_interest_and_principal():
    assert SCHEDULE[0] == Installment(1, 8885, 1000, 7885, 92115)


def test_schedule_second_row_charges_interest_on_reduced_balance():
    assert SCHEDULE[1] == Installment(2, 8885, 921, 7964, 84151)


def test_schedule_regular_payments_are_level():
    assert {row.payment for row in SCHEDULE[:-1]} == {8885}


def test_schedule_last_payment_absorbs_remainder():
    assert SCHEDULE[-1] == Installment(12, 8884, 88, 8796, 0)


def test_schedule_principal_column_sums_to_loan():
    assert sum(row.principal for row in SCHEDULE) == 100000


def test_schedule_each_payment_is_interest_plus_principal():
    for row in SCHEDULE:
        assert row.payment == row.interest + row.principal


def test_schedule_zero_rate_last_payment_is_smaller():
    schedule = amortization_schedule(1000, 0, 3)
    assert [row.payment for row in schedule] == [334, 334, 332]
    assert [row.balance for row in schedule] == [666, 332, 0]


def test_schedule_stops_early_when_balance_paid_off():
    schedule = amortization_schedule(10, 0, 7)
    assert [row.balance for row in schedule] == [8, 6, 4, 2, 0]


def test_schedule_single_month():
    assert amortization_schedule(100000, 1200, 1) == [Installment(1, 101000, 1000, 100000, 0)]


def test_schedule_longer_loan_ends_at_zero_with_smaller_last_payment():
    schedule = amortization_schedule(500000, 600, 24)
    assert len(schedule) == 24
    assert schedule[-1] == Installment(24, 22145, 110, 22035, 0)


def test_schedule_rejects_bad_input():
    with pytest.raises(ValueError, match="months must be at least 1"):
        amortization_schedule(100000, 1200, 0)


# --- total_interest / remaining_balance ------------------------------------


def test_total_interest_of_schedule():
    assert total_interest(SCHEDULE) == 6619


def test_total_interest_zero_rate_is_zero():
    assert total_interest(amortization_schedule(1000, 0, 3)) == 0


def test_total_interest_of_empty_schedule_is_zero():
    assert total_interest([]) == 0


def test_remaining_balance_before_any_payment_is_principal():
    assert remaining_balance(SCHEDULE, 0) == 100000


def test_remaining_balance_after_some_payments():
    assert remaining_balance(SCHEDULE, 1) == 92115
    assert remaining_balance(SCHEDULE, 11) == 8796


def test_remaining_balance_after_all_payments_is_zero():
    assert remaining_balance(SCHEDULE, 12) == 0
    assert remaining_balance(SCHEDULE, 40) == 0


def test_remaining_balance_negative_count_raises():
    with pytest.raises(ValueError, match="payments made must not be negative"):
        remaining_balance(SCHEDULE, -1)


def test_remaining_balance_empty_schedule_raises():
    with pytest.raises(ValueError, match="schedule is empty"):
        remaining_balance([], 0)


def test_payment_for_one_cent_loan():
    assert monthly_payment(1, 0, 1) == 1


def test_payment_on_large_loan_is_exact_to_the_cent():
    # $1,000,000 at 12% over 12 months is $88,848.7886... a month
    assert monthly_payment(100_000_000, 1200, 12) == 8884879


def test_schedule_tiny_loan_with_interest_finishes_before_term():
    schedule = amortization_schedule(288, 3600, 24)
    assert len(schedule) == 23
    assert schedule[21] == Installment(22, 18, 1, 17, 1)
    assert schedule[-1] == Installment(23, 1, 0, 1, 0)
