import datetime

import pytest
from calendarium import (
    CalendarError,
    Date,
    format_iso_week,
    from_iso_calendar,
    iso_calendar,
    iso_week_one_monday,
    iso_weeks_in_year,
    parse_iso_week,
)


@pytest.mark.parametrize(
    ("year", "expected"),
    [(2024, (2024, 1, 1)), (2021, (2021, 1, 4)), (2020, (2019, 12, 30)),
     (2026, (2025, 12, 29)), (2015, (2014, 12, 29)), (2027, (2027, 1, 4))],
)
def test_iso_week_one_monday(year, expected):
    assert iso_week_one_monday(year) == Date(*expected)


def test_iso_weeks_in_year_53_when_year_starts_on_thursday():
    assert iso_weeks_in_year(2015) == 53
    assert iso_weeks_in_year(2026) == 53


def test_iso_weeks_in_year_53_for_leap_year_starting_on_wednesday():
    assert iso_weeks_in_year(2020) == 53
    assert iso_weeks_in_year(1992) == 53


def test_iso_weeks_in_year_52_for_common_year_starting_on_wednesday():
    assert iso_weeks_in_year(2025) == 52


def test_iso_weeks_in_year_52_for_ordinary_years():
    assert iso_weeks_in_year(2021) == 52
    assert iso_weeks_in_year(2024) == 52


def test_iso_weeks_in_year_matches_datetime_for_1900_to_2100():
    for year in range(1900, 2101):
        expected = datetime.date(year, 12, 28).isocalendar()[1]
        assert iso_weeks_in_year(year) == expected, f"ISO weeks in {year}"


def test_iso_calendar_early_january_belongs_to_week_53_of_previous_year():
    assert iso_calendar(Date(2021, 1, 3)) == (2020, 53, 7)


def test_iso_calendar_first_monday_of_week_one():
    assert iso_calendar(Date(2021, 1, 4)) == (2021, 1, 1)


def test_iso_calendar_late_december_belongs_to_week_one_of_next_year():
    assert iso_calendar(Date(2024, 12, 30)) == (2025, 1, 1)
    assert iso_calendar(Date(2008, 12, 29)) == (2009, 1, 1)


def test_iso_calendar_december_28_is_always_in_last_week_of_its_year():
    assert iso_calendar(Date(2024, 12, 28)) == (2024, 52, 6)
    assert iso_calendar(Date(2026, 12, 28)) == (2026, 53, 1)


def test_iso_calendar_january_first_when_it_is_a_monday():
    assert iso_calendar(Date(2024, 1, 1)) == (2024, 1, 1)


def test_iso_calendar_sunday_is_weekday_seven():
    assert iso_calendar(Date(2024, 6, 9)) == (2024, 23, 7)


def test_iso_calendar_at_both_ends_of_supported_range():
    assert iso_calendar(Date(1, 1, 1)) == (1, 1, 1)
    assert iso_calendar(Date(9999, 12, 31)) == (9999, 52, 5)


def test_iso_calendar_matches_datetime_over_fourteen_months():
    start = datetime.date(2019, 12, 1)
    for offset in range(430):
        ref = start + datetime.timedelta(days=offset)
        got = iso_calendar(Date(ref.year, ref.month, ref.day))
        assert got == tuple(ref.isocalendar()), f"ISO calendar of {ref}"


def test_from_iso_calendar_week_53_of_2020():
    assert from_iso_calendar(2020, 53, 5) == Date(2021, 1, 1)


def test_from_iso_calendar_week_one_monday_in_previous_year():
    assert from_iso_calendar(2025, 1, 1) == Date(2024, 12, 30)


def test_from_iso_calendar_sunday_of_week_ten():
    assert from_iso_calendar(2024, 10, 7) == Date(2024, 3, 10)


def test_from_iso_calendar_rejects_week_53_in_52_week_year():
    with pytest.raises(CalendarError, match=r"ISO week 53 is outside 1\.\.52 for 2021"):
        from_iso_calendar(2021, 53, 1)


def test_from_iso_calendar_rejects_week_zero():
    with pytest.raises(CalendarError, match=r"ISO week 0 is outside 1\.\.53 for 2020"):
        from_iso_calendar(2020, 0, 1)


@pytest.mark.parametrize("weekday", [0, 8])
def test_from_iso_calendar_rejects_weekday_outside_1_to_7(weekday):
    with pytest.raises(CalendarError, match=rf"ISO weekday {weekday} is outside 1\.\.7"):
        from_iso_calendar(2024, 10, weekday)


def test_from_iso_calendar_round_trips_iso_calendar():
    for offset in range(0, 400, 3):
        ref = datetime.date(2020, 12, 20) + datetime.timedelta(days=offset)
        value = Date(ref.year, ref.month, ref.day)
        assert from_iso_calendar(*iso_calendar(value)) == value, f"round trip of {value}"


def test_format_iso_week_zero_pads_week():
    assert format_iso_week(Date(2024, 1, 1)) == "2024-W01-1"


def test_format_iso_week_uses_iso_year_not_calendar_year():
    assert format_iso_week(Date(2021, 1, 1)) == "2020-W53-5"


def test_parse_iso_week_returns_date():
    assert parse_iso_week("2020-W53-5") == Date(2021, 1, 1)


def test_parse_iso_week_strips_whitespace():
    assert parse_iso_week("  2024-W10-7\n") == Date(2024, 3, 10)


@pytest.mark.parametrize(
    "text", ["2020-53-5", "2020-W5-1", "20-W05-1", "2020-Wab-1", "2020-W05", "2020-X05-1", "2020-W05-12"]
)
def test_parse_iso_week_rejects_malformed_text(text):
    with pytest.raises(CalendarError, match="expected YYYY-Www-D"):
        parse_iso_week(text)


def test_parse_iso_week_rejects_out_of_range_weekday():
    with pytest.raises(CalendarError, match="ISO weekday 8 is outside"):
        parse_iso_week("2020-W05-8")
