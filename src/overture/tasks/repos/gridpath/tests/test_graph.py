import pytest
from gridpath import (
    CycleError,
    all_nodes,
    bfs_layers,
    connected_components,
    dijkstra,
    shortest_path,
    topological_sort,
)

WEIGHTED = {
    "a": {"b": 4, "c": 1},
    "b": {"d": 1},
    "c": {"b": 2, "d": 5},
    "d": {},
    "e": {"a": 1},
}


def test_all_nodes_includes_neighbour_only_nodes_sorted():
    assert all_nodes({"b": ["z"], "a": []}) == ["a", "b", "z"]


def test_all_nodes_of_empty_graph():
    assert all_nodes({}) == []


def test_dijkstra_distances():
    dist, _ = dijkstra(WEIGHTED, "a")
    assert dist == {"a": 0, "b": 3, "c": 1, "d": 4}


def test_dijkstra_predecessors():
    _, prev = dijkstra(WEIGHTED, "a")
    assert prev == {"a": None, "b": "c", "c": "a", "d": "b"}


def test_dijkstra_omits_unreachable_nodes():
    dist, prev = dijkstra(WEIGHTED, "d")
    assert dist == {"d": 0}
    assert prev == {"d": None}


def test_dijkstra_handles_neighbour_missing_from_keys():
    dist, _ = dijkstra({"s": {"t": 7}}, "s")
    assert dist == {"s": 0, "t": 7}


def test_dijkstra_zero_weight_edges():
    dist, _ = dijkstra({"a": {"b": 0}, "b": {"c": 0}, "c": {}}, "a")
    assert dist == {"a": 0, "b": 0, "c": 0}


def test_dijkstra_keeps_cheaper_of_parallel_routes():
    graph = {1: {2: 10, 3: 3}, 2: {4: 1}, 3: {2: 3, 4: 20}, 4: {}}
    dist, prev = dijkstra(graph, 1)
    assert dist == {1: 0, 2: 6, 3: 3, 4: 7}
    assert prev[4] == 2


def test_dijkstra_keeps_first_predecessor_on_equal_cost_tie():
    graph = {"a": {"b": 1, "c": 1}, "b": {"d": 1}, "c": {"d": 1}}
    dist, prev = dijkstra(graph, "a")
    assert dist["d"] == 2
    assert prev["d"] == "b"


def test_dijkstra_unknown_source_raises_key_error():
    with pytest.raises(KeyError, match="source 'x' is not in the graph"):
        dijkstra(WEIGHTED, "x")


def test_dijkstra_negative_weight_raises():
    with pytest.raises(ValueError, match=r"negative weight -1 on edge 'b' -> 'c'"):
        dijkstra({"a": {"b": 1}, "b": {"c": -1}}, "a")


def test_shortest_path_returns_cost_and_nodes():
    assert shortest_path(WEIGHTED, "e", "d") == (5, ["e", "a", "c", "b", "d"])


def test_shortest_path_to_self():
    assert shortest_path(WEIGHTED, "b", "b") == (0, ["b"])


def test_shortest_path_unreachable_is_none():
    assert shortest_path(WEIGHTED, "b", "a") is None


def test_shortest_path_single_edge():
    assert shortest_path({"x": {"y": 2.5}}, "x", "y") == (2.5, ["x", "y"])


def test_topological_sort_respects_edges_and_picks_smallest_ready():
    graph = {"shirt": ["tie", "belt"], "tie": ["jacket"], "pants": ["shoes", "belt"], "belt": ["jacket"]}
    assert topological_sort(graph) == ["pants", "shirt", "belt", "shoes", "tie", "jacket"]


def test_topological_sort_chain():
    assert topological_sort({3: [2], 2: [1], 1: []}) == [3, 2, 1]


def test_topological_sort_independent_nodes_are_sorted():
    assert topological_sort({"c": [], "a": [], "b": []}) == ["a", "b", "c"]


def test_topological_sort_empty_graph():
    assert topological_sort({}) == []


def test_topological_sort_diamond():
    assert topological_sort({1: [3, 2], 2: [4], 3: [4]}) == [1, 2, 3, 4]


def test_topological_sort_counts_duplicate_edges():
    assert topological_sort({"a": ["b", "b"], "b": []}) == ["a", "b"]


def test_topological_sort_cycle_raises_with_nodes():
    with pytest.raises(CycleError, match=r"cycle involving nodes \['b', 'c', 'd'\]"):
        topological_sort({"a": ["b"], "b": ["c"], "c": ["b", "d"]})


def test_topological_sort_self_loop_is_a_cycle():
    with pytest.raises(CycleError) as info:
        topological_sort({1: [1], 0: [1]})
    assert info.value.nodes == [1]


def test_cycle_error_is_a_value_error():
    assert issubclass(CycleError, ValueError)


def test_connected_components_ignores_edge_direction():
    graph = {1: [2], 3: [2], 4: [5], 6: []}
    assert connected_components(graph) == [[1, 2, 3], [4, 5], [6]]


def test_connected_components_ordered_by_smallest_member():
    graph = {"z": ["y"], "b": ["x"], "a": []}
    assert connected_components(graph) == [["a"], ["b", "x"], ["y", "z"]]


def test_connected_components_members_are_sorted_not_discovery_order():
    assert connected_components({1: [3], 3: [2]}) == [[1, 2, 3]]


def test_connected_components_empty_graph():
    assert connected_components({}) == []


def test_connected_components_with_cycle_is_single_component():
    assert connected_components({1: [2], 2: [3], 3: [1]}) == [[1, 2, 3]]


def test_bfs_layers_groups_by_distance():
    graph = {"a": ["c", "b"], "b": ["d"], "c": ["d", "e"], "d": ["f"], "e": [], "f": ["a"]}
    assert bfs_layers(graph, "a") == [["a"], ["b", "c"], ["d", "e"], ["f"]]


def test_bfs_layers_sorts_each_layer():
    graph = {"a": ["b", "c"], "b": ["z"], "c": ["y"]}
    assert bfs_layers(graph, "a") == [["a"], ["b", "c"], ["y", "z"]]


def test_bfs_layers_of_isolated_start():
    assert bfs_layers({"a": [], "b": ["a"]}, "a") == [["a"]]


def test_bfs_layers_follows_edges_only_forward():
    assert bfs_layers({1: [2], 2: [], 3: [1]}, 1) == [[1], [2]]


def test_bfs_layers_unknown_start_raises():
    with pytest.raises(KeyError, match="start 'q' is not in the graph"):
        bfs_layers({"a": []}, "q")
