"""gridpath: small graph and grid algorithms."""

from gridpath.graph import (
    CycleError,
    all_nodes,
    bfs_layers,
    connected_components,
    dijkstra,
    shortest_path,
    topological_sort,
)
from gridpath.grid import (
    FLOOR,
    GOAL,
    START,
    WALL,
    Grid,
    GridError,
    chebyshev,
    manhattan,
    neighbours4,
    neighbours8,
    parse_grid,
)
from gridpath.intervals import (
    find_gaps,
    max_non_overlapping,
    max_overlap,
    merge_intervals,
    overlaps,
    total_length,
    validate,
)
from gridpath.search import bfs_distances, bfs_path, count_regions, flood_fill, reconstruct_path
from gridpath.unionfind import UnionFind

__all__ = [
    "FLOOR",
    "GOAL",
    "START",
    "WALL",
    "CycleError",
    "Grid",
    "GridError",
    "UnionFind",
    "all_nodes",
    "bfs_distances",
    "bfs_layers",
    "bfs_path",
    "chebyshev",
    "connected_components",
    "count_regions",
    "dijkstra",
    "find_gaps",
    "flood_fill",
    "manhattan",
    "max_non_overlapping",
    "max_overlap",
    "merge_intervals",
    "neighbours4",
    "neighbours8",
    "overlaps",
    "parse_grid",
    "reconstruct_path",
    "shortest_path",
    "topological_sort",
    "total_length",
    "validate",
]
