"""Adding and subtracting days, months and years, and counting business days."""

from __future__ import annotations

from collections.abc import Collection

from calendarium.core import (
    CalendarError,
    Date,
    day_of_week,
    days_in_month,
    from_ordinal,
    is_leap_year,
    to_ordinal,
)

SATURDAY = 5


def add_days(date: Date, days: int) -> Date:
    """Return the date `days` days after `date` (before it when `days` is negative)."""
    return from_ordinal(to_ordinal(date) + days)


def days_between(start: Date, end: Date) -> int:
    """Signed number of days from `start` to `end` (positive when `end` is later)."""
    return to_ordinal(end) - to_ordinal(start)


def add_months(date: Date, months: int) -> Date:
    """Shift `date` by whole months, clamping the day to the target month (Jan 31 + 1 -> Feb 28/29)."""
    index = date.year * 12 + (date.month - 1) + months
    year, month_index = divmod(index, 12)
    month = month_index + 1
    if year < 1:
        raise CalendarError(f"adding {months} months to {date} leaves the supported range")
    day = min(date.day, days_in_month(year, month))
    return Date(year, month, day)


def add_years(date: Date, years: int) -> Date:
    """Shift `date` by whole years; February 29 becomes February 28 in a non-leap target year."""
    year = date.year + years
    day = date.day
    if date.month == 2 and day == 29 and not is_leap_year(year):
        day = 28
    return Date(year, date.month, day)


def months_between(start: Date, end: Date) -> int:
    """Whole months from `start` to `end`: the largest n with add_months(start, n) not past `end`.

    Negative when `end` is before `start`: then the most negative n with add_months(start, n)
    not before `end`.
    """
    months = (end.year - start.year) * 12 + (end.month - start.month)
    if months > 0 and add_months(start, months) > end:
        months -= 1
    elif months < 0 and add_months(start, months) < end:
        months += 1
    return months


def end_of_month(date: Date) -> Date:
    """The last day of the month containing `date`."""
    return Date(date.year, date.month, days_in_month(date.year, date.month))


def is_weekend(date: Date) -> bool:
    """True for Saturdays and Sundays."""
    return day_of_week(date) >= SATURDAY


def is_business_day(date: Date, holidays: Collection[Date] = ()) -> bool:
    """True if `date` is a weekday (Monday-Friday) that is not in `holidays`."""
    if is_weekend(date):
        return False
    return date not in holidays


def add_business_days(date: Date, count: int, holidays: Collection[Date] = ()) -> Date:
    """Move `count` business days from `date` (backwards if negative), skipping weekends and holidays.

    The starting date itself is never counted; a count of 0 returns `date` unchanged.
    """
    step = -1 if count < 0 else 1
    remaining = abs(count)
    # Every 7 consecutive days hold 5 weekdays, each holiday removes at most one of them,
    # so this many steps always suffice.
    limit = 2 * (remaining + len(holidays)) + 7
    current = date
    for _ in range(limit):
        if remaining == 0:
            break
        current = add_days(current, step)
        if is_business_day(current, holidays):
            remaining -= 1
    return current


def business_days_between(start: Date, end: Date, holidays: Collection[Date] = ()) -> int:
    """Count business days in the half-open range [start, end); negated when `end` is before `start`."""
    if end < start:
        return -business_days_between(end, start, holidays)
    count = 0
    current = start
    for _ in range(days_between(start, end)):
        if is_business_day(current, holidays):
            count += 1
        current = add_days(current, 1)
    return count


def next_weekday(date: Date, weekday: int) -> Date:
    """The first date strictly after `date` that falls on `weekday` (0 = Monday ... 6 = Sunday)."""
    if weekday < 0 or weekday > 6:
        raise CalendarError(f"weekday {weekday} is outside 0..6")
    delta = (weekday - day_of_week(date)) % 7
    if delta == 0:
        delta = 7
    return add_days(date, delta)


def previous_weekday(date: Date, weekday: int) -> Date:
    """The last date strictly before `date` that falls on `weekday` (0 = Monday ... 6 = Sunday)."""
    if weekday < 0 or weekday > 6:
        raise CalendarError(f"weekday {weekday} is outside 0..6")
    delta = (day_of_week(date) - weekday) % 7
    if delta == 0:
        delta = 7
    return add_days(date, -delta)
