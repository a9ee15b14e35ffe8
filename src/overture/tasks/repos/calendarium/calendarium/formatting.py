"""Parsing and formatting dates, and laying out months as week grids."""

from __future__ import annotations

from calendarium.core import (
    MONTH_NAMES,
    WEEKDAY_NAMES,
    CalendarError,
    Date,
    day_of_week,
    day_of_year,
    days_in_month,
)
from calendarium.isoweek import iso_calendar

CALENDAR_WIDTH = 20  # seven 2-character cells separated by single spaces


def parse_date(text: str) -> Date:
    """Parse 'YYYY-MM-DD' or the compact 'YYYYMMDD' into a Date, raising CalendarError on bad input."""
    cleaned = text.strip()
    if "-" in cleaned:
        parts = cleaned.split("-")
    elif len(cleaned) == 8:
        parts = [cleaned[:4], cleaned[4:6], cleaned[6:]]
    else:
        raise CalendarError(f"expected YYYY-MM-DD or YYYYMMDD, got {text!r}")
    if len(parts) != 3:
        raise CalendarError(f"expected YYYY-MM-DD or YYYYMMDD, got {text!r}")
    values = []
    for index, (width, name) in enumerate(((4, "year"), (2, "month"), (2, "day"))):
        part = parts[index]
        if len(part) != width or not (part.isascii() and part.isdigit()):
            raise CalendarError(f"{name} must be exactly {width} digits, got {part!r}")
        values.append(int(part))
    return Date(values[0], values[1], values[2])


def _format_code(date: Date, code: str) -> str:
    """Render one %-code of format_date."""
    if code == "Y":
        return f"{date.year:04d}"
    if code == "m":
        return f"{date.month:02d}"
    if code == "d":
        return f"{date.day:02d}"
    if code == "j":
        return f"{day_of_year(date):03d}"
    if code in ("A", "a"):
        name = WEEKDAY_NAMES[day_of_week(date)]
        return name if code == "A" else name[:3]
    if code in ("B", "b"):
        name = MONTH_NAMES[date.month - 1]
        return name if code == "B" else name[:3]
    if code == "u":
        return str(day_of_week(date) + 1)
    if code == "V":
        return f"{iso_calendar(date)[1]:02d}"
    if code == "G":
        return f"{iso_calendar(date)[0]:04d}"
    if code == "%":
        return "%"
    raise CalendarError(f"unknown format code %{code}")


def format_date(date: Date, pattern: str = "%Y-%m-%d") -> str:
    """Format `date` with %-codes: %Y %m %d %j %A %a %B %b %u %V %G and %% for a literal percent sign."""
    pieces = []
    pending = False
    for char in pattern:
        if pending:
            pieces.append(_format_code(date, char))
            pending = False
        elif char == "%":
            pending = True
        else:
            pieces.append(char)
    if pending:
        raise CalendarError("format pattern ends with a lone '%'")
    return "".join(pieces)


def month_grid(year: int, month: int, first_weekday: int = 0) -> list[list[int]]:
    """Weeks of a month as rows of 7 day numbers, 0 for cells outside the month.

    `first_weekday` is the weekday of each row's first column (0 = Monday, 6 = Sunday).
    """
    if first_weekday < 0 or first_weekday > 6:
        raise CalendarError(f"first_weekday {first_weekday} is outside 0..6")
    length = days_in_month(year, month)
    leading = (day_of_week(Date(year, month, 1)) - first_weekday) % 7
    cells = [0] * leading + list(range(1, length + 1))
    trailing = (7 - len(cells) % 7) % 7
    cells.extend([0] * trailing)
    weeks = []
    for row in range(len(cells) // 7):
        weeks.append(cells[row * 7:(row + 1) * 7])
    return weeks


def weekday_header(first_weekday: int = 0) -> str:
    """Two-letter weekday abbreviations starting at `first_weekday`, e.g. 'Mo Tu We Th Fr Sa Su'."""
    if first_weekday < 0 or first_weekday > 6:
        raise CalendarError(f"first_weekday {first_weekday} is outside 0..6")
    names = []
    for column in range(7):
        names.append(WEEKDAY_NAMES[(first_weekday + column) % 7][:2])
    return " ".join(names)


def render_month(year: int, month: int, first_weekday: int = 0) -> str:
    """A plain-text month calendar: centred title, weekday header, then one line per week."""
    weeks = month_grid(year, month, first_weekday)
    lines = [f"{MONTH_NAMES[month - 1]} {year}".center(CALENDAR_WIDTH).rstrip()]
    lines.append(weekday_header(first_weekday))
    for week in weeks:
        cells = ["  " if day == 0 else f"{day:2d}" for day in week]
        lines.append(" ".join(cells).rstrip())
    return "\n".join(lines)
