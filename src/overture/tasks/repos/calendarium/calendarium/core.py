"""Core date type and the arithmetic of the proleptic Gregorian calendar.

Weekdays are numbered 0 (Monday) to 6 (Sunday). Ordinals count days with
0001-01-01 as day 1.
"""

from __future__ import annotations

from dataclasses import dataclass

MIN_YEAR = 1
MAX_YEAR = 9999
MAX_ORDINAL = 3652059  # ordinal of 9999-12-31

MONTH_NAMES = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)
WEEKDAY_NAMES = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")

_MONTH_LENGTHS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_DAYS_IN_400_YEARS = 146097
_DAYS_IN_100_YEARS = 36524
_DAYS_IN_4_YEARS = 1461


class CalendarError(ValueError):
    """Raised when a date, field or argument is outside the calendar's rules."""


def is_leap_year(year: int) -> bool:
    """Return True if `year` has a February 29 (divisible by 4, except centuries not divisible by 400)."""
    if year % 4 != 0:
        return False
    if year % 100 != 0:
        return True
    return year % 400 == 0


def days_in_month(year: int, month: int) -> int:
    """Number of days in `month` (1-12) of `year`; February has 29 days in leap years."""
    if month < 1 or month > 12:
        raise CalendarError(f"month {month} is outside 1..12")
    length = _MONTH_LENGTHS[month - 1]
    if month == 2 and is_leap_year(year):
        length += 1
    return length


def days_in_year(year: int) -> int:
    """Number of days in `year`: 366 for leap years, otherwise 365."""
    total = 365
    if is_leap_year(year):
        total += 1
    return total


def validate_date(year: int, month: int, day: int) -> None:
    """Raise CalendarError (TypeError for non-integers) unless year-month-day is a real date."""
    for name, value in (("year", year), ("month", month), ("day", day)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if year < MIN_YEAR or year > MAX_YEAR:
        raise CalendarError(f"year {year} is outside {MIN_YEAR}..{MAX_YEAR}")
    limit = days_in_month(year, month)
    if day < 1 or day > limit:
        raise CalendarError(f"day {day} is outside 1..{limit} for {year:04d}-{month:02d}")


def is_valid_date(year: int, month: int, day: int) -> bool:
    """Return True if year-month-day is a real date, False otherwise (never raises for ints)."""
    try:
        validate_date(year, month, day)
    except CalendarError:
        return False
    return True


@dataclass(frozen=True, order=True)
class Date:
    """An immutable, validated calendar date; instances compare chronologically."""

    year: int
    month: int
    day: int

    def __post_init__(self) -> None:
        validate_date(self.year, self.month, self.day)

    def __str__(self) -> str:
        return f"{self.year:04d}-{self.month:02d}-{self.day:02d}"

    @property
    def weekday(self) -> int:
        """Day of the week, 0 = Monday ... 6 = Sunday."""
        return day_of_week(self)


def days_before_month(year: int, month: int) -> int:
    """Number of days in `year` that come before the 1st of `month` (0 for January)."""
    if month < 1 or month > 12:
        raise CalendarError(f"month {month} is outside 1..12")
    total = 0
    for earlier in range(1, month):
        total += days_in_month(year, earlier)
    return total


def day_of_year(date: Date) -> int:
    """1-based position of `date` within its year (Jan 1 -> 1, Dec 31 -> 365 or 366)."""
    return days_before_month(date.year, date.month) + date.day


def date_from_day_of_year(year: int, number: int) -> Date:
    """The Date that is day `number` (1-based) of `year`; inverse of day_of_year."""
    total = days_in_year(year)
    if number < 1 or number > total:
        raise CalendarError(f"day of year {number} is outside 1..{total} for {year}")
    month = 1
    remaining = number
    while remaining > days_in_month(year, month):
        remaining -= days_in_month(year, month)
        month += 1
    return Date(year, month, remaining)


def days_before_year(year: int) -> int:
    """Number of days from 0001-01-01 up to (not including) January 1 of `year`."""
    previous = year - 1
    return previous * 365 + previous // 4 - previous // 100 + previous // 400


def to_ordinal(date: Date) -> int:
    """Day number of `date`, counting 0001-01-01 as 1 (same numbering as datetime's toordinal)."""
    return days_before_year(date.year) + day_of_year(date)


def from_ordinal(ordinal: int) -> Date:
    """The Date with the given ordinal; inverse of to_ordinal."""
    if ordinal < 1 or ordinal > MAX_ORDINAL:
        raise CalendarError(f"ordinal {ordinal} is outside 1..{MAX_ORDINAL}")
    rest = ordinal - 1
    cycles400, rest = divmod(rest, _DAYS_IN_400_YEARS)
    cycles100, rest = divmod(rest, _DAYS_IN_100_YEARS)
    cycles4, rest = divmod(rest, _DAYS_IN_4_YEARS)
    single_years, rest = divmod(rest, 365)
    year = cycles400 * 400 + cycles100 * 100 + cycles4 * 4 + single_years + 1
    if cycles100 == 4 or single_years == 4:
        # The extra day at the very end of a leap-year-closing cycle is December 31.
        return Date(year - 1, 12, 31)
    return date_from_day_of_year(year, rest + 1)


def day_of_week(date: Date) -> int:
    """Day of the week of `date` from its ordinal: 0 = Monday ... 6 = Sunday."""
    return (to_ordinal(date) + 6) % 7


def zeller_day_of_week(year: int, month: int, day: int) -> int:
    """Day of the week via Zeller's congruence, using the same numbering (0 = Monday) as day_of_week."""
    validate_date(year, month, day)
    if month < 3:
        month += 12
        year -= 1
    century, year_of_century = divmod(year, 100)
    h = (day + (13 * (month + 1)) // 5 + year_of_century + year_of_century // 4
         + century // 4 + 5 * century) % 7
    # Zeller gives 0 = Saturday; shift so that 0 = Monday.
    return (h + 5) % 7
