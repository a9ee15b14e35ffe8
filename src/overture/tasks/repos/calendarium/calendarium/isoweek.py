"""ISO 8601 week dates: weeks start on Monday and week 1 contains January 4."""

from __future__ import annotations

from calendarium.arithmetic import add_days, days_between
from calendarium.core import MAX_YEAR, CalendarError, Date, day_of_week, is_leap_year


def iso_week_one_monday(year: int) -> Date:
    """The Monday that starts ISO week 1 of `year` (may fall in late December of the previous year)."""
    january_4 = Date(year, 1, 4)
    return add_days(january_4, -day_of_week(january_4))


def iso_weeks_in_year(year: int) -> int:
    """Number of ISO weeks in `year`: 53 if it starts on a Thursday (or Wednesday in a leap year), else 52."""
    first_weekday = day_of_week(Date(year, 1, 1))
    if first_weekday == 3:
        return 53
    if first_weekday == 2 and is_leap_year(year):
        return 53
    return 52


def iso_calendar(date: Date) -> tuple[int, int, int]:
    """Return (iso_year, iso_week, iso_weekday) for `date`, with iso_weekday 1 = Monday ... 7 = Sunday."""
    year = date.year
    start = iso_week_one_monday(year)
    if date < start:
        year -= 1
        start = iso_week_one_monday(year)
    elif year < MAX_YEAR:
        next_start = iso_week_one_monday(year + 1)
        if date >= next_start:
            year += 1
            start = next_start
    offset = days_between(start, date)
    week = offset // 7 + 1
    weekday = offset % 7 + 1
    return (year, week, weekday)


def from_iso_calendar(year: int, week: int, weekday: int) -> Date:
    """The Date for ISO `year`, `week` (1-52/53) and `weekday` (1 = Monday ... 7 = Sunday)."""
    weeks = iso_weeks_in_year(year)
    if week < 1 or week > weeks:
        raise CalendarError(f"ISO week {week} is outside 1..{weeks} for {year}")
    if weekday < 1 or weekday > 7:
        raise CalendarError(f"ISO weekday {weekday} is outside 1..7")
    offset = (week - 1) * 7 + (weekday - 1)
    return add_days(iso_week_one_monday(year), offset)


def format_iso_week(date: Date) -> str:
    """Format `date` as an ISO week date string such as '2020-W53-5'."""
    year, week, weekday = iso_calendar(date)
    return f"{year:04d}-W{week:02d}-{weekday}"


def parse_iso_week(text: str) -> Date:
    """Parse an ISO week date 'YYYY-Www-D' (e.g. '2020-W53-5') into a Date."""
    parts = text.strip().split("-")
    if len(parts) != 3 or len(parts[1]) != 3 or parts[1][0] != "W":
        raise CalendarError(f"expected YYYY-Www-D, got {text!r}")
    year_text, week_text, weekday_text = parts[0], parts[1][1:], parts[2]
    for field, width in ((year_text, 4), (week_text, 2), (weekday_text, 1)):
        if len(field) != width or not (field.isascii() and field.isdigit()):
            raise CalendarError(f"expected YYYY-Www-D, got {text!r}")
    return from_iso_calendar(int(year_text), int(week_text), int(weekday_text))
