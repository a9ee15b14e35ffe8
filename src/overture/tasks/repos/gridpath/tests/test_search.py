import pytest
from gridpath import (
    GridError,
    bfs_distances,
    bfs_path,
    count_regions,
    flood_fill,
    parse_grid,
    reconstruct_path,
)

CORRIDOR = """
S.#
..#
#.G
"""

OPEN_3X3 = """
S..
...
..G
"""


def test_reconstruct_path_from_root_to_goal():
    parents = {"a": None, "b": "a", "c": "b", "d": "a"}
    assert reconstruct_path(parents, "c") == ["a", "b", "c"]


def test_reconstruct_path_of_root_is_single_point():
    assert reconstruct_path({(0, 0): None}, (0, 0)) == [(0, 0)]


def test_reconstruct_path_unknown_goal_raises_key_error():
    with pytest.raises(KeyError, match="has no parent entry"):
        reconstruct_path({"a": None}, "z")


def test_reconstruct_path_detects_parent_loop():
    with pytest.raises(ValueError, match="loop"):
        reconstruct_path({"a": "b", "b": "a"}, "a")


def test_bfs_path_follows_corridor_exactly():
    grid = parse_grid(CORRIDOR)
    assert bfs_path(grid) == [(0, 0), (0, 1), (1, 1), (2, 1), (2, 2)]


def test_bfs_path_prefers_row_major_neighbours_on_ties():
    grid = parse_grid(OPEN_3X3)
    assert bfs_path(grid) == [(0, 0), (0, 1), (0, 2), (1, 2), (2, 2)]


def test_bfs_path_diagonal_is_shorter():
    grid = parse_grid(OPEN_3X3)
    assert bfs_path(grid, diagonal=True) == [(0, 0), (1, 1), (2, 2)]


def test_bfs_path_goal_equal_to_start():
    grid = parse_grid("S")
    assert bfs_path(grid, goal=(0, 0)) == [(0, 0)]


def test_bfs_path_returns_none_when_goal_walled_off():
    grid = parse_grid("S.#\n.##\n##G")
    assert bfs_path(grid) is None


def test_bfs_path_diagonal_squeezes_between_walls():
    grid = parse_grid("S#\n#G")
    assert bfs_path(grid) is None
    assert bfs_path(grid, diagonal=True) == [(0, 0), (1, 1)]


def test_bfs_path_explicit_points_override_map_markers():
    grid = parse_grid(OPEN_3X3)
    assert bfs_path(grid, start=(2, 0), goal=(2, 2)) == [(2, 0), (2, 1), (2, 2)]


def test_bfs_path_length_matches_manhattan_on_open_grid():
    grid = parse_grid("S....\n.....\n....G")
    path = bfs_path(grid)
    assert len(path) == 7
    assert path[0] == (0, 0)
    assert path[-1] == (2, 4)


def test_bfs_path_detours_around_wall():
    grid = parse_grid("S#G\n.#.\n...")
    assert bfs_path(grid) == [(0, 0), (1, 0), (2, 0), (2, 1), (2, 2), (1, 2), (0, 2)]


def test_bfs_path_without_start_raises():
    with pytest.raises(GridError, match="no start given"):
        bfs_path(parse_grid("..G"))


def test_bfs_path_without_goal_raises():
    with pytest.raises(GridError, match="no goal given"):
        bfs_path(parse_grid("S.."))


def test_bfs_path_goal_on_wall_raises():
    with pytest.raises(GridError, match=r"goal \(0, 1\) is a wall"):
        bfs_path(parse_grid("S#"), goal=(0, 1))


def test_bfs_path_start_outside_grid_raises():
    with pytest.raises(GridError, match=r"start .* outside the grid"):
        bfs_path(parse_grid("S.G"), start=(1, 0))


def test_bfs_distances_counts_steps():
    grid = parse_grid(CORRIDOR)
    assert bfs_distances(grid, (0, 0)) == {
        (0, 0): 0,
        (0, 1): 1,
        (1, 0): 1,
        (1, 1): 2,
        (2, 1): 3,
        (2, 2): 4,
    }


def test_bfs_distances_diagonal_uses_chebyshev_steps():
    grid = parse_grid(OPEN_3X3)
    distances = bfs_distances(grid, (0, 0), diagonal=True)
    assert distances[(2, 2)] == 2
    assert distances[(2, 1)] == 2
    assert distances[(1, 1)] == 1
    assert len(distances) == 9


def test_bfs_distances_of_isolated_cell_is_only_itself():
    grid = parse_grid("#.#\n#S#")
    assert bfs_distances(grid, (0, 1)) == {(0, 1): 0, (1, 1): 1}
    assert bfs_distances(parse_grid("S"), (0, 0)) == {(0, 0): 0}


def test_bfs_distances_from_wall_raises():
    with pytest.raises(GridError, match="is a wall"):
        bfs_distances(parse_grid(".#"), (0, 1))


def test_flood_fill_replaces_connected_region_only():
    rows = ["aab", "abb", "baa"]
    new_rows, changed = flood_fill(rows, (0, 0), "x")
    assert new_rows == ["xxb", "xbb", "baa"]
    assert changed == 3


def test_flood_fill_does_not_cross_diagonals():
    rows = ["a.", ".a"]
    assert flood_fill(rows, (0, 0), "x") == (["x.", ".a"], 1)


def test_flood_fill_whole_grid():
    assert flood_fill(["...", "..."], (1, 2), "#") == (["###", "###"], 6)


def test_flood_fill_reaches_last_row_and_column():
    rows = ["#..", "#.#", "..."]
    assert flood_fill(rows, (2, 2), "o") == (["#oo", "#o#", "ooo"], 6)


def test_flood_fill_same_character_changes_nothing():
    rows = ["ab", "ba"]
    assert flood_fill(rows, (0, 0), "a") == (["ab", "ba"], 0)


def test_flood_fill_does_not_modify_input():
    rows = ["..", ".."]
    flood_fill(rows, (0, 0), "x")
    assert rows == ["..", ".."]


def test_flood_fill_on_empty_rows_raises():
    with pytest.raises(IndexError, match="outside the 0x0 grid"):
        flood_fill([], (0, 0), "x")


def test_flood_fill_rejects_multi_character_fill():
    with pytest.raises(ValueError, match="single character"):
        flood_fill(["."], (0, 0), "xy")


@pytest.mark.parametrize("start", [(1, 0), (0, 2), (-1, 0), (0, -1)])
def test_flood_fill_start_outside_raises(start):
    with pytest.raises(IndexError, match="outside the 1x2 grid"):
        flood_fill([".."], start, "x")


def test_count_regions_four_connected():
    grid = parse_grid(".#.\n#.#\n.#.")
    assert count_regions(grid) == 5


def test_count_regions_eight_connected_joins_diagonals():
    grid = parse_grid(".#.\n#.#\n.#.")
    assert count_regions(grid, diagonal=True) == 1


def test_count_regions_all_walls_is_zero():
    assert count_regions(parse_grid("##\n##")) == 0


def test_count_regions_single_open_grid_is_one():
    assert count_regions(parse_grid("S..\n...\n..G")) == 1


def test_count_regions_split_by_wall_column():
    assert count_regions(parse_grid("..#..\n..#..")) == 2
