import pytest
from calendarium import CalendarError, Date, format_date, month_grid, parse_date, render_month, weekday_header

# --- parse_date -------------------------------------------------------------------------------


def test_parse_date_iso_form():
    assert parse_date("2024-02-29") == Date(2024, 2, 29)


def test_parse_date_compact_form():
    assert parse_date("20240229") == Date(2024, 2, 29)


def test_parse_date_strips_surrounding_whitespace():
    assert parse_date("  1999-12-31\n") == Date(1999, 12, 31)


def test_parse_date_round_trips_str():
    for date in (Date(1, 1, 1), Date(42, 3, 7), Date(9999, 12, 31)):
        assert parse_date(str(date)) == date


def test_parse_date_rejects_feb_29_in_common_year():
    with pytest.raises(CalendarError, match=r"day 29 is outside 1\.\.28 for 2023-02"):
        parse_date("2023-02-29")


def test_parse_date_rejects_single_digit_month():
    with pytest.raises(CalendarError, match="month must be exactly 2 digits, got '2'"):
        parse_date("2024-2-29")


def test_parse_date_rejects_two_digit_year():
    with pytest.raises(CalendarError, match="year must be exactly 4 digits, got '24'"):
        parse_date("24-02-29")


def test_parse_date_rejects_non_digit_day():
    with pytest.raises(CalendarError, match="day must be exactly 2 digits, got '2x'"):
        parse_date("2024-02-2x")


def test_parse_date_rejects_missing_day():
    with pytest.raises(CalendarError, match="expected YYYY-MM-DD or YYYYMMDD, got '2024-02'"):
        parse_date("2024-02")


def test_parse_date_rejects_slashes():
    with pytest.raises(CalendarError, match="expected YYYY-MM-DD or YYYYMMDD"):
        parse_date("2024/02/29")


def test_parse_date_rejects_compact_form_with_wrong_length():
    with pytest.raises(CalendarError, match="expected YYYY-MM-DD or YYYYMMDD"):
        parse_date("2024022")


def test_parse_date_rejects_year_zero():
    with pytest.raises(CalendarError, match="year 0 is outside"):
        parse_date("0000-01-01")


def test_parse_date_rejects_non_ascii_digits():
    with pytest.raises(CalendarError, match="day must be exactly 2 digits"):
        parse_date("2024-01-\u0661\u0662")


# --- format_date ------------------------------------------------------------------------------


def test_format_date_default_pattern_is_iso():
    assert format_date(Date(2024, 2, 9)) == "2024-02-09"


def test_format_date_zero_pads_small_year():
    assert format_date(Date(42, 1, 5), "%Y/%m/%d") == "0042/01/05"


def test_format_date_day_month_year_order():
    assert format_date(Date(2024, 7, 4), "%d.%m.%Y") == "04.07.2024"


def test_format_date_day_of_year_is_three_digits():
    assert format_date(Date(2024, 2, 29), "%j") == "060"
    assert format_date(Date(2024, 12, 31), "%j") == "366"


def test_format_date_weekday_names():
    assert format_date(Date(2024, 6, 5), "%A %a") == "Wednesday Wed"


def test_format_date_month_names():
    assert format_date(Date(2024, 9, 1), "%B %b") == "September Sep"
    assert format_date(Date(2024, 1, 1), "%B") == "January"
    assert format_date(Date(2024, 12, 1), "%b") == "Dec"


def test_format_date_iso_weekday_number_runs_1_to_7():
    assert format_date(Date(2024, 6, 3), "%u") == "1"
    assert format_date(Date(2024, 6, 9), "%u") == "7"


def test_format_date_iso_week_and_year():
    assert format_date(Date(2021, 1, 3), "%G-W%V") == "2020-W53"
    assert format_date(Date(2024, 1, 7), "%V") == "01"


def test_format_date_literal_percent_and_text():
    assert format_date(Date(2024, 5, 1), "100%% on %d") == "100% on 01"


def test_format_date_rejects_unknown_code():
    with pytest.raises(CalendarError, match="unknown format code %Q"):
        format_date(Date(2024, 5, 1), "%Q")


def test_format_date_rejects_trailing_percent():
    with pytest.raises(CalendarError, match="lone '%'"):
        format_date(Date(2024, 5, 1), "%Y%")


# --- month_grid -------------------------------------------------------------------------------


def test_month_grid_february_2024_monday_first():
    assert month_grid(2024, 2) == [
        [0, 0, 0, 1, 2, 3, 4],
        [5, 6, 7, 8, 9, 10, 11],
        [12, 13, 14, 15, 16, 17, 18],
        [19, 20, 21, 22, 23, 24, 25],
        [26, 27, 28, 29, 0, 0, 0],
    ]


def test_month_grid_february_2010_fits_exactly_four_rows():
    assert month_grid(2010, 2) == [
        [1, 2, 3, 4, 5, 6, 7],
        [8, 9, 10, 11, 12, 13, 14],
        [15, 16, 17, 18, 19, 20, 21],
        [22, 23, 24, 25, 26, 27, 28],
    ]


def test_month_grid_september_2024_needs_six_rows():
    grid = month_grid(2024, 9)
    assert len(grid) == 6
    assert grid[0] == [0, 0, 0, 0, 0, 0, 1]
    assert grid[5] == [30, 0, 0, 0, 0, 0, 0]


def test_month_grid_sunday_first():
    grid = month_grid(2024, 9, first_weekday=6)
    assert grid[0] == [1, 2, 3, 4, 5, 6, 7]
    assert grid[-1] == [29, 30, 0, 0, 0, 0, 0]
    assert len(grid) == 5


def test_month_grid_rows_have_seven_cells_and_every_day_once():
    for month in range(1, 13):
        grid = month_grid(2023, month, first_weekday=2)
        assert all(len(week) == 7 for week in grid), f"row width in month {month}"
        days = [day for week in grid for day in week if day]
        assert days == list(range(1, len(days) + 1)), f"days of month {month}"
        assert grid[0].count(0) < 7, f"empty first row in month {month}"
        assert grid[-1].count(0) < 7, f"empty last row in month {month}"


@pytest.mark.parametrize("first_weekday", [-1, 7])
def test_month_grid_rejects_invalid_first_weekday(first_weekday):
    with pytest.raises(CalendarError, match=rf"first_weekday {first_weekday} is outside 0\.\.6"):
        month_grid(2024, 1, first_weekday)


def test_month_grid_rejects_invalid_month():
    with pytest.raises(CalendarError, match=r"month 13 is outside 1\.\.12"):
        month_grid(2024, 13)


# --- weekday_header / render_month ------------------------------------------------------------


def test_weekday_header_monday_first():
    assert weekday_header() == "Mo Tu We Th Fr Sa Su"


def test_weekday_header_sunday_first():
    assert weekday_header(6) == "Su Mo Tu We Th Fr Sa"


@pytest.mark.parametrize("first_weekday", [-1, 7])
def test_weekday_header_rejects_invalid_first_weekday(first_weekday):
    with pytest.raises(CalendarError, match=rf"first_weekday {first_weekday} is outside 0\.\.6"):
        weekday_header(first_weekday)


def test_render_month_february_2024():
    expected = "\n".join([
        "   February 2024",
        "Mo Tu We Th Fr Sa Su",
        "          1  2  3  4",
        " 5  6  7  8  9 10 11",
        "12 13 14 15 16 17 18",
        "19 20 21 22 23 24 25",
        "26 27 28 29",
    ])
    assert render_month(2024, 2) == expected


def test_render_month_sunday_first_title_and_first_row():
    lines = render_month(2024, 9, first_weekday=6).split("\n")
    assert lines[0] == "   September 2024"
    assert lines[1] == "Su Mo Tu We Th Fr Sa"
    assert lines[2] == " 1  2  3  4  5  6  7"
    assert lines[-1] == "29 30"


def test_render_month_rejects_invalid_month():
    with pytest.raises(CalendarError, match=r"month 0 is outside 1\.\.12"):
        render_month(2024, 0)
