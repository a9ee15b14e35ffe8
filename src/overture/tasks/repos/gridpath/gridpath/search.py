"""Breadth-first search, flood fill and region counting on grids."""

from collections import deque

from gridpath.grid import Grid, GridError, Point, neighbours4


def reconstruct_path(parents: dict[Point, Point | None], goal: Point) -> list[Point]:
    """Walk ``parents`` back from ``goal`` and return the path from the root to ``goal``.

    The root is the point whose parent is ``None``. Raises KeyError if ``goal`` was
    never reached, and ValueError if the parent links contain a loop.
    """
    if goal not in parents:
        raise KeyError(f"goal {goal} has no parent entry")
    path = [goal]
    current = parents[goal]
    for _ in range(len(parents)):
        if current is None:
            path.reverse()
            return path
        path.append(current)
        current = parents[current]
    raise ValueError("parent links contain a loop")


def _resolve(grid: Grid, point: Point | None, fallback: Point | None, label: str) -> Point:
    chosen = point if point is not None else fallback
    if chosen is None:
        raise GridError(f"no {label} given and the grid has none")
    if not grid.is_open(chosen):
        raise GridError(f"{label} {chosen} is a wall or outside the grid")
    return chosen


def bfs_path(
    grid: Grid, start: Point | None = None, goal: Point | None = None, diagonal: bool = False
) -> list[Point] | None:
    """Return a shortest path of points from start to goal (both included), or None.

    ``start`` and ``goal`` default to the grid's ``S`` and ``G`` cells. Neighbours are
    explored in row-major order, so among equally short paths the result is deterministic.
    A path from a point to itself is ``[start]``.
    """
    source = _resolve(grid, start, grid.start, "start")
    target = _resolve(grid, goal, grid.goal, "goal")
    parents: dict[Point, Point | None] = {source: None}
    queue = deque([source])
    budget = grid.height * grid.width
    while queue and budget > 0:
        budget -= 1
        current = queue.popleft()
        if current == target:
            return reconstruct_path(parents, target)
        for nxt in grid.open_neighbours(current, diagonal):
            if nxt not in parents:
                parents[nxt] = current
                queue.append(nxt)
    return None


def bfs_distances(grid: Grid, start: Point, diagonal: bool = False) -> dict[Point, int]:
    """Return the number of steps from ``start`` to every reachable open cell."""
    if not grid.is_open(start):
        raise GridError(f"start {start} is a wall or outside the grid")
    distances = {start: 0}
    queue = deque([start])
    budget = grid.height * grid.width
    while queue and budget > 0:
        budget -= 1
        current = queue.popleft()
        for nxt in grid.open_neighbours(current, diagonal):
            if nxt not in distances:
                distances[nxt] = distances[current] + 1
                queue.append(nxt)
    return distances


def flood_fill(rows: list[str], start: Point, fill: str) -> tuple[list[str], int]:
    """Replace the 4-connected region of identical characters containing ``start``.

    Returns ``(new_rows, changed)`` where ``changed`` is the number of cells repainted.
    The input is not modified. Filling with the region's own character changes nothing.
    """
    if len(fill) != 1:
        raise ValueError("fill must be a single character")
    height = len(rows)
    width = len(rows[0]) if rows else 0
    row, col = start
    if not (0 <= row < height and 0 <= col < width):
        raise IndexError(f"start {start} is outside the {height}x{width} grid")
    target = rows[row][col]
    if target == fill:
        return list(rows), 0
    cells = [list(line) for line in rows]
    stack = [start]
    changed = 0
    limit = height * width
    while stack and changed < limit:
        r, c = stack.pop()
        if cells[r][c] != target:
            continue
        cells[r][c] = fill
        changed += 1
        stack.extend(neighbours4((r, c), height, width))
    return ["".join(line) for line in cells], changed


def count_regions(grid: Grid, diagonal: bool = False) -> int:
    """Return the number of connected regions of open (non-wall) cells."""
    seen: set[Point] = set()
    regions = 0
    budget = grid.height * grid.width
    for row in range(grid.height):
        for col in range(grid.width):
            point = (row, col)
            if point in seen or not grid.is_open(point):
                continue
            regions += 1
            seen.add(point)
            stack = [point]
            while stack and budget > 0:
                budget -= 1
                current = stack.pop()
                for nxt in grid.open_neighbours(current, diagonal):
                    if nxt not in seen:
                        seen.add(nxt)
                        stack.append(nxt)
    return regions
