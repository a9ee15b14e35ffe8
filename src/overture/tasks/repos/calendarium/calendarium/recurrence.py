"""Simple recurrence rules: every n days, weekly on chosen weekdays, monthly, nth weekday, Easter."""

from __future__ import annotations

from collections.abc import Iterable

from calendarium.arithmetic import add_days, add_months
from calendarium.core import WEEKDAY_NAMES, CalendarError, Date, day_of_week, days_in_month

FIRST_GREGORIAN_EASTER_YEAR = 1583


def _check_count(count: int) -> None:
    if count < 0:
        raise CalendarError(f"count must not be negative, got {count}")


def _check_weekday(weekday: int) -> None:
    if weekday < 0 or weekday > 6:
        raise CalendarError(f"weekday {weekday} is outside 0..6")


def every_n_days(start: Date, interval: int, count: int, until: Date | None = None) -> list[Date]:
    """Up to `count` dates `interval` days apart beginning with `start`, stopping after `until` if given."""
    if interval < 1:
        raise CalendarError(f"interval must be at least 1, got {interval}")
    _check_count(count)
    dates = []
    for index in range(count):
        current = add_days(start, index * interval)
        if until is not None and current > until:
            break
        dates.append(current)
    return dates


def weekly_on(start: Date, weekdays: Iterable[int], count: int, interval: int = 1) -> list[Date]:
    """The first `count` dates on or after `start` falling on one of `weekdays` (0 = Monday).

    Only every `interval`-th Monday-based week, counted from the week containing `start`, is used.
    """
    if interval < 1:
        raise CalendarError(f"interval must be at least 1, got {interval}")
    _check_count(count)
    chosen = sorted(set(weekdays))
    if not chosen:
        raise CalendarError("weekdays must not be empty")
    for weekday in chosen:
        _check_weekday(weekday)
    monday = add_days(start, -day_of_week(start))
    dates: list[Date] = []
    for week in range(count + 1):
        week_start = add_days(monday, week * interval * 7)
        for weekday in chosen:
            candidate = add_days(week_start, weekday)
            if candidate >= start and len(dates) < count:
                dates.append(candidate)
    return dates


def monthly_on_day(start: Date, count: int, interval: int = 1) -> list[Date]:
    """`count` dates every `interval` months on start's day, clamped to short months (Jan 31 -> Feb 28)."""
    if interval < 1:
        raise CalendarError(f"interval must be at least 1, got {interval}")
    _check_count(count)
    dates = []
    for index in range(count):
        dates.append(add_months(start, index * interval))
    return dates


def nth_weekday(year: int, month: int, weekday: int, n: int) -> Date:
    """The `n`-th `weekday` (0 = Monday) of a month; n = 1 is the first, n = -1 the last.

    Raises CalendarError when the month has no such day (e.g. a fifth Monday).
    """
    _check_weekday(weekday)
    if n == 0:
        raise CalendarError("n must be non-zero (1 = first, -1 = last)")
    length = days_in_month(year, month)
    if n > 0:
        first_weekday = day_of_week(Date(year, month, 1))
        day = 1 + (weekday - first_weekday) % 7 + (n - 1) * 7
    else:
        last_weekday = day_of_week(Date(year, month, length))
        day = length - (last_weekday - weekday) % 7 + (n + 1) * 7
    if day < 1 or day > length:
        raise CalendarError(f"{year:04d}-{month:02d} has no occurrence {n} of {WEEKDAY_NAMES[weekday]}")
    return Date(year, month, day)


def monthly_nth_weekday(year: int, month: int, weekday: int, n: int, months: int) -> list[Date]:
    """The `n`-th `weekday` in `months` consecutive months from year-month, skipping months without it."""
    _check_weekday(weekday)
    _check_count(months)
    if n == 0 or n < -5 or n > 5:
        raise CalendarError(f"n must be in -5..-1 or 1..5, got {n}")
    dates = []
    first_index = year * 12 + (month - 1)
    for offset in range(months):
        current_year, month_index = divmod(first_index + offset, 12)
        try:
            dates.append(nth_weekday(current_year, month_index + 1, weekday, n))
        except CalendarError:
            continue
    return dates


def easter_sunday(year: int) -> Date:
    """Western (Gregorian) Easter Sunday of `year`, computed with the anonymous Gregorian algorithm."""
    if year < FIRST_GREGORIAN_EASTER_YEAR:
        raise CalendarError(f"Gregorian Easter is defined from {FIRST_GREGORIAN_EASTER_YEAR}, got {year}")
    golden = year % 19
    century, year_in_century = divmod(year, 100)
    leap_centuries, century_rest = divmod(century, 4)
    correction = (century + 8) // 25
    moon_shift = (century - correction + 1) // 3
    epact = (19 * golden + century - leap_centuries - moon_shift + 15) % 30
    leap_quarters, year_rest = divmod(year_in_century, 4)
    to_sunday = (32 + 2 * century_rest + 2 * leap_quarters - epact - year_rest) % 7
    late = (golden + 11 * epact + 22 * to_sunday) // 451
    total = epact + to_sunday - 7 * late + 114
    return Date(year, total // 31, total % 31 + 1)
