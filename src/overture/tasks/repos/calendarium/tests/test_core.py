import calendar
import dataclasses
import datetime

import pytest
from calendarium import (
    MAX_ORDINAL,
    CalendarError,
    Date,
    date_from_day_of_year,
    day_of_week,
    day_of_year,
    days_before_month,
    days_before_year,
    days_in_month,
    days_in_year,
    from_ordinal,
    is_leap_year,
    is_valid_date,
    to_ordinal,
    validate_date,
    zeller_day_of_week,
)


def as_tuple(date):
    return (date.year, date.month, date.day)


# --- leap years -------------------------------------------------------------------------------


def test_is_leap_year_true_for_year_divisible_by_four():
    assert is_leap_year(2024) is True


def test_is_leap_year_false_for_ordinary_year():
    assert is_leap_year(2023) is False


def test_is_leap_year_false_for_century_not_divisible_by_400():
    assert is_leap_year(1900) is False
    assert is_leap_year(2100) is False


def test_is_leap_year_true_for_century_divisible_by_400():
    assert is_leap_year(2000) is True
    assert is_leap_year(2400) is True


def test_is_leap_year_matches_calendar_module_for_years_1_to_2500():
    wrong = [year for year in range(1, 2501) if is_leap_year(year) != calendar.isleap(year)]
    assert wrong == []


# --- month and year lengths -------------------------------------------------------------------


def test_days_in_month_for_every_month_of_2023():
    lengths = [days_in_month(2023, month) for month in range(1, 13)]
    assert lengths == [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]


def test_days_in_month_february_has_29_days_in_leap_year():
    assert days_in_month(2024, 2) == 29


def test_days_in_month_february_1900_has_28_days():
    assert days_in_month(1900, 2) == 28


def test_days_in_month_february_2000_has_29_days():
    assert days_in_month(2000, 2) == 29


def test_days_in_month_only_february_changes_in_leap_year():
    assert days_in_month(2024, 1) == 31
    assert days_in_month(2024, 3) == 31
    assert days_in_month(2024, 12) == 31


@pytest.mark.parametrize("month", [0, 13, -1])
def test_days_in_month_rejects_month_outside_1_to_12(month):
    with pytest.raises(CalendarError, match=rf"month {month} is outside 1\.\.12"):
        days_in_month(2024, month)


@pytest.mark.parametrize(("year", "expected"), [(2024, 366), (2023, 365), (1900, 365), (2000, 366)])
def test_days_in_year_counts_leap_day(year, expected):
    assert days_in_year(year) == expected


# --- validation -------------------------------------------------------------------------------


def test_validate_date_accepts_real_dates_including_extremes():
    assert validate_date(2024, 2, 29) is None
    assert validate_date(1, 1, 1) is None
    assert validate_date(9999, 12, 31) is None


def test_validate_date_rejects_year_zero():
    with pytest.raises(CalendarError, match=r"year 0 is outside 1\.\.9999"):
        validate_date(0, 1, 1)


def test_validate_date_rejects_year_10000():
    with pytest.raises(CalendarError, match=r"year 10000 is outside 1\.\.9999"):
        validate_date(10000, 1, 1)


def test_validate_date_rejects_month_13():
    with pytest.raises(CalendarError, match=r"month 13 is outside 1\.\.12"):
        validate_date(2024, 13, 1)


def test_validate_date_rejects_month_zero():
    with pytest.raises(CalendarError, match=r"month 0 is outside 1\.\.12"):
        validate_date(2024, 0, 1)


def test_validate_date_rejects_day_zero():
    with pytest.raises(CalendarError, match=r"day 0 is outside 1\.\.31 for 2024-01"):
        validate_date(2024, 1, 0)


def test_validate_date_rejects_day_32_in_january():
    with pytest.raises(CalendarError, match=r"day 32 is outside 1\.\.31 for 2024-01"):
        validate_date(2024, 1, 32)


def test_validate_date_rejects_february_29_in_non_leap_year():
    with pytest.raises(CalendarError, match=r"day 29 is outside 1\.\.28 for 2023-02"):
        validate_date(2023, 2, 29)


def test_validate_date_rejects_april_31():
    with pytest.raises(CalendarError, match=r"day 31 is outside 1\.\.30 for 2024-04"):
        validate_date(2024, 4, 31)


def test_validate_date_rejects_string_year_with_type_error():
    with pytest.raises(TypeError, match="year must be an int, got str"):
        validate_date("2024", 1, 1)


def test_validate_date_rejects_bool_month_with_type_error():
    with pytest.raises(TypeError, match="month must be an int, got bool"):
        validate_date(2024, True, 1)


def test_validate_date_rejects_float_day_with_type_error():
    with pytest.raises(TypeError, match="day must be an int, got float"):
        validate_date(2024, 1, 1.0)


def test_calendar_error_is_a_value_error():
    assert issubclass(CalendarError, ValueError)


@pytest.mark.parametrize(
    ("fields", "expected"),
    [((2024, 2, 29), True), ((2023, 2, 29), False), ((2024, 12, 31), True), ((2024, 13, 1), False)],
)
def test_is_valid_date_reports_without_raising(fields, expected):
    assert is_valid_date(*fields) is expected


# --- Date type --------------------------------------------------------------------------------


def test_date_str_is_zero_padded_iso_format():
    assert str(Date(42, 3, 7)) == "0042-03-07"
    assert str(Date(2024, 12, 31)) == "2024-12-31"


def test_date_constructor_validates_fields():
    with pytest.raises(CalendarError, match=r"day 30 is outside 1\.\.29"):
        Date(2024, 2, 30)


def test_dates_order_chronologically():
    assert Date(2023, 12, 31) < Date(2024, 1, 1)
    assert Date(2024, 1, 31) < Date(2024, 2, 1)
    assert Date(2024, 2, 1) < Date(2024, 2, 2)
    assert sorted([Date(2024, 3, 1), Date(2023, 5, 5), Date(2024, 1, 9)]) == [
        Date(2023, 5, 5), Date(2024, 1, 9), Date(2024, 3, 1)
    ]


def test_date_is_frozen():
    date = Date(2024, 1, 1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        date.day = 2  # type: ignore[misc]


def test_date_weekday_property_uses_monday_zero():
    assert Date(2024, 1, 1).weekday == 0
    assert Date(2024, 1, 7).weekday == 6


# --- day of year ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("year", "month", "expected"),
    [(2023, 1, 0), (2023, 2, 31), (2023, 3, 59), (2024, 3, 60), (2023, 12, 334), (2024, 12, 335)],
)
def test_days_before_month(year, month, expected):
    assert days_before_month(year, month) == expected


@pytest.mark.parametrize("month", [0, 13])
def test_days_before_month_rejects_month_outside_1_to_12(month):
    with pytest.raises(CalendarError, match=f"month {month} is outside"):
        days_before_month(2024, month)


def test_day_of_year_january_first_is_one():
    assert day_of_year(Date(2024, 1, 1)) == 1


def test_day_of_year_december_31_is_365_in_common_year():
    assert day_of_year(Date(2023, 12, 31)) == 365


def test_day_of_year_december_31_is_366_in_leap_year():
    assert day_of_year(Date(2024, 12, 31)) == 366


def test_day_of_year_march_first_shifts_in_leap_year():
    assert day_of_year(Date(2023, 3, 1)) == 60
    assert day_of_year(Date(2024, 3, 1)) == 61
    assert day_of_year(Date(1900, 3, 1)) == 60
    assert day_of_year(Date(2000, 3, 1)) == 61


def test_day_of_year_matches_datetime_for_every_day_of_2024():
    start = datetime.date(2024, 1, 1)
    for offset in range(366):
        ref = start + datetime.timedelta(days=offset)
        got = day_of_year(Date(ref.year, ref.month, ref.day))
        assert got == ref.timetuple().tm_yday, f"day_of_year wrong for {ref}"


def test_date_from_day_of_year_first_day():
    assert date_from_day_of_year(2024, 1) == Date(2024, 1, 1)


def test_date_from_day_of_year_60_is_feb_29_in_leap_year():
    assert date_from_day_of_year(2024, 60) == Date(2024, 2, 29)


def test_date_from_day_of_year_60_is_march_1_in_common_year():
    assert date_from_day_of_year(2023, 60) == Date(2023, 3, 1)


def test_date_from_day_of_year_last_day_of_leap_year():
    assert date_from_day_of_year(2024, 366) == Date(2024, 12, 31)


def test_date_from_day_of_year_rejects_366_in_common_year():
    with pytest.raises(CalendarError, match=r"day of year 366 is outside 1\.\.365 for 2023"):
        date_from_day_of_year(2023, 366)


def test_date_from_day_of_year_rejects_zero():
    with pytest.raises(CalendarError, match=r"day of year 0 is outside 1\.\.366 for 2024"):
        date_from_day_of_year(2024, 0)


def test_date_from_day_of_year_round_trips_every_day_of_1900():
    for number in range(1, 366):
        assert day_of_year(date_from_day_of_year(1900, number)) == number


# --- ordinals ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("year", "expected"), [(1, 0), (2, 365), (5, 1461), (101, 36524), (401, 146097), (2001, 730485)]
)
def test_days_before_year(year, expected):
    assert days_before_year(year) == expected


def test_to_ordinal_of_first_supported_day_is_one():
    assert to_ordinal(Date(1, 1, 1)) == 1


def test_to_ordinal_of_last_supported_day_is_max_ordinal():
    assert to_ordinal(Date(9999, 12, 31)) == MAX_ORDINAL
    assert datetime.date(9999, 12, 31).toordinal() == MAX_ORDINAL


@pytest.mark.parametrize(
    "fields", [(1970, 1, 1), (2000, 1, 1), (2000, 2, 29), (1900, 3, 1), (2024, 12, 31), (1600, 12, 31)]
)
def test_to_ordinal_matches_datetime(fields):
    assert to_ordinal(Date(*fields)) == datetime.date(*fields).toordinal()


def test_consecutive_days_have_consecutive_ordinals_across_year_end():
    assert to_ordinal(Date(2024, 1, 1)) - to_ordinal(Date(2023, 12, 31)) == 1


def test_from_ordinal_one_is_first_of_january_year_one():
    assert from_ordinal(1) == Date(1, 1, 1)


def test_from_ordinal_max_is_9999_12_31():
    assert from_ordinal(MAX_ORDINAL) == Date(9999, 12, 31)


@pytest.mark.parametrize("ordinal", [0, -5, MAX_ORDINAL + 1])
def test_from_ordinal_rejects_out_of_range(ordinal):
    with pytest.raises(CalendarError, match=rf"ordinal {ordinal} is outside 1\.\.{MAX_ORDINAL}"):
        from_ordinal(ordinal)


@pytest.mark.parametrize(
    ("ordinal", "expected"),
    [(1461, (4, 12, 31)), (1462, (5, 1, 1)), (36524, (100, 12, 31)), (146097, (400, 12, 31)),
     (146098, (401, 1, 1)), (365, (1, 12, 31)), (366, (2, 1, 1))],
)
def test_from_ordinal_handles_cycle_boundaries(ordinal, expected):
    assert as_tuple(from_ordinal(ordinal)) == expected


def test_from_ordinal_matches_datetime_around_2000_leap_day():
    base = datetime.date(2000, 2, 20).toordinal()
    for ordinal in range(base, base + 320):
        ref = datetime.date.fromordinal(ordinal)
        assert as_tuple(from_ordinal(ordinal)) == (ref.year, ref.month, ref.day), f"ordinal {ordinal}"


def test_from_ordinal_matches_datetime_on_samples_across_whole_range():
    for ordinal in range(1, MAX_ORDINAL + 1, 9973):
        ref = datetime.date.fromordinal(ordinal)
        assert as_tuple(from_ordinal(ordinal)) == (ref.year, ref.month, ref.day), f"ordinal {ordinal}"


def test_from_ordinal_inverts_to_ordinal_around_1900():
    start = to_ordinal(Date(1899, 12, 1))
    for ordinal in range(start, start + 200):
        assert to_ordinal(from_ordinal(ordinal)) == ordinal


# --- day of week ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "expected"),
    [((2024, 1, 1), 0), ((2000, 1, 1), 5), ((1970, 1, 1), 3), ((2023, 12, 31), 6), ((2024, 2, 29), 3),
     ((1, 1, 1), 0)],
)
def test_day_of_week_known_dates(fields, expected):
    assert day_of_week(Date(*fields)) == expected


def test_day_of_week_matches_datetime_for_a_year_of_days():
    start = datetime.date(1999, 11, 1)
    for offset in range(400):
        ref = start + datetime.timedelta(days=offset)
        assert day_of_week(Date(ref.year, ref.month, ref.day)) == ref.weekday(), f"weekday of {ref}"


@pytest.mark.parametrize(
    ("fields", "expected"),
    [((2000, 2, 29), 1), ((1900, 3, 1), 3), ((2024, 1, 1), 0), ((2024, 2, 1), 3), ((2023, 12, 31), 6),
     ((1600, 1, 1), 5), ((2100, 2, 28), 6)],
)
def test_zeller_day_of_week_known_dates(fields, expected):
    assert zeller_day_of_week(*fields) == expected


def test_zeller_day_of_week_agrees_with_day_of_week_across_two_years():
    start = datetime.date(1899, 12, 1)
    for offset in range(0, 760, 3):
        ref = start + datetime.timedelta(days=offset)
        got = zeller_day_of_week(ref.year, ref.month, ref.day)
        assert got == ref.weekday(), f"zeller weekday of {ref}"


def test_zeller_day_of_week_rejects_invalid_date():
    with pytest.raises(CalendarError, match=r"day 29 is outside 1\.\.28 for 2023-02"):
        zeller_day_of_week(2023, 2, 29)
