import pytest
from gridpath import Grid, GridError, chebyshev, manhattan, neighbours4, neighbours8, parse_grid

MAP = """
S..#
.#..
...G
"""


def test_parse_grid_finds_start_and_goal():
    grid = parse_grid(MAP)
    assert grid.start == (0, 0)
    assert grid.goal == (2, 3)


def test_parse_grid_dimensions():
    grid = parse_grid(MAP)
    assert grid.height == 3
    assert grid.width == 4


def test_parse_grid_strips_whitespace_and_blank_lines():
    grid = parse_grid("\n   .S  \n\n  G#\n\n")
    assert grid.rows == (".S", "G#")
    assert grid.start == (0, 1)
    assert grid.goal == (1, 0)


def test_parse_grid_without_start_or_goal_leaves_them_none():
    grid = parse_grid("..\n.#")
    assert grid.start is None
    assert grid.goal is None


def test_parse_grid_single_cell():
    grid = parse_grid("S")
    assert (grid.height, grid.width) == (1, 1)
    assert grid.start == (0, 0)


def test_parse_grid_rejects_empty_text():
    with pytest.raises(GridError, match="grid is empty"):
        parse_grid("  \n \n")


def test_parse_grid_rejects_ragged_rows():
    with pytest.raises(GridError, match="row 2 has width 2, expected 3"):
        parse_grid("...\n...\n..")


def test_parse_grid_rejects_unknown_character():
    with pytest.raises(GridError, match=r"invalid character 'x' at row 1, column 2"):
        parse_grid("...\n..x")


def test_parse_grid_rejects_two_starts():
    with pytest.raises(GridError, match="more than one start"):
        parse_grid("S.S")


def test_parse_grid_rejects_two_goals():
    with pytest.raises(GridError, match="more than one goal"):
        parse_grid("G\nG")


def test_grid_error_is_a_value_error():
    assert issubclass(GridError, ValueError)


def test_empty_grid_has_zero_width():
    grid = Grid(())
    assert grid.width == 0
    assert grid.height == 0
    assert not grid.in_bounds((0, 0))


@pytest.mark.parametrize(
    ("point", "expected"),
    [
        ((0, 0), True),
        ((2, 3), True),
        ((3, 0), False),
        ((0, 4), False),
        ((-1, 0), False),
        ((0, -1), False),
    ],
)
def test_in_bounds_checks_every_edge(point, expected):
    assert parse_grid(MAP).in_bounds(point) is expected


def test_cell_returns_character_at_row_and_column():
    grid = parse_grid(MAP)
    assert grid.cell((0, 3)) == "#"
    assert grid.cell((1, 1)) == "#"
    assert grid.cell((2, 3)) == "G"
    assert grid.cell((1, 2)) == "."


def test_cell_outside_grid_raises_index_error():
    with pytest.raises(IndexError, match=r"outside the 3x4 grid"):
        parse_grid(MAP).cell((3, 0))


def test_is_open_false_for_walls_and_outside():
    grid = parse_grid(MAP)
    assert grid.is_open((0, 3)) is False
    assert grid.is_open((5, 5)) is False
    assert grid.is_open((0, 0)) is True
    assert grid.is_open((2, 3)) is True


def test_count_open_excludes_walls():
    assert parse_grid(MAP).count_open() == 10
    assert parse_grid("##\n##").count_open() == 0


def test_neighbours4_in_middle_are_row_major():
    assert neighbours4((1, 1), 3, 3) == [(0, 1), (1, 0), (1, 2), (2, 1)]


def test_neighbours4_top_left_corner():
    assert neighbours4((0, 0), 3, 3) == [(0, 1), (1, 0)]


def test_neighbours4_bottom_right_corner():
    assert neighbours4((2, 2), 3, 3) == [(1, 2), (2, 1)]


def test_neighbours4_on_one_by_one_grid_is_empty():
    assert neighbours4((0, 0), 1, 1) == []


def test_neighbours4_in_single_row():
    assert neighbours4((0, 1), 1, 3) == [(0, 0), (0, 2)]


def test_neighbours8_in_middle_has_eight_points():
    assert neighbours8((1, 1), 3, 3) == [
        (0, 0), (0, 1), (0, 2),
        (1, 0), (1, 2),
        (2, 0), (2, 1), (2, 2),
    ]  # fmt: skip


def test_neighbours8_top_right_corner():
    assert neighbours8((0, 2), 3, 3) == [(0, 1), (1, 1), (1, 2)]


def test_neighbours8_bottom_left_corner():
    assert neighbours8((2, 0), 3, 3) == [(1, 0), (1, 1), (2, 1)]


def test_open_neighbours_skips_walls():
    grid = parse_grid(MAP)
    assert grid.open_neighbours((0, 1)) == [(0, 0), (0, 2)]


def test_open_neighbours_diagonal_includes_corners():
    grid = parse_grid(MAP)
    assert grid.open_neighbours((1, 2), diagonal=True) == [(0, 1), (0, 2), (1, 3), (2, 1), (2, 2), (2, 3)]


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ((0, 0), (0, 0), 0),
        ((0, 0), (2, 3), 5),
        ((2, 3), (0, 0), 5),
        ((-1, 4), (2, -2), 9),
        ((1, 2, 3), (4, 0, 3), 5),
    ],
)
def test_manhattan_distance(a, b, expected):
    assert manhattan(a, b) == expected


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ((0, 0), (0, 0), 0),
        ((0, 0), (2, 3), 3),
        ((5, 1), (1, 2), 4),
        ((-1, 4), (2, -2), 6),
        ((1, 2, 3), (1, 2, 10), 7),
    ],
)
def test_chebyshev_distance(a, b, expected):
    assert chebyshev(a, b) == expected


def test_distances_of_zero_dimensional_points_are_zero():
    assert manhattan((), ()) == 0
    assert chebyshev((), ()) == 0


def test_manhattan_rejects_dimension_mismatch():
    with pytest.raises(ValueError, match="dimension mismatch: 2 != 3"):
        manhattan((0, 0), (0, 0, 0))


def test_chebyshev_rejects_dimension_mismatch():
    with pytest.raises(ValueError, match="dimension mismatch: 3 != 2"):
        chebyshev((0, 0, 0), (0, 0))
