"""Text grid maps: parsing, bounds checks, neighbours and distances.

Points are ``(row, col)`` tuples; row 0 is the top line of the map and
column 0 is its leftmost character.
"""

from dataclasses import dataclass

WALL = "#"
FLOOR = "."
START = "S"
GOAL = "G"
VALID_CELLS = frozenset({WALL, FLOOR, START, GOAL})

Point = tuple[int, int]

# Neighbour offsets, listed in row-major order so results come out sorted.
_OFFSETS_4 = ((-1, 0), (0, -1), (0, 1), (1, 0))
_OFFSETS_8 = ((-1, -1), (-1, 0), (-1, 1), (0, -1), (0, 1), (1, -1), (1, 0), (1, 1))


class GridError(ValueError):
    """Raised when a text grid map is malformed or lacks a required cell."""


def _neighbours(point: Point, height: int, width: int, offsets: tuple[Point, ...]) -> list[Point]:
    row, col = point
    result = []
    for d_row, d_col in offsets:
        n_row = row + d_row
        n_col = col + d_col
        if 0 <= n_row < height and 0 <= n_col < width:
            result.append((n_row, n_col))
    return result


def neighbours4(point: Point, height: int, width: int) -> list[Point]:
    """Return the up/left/right/down neighbours of ``point`` inside a height x width grid.

    The result is in row-major order (sorted) and never contains out-of-bounds points.
    """
    return _neighbours(point, height, width, _OFFSETS_4)


def neighbours8(point: Point, height: int, width: int) -> list[Point]:
    """Return the up-to-eight neighbours (diagonals included) of ``point``, in row-major order."""
    return _neighbours(point, height, width, _OFFSETS_8)


def manhattan(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    """Return the Manhattan (L1) distance between two points of equal dimension."""
    if len(a) != len(b):
        raise ValueError(f"dimension mismatch: {len(a)} != {len(b)}")
    total = 0
    for x, y in zip(a, b, strict=True):
        total += abs(x - y)
    return total


def chebyshev(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    """Return the Chebyshev (L-infinity) distance between two points of equal dimension."""
    if len(a) != len(b):
        raise ValueError(f"dimension mismatch: {len(a)} != {len(b)}")
    best = 0
    for x, y in zip(a, b, strict=True):
        step = abs(x - y)
        if step > best:
            best = step
    return best


@dataclass(frozen=True)
class Grid:
    """A rectangular map of characters with an optional start and goal."""

    rows: tuple[str, ...]
    start: Point | None = None
    goal: Point | None = None

    @property
    def height(self) -> int:
        """Number of rows."""
        return len(self.rows)

    @property
    def width(self) -> int:
        """Number of columns (0 for an empty grid)."""
        if not self.rows:
            return 0
        return len(self.rows[0])

    def in_bounds(self, point: Point) -> bool:
        """True if ``point`` lies inside the grid."""
        row, col = point
        return 0 <= row < self.height and 0 <= col < self.width

    def cell(self, point: Point) -> str:
        """Return the character at ``point``; raise IndexError if it is outside the grid."""
        if not self.in_bounds(point):
            raise IndexError(f"point {point} is outside the {self.height}x{self.width} grid")
        row, col = point
        return self.rows[row][col]

    def is_open(self, point: Point) -> bool:
        """True if ``point`` is inside the grid and is not a wall."""
        if not self.in_bounds(point):
            return False
        return self.cell(point) != WALL

    def open_neighbours(self, point: Point, diagonal: bool = False) -> list[Point]:
        """Return the non-wall neighbours of ``point`` in row-major order.

        With ``diagonal=True`` 8-connectivity is used, otherwise 4-connectivity.
        """
        if diagonal:
            candidates = neighbours8(point, self.height, self.width)
        else:
            candidates = neighbours4(point, self.height, self.width)
        result = []
        for candidate in candidates:
            if self.is_open(candidate):
                result.append(candidate)
        return result

    def count_open(self) -> int:
        """Return the number of cells that are not walls."""
        total = 0
        for line in self.rows:
            for char in line:
                if char != WALL:
                    total += 1
        return total


def parse_grid(text: str) -> Grid:
    """Parse a text map into a :class:`Grid`.

    Blank lines and whitespace around each line are ignored.
    All rows must have the same width, only ``# . S G`` are allowed, and at most one
    ``S`` and one ``G`` may appear.
    """
    lines = []
    for raw in text.splitlines():
        stripped = raw.strip()
        if stripped:
            lines.append(stripped)
    if not lines:
        raise GridError("grid is empty")
    width = len(lines[0])
    start = None
    goal = None
    for row, line in enumerate(lines):
        if len(line) != width:
            raise GridError(f"row {row} has width {len(line)}, expected {width}")
        for col, char in enumerate(line):
            if char not in VALID_CELLS:
                raise GridError(f"invalid character {char!r} at row {row}, column {col}")
            if char == START:
                if start is not None:
                    raise GridError("grid has more than one start 'S'")
                start = (row, col)
            elif char == GOAL:
                if goal is not None:
                    raise GridError("grid has more than one goal 'G'")
                goal = (row, col)
    return Grid(tuple(lines), start, goal)
