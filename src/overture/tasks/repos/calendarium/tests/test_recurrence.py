import pytest
from calendarium import (
    CalendarError,
    Date,
    day_of_week,
    easter_sunday,
    every_n_days,
    monthly_nth_weekday,
    monthly_on_day,
    nth_weekday,
    weekly_on,
)

MONDAY, TUESDAY, WEDNESDAY, THURSDAY, FRIDAY, SATURDAY, SUNDAY = range(7)

# --- every_n_days -----------------------------------------------------------------------------


def test_every_n_days_starts_with_start_date():
    assert every_n_days(Date(2024, 1, 1), 10, 3) == [Date(2024, 1, 1), Date(2024, 1, 11), Date(2024, 1, 21)]


def test_every_n_days_crosses_leap_day():
    assert every_n_days(Date(2024, 2, 27), 1, 4) == [
        Date(2024, 2, 27), Date(2024, 2, 28), Date(2024, 2, 29), Date(2024, 3, 1)
    ]


def test_every_n_days_until_is_inclusive():
    assert every_n_days(Date(2024, 1, 1), 7, 10, until=Date(2024, 1, 15)) == [
        Date(2024, 1, 1), Date(2024, 1, 8), Date(2024, 1, 15)
    ]


def test_every_n_days_until_before_start_gives_nothing():
    assert every_n_days(Date(2024, 1, 10), 1, 5, until=Date(2024, 1, 9)) == []


def test_every_n_days_count_zero_is_empty():
    assert every_n_days(Date(2024, 1, 1), 3, 0) == []


def test_every_n_days_rejects_zero_interval():
    with pytest.raises(CalendarError, match="interval must be at least 1, got 0"):
        every_n_days(Date(2024, 1, 1), 0, 3)


def test_every_n_days_rejects_negative_count():
    with pytest.raises(CalendarError, match="count must not be negative, got -1"):
        every_n_days(Date(2024, 1, 1), 1, -1)


# --- weekly_on --------------------------------------------------------------------------------


def test_weekly_on_monday_wednesday_friday_starting_on_wednesday():
    # 2024-06-05 is a Wednesday, so the Monday of that week is skipped.
    assert weekly_on(Date(2024, 6, 5), [MONDAY, WEDNESDAY, FRIDAY], 4) == [
        Date(2024, 6, 5), Date(2024, 6, 7), Date(2024, 6, 10), Date(2024, 6, 12)
    ]


def test_weekly_on_every_second_week():
    assert weekly_on(Date(2024, 6, 3), [TUESDAY], 3, interval=2) == [
        Date(2024, 6, 4), Date(2024, 6, 18), Date(2024, 7, 2)
    ]


def test_weekly_on_ignores_duplicate_and_unsorted_weekdays():
    assert weekly_on(Date(2024, 6, 3), [SUNDAY, MONDAY, SUNDAY], 3) == [
        Date(2024, 6, 3), Date(2024, 6, 9), Date(2024, 6, 10)
    ]


def test_weekly_on_when_every_chosen_day_is_before_start_in_first_week():
    assert weekly_on(Date(2024, 6, 8), [MONDAY], 2) == [Date(2024, 6, 10), Date(2024, 6, 17)]


def test_weekly_on_returns_exactly_count_dates():
    dates = weekly_on(Date(2024, 6, 3), range(7), 10)
    assert len(dates) == 10
    assert dates[-1] == Date(2024, 6, 12)


def test_weekly_on_count_zero_is_empty():
    assert weekly_on(Date(2024, 6, 3), [MONDAY], 0) == []


def test_weekly_on_rejects_empty_weekdays():
    with pytest.raises(CalendarError, match="weekdays must not be empty"):
        weekly_on(Date(2024, 6, 3), [], 3)


def test_weekly_on_rejects_weekday_seven():
    with pytest.raises(CalendarError, match=r"weekday 7 is outside 0\.\.6"):
        weekly_on(Date(2024, 6, 3), [MONDAY, 7], 3)


def test_weekly_on_rejects_negative_count():
    with pytest.raises(CalendarError, match="count must not be negative, got -1"):
        weekly_on(Date(2024, 6, 3), [MONDAY], -1)


def test_weekly_on_rejects_zero_interval():
    with pytest.raises(CalendarError, match="interval must be at least 1, got 0"):
        weekly_on(Date(2024, 6, 3), [MONDAY], 3, interval=0)


# --- monthly_on_day ---------------------------------------------------------------------------


def test_monthly_on_day_clamps_each_month_independently():
    assert monthly_on_day(Date(2024, 1, 31), 4) == [
        Date(2024, 1, 31), Date(2024, 2, 29), Date(2024, 3, 31), Date(2024, 4, 30)
    ]


def test_monthly_on_day_quarterly_crosses_year():
    assert monthly_on_day(Date(2023, 11, 15), 3, interval=3) == [
        Date(2023, 11, 15), Date(2024, 2, 15), Date(2024, 5, 15)
    ]


def test_monthly_on_day_rejects_zero_interval():
    with pytest.raises(CalendarError, match="interval must be at least 1"):
        monthly_on_day(Date(2024, 1, 31), 4, interval=0)


def test_monthly_on_day_rejects_negative_count():
    with pytest.raises(CalendarError, match="count must not be negative, got -2"):
        monthly_on_day(Date(2024, 1, 31), -2)


# --- nth_weekday ------------------------------------------------------------------------------


def test_nth_weekday_first_monday_of_september_2024():
    assert nth_weekday(2024, 9, MONDAY, 1) == Date(2024, 9, 2)


def test_nth_weekday_first_when_month_starts_on_that_weekday():
    assert nth_weekday(2024, 9, SUNDAY, 1) == Date(2024, 9, 1)


def test_nth_weekday_fourth_thursday_of_november_2024():
    assert nth_weekday(2024, 11, THURSDAY, 4) == Date(2024, 11, 28)


def test_nth_weekday_fifth_friday_exists_in_march_2024():
    assert nth_weekday(2024, 3, FRIDAY, 5) == Date(2024, 3, 29)


def test_nth_weekday_last_monday_of_may_2024():
    assert nth_weekday(2024, 5, MONDAY, -1) == Date(2024, 5, 27)


def test_nth_weekday_last_when_month_ends_on_that_weekday():
    assert nth_weekday(2024, 8, SATURDAY, -1) == Date(2024, 8, 31)


def test_nth_weekday_second_to_last_friday():
    assert nth_weekday(2024, 2, FRIDAY, -2) == Date(2024, 2, 16)


def test_nth_weekday_last_thursday_of_leap_february():
    assert nth_weekday(2024, 2, THURSDAY, -1) == Date(2024, 2, 29)


def test_nth_weekday_rejects_missing_fifth_monday():
    with pytest.raises(CalendarError, match="2024-02 has no occurrence 5 of Monday"):
        nth_weekday(2024, 2, MONDAY, 5)


def test_nth_weekday_rejects_missing_fifth_from_end():
    with pytest.raises(CalendarError, match="2024-06 has no occurrence -5 of Tuesday"):
        nth_weekday(2024, 6, TUESDAY, -5)


def test_nth_weekday_rejects_fifth_last_when_it_would_be_day_zero():
    # February 2023 has exactly four Tuesdays, the last on the 28th.
    with pytest.raises(CalendarError, match="2023-02 has no occurrence -5 of Tuesday"):
        nth_weekday(2023, 2, TUESDAY, -5)


def test_nth_weekday_rejects_n_zero():
    with pytest.raises(CalendarError, match="n must be non-zero"):
        nth_weekday(2024, 2, MONDAY, 0)


@pytest.mark.parametrize("weekday", [-1, 7])
def test_nth_weekday_rejects_invalid_weekday(weekday):
    with pytest.raises(CalendarError, match=rf"weekday {weekday} is outside 0\.\.6"):
        nth_weekday(2024, 2, weekday, 1)


# --- monthly_nth_weekday ----------------------------------------------------------------------


def test_monthly_nth_weekday_second_tuesday_across_year_end():
    assert monthly_nth_weekday(2024, 11, TUESDAY, 2, 3) == [
        Date(2024, 11, 12), Date(2024, 12, 10), Date(2025, 1, 14)
    ]


def test_monthly_nth_weekday_skips_months_without_fifth_friday():
    assert monthly_nth_weekday(2024, 1, FRIDAY, 5, 12) == [
        Date(2024, 3, 29), Date(2024, 5, 31), Date(2024, 8, 30), Date(2024, 11, 29)
    ]


def test_monthly_nth_weekday_last_sunday_each_month():
    dates = monthly_nth_weekday(2024, 1, SUNDAY, -1, 3)
    assert dates == [Date(2024, 1, 28), Date(2024, 2, 25), Date(2024, 3, 31)]


def test_monthly_nth_weekday_accepts_fifth_from_end():
    assert monthly_nth_weekday(2024, 3, FRIDAY, -5, 2) == [Date(2024, 3, 1)]


def test_monthly_nth_weekday_rejects_invalid_weekday():
    with pytest.raises(CalendarError, match=r"weekday 7 is outside 0\.\.6"):
        monthly_nth_weekday(2024, 1, 7, 1, 3)


def test_monthly_nth_weekday_rejects_negative_months():
    with pytest.raises(CalendarError, match="count must not be negative, got -1"):
        monthly_nth_weekday(2024, 1, SUNDAY, 1, -1)


def test_monthly_nth_weekday_zero_months_is_empty():
    assert monthly_nth_weekday(2024, 1, SUNDAY, 1, 0) == []


@pytest.mark.parametrize("n", [0, 6, -6])
def test_monthly_nth_weekday_rejects_n_out_of_range(n):
    with pytest.raises(CalendarError, match=rf"n must be in -5\.\.-1 or 1\.\.5, got {n}"):
        monthly_nth_weekday(2024, 1, SUNDAY, n, 3)


# --- easter_sunday ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("year", "month", "day"),
    [(2000, 4, 23), (2002, 3, 31), (2008, 3, 23), (2011, 4, 24), (2018, 4, 1), (2019, 4, 21),
     (2024, 3, 31), (2025, 4, 20), (1818, 3, 22), (2285, 3, 22), (1943, 4, 25), (2038, 4, 25),
     (1961, 4, 2), (1583, 4, 10)],
)
def test_easter_sunday_known_dates(year, month, day):
    assert easter_sunday(year) == Date(year, month, day)


def reference_easter(year):
    """Independent check: Oudin's formulation of the Gregorian Easter computus."""
    golden = year % 19
    century = year // 100
    h = (century - century // 4 - (8 * century + 13) // 25 + 19 * golden + 15) % 30
    i = h - (h // 28) * (1 - (29 // (h + 1)) * ((21 - golden) // 11))
    j = (year + year // 4 + i + 2 - century + century // 4) % 7
    offset = i - j
    month = 3 + (offset + 40) // 44
    return (month, offset + 28 - 31 * (month // 4))


def test_easter_sunday_agrees_with_independent_formula_for_1583_to_3000():
    for year in range(1583, 3001):
        easter = easter_sunday(year)
        assert (easter.month, easter.day) == reference_easter(year), f"Easter {year}"


def test_easter_sunday_agrees_with_independent_formula_in_rare_late_correction_years():
    for year in (3165, 3192, 3260, 3317, 3344, 6412, 6415, 7515, 7610, 7762):
        easter = easter_sunday(year)
        assert (easter.month, easter.day) == reference_easter(year), f"Easter {year}"


def test_easter_sunday_is_always_a_sunday_between_march_22_and_april_25():
    for year in range(1583, 2600, 3):
        easter = easter_sunday(year)
        assert day_of_week(easter) == SUNDAY, f"Easter {easter} is not a Sunday"
        assert Date(year, 3, 22) <= easter <= Date(year, 4, 25), f"Easter {easter} out of window"


def test_easter_sunday_rejects_years_before_gregorian_reform():
    with pytest.raises(CalendarError, match="Gregorian Easter is defined from 1583, got 1582"):
        easter_sunday(1582)
