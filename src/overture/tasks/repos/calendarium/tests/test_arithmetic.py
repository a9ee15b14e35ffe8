import datetime

import pytest
from calendarium import (
    CalendarError,
    Date,
    add_business_days,
    add_days,
    add_months,
    add_years,
    business_days_between,
    days_between,
    end_of_month,
    is_business_day,
    is_weekend,
    months_between,
    next_weekday,
    previous_weekday,
)

# Dates are built inside the tests (never at import time) so a broken Date fails single tests.


def to_date(ref):
    return Date(ref.year, ref.month, ref.day)


def day(text):
    year, month, day_number = (int(part) for part in text.split("-"))
    return Date(year, month, day_number)


# 2024-06-03 is a Monday; the week runs to Sunday 2024-06-09.
def monday():
    return Date(2024, 6, 3)


def thursday():
    return Date(2024, 6, 6)


def friday():
    return Date(2024, 6, 7)


def saturday():
    return Date(2024, 6, 8)


def sunday():
    return Date(2024, 6, 9)


# --- add_days / days_between ------------------------------------------------------------------


def test_add_days_crosses_year_end():
    assert add_days(Date(2023, 12, 31), 1) == Date(2024, 1, 1)


def test_add_days_lands_on_leap_day():
    assert add_days(Date(2024, 2, 28), 1) == Date(2024, 2, 29)


def test_add_days_skips_missing_leap_day():
    assert add_days(Date(2023, 2, 28), 1) == Date(2023, 3, 1)


def test_add_days_negative_goes_back_into_previous_year():
    assert add_days(Date(2024, 1, 1), -1) == Date(2023, 12, 31)


def test_add_days_zero_returns_same_date():
    assert add_days(Date(2024, 5, 17), 0) == Date(2024, 5, 17)


def test_add_days_matches_datetime_for_many_offsets():
    start = datetime.date(1999, 12, 15)
    for offset in range(-200, 400, 7):
        expected = to_date(start + datetime.timedelta(days=offset))
        assert add_days(to_date(start), offset) == expected, f"offset {offset}"


def test_add_days_past_last_supported_date_raises():
    with pytest.raises(CalendarError, match="ordinal"):
        add_days(Date(9999, 12, 31), 1)


def test_add_days_before_first_supported_date_raises():
    with pytest.raises(CalendarError, match="ordinal 0 is outside"):
        add_days(Date(1, 1, 1), -1)


def test_days_between_is_positive_when_end_is_later():
    assert days_between(Date(2024, 1, 1), Date(2024, 3, 1)) == 60


def test_days_between_is_negative_when_end_is_earlier():
    assert days_between(Date(2024, 3, 1), Date(2024, 1, 1)) == -60


def test_days_between_same_date_is_zero():
    assert days_between(Date(2024, 3, 1), Date(2024, 3, 1)) == 0


def test_days_between_whole_leap_year_is_366():
    assert days_between(Date(2024, 1, 1), Date(2025, 1, 1)) == 366


def test_days_between_across_1900_has_no_leap_day():
    assert days_between(Date(1900, 2, 28), Date(1900, 3, 1)) == 1


# --- add_months / add_years -------------------------------------------------------------------


def test_add_months_keeps_day_when_it_exists():
    assert add_months(Date(2024, 1, 15), 1) == Date(2024, 2, 15)


def test_add_months_clamps_january_31_to_february_29_in_leap_year():
    assert add_months(Date(2024, 1, 31), 1) == Date(2024, 2, 29)


def test_add_months_clamps_january_31_to_february_28_in_common_year():
    assert add_months(Date(2023, 1, 31), 1) == Date(2023, 2, 28)


def test_add_months_clamps_to_april_30():
    assert add_months(Date(2024, 3, 31), 1) == Date(2024, 4, 30)


def test_add_months_december_plus_one_is_january_next_year():
    assert add_months(Date(2023, 12, 10), 1) == Date(2024, 1, 10)


def test_add_months_january_minus_one_is_december_previous_year():
    assert add_months(Date(2024, 1, 10), -1) == Date(2023, 12, 10)


def test_add_months_twelve_is_one_year():
    assert add_months(Date(2023, 7, 4), 12) == Date(2024, 7, 4)


def test_add_months_minus_thirteen():
    assert add_months(Date(2024, 3, 31), -13) == Date(2023, 2, 28)


def test_add_months_zero_returns_same_date():
    assert add_months(Date(2024, 5, 31), 0) == Date(2024, 5, 31)


def test_add_months_can_land_in_year_one():
    assert add_months(Date(2, 1, 15), -1) == Date(1, 12, 15)
    assert add_months(Date(1, 12, 31), -11) == Date(1, 1, 31)


def test_add_months_before_year_one_raises():
    with pytest.raises(CalendarError, match="leaves the supported range"):
        add_months(Date(1, 1, 15), -1)


def test_add_months_after_year_9999_raises():
    with pytest.raises(CalendarError, match="year 10000 is outside"):
        add_months(Date(9999, 12, 1), 1)


def test_add_years_keeps_ordinary_date():
    assert add_years(Date(2023, 7, 4), 2) == Date(2025, 7, 4)


def test_add_years_moves_feb_29_to_feb_28_in_common_year():
    assert add_years(Date(2024, 2, 29), 1) == Date(2025, 2, 28)


def test_add_years_keeps_feb_29_in_leap_target_year():
    assert add_years(Date(2024, 2, 29), 4) == Date(2028, 2, 29)


def test_add_years_feb_29_to_century_2100_is_feb_28():
    assert add_years(Date(2000, 2, 29), 100) == Date(2100, 2, 28)


def test_add_years_negative():
    assert add_years(Date(2024, 2, 29), -1) == Date(2023, 2, 28)
    assert add_years(Date(2024, 3, 1), -24) == Date(2000, 3, 1)


def test_add_years_does_not_touch_feb_28():
    assert add_years(Date(2023, 2, 28), 1) == Date(2024, 2, 28)


# --- months_between / end_of_month ------------------------------------------------------------


@pytest.mark.parametrize(
    ("start", "end", "expected"),
    [
        ("2024-01-15", "2024-02-15", 1),
        ("2024-01-15", "2024-03-14", 1),
        ("2024-01-15", "2024-03-15", 2),
        ("2024-01-31", "2024-02-29", 1),
        ("2024-01-31", "2024-02-28", 0),
        ("2023-11-30", "2025-01-01", 13),
        ("2024-03-15", "2024-03-15", 0),
        ("2024-03-15", "2024-01-15", -2),
        ("2024-03-15", "2024-01-16", -1),
        ("2024-03-15", "2024-01-14", -2),
        ("2024-03-20", "2024-03-10", 0),
        ("2024-03-10", "2024-03-20", 0),
        ("2024-03-15", "2024-02-20", 0),
        ("2024-01-20", "2024-02-10", 0),
    ],
)
def test_months_between(start, end, expected):
    assert months_between(day(start), day(end)) == expected


def test_end_of_month_february_leap_year():
    assert end_of_month(Date(2024, 2, 3)) == Date(2024, 2, 29)


def test_end_of_month_february_1900():
    assert end_of_month(Date(1900, 2, 3)) == Date(1900, 2, 28)


def test_end_of_month_april_and_december():
    assert end_of_month(Date(2024, 4, 1)) == Date(2024, 4, 30)
    assert end_of_month(Date(2024, 12, 31)) == Date(2024, 12, 31)


# --- weekends and business days ---------------------------------------------------------------


def test_is_weekend_true_on_saturday_and_sunday():
    assert is_weekend(saturday()) is True
    assert is_weekend(sunday()) is True


def test_is_weekend_false_on_friday_and_monday():
    assert is_weekend(friday()) is False
    assert is_weekend(monday()) is False


def test_is_business_day_excludes_holidays():
    assert is_business_day(thursday()) is True
    assert is_business_day(thursday(), {thursday()}) is False


def test_is_business_day_false_on_weekend_even_without_holidays():
    assert is_business_day(saturday()) is False


def test_add_business_days_friday_plus_one_is_monday():
    assert add_business_days(friday(), 1) == Date(2024, 6, 10)


def test_add_business_days_thursday_plus_two_skips_weekend():
    assert add_business_days(thursday(), 2) == Date(2024, 6, 10)


def test_add_business_days_five_is_one_week_later():
    assert add_business_days(monday(), 5) == Date(2024, 6, 10)


def test_add_business_days_saturday_plus_one_is_monday():
    assert add_business_days(saturday(), 1) == Date(2024, 6, 10)


def test_add_business_days_zero_returns_start_even_on_weekend():
    assert add_business_days(saturday(), 0) == saturday()


def test_add_business_days_negative_from_monday_is_previous_friday():
    assert add_business_days(monday(), -1) == Date(2024, 5, 31)


def test_add_business_days_negative_from_friday_is_thursday():
    assert add_business_days(friday(), -1) == thursday()


def test_add_business_days_skips_holidays_over_year_end():
    holidays = {Date(2024, 12, 25), Date(2024, 12, 26), Date(2025, 1, 1)}
    assert add_business_days(Date(2024, 12, 24), 2, holidays) == Date(2024, 12, 30)
    assert add_business_days(Date(2024, 12, 24), 4, holidays) == Date(2025, 1, 2)


def test_add_business_days_skips_a_whole_month_of_holidays():
    june_weekdays = {Date(2024, 6, day) for day in range(1, 31) if Date(2024, 6, day).weekday < 5}
    assert len(june_weekdays) == 20
    assert add_business_days(Date(2024, 5, 31), 1, june_weekdays) == Date(2024, 7, 1)
    assert add_business_days(Date(2024, 7, 1), -1, june_weekdays) == Date(2024, 5, 31)


def test_add_business_days_matches_brute_force_count():
    holidays = {Date(2024, 7, 4), Date(2024, 9, 2)}
    for count in range(0, 80, 3):
        current = datetime.date(2024, 6, 3)
        remaining = count
        while remaining:
            current += datetime.timedelta(days=1)
            if current.weekday() < 5 and to_date(current) not in holidays:
                remaining -= 1
        assert add_business_days(monday(), count, holidays) == to_date(current), f"count {count}"


def test_business_days_between_full_week_is_five():
    assert business_days_between(monday(), Date(2024, 6, 10)) == 5


def test_business_days_between_same_day_is_zero():
    assert business_days_between(monday(), monday()) == 0


def test_business_days_between_counts_start_but_not_end():
    assert business_days_between(friday(), Date(2024, 6, 10)) == 1
    assert business_days_between(saturday(), Date(2024, 6, 10)) == 0


def test_business_days_between_reversed_range_is_negative():
    assert business_days_between(Date(2024, 6, 17), monday()) == -10


def test_business_days_between_skips_holidays():
    assert business_days_between(monday(), Date(2024, 6, 10), {thursday()}) == 4


def test_business_days_between_inverts_add_business_days():
    for count in range(0, 60, 4):
        target = add_business_days(thursday(), count)
        assert business_days_between(thursday(), target) == count, f"count {count}"


# --- next / previous weekday ------------------------------------------------------------------


def test_next_weekday_same_weekday_is_one_week_later():
    assert next_weekday(monday(), 0) == Date(2024, 6, 10)


def test_next_weekday_friday_to_monday():
    assert next_weekday(friday(), 0) == Date(2024, 6, 10)


def test_next_weekday_crosses_month_end():
    assert next_weekday(Date(2024, 6, 30), 0) == Date(2024, 7, 1)


def test_next_weekday_later_in_same_week():
    assert next_weekday(monday(), 4) == friday()


def test_next_weekday_accepts_sunday():
    assert next_weekday(monday(), 6) == sunday()


@pytest.mark.parametrize("weekday", [-1, 7])
def test_next_weekday_rejects_invalid_weekday(weekday):
    with pytest.raises(CalendarError, match=rf"weekday {weekday} is outside 0\.\.6"):
        next_weekday(monday(), weekday)


def test_previous_weekday_monday_to_friday():
    assert previous_weekday(monday(), 4) == Date(2024, 5, 31)


def test_previous_weekday_same_weekday_is_one_week_earlier():
    assert previous_weekday(friday(), 4) == Date(2024, 5, 31)


def test_previous_weekday_earlier_in_same_week():
    assert previous_weekday(friday(), 0) == monday()


def test_previous_weekday_accepts_sunday():
    assert previous_weekday(friday(), 6) == Date(2024, 6, 2)


@pytest.mark.parametrize("weekday", [-1, 7])
def test_previous_weekday_rejects_invalid_weekday(weekday):
    with pytest.raises(CalendarError, match=rf"weekday {weekday} is outside 0\.\.6"):
        previous_weekday(monday(), weekday)
